// Tests of web.js (URL, URLSearchParams, Headers, TextEncoder, TextDecoder,
// Response, fetch, SyncPromise) and sync.js (asSync, unwrapAwait) in plain
// Node 20, without a component:
//   node --test sdk/js/runtime/web.test.mjs
// The web classes are compared with Node's own on tables of cases; fetch
// runs over a fake transport; asSync's output is evaluated with
// `__toolhost_await__` = unwrapAwait and `Promise` = SyncPromise.

import { test } from "node:test";
import assert from "node:assert/strict";

import * as web from "./web.js";
import { asSync, unwrapAwait, wrap, tokenize, NATIVE_PROMISE_MESSAGE, PENDING_MESSAGE } from "./sync.js";

const { SyncPromise, makeFetch, install } = web;
const NativePromise = globalThis.Promise;

// --- Helpers -----------------------------------------------------------------

/** What `f()` gives, or `{ threw: name }`, for comparing two
 * implementations: the error's class is compared, not its wording. */
function outcome(f) {
  try {
    return { value: f() };
  } catch (error) {
    return { threw: error?.constructor?.name ?? typeof error };
  }
}

const URL_PARTS = ["href", "origin", "protocol", "username", "password", "host", "hostname", "port", "pathname", "search", "hash"];

function describeURL(U, input, base) {
  return outcome(() => {
    const url = base === undefined ? new U(input) : new U(input, base);
    return {
      ...Object.fromEntries(URL_PARTS.map((part) => [part, url[part]])),
      string: url.toString(),
      json: url.toJSON(),
      params: [...url.searchParams],
    };
  });
}

/** The settled state of a SyncPromise, read synchronously. */
function settled(promise) {
  let state = "pending";
  let value;
  promise.then((v) => { state = "fulfilled"; value = v; }, (r) => { state = "rejected"; value = r; });
  return { state, value };
}

const encoder = new globalThis.TextEncoder();
const bytesOf = (text) => encoder.encode(text);

/** A fake transport: records each request, answers with `answer(request)`. */
function transport(answer = (request) => ({ status: 200, url: request.url, headers: [], body: new Uint8Array(0) })) {
  const requests = [];
  const send = (request) => {
    requests.push(request);
    return answer(request);
  };
  return { send, requests, fetch: makeFetch(send) };
}

/** Runs a tool source through asSync and evaluates it as a function body
 * (indirect eval, the prefix on line 1 so lines keep their numbers) with
 * `__toolhost_await__`, `Promise` and `scope`'s names bound. */
function runSync(source, scope = {}) {
  const names = ["__toolhost_await__", "Promise", ...Object.keys(scope)];
  const code = `(function (${names.join(", ")}) {${asSync(source)}\n})\n//# sourceURL=tool.js`;
  return (0, eval)(code)(unwrapAwait, SyncPromise, ...Object.values(scope));
}

// --- URL ---------------------------------------------------------------------

const URL_CASES = [
  ["http://example.com"],
  ["HTTP://EXAMPLE.COM:80/A/B?C=D#E"],
  ["https://example.com:443/"],
  ["https://example.com:8443/x"],
  ["http://example.com:0080/"],
  ["ws://example.com:80/socket"],
  ["wss://example.com:443/"],
  ["ftp://example.com:21/file"],
  ["https://user:pa ss@example.com/p"],
  ["https://us@er:p:w@example.com/"],
  ["http://münchen.de/ä?ö=ü#ß"],
  ["http://Bücher.example/"],
  ["http://faß.de/"],
  ["http://ＥＸＡＭＰＬＥ。com/"],
  ["http://xn--mnchen-3ya.de/"],
  ["http://xn--abc.com/"],
  ["http://例え.テスト/パス?クエリ#断片"],
  ["https://😀.example/😀?😀#😀"],
  ["http://[::1]/"],
  ["http://[::1]:80/"],
  ["http://[2001:DB8:0:0:0:0:0:1]:8080/x"],
  ["http://[1:0:0:2::3:0]/"],
  ["http://[::ffff:192.168.0.1]/"],
  ["http://[::1/"],
  ["http://[1::2::3]/"],
  ["http://127.0.0.1:3000/api"],
  ["http://0x7f.1/"],
  ["http://2130706433/"],
  ["http://1.2.3.4.5/"],
  ["http://999.1.1.1/"],
  ["http://example.com:65535/"],
  ["http://example.com:65536/"],
  ["http://example.com:12ab/"],
  ["http://exa mple.com/"],
  ["http://a%b/"],
  ["http://%41.com/"],
  ["http:///x"],
  ["http://"],
  ["not a url"],
  [""],
  ["//example.com/x", "https://base.test/"],
  ["../../c/d?e#f", "http://h/a/b/x/y"],
  ["../../../../up", "http://h/a/b"],
  ["./x/./y/../z", "http://h/a/b"],
  ["?q=1", "http://h/a/b?old#frag"],
  ["#only", "http://h/a/b?q"],
  ["/abs/%2e%2E/x", "http://h/a"],
  ["\\\\other\\path", "http://h/a"],
  ["rel", "mailto:x@y"],
  ["x", "not a base"],
  ["  http://h/ws  \t"],
  ["http://h/a\tb\nc"],
  ["http://h/p a\"<>`{}|^?q a\"<>'`{}#f a\"<>`{}"],
  ["http://h/%zz%41?%zz#%zz"],
  ["http://h/\u{1F600}?\u{1F600}#\u{1F600}"],
  ["http://h/\uD800x?\uDC00#\uDBFF"],
  ["http://h\uD800/"],
  ["mailto:Joe@Example.com?subject=hi there"],
  ["data:text/plain,hello world#frag"],
  ["javascript:alert(1)"],
  ["sc://Ñ/x?y#z"],
  ["sc://a b/"],
  ["non-spec:/.//p"],
  ["file:///C|/x/../.."],
  ["file://localhost/etc/hosts"],
  ["blob:https://example.com:443/uuid"],
  ["https://example.com/?a=1&b=x+y&c=%20&d"],
];

test("URL matches Node's URL on a table of inputs", () => {
  assert.ok(URL_CASES.length > 60);
  for (const [input, base] of URL_CASES) {
    assert.deepEqual(describeURL(web.URL, input, base), describeURL(globalThis.URL, input, base), `new URL(${JSON.stringify(input)}, ${JSON.stringify(base)})`);
  }
});

test("URL throws a TypeError on an invalid URL, naming it", () => {
  assert.throws(() => new web.URL("http://exa mple.com/"), (error) => error instanceof TypeError && error.message.includes("exa mple"));
  assert.throws(() => new web.URL("/relative"), TypeError);
  assert.throws(() => new web.URL("x", "not a base"), TypeError);
  assert.equal(web.URL.canParse("/x"), false);
  assert.equal(web.URL.canParse("/x", "http://h/"), true);
  assert.equal(web.URL.parse("/x"), null);
  assert.equal(web.URL.parse("/x", "http://h/a").href, "http://h/x");
});

const SETTER_CASES = [
  ["http://h/p?q#f", "href", "https://other.test:8080/x?y#z"],
  ["http://h/p?q#f", "protocol", "https"],
  ["http://h/p?q#f", "protocol", "mailto"],
  ["http://h:8080/p", "protocol", "https:"],
  ["https://h:80/p", "protocol", "http"],
  ["http://h/p", "username", "us er@:"],
  ["http://h/p", "password", "p@ss/w:rd"],
  ["http://h/p", "host", "example.com:8080"],
  ["http://h/p", "host", "example.com:65536"],
  ["http://h:81/p", "hostname", "ümlaut.example"],
  ["http://h/p", "hostname", "example.com:8080"],
  ["http://h/p", "port", "443"],
  ["https://h/p", "port", "443"],
  ["http://h:81/p", "port", ""],
  ["http://h/p", "port", "8080abc"],
  ["http://h/p", "port", "99999"],
  ["http://h/p?q", "pathname", "/a b/../c/%2e/d"],
  ["http://h/p?q", "pathname", "no-slash"],
  ["http://h/p?q#f", "search", "a=1 2&b=ä#x"],
  ["http://h/p?q#f", "search", "?"],
  ["http://h/p?q#f", "search", ""],
  ["http://h/p?q#f", "hash", "new frag"],
  ["http://h/p?q#f", "hash", ""],
  ["mailto:x@y", "pathname", "nope"],
  ["mailto:x@y", "host", "nope"],
];

test("URL setters match Node's", () => {
  for (const [href, part, value] of SETTER_CASES) {
    const set = (U) => outcome(() => {
      const url = new U(href);
      url[part] = value;
      return { ...Object.fromEntries(URL_PARTS.map((name) => [name, url[name]])), params: [...url.searchParams] };
    });
    assert.deepEqual(set(web.URL), set(globalThis.URL), `new URL(${JSON.stringify(href)}).${part} = ${JSON.stringify(value)}`);
  }
  assert.throws(() => { new web.URL("http://h/").href = "not a url"; }, TypeError);
});

test("URL.searchParams is live both ways", () => {
  for (const U of [web.URL, globalThis.URL]) {
    const url = new U("https://h/p?a=1&b=2#f");
    const params = url.searchParams;
    params.append("c", "x y");
    assert.equal(url.search, "?a=1&b=2&c=x+y");
    params.set("a", "é");
    assert.equal(url.href, "https://h/p?a=%C3%A9&b=2&c=x+y#f");
    url.search = "?z=9";
    assert.deepEqual([...params], [["z", "9"]]);
    url.href = "https://h/?k=v";
    assert.equal(params.get("k"), "v");
    assert.equal(url.searchParams, params);
    params.delete("k");
    assert.equal(url.href, "https://h/");
    assert.equal(url.search, "");
  }
});

// --- URLSearchParams ---------------------------------------------------------

const PARAMS_INITS = [
  "a=1&b=2&a=3",
  "?a=1&&b=&=c&d",
  "q=hello+world&x=%20%2B%26%3D&y=%zz&z=%E2%82%AC",
  "ä=ö&emoji=\u{1F600}&lone=\uD800",
  "%FF%FE=%C0%80",
  { a: "1", b: "two words", "c&d": "e=f", u: "\uDC00x" },
  [["a", "1"], ["a", "2"], ["b", "!'()*-._~ +&=#"]],
  new Map([["m", "1"], ["n", "2"]]),
  "",
  undefined,
];

function paramsOps(P, init) {
  return outcome(() => {
    const p = new P(init);
    const log = [p.toString(), p.size, [...p], p.get("a"), p.getAll("a"), p.has("a"), p.has("a", "3"), p.get("missing")];
    p.append("a", "4 4");
    p.append("new", "ñ\uD800");
    log.push(p.toString());
    p.set("a", "set");
    log.push(p.toString(), p.getAll("a"));
    p.delete("b");
    p.delete("new", "nope");
    log.push(p.toString());
    p.append("0", "zero");
    p.append("B", "upper");
    p.sort();
    log.push(p.toString(), [...p.keys()], [...p.values()], [...p.entries()]);
    const seen = [];
    p.forEach((value, name, self) => seen.push([name, value, self === p]));
    log.push(seen, new P(p).toString(), String(p));
    return log;
  });
}

test("URLSearchParams matches Node's on strings, objects and pairs", () => {
  for (const init of PARAMS_INITS) {
    assert.deepEqual(paramsOps(web.URLSearchParams, init), paramsOps(globalThis.URLSearchParams, init), `init ${String(init)}`);
  }
  assert.throws(() => new web.URLSearchParams([["a", "1", "2"]]), TypeError);
  assert.throws(() => new web.URLSearchParams([["a"]]), TypeError);
  assert.equal(new web.URLSearchParams({ s: "a b+c" }).toString(), "s=a+b%2Bc");
});

// --- Headers -----------------------------------------------------------------

const HEADER_INITS = [
  undefined,
  { "Content-Type": "text/plain", "X-Multi": "a" },
  [["Set-Cookie", "a=1"], ["set-cookie", "b=2"], ["X", "1"], ["x", "2"], ["Accept", "*/*"]],
  [["b", "2"], ["A", "1"], ["c", " spaced\t "]],
  { é: "bad name" },
  { "bad name": "x" },
  { ok: "bad\nvalue" },
  { ok: "latin1 é" },
  [["only-one"]],
];

function headerOps(H, init) {
  return outcome(() => {
    const h = new H(init);
    const log = [[...h], h.get("x"), h.get("X"), h.has("SET-COOKIE"), h.get("set-cookie"), h.getSetCookie()];
    h.append("X-Multi", "b");
    h.append("x-multi", "c");
    log.push(h.get("x-multi"));
    h.set("X-MULTI", "one");
    log.push(h.get("x-multi"), [...h]);
    h.delete("accept");
    log.push(h.has("Accept"), [...h.keys()], [...h.values()], [...h.entries()]);
    const seen = [];
    h.forEach((value, name, self) => seen.push([name, value, self === h]));
    log.push(seen, [...new H(h)], outcome(() => h.append("bad name", "x")), outcome(() => h.set("ok", "a\rb")));
    return log;
  });
}

test("Headers matches Node's: case, joining, sorted iteration, validation", () => {
  for (const init of HEADER_INITS) {
    assert.deepEqual(headerOps(web.Headers, init), headerOps(globalThis.Headers, init), `init ${JSON.stringify(init)}`);
  }
});

// --- TextEncoder, TextDecoder ------------------------------------------------

const TEXTS = ["", "ascii", "é€😀", "a\uD800b", "\uDC00", "x\uD83D", "\uD83D\uDE00\uD83D", "\uFEFFbom", "\u0000\u007F\u0080\u07FF\u0800\uFFFF"];

test("TextEncoder matches Node's, lone surrogates included", () => {
  const mine = new web.TextEncoder();
  assert.equal(mine.encoding, "utf-8");
  for (const text of TEXTS) {
    assert.deepEqual(mine.encode(text), encoder.encode(text), JSON.stringify(text));
    for (const size of [0, 1, 2, 3, 4, 5, 7]) {
      const a = new Uint8Array(size);
      const b = new Uint8Array(size);
      assert.deepEqual(mine.encodeInto(text, a), encoder.encodeInto(text, b), `${JSON.stringify(text)} into ${size}`);
      assert.deepEqual(a, b);
    }
  }
  assert.deepEqual(mine.encode(), encoder.encode());
});

const BYTES = [
  [],
  [0x41, 0x42],
  [0xef, 0xbb, 0xbf, 0x41],
  [0xef, 0xbb, 0xbf, 0xef, 0xbb, 0xbf],
  [0xc3, 0xa9, 0xe2, 0x82, 0xac, 0xf0, 0x9f, 0x98, 0x80],
  [0xc0, 0x80],
  [0xe0, 0x80, 0x80],
  [0xed, 0xa0, 0x80],
  [0xf0, 0x9f, 0x98],
  [0xf4, 0x90, 0x80, 0x80],
  [0xf8, 0x88, 0x80, 0x80, 0x80],
  [0x80, 0xbf, 0x41],
  [0xe2, 0x82, 0x41, 0xc3],
  [0xff, 0xfe, 0x41],
];

test("TextDecoder matches Node's: fatal, ignoreBOM, invalid UTF-8, streaming", () => {
  for (const list of BYTES) {
    const bytes = Uint8Array.from(list);
    for (const options of [{}, { fatal: true }, { ignoreBOM: true }, { fatal: true, ignoreBOM: true }]) {
      const where = `${JSON.stringify(list)} ${JSON.stringify(options)}`;
      const decode = (D, input) => outcome(() => new D("utf-8", options).decode(input));
      assert.deepEqual(decode(web.TextDecoder, bytes), decode(globalThis.TextDecoder, bytes), where);
      assert.deepEqual(decode(web.TextDecoder, bytes.buffer), decode(globalThis.TextDecoder, bytes.buffer), where);
      // Streamed a byte at a time.
      const stream = (D) => outcome(() => {
        const decoder = new D("utf8", options);
        let out = "";
        for (const b of bytes) out += decoder.decode(Uint8Array.of(b), { stream: true });
        return out + decoder.decode();
      });
      assert.deepEqual(stream(web.TextDecoder), stream(globalThis.TextDecoder), `streamed ${where}`);
    }
  }
  const mine = new web.TextDecoder("UTF-8", { fatal: true, ignoreBOM: true });
  assert.deepEqual([mine.encoding, mine.fatal, mine.ignoreBOM], ["utf-8", true, true]);
  assert.throws(() => new web.TextDecoder("latin1"), RangeError);
  assert.equal(new web.TextDecoder().decode(new DataView(Uint8Array.of(0x20, 0x41, 0x42).buffer, 1)), "AB");
  assert.throws(() => new web.TextDecoder("utf-8", { fatal: true }).decode(Uint8Array.of(0xc3)), TypeError);
});

// --- SyncPromise -------------------------------------------------------------

test("SyncPromise settles at once and runs callbacks synchronously", () => {
  const order = [];
  const p = SyncPromise.resolve(1).then((v) => { order.push(`then ${v}`); return v + 1; });
  order.push("after");
  assert.deepEqual(order, ["then 1", "after"]);
  assert.deepEqual(settled(p), { state: "fulfilled", value: 2 });

  const error = new Error("no");
  const caught = SyncPromise.reject(error).then(() => "skipped").catch((e) => e.message);
  assert.deepEqual(settled(caught), { state: "fulfilled", value: "no" });
  assert.deepEqual(settled(SyncPromise.resolve(1).then(() => { throw error; })), { state: "rejected", value: error });
  let ran = false;
  assert.deepEqual(settled(SyncPromise.reject(error).finally(() => { ran = true; })), { state: "rejected", value: error });
  assert.ok(ran);
  assert.deepEqual(settled(new SyncPromise((resolve) => resolve(SyncPromise.resolve(5)))), { state: "fulfilled", value: 5 });
  assert.deepEqual(settled(new SyncPromise(() => { throw error; })), { state: "rejected", value: error });
  const p2 = SyncPromise.resolve(3);
  assert.equal(SyncPromise.resolve(p2), p2);
  // A pending one runs its callbacks when it settles.
  const { promise, resolve } = SyncPromise.withResolvers();
  const later = promise.then((v) => v * 2);
  assert.equal(settled(later).state, "pending");
  resolve(21);
  assert.deepEqual(settled(later), { state: "fulfilled", value: 42 });
});

test("SyncPromise statics: all, allSettled, race, any", () => {
  const error = new Error("bad");
  assert.deepEqual(settled(SyncPromise.all([1, SyncPromise.resolve(2), { then: (r) => r(3) }])), { state: "fulfilled", value: [1, 2, 3] });
  assert.deepEqual(settled(SyncPromise.all([])), { state: "fulfilled", value: [] });
  assert.deepEqual(settled(SyncPromise.all([1, SyncPromise.reject(error)])), { state: "rejected", value: error });
  assert.deepEqual(settled(SyncPromise.allSettled([1, SyncPromise.reject(error)])), {
    state: "fulfilled",
    value: [{ status: "fulfilled", value: 1 }, { status: "rejected", reason: error }],
  });
  assert.deepEqual(settled(SyncPromise.race([SyncPromise.reject(error), 1])), { state: "rejected", value: error });
  assert.deepEqual(settled(SyncPromise.any([SyncPromise.reject(error), 7])), { state: "fulfilled", value: 7 });
  const none = settled(SyncPromise.any([SyncPromise.reject(error)]));
  assert.equal(none.state, "rejected");
  assert.equal(none.value.name, "AggregateError");
  assert.deepEqual(none.value.errors, [error]);
});

// --- fetch -------------------------------------------------------------------

test("fetch hands method, URL, headers and body to the transport", () => {
  const t = transport();
  t.fetch("https://api.test/items?x=1#fragment", { method: "post", headers: { "X-Key": "k", "Content-Type": "application/json" }, body: "{\"a\":1}", timeout: 2500 });
  t.fetch(new web.URL("http://api.test/a"), { method: "PATCH", headers: [["X-A", "1"], ["x-a", "2"]], body: Uint8Array.of(1, 2, 3) });
  t.fetch("http://api.test/b", { method: "PUT", headers: new web.Headers({ Accept: "text/plain" }), body: Uint8Array.of(9, 8).buffer, redirect: "manual" });
  t.fetch("http://api.test/form", { method: "POST", body: new web.URLSearchParams({ q: "a b", n: "1" }) });
  t.fetch("http://api.test/text", { method: "delete", body: "héllo" });
  t.fetch("http://api.test/get");
  const [a, b, c, d, e, f] = t.requests;
  assert.deepEqual(a, {
    method: "POST",
    url: "https://api.test/items?x=1",
    headers: [["content-type", "application/json"], ["x-key", "k"], ["accept", "*/*"]],
    body: bytesOf("{\"a\":1}"),
    timeoutMs: 2500,
    followRedirects: true,
  });
  assert.equal(b.method, "PATCH");
  assert.deepEqual(b.headers, [["x-a", "1, 2"], ["accept", "*/*"]]);
  assert.deepEqual(b.body, Uint8Array.of(1, 2, 3));
  assert.deepEqual(c.headers, [["accept", "text/plain"]]);
  assert.deepEqual(c.body, Uint8Array.of(9, 8));
  assert.equal(c.followRedirects, false);
  assert.deepEqual(d.headers, [["content-type", "application/x-www-form-urlencoded;charset=UTF-8"], ["accept", "*/*"]]);
  assert.equal(new globalThis.TextDecoder().decode(d.body), "q=a+b&n=1");
  assert.equal(e.method, "DELETE");
  assert.deepEqual(e.headers, [["content-type", "text/plain;charset=UTF-8"], ["accept", "*/*"]]);
  assert.deepEqual(e.body, bytesOf("héllo"));
  assert.deepEqual(f, { method: "GET", url: "http://api.test/get", headers: [["accept", "*/*"]], body: undefined, timeoutMs: undefined, followRedirects: true });
});

test("fetch answers a settled SyncPromise of a Response; JSON round-trips", () => {
  const echo = transport((request) => ({
    status: 201,
    url: request.url,
    headers: [["Content-Type", "application/json"], ["X-Echo", "1"], ["x-echo", "2"], ["X-Name", "café €"]],
    body: request.body,
  }));
  const data = { name: "café ☕", list: [1, 2, { deep: null }], emoji: "😀" };
  const promise = echo.fetch("https://echo.test/#f", { method: "POST", body: JSON.stringify(data) });
  assert.ok(promise instanceof SyncPromise);
  const { state, value: response } = settled(promise);
  assert.equal(state, "fulfilled");
  assert.ok(response instanceof web.Response);
  assert.deepEqual(
    [response.status, response.ok, response.statusText, response.url, response.redirected, response.type, response.bodyUsed],
    [201, true, "Created", "https://echo.test/", false, "basic", false],
  );
  assert.equal(response.headers.get("x-echo"), "1, 2");
  assert.equal(response.headers.get("x-name"), "café €"); // a server's UTF-8 is kept
  assert.throws(() => response.headers.set("x", "y"), TypeError);
  const copy = response.clone();
  const json = response.json();
  assert.ok(json instanceof SyncPromise);
  assert.deepEqual(settled(json), { state: "fulfilled", value: data });
  assert.equal(response.bodyUsed, true);
  const again = settled(response.text());
  assert.equal(again.state, "rejected");
  assert.ok(again.value instanceof TypeError);
  assert.equal(settled(copy.text()).value, JSON.stringify(data));
  // The other body readers.
  const bin = transport(() => ({ status: 200, url: "https://b.test/", headers: [], body: Uint8Array.of(0xef, 0xbb, 0xbf, 0x68, 0x69) }));
  assert.equal(unwrapAwait(unwrapAwait(bin.fetch("https://b.test/")).text()), "hi");
  assert.deepEqual(new Uint8Array(unwrapAwait(unwrapAwait(bin.fetch("https://b.test/")).arrayBuffer())), Uint8Array.of(0xef, 0xbb, 0xbf, 0x68, 0x69));
  assert.deepEqual(unwrapAwait(unwrapAwait(bin.fetch("https://b.test/")).bytes()), Uint8Array.of(0xef, 0xbb, 0xbf, 0x68, 0x69));
  const bad = transport(() => ({ status: 500, url: "https://b.test/", headers: [], body: bytesOf("not json") }));
  const response500 = unwrapAwait(bad.fetch("https://b.test/"));
  assert.deepEqual([response500.ok, response500.statusText], [false, "Internal Server Error"]);
  assert.throws(() => unwrapAwait(response500.json()), SyntaxError);
});

test("a transport's error reaches the caller with its message unchanged", () => {
  const sentence = "http://127.0.0.1:9 is not allowed for ns/plugin: an admin grants it with [http] allow = [...] in /etc/toolhost.toml";
  const cause = new Error(sentence);
  const refused = transport(() => { throw cause; });
  const { state, value } = settled(refused.fetch("http://127.0.0.1:9/"));
  assert.equal(state, "rejected");
  assert.ok(value instanceof TypeError);
  assert.equal(value.message, sentence);
  assert.equal(value.cause, cause);
  // A string thrown (as a WIT error may be) is the message too.
  const stringly = transport(() => { throw "a plain sentence"; });
  assert.equal(settled(stringly.fetch("http://h/")).value.message, "a plain sentence");
  // And through a tool's await.
  const run = runSync(`
    return async function run(url) {
      try {
        await fetch(url);
        return "fetched";
      } catch (error) {
        return error.message;
      }
    };`, { fetch: refused.fetch });
  assert.equal(run("http://127.0.0.1:9/"), sentence);
});

test("fetch's redirect modes: follow, manual, error", () => {
  const redirecting = transport((request) => (request.followRedirects
    ? { status: 200, url: "https://h.test/final", headers: [], body: bytesOf("done") }
    : { status: 302, url: request.url, headers: [["Location", "/final"]], body: new Uint8Array(0) }));
  const followed = unwrapAwait(redirecting.fetch("https://h.test/start"));
  assert.deepEqual([followed.status, followed.url, followed.redirected], [200, "https://h.test/final", true]);
  const manual = unwrapAwait(redirecting.fetch("https://h.test/start", { redirect: "manual" }));
  assert.deepEqual([manual.status, manual.headers.get("location"), manual.redirected], [302, "/final", false]);
  const refused = settled(redirecting.fetch("https://h.test/start", { redirect: "error" }));
  assert.equal(refused.state, "rejected");
  assert.ok(refused.value instanceof TypeError);
  assert.match(refused.value.message, /redirect/);
  assert.deepEqual(redirecting.requests.map((r) => r.followRedirects), [true, false, false]);
  assert.equal(settled(redirecting.fetch("https://h.test/", { redirect: "sideways" })).state, "rejected");
});

test("fetch rejects what it cannot send, without calling the transport", () => {
  const t = transport();
  for (const [input, init] of [
    ["/relative", undefined],
    ["ftp://h/file", undefined],
    ["https://user:pw@h/", undefined],
    ["https://h/", { method: "GET", body: "x" }],
    ["https://h/", { method: "HEAD", body: "x" }],
    ["https://h/", { method: "CONNECT" }],
    ["https://h/", { method: "bad method" }],
    ["https://h/", { headers: { "bad name": "x" } }],
  ]) {
    const { state, value } = settled(t.fetch(input, init));
    assert.equal(state, "rejected", `${input} ${JSON.stringify(init)}`);
    assert.ok(value instanceof TypeError);
  }
  assert.equal(t.requests.length, 0);
});

test("Response made by hand", () => {
  for (const R of [web.Response, globalThis.Response]) {
    const r = new R("hé", { status: 404, statusText: "Nope", headers: { "X-A": "1" } });
    assert.deepEqual([r.status, r.ok, r.statusText, r.headers.get("content-type"), r.headers.get("x-a"), r.url, r.redirected, r.type],
      [404, false, "Nope", "text/plain;charset=UTF-8", "1", "", false, "default"]);
    assert.throws(() => new R("x", { status: 99 }), RangeError);
    const json = R.json({ a: 1 });
    assert.equal(json.headers.get("content-type"), "application/json");
    assert.equal(R.redirect("https://h/x", 301).headers.get("location"), "https://h/x");
    assert.equal(R.error().status, 0);
  }
  assert.deepEqual(unwrapAwait(web.Response.json({ a: [1] }).json()), { a: [1] });
  const empty = new web.Response(null);
  assert.equal(unwrapAwait(empty.text()), "");
  assert.equal(unwrapAwait(empty.text()), "");
  assert.equal(empty.bodyUsed, false);
});

test("install defines only the missing globals", () => {
  const { send } = transport();
  const target = { URL: "kept" };
  const defined = install(target, send);
  assert.deepEqual(defined.sort(), ["Headers", "Request", "Response", "TextDecoder", "TextEncoder", "URLSearchParams", "fetch"]);
  assert.equal(target.URL, "kept");
  assert.equal(target.Headers, web.Headers);
  assert.equal(typeof target.fetch, "function");
  assert.equal(Object.keys(target).join(), "URL"); // not enumerable
  assert.deepEqual(install({}).includes("fetch"), false);
  assert.deepEqual(install(target, send), []);
});

// --- unwrapAwait ---------------------------------------------------------------

test("unwrapAwait: values, SyncPromises, native Promises", () => {
  const plain = { a: 1 };
  assert.equal(unwrapAwait(plain), plain);
  assert.equal(unwrapAwait(5), 5);
  assert.equal(unwrapAwait(null), null);
  assert.equal(unwrapAwait(undefined), undefined);
  assert.equal(unwrapAwait(SyncPromise.resolve(7)), 7);
  assert.equal(unwrapAwait({ then: (resolve) => resolve(8) }), 8);
  const reason = new RangeError("r");
  assert.throws(() => unwrapAwait(SyncPromise.reject(reason)), (error) => error === reason);
  assert.throws(() => unwrapAwait(NativePromise.resolve(1)), { message: NATIVE_PROMISE_MESSAGE });
  assert.equal(NATIVE_PROMISE_MESSAGE, "await works here on fetch, Response bodies and values that are already there; a native Promise cannot be waited for inside a tool");
  assert.throws(() => unwrapAwait(new SyncPromise(() => {})), { message: PENDING_MESSAGE });
});

// --- asSync --------------------------------------------------------------------

const TOOL = `import { tool, exportTools } from "./toolhost.js";

const weather = tool({
  name: "weather",
  async run({ city }) {
    const response = await fetch(\`https://api.test/weather?q=\${encodeURIComponent(city)}\`, { headers: { accept: "application/json" } });
    const data = await response.json();
    return { city, temperature: data.temperature };
  },
});
`;

test("asSync (a): an async run with two awaits returns its value synchronously", () => {
  const t = transport((request) => ({
    status: 200,
    url: request.url,
    headers: [["content-type", "application/json"]],
    body: bytesOf(JSON.stringify({ temperature: 21, q: new web.URL(request.url).searchParams.get("q") })),
  }));
  const body = TOOL.replace(/^import .*$/m, "").replace("tool({", "({") + "\nreturn weather;";
  const weather = runSync(body, { fetch: t.fetch });
  assert.notEqual(weather.run.constructor.name, "AsyncFunction");
  const result = weather.run({ city: "São Paulo" });
  assert.deepEqual(result, { city: "São Paulo", temperature: 21 });
  assert.equal(t.requests[0].url, "https://api.test/weather?q=S%C3%A3o%20Paulo");
  assert.deepEqual(t.requests[0].headers, [["accept", "application/json"]]);
  // Every form of async function loses its `async`.
  const forms = runSync(`
    async function declared(x) { return await x; }
    const arrow = async (x) => await x;
    const bare = async x => await x;
    const expression = async function (x) { return await x; };
    const object = { async method(x) { return await x; }, property: async (x) => await x };
    class Klass { async method(x) { return await x; } static async stat(x) { return await x; } }
    return [declared, arrow, bare, expression, object.method, object.property, new Klass().method, Klass.stat];
  `);
  for (const f of forms) {
    assert.equal(f.constructor.name, "Function", f.toString());
    assert.equal(f(SyncPromise.resolve(3)), 3, f.toString());
  }
});

test("asSync (b): await in strings, comments, templates and names is untouched", () => {
  const source = [
    `const s = "await fetch(x)" + 'async function f() {}';`,
    `// await comment(); async function`,
    `/* await block(); */ const t = \`await \${await g(\`async \${await h()}\`)} await\`;`,
    `const re = /await\\s+async/g, ratio = a / b / c;`,
    `const awaited = asyncTask + awaitable; obj.await(1); obj.async(2); const o = { await: 1, async: 2 };`,
    `const v = await obj?.x[0] + 1;`,
    `const w = x /* await y() */ + 1; /* multi-line: await z()`,
    `   async function q() { await r(); } */`,
  ].join("\n");
  const out = asSync(source).split("\n");
  assert.equal(out[0], `const s = "await fetch(x)" + 'async function f() {}';`);
  assert.equal(out[1], `// await comment(); async function`);
  assert.equal(out[2], `/* await block(); */ const t = \`await \${__toolhost_await__(g(\`async \${__toolhost_await__(h())}\`))} await\`;`);
  assert.equal(out[3], `const re = /await\\s+async/g, ratio = a / b / c;`);
  assert.equal(out[4], `const awaited = asyncTask + awaitable; obj.await(1); obj.async(2); const o = { await: 1, async: 2 };`);
  assert.equal(out[5], `const v = __toolhost_await__(obj?.x[0]) + 1;`);
  assert.equal(out[6], `const w = x /* await y() */ + 1; /* multi-line: await z()`);
  assert.equal(out[7], `   async function q() { await r(); } */`);
  // The template's text really is kept: evaluate it.
  const value = runSync(`return \`await \${await g(\`async \${await h()}\`)} await\`;`, {
    g: (x) => SyncPromise.resolve(`[${x}]`),
    h: () => "H",
  });
  assert.equal(value, "await [async H] await");
  // The tokenizer sees the template's parts and the regex whole.
  const types = tokenize("x = `a${b}c${`d`}e`; y = /[/]/g").map((token) => token.type);
  assert.deepEqual(types, ["name", "punct", "templateHead", "name", "templateMiddle", "template", "templateTail", "punct", "name", "punct", "regex"]);
});

test("asSync: the operands of await", () => {
  const cases = [
    ["await fetch(url, { headers })", "__toolhost_await__(fetch(url, { headers }))"],
    ["await r.json()", "__toolhost_await__(r.json())"],
    ["await Promise.all(list.map(u => fetch(u)))", "__toolhost_await__(Promise.all(list.map(u => fetch(u))))"],
    ["(await fetch(u)).json()", "(__toolhost_await__(fetch(u))).json()"],
    ["await (await fetch(u)).json()", "__toolhost_await__((__toolhost_await__(fetch(u))).json())"],
    ["await await x", "__toolhost_await__(__toolhost_await__(x))"],
    ["!await x.ok", "!__toolhost_await__(x.ok)"],
    ["await -x * 2", "__toolhost_await__(-x) * 2"],
    ["await typeof x", "__toolhost_await__(typeof x)"],
    ["await new Thing(1).go()", "__toolhost_await__(new Thing(1).go())"],
    ["await tag`x${y}z`.length", "__toolhost_await__(tag`x${y}z`.length)"],
    ["await a?.b?.(c)?.[d]", "__toolhost_await__(a?.b?.(c)?.[d])"],
    ["x = await y ? 1 : 2", "x = __toolhost_await__(y) ? 1 : 2"],
    ["f(await a, await b)", "f(__toolhost_await__(a), __toolhost_await__(b))"],
    ["for await (const x of y) {}", "for       (const x of y) {}"],
    ["class A { await() {} }", "class A { await() {} }"],
  ];
  for (const [input, output] of cases) assert.equal(asSync(input), output, input);
});

test("asSync (c): every line keeps its number; an error names its line", () => {
  const source = `export async function run(args) {
  const first = await fetch("https://h.test/one");

  /* a comment
     over two lines with await in it */
  const text = await first.text();
  const second = await Promise.all([
    fetch("https://h.test/two"),
    fetch("https://h.test/three"),
  ]);
  if (args.fail) {
    throw new Error("line 12: " + text + second.length);
  }
  return text;
}
`;
  const out = asSync(source);
  assert.equal(out.split("\n").length, source.split("\n").length);
  const lines = source.split("\n");
  const outLines = out.split("\n");
  for (let i = 0; i < lines.length; i++) {
    // A line without await or async is the same, but for the ")" closing
    // an operand begun on an earlier line (here line 10's "]));").
    if (!/await|async/.test(lines[i])) {
      assert.equal(outLines[i].replace(/\)/g, ""), lines[i].replace(/\)/g, ""), `line ${i + 1}`);
      assert.ok(outLines[i].length - lines[i].length <= 1, `line ${i + 1}`);
    }
  }
  assert.equal(outLines[9], "  ]));");
  const t = transport((request) => ({ status: 200, url: request.url, headers: [], body: bytesOf(new web.URL(request.url).pathname) }));
  globalThis.__toolhost_sync_test__ = { SyncPromise, unwrapAwait, fetch: t.fetch };
  try {
    // The runtime's way: export dropped, wrap()'s function around the text.
    const script = wrap(`const fetch = globalThis.__toolhost_sync_test__.fetch; globalThis.__toolhost_sync_test__.run = ${out.replace(/^export /, "")}`, "globalThis.__toolhost_sync_test__");
    (0, eval)(`${script}\n//# sourceURL=app.js`);
    const { run } = globalThis.__toolhost_sync_test__;
    assert.equal(run({}), "/one");
    assert.deepEqual(t.requests.map((r) => new web.URL(r.url).pathname), ["/one", "/two", "/three"]);
    let stack = "";
    try {
      run({ fail: true });
    } catch (error) {
      stack = String(error.stack);
    }
    assert.match(stack, /line 12/);
    assert.match(stack, /app\.js:12:\d+/);
  } finally {
    delete globalThis.__toolhost_sync_test__;
  }
});

test("asSync (d): Promise.all of fetches works with Promise meaning SyncPromise", () => {
  const t = transport((request) => ({ status: 200, url: request.url, headers: [], body: bytesOf(JSON.stringify({ at: request.url })) }));
  const source = `
    async function gather(urls) {
      const responses = await Promise.all(urls.map((u) => fetch(u)));
      const bodies = await Promise.all(responses.map(async (r) => await r.json()));
      const raced = await Promise.race([fetch(urls[0]).then((r) => r.status), new Promise(() => {})]);
      const settled = await Promise.allSettled([Promise.reject(new Error("x")), fetch(urls[1])]);
      return { bodies, raced, statuses: settled.map((s) => s.status), isSync: Promise.resolve(1) instanceof Promise };
    }
    return gather;`;
  const gather = runSync(source, { fetch: t.fetch });
  const result = gather(["https://a.test/1", "https://b.test/2"]);
  assert.deepEqual(result, {
    bodies: [{ at: "https://a.test/1" }, { at: "https://b.test/2" }],
    raced: 200,
    statuses: ["rejected", "fulfilled"],
    isSync: true,
  });
  assert.equal(t.requests.length, 4);
});

test("asSync (e): awaiting a native Promise gives the clear error", () => {
  const run = runSync(`
    return async function run() {
      const value = await native();
      return value;
    };`, { native: () => NativePromise.resolve(1) });
  assert.throws(() => run(), (error) => error instanceof Error && error.message === NATIVE_PROMISE_MESSAGE);
});
