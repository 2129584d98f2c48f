// web.js: the web platform's URL, URLSearchParams, Headers, TextEncoder,
// TextDecoder, Request, Response and fetch for toolhost's JavaScript
// runtime. One ES module, no dependencies.
//
// The runtime's QuickJS has none of these, and it never runs the promise
// job queue during an export call: a native Promise's `.then` callbacks
// never run inside a tool call. So `fetch` and the body methods answer a
// `SyncPromise`, a Promise-shaped thenable that is settled when it is made
// and runs callbacks at once; `sync.js` turns an author's `await` into a
// call that takes its value.
//
// `fetch` is made over a synchronous transport, `makeFetch(send)`: `send`
// takes `{ method, url, headers: [[name, value], ..], body: Uint8Array |
// undefined, timeoutMs: number | undefined, followRedirects: boolean }` and
// answers `{ status, url, headers: [[name, value], ..], body: Uint8Array }`
// or throws; the thrown message reaches the author unchanged (as a
// TypeError's message, the error itself its `cause`). In the runtime
// `send` is the host import `toolhost:plugin/http@0.2.0`'s `send`.
//
// `install(globalThis, send)` defines what is missing of these globals.
//
// Limits: UTF-8 is the only text encoding; a host name's Unicode is mapped
// to ASCII with lower-casing, NFKC and Punycode (not the full UTS 46
// tables, and no bidi check); there is no Blob, FormData, ReadableStream
// or AbortSignal (a Response has no `body` stream).

// --- SyncPromise -------------------------------------------------------------

const PENDING = 0;
const FULFILLED = 1;
const REJECTED = 2;

function isObjectLike(value) {
  return value !== null && (typeof value === "object" || typeof value === "function");
}

/** A Promise-compatible thenable that settles as soon as its executor
 * resolves it and runs `then` callbacks synchronously: at once when it is
 * already settled, else when it settles. `resolve(thenable)` adopts the
 * thenable's state through its `then` (a native Promise's, which never
 * runs inside a tool call, leaves it pending). */
export class SyncPromise {
  #state = PENDING;
  #value = undefined;
  #reactions = [];

  constructor(executor) {
    if (typeof executor !== "function") throw new TypeError("SyncPromise resolver is not a function");
    let done = false;
    const resolve = (value) => {
      if (done) return;
      done = true;
      this.#resolve(value);
    };
    const reject = (reason) => {
      if (done) return;
      done = true;
      this.#settle(REJECTED, reason);
    };
    try {
      executor(resolve, reject);
    } catch (error) {
      reject(error);
    }
  }

  #resolve(value) {
    if (value === this) {
      this.#settle(REJECTED, new TypeError("Chaining cycle detected for promise"));
      return;
    }
    if (isObjectLike(value)) {
      let then;
      try {
        then = value.then;
      } catch (error) {
        this.#settle(REJECTED, error);
        return;
      }
      if (typeof then === "function") {
        let called = false;
        try {
          then.call(
            value,
            (inner) => {
              if (called) return;
              called = true;
              this.#resolve(inner);
            },
            (reason) => {
              if (called) return;
              called = true;
              this.#settle(REJECTED, reason);
            },
          );
        } catch (error) {
          if (!called) {
            called = true;
            this.#settle(REJECTED, error);
          }
        }
        return;
      }
    }
    this.#settle(FULFILLED, value);
  }

  #settle(state, value) {
    if (this.#state !== PENDING) return;
    this.#state = state;
    this.#value = value;
    const reactions = this.#reactions;
    this.#reactions = null;
    for (const react of reactions) react();
  }

  then(onFulfilled, onRejected) {
    return new SyncPromise((resolve, reject) => {
      const react = () => {
        const fulfilled = this.#state === FULFILLED;
        const handler = fulfilled ? onFulfilled : onRejected;
        if (typeof handler !== "function") {
          (fulfilled ? resolve : reject)(this.#value);
          return;
        }
        let result;
        try {
          result = handler(this.#value);
        } catch (error) {
          reject(error);
          return;
        }
        resolve(result);
      };
      if (this.#state === PENDING) this.#reactions.push(react);
      else react();
    });
  }

  catch(onRejected) {
    return this.then(undefined, onRejected);
  }

  finally(onFinally) {
    if (typeof onFinally !== "function") return this.then(onFinally, onFinally);
    return this.then(
      (value) => SyncPromise.resolve(onFinally()).then(() => value),
      (reason) => SyncPromise.resolve(onFinally()).then(() => { throw reason; }),
    );
  }

  get [Symbol.toStringTag]() {
    return "SyncPromise";
  }

  static resolve(value) {
    if (value instanceof SyncPromise) return value;
    return new SyncPromise((resolve) => resolve(value));
  }

  static reject(reason) {
    return new SyncPromise((resolve, reject) => reject(reason));
  }

  static withResolvers() {
    let resolve;
    let reject;
    const promise = new SyncPromise((res, rej) => {
      resolve = res;
      reject = rej;
    });
    return { promise, resolve, reject };
  }

  static try(fn, ...args) {
    return new SyncPromise((resolve) => resolve(fn(...args)));
  }

  static all(iterable) {
    return new SyncPromise((resolve, reject) => {
      const values = [];
      let remaining = 1;
      let index = 0;
      for (const item of iterable) {
        const at = index++;
        values[at] = undefined;
        remaining++;
        SyncPromise.resolve(item).then((value) => {
          values[at] = value;
          if (--remaining === 0) resolve(values);
        }, reject);
      }
      if (--remaining === 0) resolve(values);
    });
  }

  static allSettled(iterable) {
    return new SyncPromise((resolve) => {
      const results = [];
      let remaining = 1;
      let index = 0;
      for (const item of iterable) {
        const at = index++;
        results[at] = undefined;
        remaining++;
        SyncPromise.resolve(item).then(
          (value) => {
            results[at] = { status: "fulfilled", value };
            if (--remaining === 0) resolve(results);
          },
          (reason) => {
            results[at] = { status: "rejected", reason };
            if (--remaining === 0) resolve(results);
          },
        );
      }
      if (--remaining === 0) resolve(results);
    });
  }

  static race(iterable) {
    return new SyncPromise((resolve, reject) => {
      for (const item of iterable) SyncPromise.resolve(item).then(resolve, reject);
    });
  }

  static any(iterable) {
    return new SyncPromise((resolve, reject) => {
      const errors = [];
      let remaining = 1;
      let index = 0;
      const fail = () => {
        const message = "All promises were rejected";
        if (typeof AggregateError === "function") {
          reject(new AggregateError(errors, message));
        } else {
          const error = new Error(message);
          error.name = "AggregateError";
          error.errors = errors;
          reject(error);
        }
      };
      for (const item of iterable) {
        const at = index++;
        errors[at] = undefined;
        remaining++;
        SyncPromise.resolve(item).then(resolve, (reason) => {
          errors[at] = reason;
          if (--remaining === 0) fail();
        });
      }
      if (--remaining === 0) fail();
    });
  }
}

// --- Strings and bytes -------------------------------------------------------

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** `value` as a USVString: a string, each lone surrogate U+FFFD. */
function toUSV(value) {
  if (typeof value === "symbol") throw new TypeError("Cannot convert a Symbol value to a string");
  return String(value).replace(LONE_SURROGATE, "\uFFFD");
}

/** The UTF-8 bytes of a string (a lone surrogate is U+FFFD's). */
function utf8Encode(string) {
  const out = new Uint8Array(string.length * 3);
  let n = 0;
  for (let i = 0; i < string.length; i++) {
    let c = string.charCodeAt(i);
    if (c < 0x80) {
      out[n++] = c;
      continue;
    }
    if (c >= 0xd800 && c <= 0xdfff) {
      const next = i + 1 < string.length ? string.charCodeAt(i + 1) : 0;
      if (c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (next - 0xdc00);
        i++;
        out[n++] = 0xf0 | (c >> 18);
        out[n++] = 0x80 | ((c >> 12) & 0x3f);
        out[n++] = 0x80 | ((c >> 6) & 0x3f);
        out[n++] = 0x80 | (c & 0x3f);
        continue;
      }
      c = 0xfffd;
    }
    if (c < 0x800) {
      out[n++] = 0xc0 | (c >> 6);
      out[n++] = 0x80 | (c & 0x3f);
    } else {
      out[n++] = 0xe0 | (c >> 12);
      out[n++] = 0x80 | ((c >> 6) & 0x3f);
      out[n++] = 0x80 | (c & 0x3f);
    }
  }
  return out.slice(0, n);
}

/** Code units to a string, in chunks (no argument-count limit). */
function fromCodeUnits(units) {
  let out = "";
  for (let i = 0; i < units.length; i += 8192) {
    out += String.fromCharCode.apply(null, units.slice(i, i + 8192));
  }
  return out;
}

/** The WHATWG UTF-8 decoder's state, kept between streamed chunks. */
class Utf8Decoder {
  needed = 0;
  seen = 0;
  codePoint = 0;
  lower = 0x80;
  upper = 0xbf;

  reset() {
    this.needed = this.seen = this.codePoint = 0;
    this.lower = 0x80;
    this.upper = 0xbf;
  }

  /** Decodes `bytes` into `units` (UTF-16 code units); `error()` is
   * called at each invalid sequence and answers whether to go on (with
   * U+FFFD) or stop. At the end (`flush`) an unfinished sequence is an
   * error. */
  decode(bytes, units, error, flush) {
    const emit = (cp) => {
      if (cp < 0x10000) units.push(cp);
      else units.push(0xd800 + ((cp - 0x10000) >> 10), 0xdc00 + ((cp - 0x10000) & 0x3ff));
    };
    for (let i = 0; i < bytes.length; i++) {
      const byte = bytes[i];
      if (this.needed === 0) {
        if (byte <= 0x7f) {
          units.push(byte);
        } else if (byte >= 0xc2 && byte <= 0xdf) {
          this.needed = 1;
          this.codePoint = byte & 0x1f;
        } else if (byte >= 0xe0 && byte <= 0xef) {
          if (byte === 0xe0) this.lower = 0xa0;
          if (byte === 0xed) this.upper = 0x9f;
          this.needed = 2;
          this.codePoint = byte & 0xf;
        } else if (byte >= 0xf0 && byte <= 0xf4) {
          if (byte === 0xf0) this.lower = 0x90;
          if (byte === 0xf4) this.upper = 0x8f;
          this.needed = 3;
          this.codePoint = byte & 0x7;
        } else {
          error();
          units.push(0xfffd);
        }
        continue;
      }
      if (byte < this.lower || byte > this.upper) {
        this.reset();
        error();
        units.push(0xfffd);
        i--; // the byte starts afresh
        continue;
      }
      this.lower = 0x80;
      this.upper = 0xbf;
      this.codePoint = (this.codePoint << 6) | (byte & 0x3f);
      this.seen++;
      if (this.seen === this.needed) {
        emit(this.codePoint);
        this.reset();
      }
    }
    if (flush && this.needed !== 0) {
      this.reset();
      error();
      units.push(0xfffd);
    }
  }
}

/** `decoder`'s text of `bytes`, decoded 64 KiB at a time (a large body
 * never makes one array of all its code units). */
function decodeInChunks(decoder, bytes, error, flush) {
  const CHUNK = 65536;
  let out = "";
  for (let at = 0; at < bytes.length || (at === 0 && flush); at += CHUNK) {
    const units = [];
    const end = Math.min(at + CHUNK, bytes.length);
    decoder.decode(bytes.subarray(at, end), units, error, flush && end === bytes.length);
    out += fromCodeUnits(units);
    if (end === bytes.length) break;
  }
  return out;
}

/** The text of UTF-8 bytes, each invalid sequence U+FFFD; a leading BOM
 * dropped when `stripBOM`. */
function utf8Decode(bytes, stripBOM = true) {
  const text = decodeInChunks(new Utf8Decoder(), bytes, () => {}, true);
  return stripBOM && text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

function bytesOf(input, what) {
  if (input instanceof Uint8Array) return input;
  if (input instanceof ArrayBuffer) return new Uint8Array(input);
  if (typeof SharedArrayBuffer === "function" && input instanceof SharedArrayBuffer) return new Uint8Array(input);
  if (ArrayBuffer.isView(input)) return new Uint8Array(input.buffer, input.byteOffset, input.byteLength);
  throw new TypeError(`${what}: expected an ArrayBuffer or an ArrayBufferView`);
}

// --- TextEncoder, TextDecoder ------------------------------------------------

/** UTF-8 only, as the standard's TextEncoder. */
export class TextEncoder {
  get encoding() {
    return "utf-8";
  }

  encode(input = "") {
    return utf8Encode(String(input));
  }

  /** Encodes as much of `source` as fits in `destination`. */
  encodeInto(source, destination) {
    if (!(destination instanceof Uint8Array)) throw new TypeError("TextEncoder.encodeInto: destination must be a Uint8Array");
    const string = String(source);
    let read = 0;
    let written = 0;
    for (let i = 0; i < string.length;) {
      let c = string.charCodeAt(i);
      let units = 1;
      if (c >= 0xd800 && c <= 0xdfff) {
        const next = i + 1 < string.length ? string.charCodeAt(i + 1) : 0;
        if (c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
          c = 0x10000 + ((c - 0xd800) << 10) + (next - 0xdc00);
          units = 2;
        } else {
          c = 0xfffd;
        }
      }
      const size = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
      if (written + size > destination.length) break;
      if (size === 1) {
        destination[written] = c;
      } else if (size === 2) {
        destination[written] = 0xc0 | (c >> 6);
        destination[written + 1] = 0x80 | (c & 0x3f);
      } else if (size === 3) {
        destination[written] = 0xe0 | (c >> 12);
        destination[written + 1] = 0x80 | ((c >> 6) & 0x3f);
        destination[written + 2] = 0x80 | (c & 0x3f);
      } else {
        destination[written] = 0xf0 | (c >> 18);
        destination[written + 1] = 0x80 | ((c >> 12) & 0x3f);
        destination[written + 2] = 0x80 | ((c >> 6) & 0x3f);
        destination[written + 3] = 0x80 | (c & 0x3f);
      }
      written += size;
      read += units;
      i += units;
    }
    return { read, written };
  }

  get [Symbol.toStringTag]() {
    return "TextEncoder";
  }
}

const UTF8_LABELS = new Set(["unicode-1-1-utf-8", "unicode11utf8", "unicode20utf8", "utf-8", "utf8", "x-unicode20utf8"]);

/** UTF-8 only; `fatal` (throw a TypeError at invalid bytes instead of
 * writing U+FFFD) and `ignoreBOM` (keep a leading U+FEFF) as the standard
 * says, and `decode(bytes, { stream: true })`. */
export class TextDecoder {
  #fatal;
  #ignoreBOM;
  #decoder = new Utf8Decoder();
  #bomSeen = false;
  #streaming = false;

  constructor(label = "utf-8", options = {}) {
    const name = String(label).trim().toLowerCase();
    if (!UTF8_LABELS.has(name)) throw new RangeError(`The "${label}" encoding is not supported`);
    this.#fatal = Boolean(options?.fatal);
    this.#ignoreBOM = Boolean(options?.ignoreBOM);
  }

  get encoding() {
    return "utf-8";
  }

  get fatal() {
    return this.#fatal;
  }

  get ignoreBOM() {
    return this.#ignoreBOM;
  }

  decode(input = undefined, options = {}) {
    const bytes = input === undefined || input === null ? new Uint8Array(0) : bytesOf(input, "TextDecoder.decode");
    if (!this.#streaming) {
      this.#decoder.reset();
      this.#bomSeen = false;
    }
    const stream = Boolean(options?.stream);
    this.#streaming = stream;
    const fatal = this.#fatal;
    let text;
    try {
      text = decodeInChunks(this.#decoder, bytes, () => {
        if (fatal) throw new TypeError("The encoded data was not valid for encoding utf-8");
      }, !stream);
    } catch (error) {
      this.#decoder.reset();
      this.#streaming = false;
      throw error;
    }
    if (!this.#ignoreBOM && !this.#bomSeen && text.length > 0) {
      this.#bomSeen = true;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    return text;
  }

  get [Symbol.toStringTag]() {
    return "TextDecoder";
  }
}

// --- Percent-encoding --------------------------------------------------------

const HEX = "0123456789ABCDEF";

const isC0Control = (b) => b < 0x20 || b > 0x7e;
const inFragmentSet = (b) => isC0Control(b) || b === 0x20 || b === 0x22 || b === 0x3c || b === 0x3e || b === 0x60;
const inQuerySet = (b) => isC0Control(b) || b === 0x20 || b === 0x22 || b === 0x23 || b === 0x3c || b === 0x3e;
const inSpecialQuerySet = (b) => inQuerySet(b) || b === 0x27;
const inPathSet = (b) => inQuerySet(b) || b === 0x3f || b === 0x60 || b === 0x7b || b === 0x7d;
const inUserinfoSet = (b) => inPathSet(b) || b === 0x2f || b === 0x3a || b === 0x3b || b === 0x3d || b === 0x40
  || (b >= 0x5b && b <= 0x5e) || b === 0x7c;

function percentByte(b) {
  return "%" + HEX[b >> 4] + HEX[b & 15];
}

/** `text` (code points) with the bytes in `set` percent-encoded. */
function percentEncode(text, set) {
  let out = "";
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x80) {
      out += set(c) ? percentByte(c) : text[i];
      continue;
    }
    let end = i + 1;
    if (c >= 0xd800 && c <= 0xdbff && end < text.length) end++;
    for (const b of utf8Encode(text.slice(i, end))) out += set(b) ? percentByte(b) : String.fromCharCode(b);
    i = end - 1;
  }
  return out;
}

function hexValue(c) {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  return -1;
}

/** The bytes of `text` with each `%XX` decoded. */
function percentDecode(text) {
  const bytes = utf8Encode(text);
  const out = new Uint8Array(bytes.length);
  let n = 0;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    if (b === 0x25 && i + 2 < bytes.length) {
      const high = hexValue(bytes[i + 1]);
      const low = hexValue(bytes[i + 2]);
      if (high >= 0 && low >= 0) {
        out[n++] = high * 16 + low;
        i += 2;
        continue;
      }
    }
    out[n++] = b;
  }
  return out.slice(0, n);
}

// --- application/x-www-form-urlencoded ---------------------------------------

function formEncode(text) {
  let out = "";
  for (const b of utf8Encode(text)) {
    if (b === 0x20) out += "+";
    else if ((b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a)
      || b === 0x2a || b === 0x2d || b === 0x2e || b === 0x5f) out += String.fromCharCode(b);
    else out += percentByte(b);
  }
  return out;
}

function formDecode(text) {
  return utf8Decode(percentDecode(text.replace(/\+/g, " ")), false);
}

function parseForm(text) {
  const list = [];
  for (const sequence of text.split("&")) {
    if (sequence === "") continue;
    const at = sequence.indexOf("=");
    const name = at < 0 ? sequence : sequence.slice(0, at);
    const value = at < 0 ? "" : sequence.slice(at + 1);
    list.push([formDecode(name), formDecode(value)]);
  }
  return list;
}

function serializeForm(list) {
  return list.map(([name, value]) => `${formEncode(name)}=${formEncode(value)}`).join("&");
}

// --- Hosts ---------------------------------------------------------------------

const FAILURE = null;

function punycodeDigit(d) {
  return String.fromCharCode(d + 22 + (d < 26 ? 75 : 0));
}

function punycodeAdapt(delta, points, first) {
  delta = first ? Math.floor(delta / 700) : delta >> 1;
  delta += Math.floor(delta / points);
  let k = 0;
  while (delta > 455) {
    delta = Math.floor(delta / 35);
    k += 36;
  }
  return k + Math.floor((36 * delta) / (delta + 38));
}

/** RFC 3492 Punycode of one label (without "xn--"). */
function punycodeEncode(label) {
  const points = Array.from(label, (c) => c.codePointAt(0));
  let output = points.filter((c) => c < 0x80).map((c) => String.fromCharCode(c)).join("");
  const basic = output.length;
  let handled = basic;
  if (basic > 0) output += "-";
  let n = 128;
  let delta = 0;
  let bias = 72;
  while (handled < points.length) {
    let m = Infinity;
    for (const c of points) if (c >= n && c < m) m = c;
    delta += (m - n) * (handled + 1);
    n = m;
    for (const c of points) {
      if (c < n) delta++;
      if (c === n) {
        let q = delta;
        for (let k = 36; ; k += 36) {
          const t = k <= bias ? 1 : k >= bias + 26 ? 26 : k - bias;
          if (q < t) break;
          output += punycodeDigit(t + ((q - t) % (36 - t)));
          q = Math.floor((q - t) / (36 - t));
        }
        output += punycodeDigit(q);
        bias = punycodeAdapt(delta, handled + 1, handled === basic);
        delta = 0;
        handled++;
      }
    }
    delta++;
    n++;
  }
  return output;
}

/** A label's Punycode decoded, or null when it is not valid Punycode. */
function punycodeDecode(input) {
  const output = [];
  const last = input.lastIndexOf("-");
  const basic = last < 0 ? 0 : last;
  for (let j = 0; j < basic; j++) {
    if (input.charCodeAt(j) >= 0x80) return null;
    output.push(input.charCodeAt(j));
  }
  let n = 128;
  let i = 0;
  let bias = 72;
  for (let at = basic > 0 ? basic + 1 : 0; at < input.length;) {
    const oldi = i;
    let w = 1;
    for (let k = 36; ; k += 36) {
      if (at >= input.length) return null;
      const c = input.charCodeAt(at++);
      const digit = c >= 0x30 && c <= 0x39 ? c - 22 : c >= 0x41 && c <= 0x5a ? c - 0x41 : c >= 0x61 && c <= 0x7a ? c - 0x61 : -1;
      if (digit < 0) return null;
      i += digit * w;
      const t = k <= bias ? 1 : k >= bias + 26 ? 26 : k - bias;
      if (digit < t) break;
      w *= 36 - t;
      if (i > 0x7fffffff || w > 0x7fffffff) return null;
    }
    bias = punycodeAdapt(i - oldi, output.length + 1, oldi === 0);
    n += Math.floor(i / (output.length + 1));
    i %= output.length + 1;
    if (n > 0x10ffff) return null;
    output.splice(i, 0, n);
    i++;
  }
  return String.fromCodePoint(...output);
}

// Code points UTS 46 maps to nothing, and those it maps to ".".
const IDNA_IGNORED = /[\u00AD\u034F\u180B-\u180D\u180F\u200B\u2060\u2064\uFE00-\uFE0F\uFEFF]|\uDB40[\uDD00-\uDDEF]/g;
const IDNA_DOTS = /[\u3002\uFF0E\uFF61]/g;
const FORBIDDEN_HOST = /[\u0000\t\n\r #/:<>?@[\\\]^|]/;
// eslint-disable-next-line no-control-regex
const FORBIDDEN_DOMAIN = /[\u0000-\u001F #%/:<>?@[\\\]^|\u007F]/;

const IDNA_VIRAMA = /[\u094D\u09CD\u0A4D\u0ACD\u0B4D\u0BCD\u0C4D\u0CCD\u0D3B\u0D3C\u0D4D\u0DCA\u0E3A\u0EBA\u0F84\u1039\u103A\u1714\u1734\u17D2\u1A60\u1B44\u1BAA\u1BAB\u1BF2\u1BF3\u2D7F\uA806\uA8C4\uA953\uA9C0\uAAF6\uABED]/;
const IDNA_JOINING = /[\u0600-\u08FF]/;
// Unicode property escapes, made at load time so that an engine without
// one of them falls back to a plainer class instead of failing to load.
function unicodeClass(source, fallback) {
  try {
    return new RegExp(source, "u");
  } catch {
    return new RegExp(fallback, "u");
  }
}
const RTL_SCRIPTS = "\\p{Script=Arabic}\\p{Script=Hebrew}\\p{Script=Syriac}\\p{Script=Thaana}\\p{Script=Nko}"
  + "\\p{Script=Samaritan}\\p{Script=Mandaic}\\p{Script=Adlam}";
const RTL_FALLBACK = "\\u0590-\\u08FF\\uFB1D-\\uFDFF\\uFE70-\\uFEFF";
const RTL = unicodeClass(`[${RTL_SCRIPTS}]`, `[${RTL_FALLBACK}]`);
const LTR_LETTER = unicodeClass(`(?![${RTL_SCRIPTS}])\\p{L}`, `(?![${RTL_FALLBACK}])[A-Za-z\\u00C0-\\u024F\\u0370-\\u03FF\\u0400-\\u04FF]`);
// Unassigned, private use, surrogates, spaces (other than ASCII's,
// refused later), line and paragraph separators and C1 controls:
// disallowed in a host.
const IDNA_INVALID = unicodeClass(
  "[\\p{Cn}\\p{Co}\\p{Cs}\\p{Zs}\\p{Zl}\\p{Zp}\\u0080-\\u009F\\uFFFD]",
  "[\\uE000-\\uF8FF\\uD800-\\uDFFF\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000\\u0080-\\u009F\\uFFFD]",
);
const LEADING_MARK = unicodeClass("^\\p{M}", "^[\\u0300-\\u036F\\u1AB0-\\u1AFF\\u1DC0-\\u1DFF\\u20D0-\\u20FF\\uFE20-\\uFE2F]");
const FORMAT_CONTROL = unicodeClass("\\p{Cf}", "[\\u00AD\\u0600-\\u0605\\u061C\\u06DD\\u070F\\u200B-\\u200F\\u202A-\\u202E\\u2060-\\u2064\\u2066-\\u206F\\uFEFF\\uFFF9-\\uFFFB]");

function idnaMap(text) {
  let s = text.replace(IDNA_DOTS, ".").replace(IDNA_IGNORED, "").replace(/\u1E9E/g, "ss").toLowerCase();
  if (/[^\x00-\x7F]/.test(s)) {
    const dots = s.split(".").length;
    if (typeof s.normalize === "function") s = s.normalize("NFKC").toLowerCase().normalize("NFC");
    if (s.split(".").length !== dots) return null; // U+2024 and kin: refused
  }
  return s;
}

/** Whether a label (Unicode) passes UTS 46's validity checks, as far as
 * these are approximated here: no disallowed code point, no leading
 * combining mark, joiners only after a virama (ZWNJ also inside Arabic
 * script), no right-to-left label with left-to-right letters. */
function validLabel(label) {
  if (label === "" || /^[\x00-\x7F]*$/.test(label)) return true;
  if (IDNA_INVALID.test(label) || LEADING_MARK.test(label)) return false;
  for (const match of label.matchAll(/[\u200C\u200D]/g)) {
    const before = label[match.index - 1] ?? "";
    const after = label[match.index + 1] ?? "";
    if (IDNA_VIRAMA.test(before)) continue;
    if (match[0] === "\u200C" && IDNA_JOINING.test(before) && IDNA_JOINING.test(after)) continue;
    return false;
  }
  if (FORMAT_CONTROL.test(label.replace(/[\u200C\u200D]/g, ""))) return false;
  if (RTL.test(label) && (LTR_LETTER.test(label) || /[A-Za-z]/.test(label))) return false;
  return true;
}

/** A domain to ASCII (UTS 46 nontransitional, approximated), or FAILURE. */
function domainToASCII(domain) {
  const mapped = idnaMap(domain);
  if (mapped === null) return FAILURE;
  const labels = mapped.split(".").map((label) => {
    if (label.startsWith("xn--")) {
      const decoded = punycodeDecode(label.slice(4));
      if (!decoded || !/[^\x00-\x7F]/.test(decoded) || idnaMap(decoded) !== decoded || !validLabel(decoded)
        || punycodeEncode(decoded) !== label.slice(4)) return FAILURE;
      return label;
    }
    if (!validLabel(label)) return FAILURE;
    return /[^\x00-\x7F]/.test(label) ? "xn--" + punycodeEncode(label) : label;
  });
  if (labels.includes(FAILURE)) return FAILURE;
  const result = labels.join(".");
  if (result === "" || FORBIDDEN_DOMAIN.test(result)) return FAILURE;
  return result;
}

function parseIPv4Number(text) {
  if (text === "") return FAILURE;
  let radix = 10;
  if (/^0[xX]/.test(text)) {
    text = text.slice(2);
    radix = 16;
  } else if (text.length > 1 && text[0] === "0") {
    text = text.slice(1);
    radix = 8;
  }
  if (text === "") return 0;
  const valid = radix === 10 ? /^[0-9]+$/ : radix === 16 ? /^[0-9A-Fa-f]+$/ : /^[0-7]+$/;
  if (!valid.test(text)) return FAILURE;
  return parseInt(text, radix);
}

function endsInANumber(text) {
  const parts = text.split(".");
  if (parts[parts.length - 1] === "") {
    if (parts.length === 1) return false;
    parts.pop();
  }
  const last = parts[parts.length - 1];
  if (last !== "" && /^[0-9]+$/.test(last)) return true;
  return parseIPv4Number(last) !== FAILURE;
}

function parseIPv4(text) {
  const parts = text.split(".");
  if (parts[parts.length - 1] === "" && parts.length > 1) parts.pop();
  if (parts.length > 4) return FAILURE;
  const numbers = [];
  for (const part of parts) {
    const n = parseIPv4Number(part);
    if (n === FAILURE) return FAILURE;
    numbers.push(n);
  }
  for (let i = 0; i < numbers.length - 1; i++) if (numbers[i] > 255) return FAILURE;
  const last = numbers[numbers.length - 1];
  if (last >= 256 ** (5 - numbers.length)) return FAILURE;
  let address = last;
  for (let i = 0; i < numbers.length - 1; i++) address += numbers[i] * 256 ** (3 - i);
  return [address >>> 24, (address >>> 16) & 255, (address >>> 8) & 255, address & 255].join(".");
}

function parseIPv6(text) {
  const address = [0, 0, 0, 0, 0, 0, 0, 0];
  let pieceIndex = 0;
  let compress = null;
  let p = 0;
  const at = (i) => text[i];
  const isHex = (c) => c !== undefined && /^[0-9A-Fa-f]$/.test(c);
  const isDigit = (c) => c !== undefined && c >= "0" && c <= "9";
  if (at(p) === ":") {
    if (at(p + 1) !== ":") return FAILURE;
    p += 2;
    pieceIndex++;
    compress = pieceIndex;
  }
  while (at(p) !== undefined) {
    if (pieceIndex === 8) return FAILURE;
    if (at(p) === ":") {
      if (compress !== null) return FAILURE;
      p++;
      pieceIndex++;
      compress = pieceIndex;
      continue;
    }
    let value = 0;
    let length = 0;
    while (length < 4 && isHex(at(p))) {
      value = value * 16 + parseInt(at(p), 16);
      p++;
      length++;
    }
    if (at(p) === ".") {
      if (length === 0) return FAILURE;
      p -= length;
      if (pieceIndex > 6) return FAILURE;
      let numbersSeen = 0;
      while (at(p) !== undefined) {
        let piece = null;
        if (numbersSeen > 0) {
          if (at(p) === "." && numbersSeen < 4) p++;
          else return FAILURE;
        }
        if (!isDigit(at(p))) return FAILURE;
        while (isDigit(at(p))) {
          const number = Number(at(p));
          if (piece === null) piece = number;
          else if (piece === 0) return FAILURE;
          else piece = piece * 10 + number;
          if (piece > 255) return FAILURE;
          p++;
        }
        address[pieceIndex] = address[pieceIndex] * 0x100 + piece;
        numbersSeen++;
        if (numbersSeen === 2 || numbersSeen === 4) pieceIndex++;
      }
      if (numbersSeen !== 4) return FAILURE;
      break;
    } else if (at(p) === ":") {
      p++;
      if (at(p) === undefined) return FAILURE;
    } else if (at(p) !== undefined) {
      return FAILURE;
    }
    address[pieceIndex] = value;
    pieceIndex++;
  }
  if (compress !== null) {
    let swaps = pieceIndex - compress;
    pieceIndex = 7;
    while (pieceIndex !== 0 && swaps > 0) {
      const other = compress + swaps - 1;
      [address[pieceIndex], address[other]] = [address[other], address[pieceIndex]];
      pieceIndex--;
      swaps--;
    }
  } else if (pieceIndex !== 8) {
    return FAILURE;
  }
  return address;
}

function serializeIPv6(address) {
  // The first longest run of two or more zero pieces is compressed.
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8;) {
    if (address[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && address[j] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  let out = "";
  for (let i = 0; i < 8; i++) {
    if (i === bestStart) {
      out += i === 0 ? "::" : ":";
      i += bestLength - 1;
      continue;
    }
    out += address[i].toString(16);
    if (i < 7) out += ":";
  }
  return out;
}

/** A host, serialized (IPv6 in brackets), or FAILURE. */
function parseHost(input, isOpaque) {
  if (input.startsWith("[")) {
    if (!input.endsWith("]")) return FAILURE;
    const address = parseIPv6(input.slice(1, -1));
    return address === FAILURE ? FAILURE : `[${serializeIPv6(address)}]`;
  }
  if (isOpaque) {
    if (FORBIDDEN_HOST.test(input)) return FAILURE;
    return percentEncode(input, isC0Control);
  }
  const domain = utf8Decode(percentDecode(input), false);
  const ascii = domainToASCII(domain);
  if (ascii === FAILURE) return FAILURE;
  if (endsInANumber(ascii)) return parseIPv4(ascii);
  return ascii;
}

// --- The URL parser (WHATWG URL Standard, "basic URL parser") ------------------

const SPECIAL_SCHEMES = { ftp: 21, file: null, http: 80, https: 443, ws: 80, wss: 443 };

const isSpecialScheme = (scheme) => Object.hasOwn(SPECIAL_SCHEMES, scheme);
const defaultPort = (scheme) => (isSpecialScheme(scheme) ? SPECIAL_SCHEMES[scheme] : null);

const SCHEME_START = 1;
const SCHEME = 2;
const NO_SCHEME = 3;
const SPECIAL_RELATIVE_OR_AUTHORITY = 4;
const PATH_OR_AUTHORITY = 5;
const RELATIVE = 6;
const RELATIVE_SLASH = 7;
const SPECIAL_AUTHORITY_SLASHES = 8;
const SPECIAL_AUTHORITY_IGNORE_SLASHES = 9;
const AUTHORITY = 10;
const HOST = 11;
const HOSTNAME = 12;
const PORT = 13;
const FILE = 14;
const FILE_SLASH = 15;
const FILE_HOST = 16;
const PATH_START = 17;
const PATH = 18;
const OPAQUE_PATH = 19;
const QUERY = 20;
const FRAGMENT = 21;

function newRecord() {
  return { scheme: "", username: "", password: "", host: null, port: null, path: [], query: null, fragment: null };
}

const isAlpha = (c) => c !== undefined && /^[A-Za-z]$/.test(c);
const isWindowsDriveLetter = (s) => s.length === 2 && isAlpha(s[0]) && (s[1] === ":" || s[1] === "|");
const isNormalizedWindowsDriveLetter = (s) => typeof s === "string" && s.length === 2 && isAlpha(s[0]) && s[1] === ":";
const isSingleDot = (s) => s === "." || s.toLowerCase() === "%2e";
const isDoubleDot = (s) => {
  const lower = s.toLowerCase();
  return lower === ".." || lower === ".%2e" || lower === "%2e." || lower === "%2e%2e";
};
const isSpecial = (url) => isSpecialScheme(url.scheme);
const hasCredentials = (url) => url.username !== "" || url.password !== "";
const hasOpaquePath = (url) => typeof url.path === "string";

function startsWithWindowsDriveLetter(points, pointer) {
  if (points.length - pointer < 2) return false;
  if (!isWindowsDriveLetter(points[pointer] + points[pointer + 1])) return false;
  if (points.length - pointer === 2) return true;
  return ["/", "\\", "?", "#"].includes(points[pointer + 2]);
}

function shortenPath(url) {
  if (url.scheme === "file" && url.path.length === 1 && isNormalizedWindowsDriveLetter(url.path[0])) return;
  url.path.pop();
}

/** The URL record of `input` (against `base`), or FAILURE; with `url` and
 * `stateOverride`, the setters' partial parse of `url` in place. */
function basicParse(input, base, url = null, stateOverride = 0) {
  if (!url) {
    url = newRecord();
    input = input.replace(/^[\u0000-\u0020]+|[\u0000-\u0020]+$/g, "");
  }
  input = input.replace(/[\t\n\r]/g, "");
  const points = Array.from(input);
  let state = stateOverride || SCHEME_START;
  let buffer = "";
  let atSignSeen = false;
  let insideBrackets = false;
  let passwordTokenSeen = false;

  for (let pointer = 0; ; pointer++) {
    const c = points[pointer]; // undefined: the end
    switch (state) {
      case SCHEME_START:
        if (isAlpha(c)) {
          buffer += c.toLowerCase();
          state = SCHEME;
        } else if (!stateOverride) {
          state = NO_SCHEME;
          pointer--;
        } else {
          return FAILURE;
        }
        break;

      case SCHEME:
        if (c !== undefined && /^[A-Za-z0-9+\-.]$/.test(c)) {
          buffer += c.toLowerCase();
        } else if (c === ":") {
          if (stateOverride) {
            if (isSpecialScheme(url.scheme) !== isSpecialScheme(buffer)) return url;
            if ((hasCredentials(url) || url.port !== null) && buffer === "file") return url;
            if (url.scheme === "file" && url.host === "") return url;
          }
          url.scheme = buffer;
          if (stateOverride) {
            if (url.port === defaultPort(url.scheme)) url.port = null;
            return url;
          }
          buffer = "";
          if (url.scheme === "file") {
            state = FILE;
          } else if (isSpecial(url) && base && base.scheme === url.scheme) {
            state = SPECIAL_RELATIVE_OR_AUTHORITY;
          } else if (isSpecial(url)) {
            state = SPECIAL_AUTHORITY_SLASHES;
          } else if (points[pointer + 1] === "/") {
            state = PATH_OR_AUTHORITY;
            pointer++;
          } else {
            url.path = "";
            state = OPAQUE_PATH;
          }
        } else if (!stateOverride) {
          buffer = "";
          state = NO_SCHEME;
          pointer = -1;
        } else {
          return FAILURE;
        }
        break;

      case NO_SCHEME:
        if (!base || (hasOpaquePath(base) && c !== "#")) return FAILURE;
        if (hasOpaquePath(base) && c === "#") {
          url.scheme = base.scheme;
          url.path = base.path;
          url.query = base.query;
          url.fragment = "";
          state = FRAGMENT;
        } else if (base.scheme !== "file") {
          state = RELATIVE;
          pointer--;
        } else {
          state = FILE;
          pointer--;
        }
        break;

      case SPECIAL_RELATIVE_OR_AUTHORITY:
        if (c === "/" && points[pointer + 1] === "/") {
          state = SPECIAL_AUTHORITY_IGNORE_SLASHES;
          pointer++;
        } else {
          state = RELATIVE;
          pointer--;
        }
        break;

      case PATH_OR_AUTHORITY:
        if (c === "/") {
          state = AUTHORITY;
        } else {
          state = PATH;
          pointer--;
        }
        break;

      case RELATIVE:
        url.scheme = base.scheme;
        if (c === "/" || (isSpecial(url) && c === "\\")) {
          state = RELATIVE_SLASH;
        } else {
          url.username = base.username;
          url.password = base.password;
          url.host = base.host;
          url.port = base.port;
          url.path = base.path.slice();
          url.query = base.query;
          if (c === "?") {
            url.query = "";
            state = QUERY;
          } else if (c === "#") {
            url.fragment = "";
            state = FRAGMENT;
          } else if (c !== undefined) {
            url.query = null;
            shortenPath(url);
            state = PATH;
            pointer--;
          }
        }
        break;

      case RELATIVE_SLASH:
        if (isSpecial(url) && (c === "/" || c === "\\")) {
          state = SPECIAL_AUTHORITY_IGNORE_SLASHES;
        } else if (c === "/") {
          state = AUTHORITY;
        } else {
          url.username = base.username;
          url.password = base.password;
          url.host = base.host;
          url.port = base.port;
          state = PATH;
          pointer--;
        }
        break;

      case SPECIAL_AUTHORITY_SLASHES:
        state = SPECIAL_AUTHORITY_IGNORE_SLASHES;
        if (c === "/" && points[pointer + 1] === "/") pointer++;
        else pointer--;
        break;

      case SPECIAL_AUTHORITY_IGNORE_SLASHES:
        if (c !== "/" && c !== "\\") {
          state = AUTHORITY;
          pointer--;
        }
        break;

      case AUTHORITY:
        if (c === "@") {
          if (atSignSeen) buffer = "%40" + buffer;
          atSignSeen = true;
          for (const point of buffer) {
            if (point === ":" && !passwordTokenSeen) {
              passwordTokenSeen = true;
              continue;
            }
            const encoded = percentEncode(point, inUserinfoSet);
            if (passwordTokenSeen) url.password += encoded;
            else url.username += encoded;
          }
          buffer = "";
        } else if (c === undefined || c === "/" || c === "?" || c === "#" || (isSpecial(url) && c === "\\")) {
          if (atSignSeen && buffer === "") return FAILURE;
          pointer -= Array.from(buffer).length + 1;
          buffer = "";
          state = HOST;
        } else {
          buffer += c;
        }
        break;

      case HOST:
      case HOSTNAME:
        if (stateOverride && url.scheme === "file") {
          pointer--;
          state = FILE_HOST;
        } else if (c === ":" && !insideBrackets) {
          if (buffer === "") return FAILURE;
          if (stateOverride === HOSTNAME) return FAILURE;
          const host = parseHost(buffer, !isSpecial(url));
          if (host === FAILURE) return FAILURE;
          url.host = host;
          buffer = "";
          state = PORT;
        } else if (c === undefined || c === "/" || c === "?" || c === "#" || (isSpecial(url) && c === "\\")) {
          pointer--;
          if (isSpecial(url) && buffer === "") return FAILURE;
          if (stateOverride && buffer === "" && (hasCredentials(url) || url.port !== null)) return FAILURE;
          const host = parseHost(buffer, !isSpecial(url));
          if (host === FAILURE) return FAILURE;
          url.host = host;
          buffer = "";
          state = PATH_START;
          if (stateOverride) return url;
        } else {
          if (c === "[") insideBrackets = true;
          if (c === "]") insideBrackets = false;
          buffer += c;
        }
        break;

      case PORT:
        if (c !== undefined && /^[0-9]$/.test(c)) {
          buffer += c;
        } else if (c === undefined || c === "/" || c === "?" || c === "#" || (isSpecial(url) && c === "\\") || stateOverride) {
          if (buffer !== "") {
            const port = Number(buffer);
            if (port > 65535) return FAILURE;
            url.port = port === defaultPort(url.scheme) ? null : port;
            buffer = "";
            if (stateOverride) return url;
          }
          if (stateOverride) return FAILURE;
          state = PATH_START;
          pointer--;
        } else {
          return FAILURE;
        }
        break;

      case FILE:
        url.scheme = "file";
        url.host = "";
        if (c === "/" || c === "\\") {
          state = FILE_SLASH;
        } else if (base && base.scheme === "file") {
          url.host = base.host;
          url.path = base.path.slice();
          url.query = base.query;
          if (c === "?") {
            url.query = "";
            state = QUERY;
          } else if (c === "#") {
            url.fragment = "";
            state = FRAGMENT;
          } else if (c !== undefined) {
            url.query = null;
            if (!startsWithWindowsDriveLetter(points, pointer)) shortenPath(url);
            else url.path = [];
            state = PATH;
            pointer--;
          }
        } else {
          state = PATH;
          pointer--;
        }
        break;

      case FILE_SLASH:
        if (c === "/" || c === "\\") {
          state = FILE_HOST;
        } else {
          if (base && base.scheme === "file") {
            url.host = base.host;
            if (!startsWithWindowsDriveLetter(points, pointer) && isNormalizedWindowsDriveLetter(base.path[0])) {
              url.path.push(base.path[0]);
            }
          }
          state = PATH;
          pointer--;
        }
        break;

      case FILE_HOST:
        if (c === undefined || c === "/" || c === "\\" || c === "?" || c === "#") {
          pointer--;
          if (!stateOverride && isWindowsDriveLetter(buffer)) {
            state = PATH;
          } else if (buffer === "") {
            url.host = "";
            if (stateOverride) return url;
            state = PATH_START;
          } else {
            let host = parseHost(buffer, !isSpecial(url));
            if (host === FAILURE) return FAILURE;
            if (host === "localhost") host = "";
            url.host = host;
            if (stateOverride) return url;
            buffer = "";
            state = PATH_START;
          }
        } else {
          buffer += c;
        }
        break;

      case PATH_START:
        if (isSpecial(url)) {
          state = PATH;
          if (c !== "/" && c !== "\\") pointer--;
        } else if (!stateOverride && c === "?") {
          url.query = "";
          state = QUERY;
        } else if (!stateOverride && c === "#") {
          url.fragment = "";
          state = FRAGMENT;
        } else if (c !== undefined) {
          state = PATH;
          if (c !== "/") pointer--;
        } else if (stateOverride && url.host === null) {
          url.path.push("");
        }
        break;

      case PATH: {
        const slash = c === "/" || (isSpecial(url) && c === "\\");
        if (c === undefined || slash || (!stateOverride && (c === "?" || c === "#"))) {
          if (isDoubleDot(buffer)) {
            shortenPath(url);
            if (!slash) url.path.push("");
          } else if (isSingleDot(buffer) && !slash) {
            url.path.push("");
          } else if (!isSingleDot(buffer)) {
            if (url.scheme === "file" && url.path.length === 0 && isWindowsDriveLetter(buffer)) buffer = buffer[0] + ":";
            url.path.push(buffer);
          }
          buffer = "";
          if (c === "?") {
            url.query = "";
            state = QUERY;
          }
          if (c === "#") {
            url.fragment = "";
            state = FRAGMENT;
          }
        } else {
          buffer += percentEncode(c, inPathSet);
        }
        break;
      }

      case OPAQUE_PATH:
        if (c === "?") {
          url.query = "";
          state = QUERY;
        } else if (c === "#") {
          url.fragment = "";
          state = FRAGMENT;
        } else if (c !== undefined) {
          url.path += percentEncode(c, isC0Control);
        }
        break;

      case QUERY:
        if ((!stateOverride && c === "#") || c === undefined) {
          url.query += percentEncode(buffer, isSpecial(url) ? inSpecialQuerySet : inQuerySet);
          buffer = "";
          if (c === "#") {
            url.fragment = "";
            state = FRAGMENT;
          }
        } else {
          buffer += c;
        }
        break;

      case FRAGMENT:
        if (c !== undefined) url.fragment += percentEncode(c, inFragmentSet);
        break;

      default:
        throw new Error(`URL parser: unknown state ${state}`);
    }
    if (pointer >= points.length) break;
  }
  return url;
}

/** The standard's "potentially strip trailing spaces from an opaque path"
 * (once its query and fragment are gone). */
function stripTrailingSpaces(url) {
  if (!hasOpaquePath(url) || url.fragment !== null || url.query !== null) return;
  url.path = url.path.replace(/ +$/, "");
}

function serializePath(url) {
  if (hasOpaquePath(url)) return url.path;
  return url.path.map((segment) => "/" + segment).join("");
}

function serializeURL(url, excludeFragment = false) {
  let out = url.scheme + ":";
  if (url.host !== null) {
    out += "//";
    if (hasCredentials(url)) {
      out += url.username;
      if (url.password !== "") out += ":" + url.password;
      out += "@";
    }
    out += url.host;
    if (url.port !== null) out += ":" + url.port;
  } else if (!hasOpaquePath(url) && url.path.length > 1 && url.path[0] === "") {
    out += "/.";
  }
  out += serializePath(url);
  if (url.query !== null) out += "?" + url.query;
  if (!excludeFragment && url.fragment !== null) out += "#" + url.fragment;
  return out;
}

function serializeOrigin(url) {
  if (url.scheme === "blob") {
    const inner = basicParse(serializePath(url), null);
    if (inner && (inner.scheme === "http" || inner.scheme === "https")) return serializeOrigin(inner);
    return "null";
  }
  if (["ftp", "http", "https", "ws", "wss"].includes(url.scheme)) {
    return `${url.scheme}://${url.host}${url.port === null ? "" : ":" + url.port}`;
  }
  return "null";
}

function invalidURL(input) {
  const error = new TypeError(`Invalid URL: ${JSON.stringify(String(input))}`);
  error.code = "ERR_INVALID_URL";
  error.input = String(input);
  return error;
}

// --- URLSearchParams ---------------------------------------------------------

const LINK = Symbol("URLSearchParams.link");
const RESET = Symbol("URLSearchParams.reset");

/** The standard's URLSearchParams; one made by a URL is that URL's query,
 * both ways. */
export class URLSearchParams {
  #list = [];
  #url = null; // the URL record whose query this is

  constructor(init = undefined) {
    if (init === undefined || init === null) return;
    if (init instanceof URLSearchParams) {
      this.#list = init.#list.map(([name, value]) => [name, value]);
    } else if (typeof init === "object" || typeof init === "function") {
      if (typeof init[Symbol.iterator] === "function") {
        for (const pair of init) {
          if (!isObjectLike(pair) || typeof pair[Symbol.iterator] !== "function") {
            throw new TypeError("URLSearchParams: each pair must be an iterable of [name, value]");
          }
          const items = Array.from(pair);
          if (items.length !== 2) throw new TypeError("URLSearchParams: each pair must have exactly two items, [name, value]");
          this.#list.push([toUSV(items[0]), toUSV(items[1])]);
        }
      } else {
        for (const key of Object.keys(init)) this.#list.push([toUSV(key), toUSV(init[key])]);
      }
    } else {
      let text = toUSV(init);
      if (text.startsWith("?")) text = text.slice(1);
      this.#list = parseForm(text);
    }
  }

  static [LINK](record) {
    const params = new URLSearchParams();
    params.#url = record;
    params.#list = record.query === null ? [] : parseForm(record.query);
    return params;
  }

  [RESET](query) {
    this.#list = query === null ? [] : parseForm(query);
  }

  #update() {
    if (!this.#url) return;
    const text = serializeForm(this.#list);
    this.#url.query = text === "" ? null : text;
    if (text === "") stripTrailingSpaces(this.#url);
  }

  get size() {
    return this.#list.length;
  }

  append(name, value) {
    this.#list.push([toUSV(name), toUSV(value)]);
    this.#update();
  }

  delete(name, value = undefined) {
    name = toUSV(name);
    if (value === undefined) this.#list = this.#list.filter(([n]) => n !== name);
    else {
      value = toUSV(value);
      this.#list = this.#list.filter(([n, v]) => n !== name || v !== value);
    }
    this.#update();
  }

  get(name) {
    name = toUSV(name);
    const pair = this.#list.find(([n]) => n === name);
    return pair ? pair[1] : null;
  }

  getAll(name) {
    name = toUSV(name);
    return this.#list.filter(([n]) => n === name).map(([, v]) => v);
  }

  has(name, value = undefined) {
    name = toUSV(name);
    if (value === undefined) return this.#list.some(([n]) => n === name);
    value = toUSV(value);
    return this.#list.some(([n, v]) => n === name && v === value);
  }

  set(name, value) {
    name = toUSV(name);
    value = toUSV(value);
    const at = this.#list.findIndex(([n]) => n === name);
    if (at < 0) this.#list.push([name, value]);
    else {
      this.#list[at][1] = value;
      this.#list = this.#list.filter(([n], i) => n !== name || i <= at);
    }
    this.#update();
  }

  /** Sorts by name (UTF-16 code units), stably. */
  sort() {
    this.#list = this.#list
      .map((pair, index) => [pair, index])
      .sort(([a, i], [b, j]) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : i - j))
      .map(([pair]) => pair);
    this.#update();
  }

  toString() {
    return serializeForm(this.#list);
  }

  forEach(callback, thisArg = undefined) {
    if (typeof callback !== "function") throw new TypeError("URLSearchParams.forEach: callback must be a function");
    for (let i = 0; i < this.#list.length; i++) {
      const [name, value] = this.#list[i];
      callback.call(thisArg, value, name, this);
    }
  }

  *entries() {
    for (let i = 0; i < this.#list.length; i++) yield [this.#list[i][0], this.#list[i][1]];
  }

  *keys() {
    for (let i = 0; i < this.#list.length; i++) yield this.#list[i][0];
  }

  *values() {
    for (let i = 0; i < this.#list.length; i++) yield this.#list[i][1];
  }

  [Symbol.iterator]() {
    return this.entries();
  }

  get [Symbol.toStringTag]() {
    return "URLSearchParams";
  }
}

// --- URL -----------------------------------------------------------------------

/** The standard's URL: `new URL(url, base)`, its parts as accessors
 * (setters included), `searchParams` live, `URL.canParse`, `URL.parse`. */
export class URL {
  #url;
  #params;

  constructor(url, base = undefined) {
    if (arguments.length === 0) throw new TypeError("URL: the url argument is required");
    const input = toUSV(url);
    let parsedBase = null;
    if (base !== undefined) {
      parsedBase = basicParse(toUSV(base), null);
      if (parsedBase === FAILURE) throw invalidURL(base);
    }
    const record = basicParse(input, parsedBase);
    if (record === FAILURE) throw invalidURL(input);
    this.#url = record;
    this.#params = URLSearchParams[LINK](record);
  }

  static canParse(url, base = undefined) {
    try {
      new URL(url, base);
      return true;
    } catch {
      return false;
    }
  }

  static parse(url, base = undefined) {
    try {
      return new URL(url, base);
    } catch {
      return null;
    }
  }

  get href() {
    return serializeURL(this.#url);
  }

  set href(value) {
    const record = basicParse(toUSV(value), null);
    if (record === FAILURE) throw invalidURL(value);
    // The same record object stays linked to searchParams.
    for (const key of Object.keys(this.#url)) delete this.#url[key];
    Object.assign(this.#url, record);
    this.#params[RESET](record.query);
  }

  get origin() {
    return serializeOrigin(this.#url);
  }

  get protocol() {
    return this.#url.scheme + ":";
  }

  set protocol(value) {
    basicParse(toUSV(value) + ":", null, this.#url, SCHEME_START);
  }

  get username() {
    return this.#url.username;
  }

  set username(value) {
    if (this.#cannotHaveCredentialsOrPort()) return;
    this.#url.username = percentEncode(toUSV(value), inUserinfoSet);
  }

  get password() {
    return this.#url.password;
  }

  set password(value) {
    if (this.#cannotHaveCredentialsOrPort()) return;
    this.#url.password = percentEncode(toUSV(value), inUserinfoSet);
  }

  #cannotHaveCredentialsOrPort() {
    return this.#url.host === null || this.#url.host === "" || this.#url.scheme === "file";
  }

  get host() {
    const { host, port } = this.#url;
    if (host === null) return "";
    return port === null ? host : `${host}:${port}`;
  }

  set host(value) {
    if (hasOpaquePath(this.#url)) return;
    basicParse(toUSV(value), null, this.#url, HOST);
  }

  get hostname() {
    return this.#url.host ?? "";
  }

  set hostname(value) {
    if (hasOpaquePath(this.#url)) return;
    basicParse(toUSV(value), null, this.#url, HOSTNAME);
  }

  get port() {
    return this.#url.port === null ? "" : String(this.#url.port);
  }

  set port(value) {
    if (this.#cannotHaveCredentialsOrPort()) return;
    const text = toUSV(value);
    if (text === "") this.#url.port = null;
    else basicParse(text, null, this.#url, PORT);
  }

  get pathname() {
    return serializePath(this.#url);
  }

  set pathname(value) {
    if (hasOpaquePath(this.#url)) return;
    this.#url.path = [];
    basicParse(toUSV(value), null, this.#url, PATH_START);
  }

  get search() {
    const { query } = this.#url;
    return query === null || query === "" ? "" : "?" + query;
  }

  set search(value) {
    let text = toUSV(value);
    if (text === "") {
      this.#url.query = null;
      this.#params[RESET](null);
      stripTrailingSpaces(this.#url);
      return;
    }
    if (text.startsWith("?")) text = text.slice(1);
    this.#url.query = "";
    basicParse(text, null, this.#url, QUERY);
    this.#params[RESET](this.#url.query);
  }

  get searchParams() {
    return this.#params;
  }

  get hash() {
    const { fragment } = this.#url;
    return fragment === null || fragment === "" ? "" : "#" + fragment;
  }

  set hash(value) {
    let text = toUSV(value);
    if (text === "") {
      this.#url.fragment = null;
      stripTrailingSpaces(this.#url);
      return;
    }
    if (text.startsWith("#")) text = text.slice(1);
    this.#url.fragment = "";
    basicParse(text, null, this.#url, FRAGMENT);
  }

  toString() {
    return this.href;
  }

  toJSON() {
    return this.href;
  }

  get [Symbol.toStringTag]() {
    return "URL";
  }
}

// --- Headers -------------------------------------------------------------------

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const IMMUTABLE = Symbol("Headers.immutable");
const RECEIVED = Symbol("Headers.received");

function headerName(name, what) {
  const text = String(name);
  if (!TOKEN.test(text)) throw new TypeError(`${what}: "${text}" is an invalid header name.`);
  return text.toLowerCase();
}

function headerValue(value, what) {
  const text = String(value).replace(/^[\t\n\r ]+|[\t\n\r ]+$/g, "");
  if (/[\0\n\r]/.test(text)) throw new TypeError(`${what}: "${text}" is an invalid header value.`);
  for (let i = 0; i < text.length; i++) {
    if (text.charCodeAt(i) > 0xff) {
      throw new TypeError(`${what}: the header value's character at index ${i} is not Latin-1 (greater than 255)`);
    }
  }
  return text;
}

/** The standard's Headers: names compared without case, `get` joining
 * repeats with ", ", iteration sorted by lower-cased name with repeats
 * combined (but each `set-cookie` apart). */
export class Headers {
  #list = []; // [lower-cased name, value]
  #immutable = false;

  constructor(init = undefined) {
    if (init === undefined || init === null) return;
    if (!isObjectLike(init)) throw new TypeError("Headers: init must be an object, a list of [name, value] pairs or Headers");
    if (init instanceof Headers) {
      for (const [name, value] of init.#list) this.#list.push([name, value]);
    } else if (typeof init[Symbol.iterator] === "function") {
      for (const pair of init) {
        if (!isObjectLike(pair) || typeof pair[Symbol.iterator] !== "function") {
          throw new TypeError("Headers: each header must be a [name, value] pair");
        }
        const items = Array.from(pair);
        if (items.length !== 2) throw new TypeError("Headers: each header must be a [name, value] pair");
        this.append(items[0], items[1]);
      }
    } else {
      for (const key of Object.keys(init)) this.append(key, init[key]);
    }
  }

  static [IMMUTABLE](headers) {
    headers.#immutable = true;
    return headers;
  }

  /** A header as the transport answered it: the name lower-cased, the
   * value kept whole (a server's UTF-8 is not refused). */
  static [RECEIVED](headers, name, value) {
    headers.#list.push([String(name).toLowerCase(), String(value)]);
  }

  #check(what) {
    if (this.#immutable) throw new TypeError(`${what}: these headers are immutable`);
  }

  append(name, value) {
    const n = headerName(name, "Headers.append");
    const v = headerValue(value, "Headers.append");
    this.#check("Headers.append");
    this.#list.push([n, v]);
  }

  delete(name) {
    const n = headerName(name, "Headers.delete");
    this.#check("Headers.delete");
    this.#list = this.#list.filter(([key]) => key !== n);
  }

  get(name) {
    const n = headerName(name, "Headers.get");
    const values = this.#list.filter(([key]) => key === n).map(([, value]) => value);
    return values.length ? values.join(", ") : null;
  }

  getSetCookie() {
    return this.#list.filter(([key]) => key === "set-cookie").map(([, value]) => value);
  }

  has(name) {
    const n = headerName(name, "Headers.has");
    return this.#list.some(([key]) => key === n);
  }

  set(name, value) {
    const n = headerName(name, "Headers.set");
    const v = headerValue(value, "Headers.set");
    this.#check("Headers.set");
    const at = this.#list.findIndex(([key]) => key === n);
    if (at < 0) this.#list.push([n, v]);
    else {
      this.#list[at][1] = v;
      this.#list = this.#list.filter(([key], i) => key !== n || i <= at);
    }
  }

  /** The standard's "sort and combine". */
  #sorted() {
    const names = [...new Set(this.#list.map(([key]) => key))].sort();
    const out = [];
    for (const name of names) {
      if (name === "set-cookie") {
        for (const value of this.getSetCookie()) out.push([name, value]);
      } else {
        out.push([name, this.get(name)]);
      }
    }
    return out;
  }

  forEach(callback, thisArg = undefined) {
    if (typeof callback !== "function") throw new TypeError("Headers.forEach: callback must be a function");
    for (const [name, value] of this.#sorted()) callback.call(thisArg, value, name, this);
  }

  *entries() {
    yield* this.#sorted();
  }

  *keys() {
    for (const [name] of this.#sorted()) yield name;
  }

  *values() {
    for (const [, value] of this.#sorted()) yield value;
  }

  [Symbol.iterator]() {
    return this.entries();
  }

  get [Symbol.toStringTag]() {
    return "Headers";
  }
}

// --- Bodies --------------------------------------------------------------------

/** [bytes or null, content type or null] of a body init. */
function extractBody(body) {
  if (body === undefined || body === null) return [null, null];
  if (typeof body === "string") return [utf8Encode(toUSV(body)), "text/plain;charset=UTF-8"];
  if (body instanceof URLSearchParams) {
    return [utf8Encode(body.toString()), "application/x-www-form-urlencoded;charset=UTF-8"];
  }
  if (body instanceof ArrayBuffer || ArrayBuffer.isView(body)
    || (typeof SharedArrayBuffer === "function" && body instanceof SharedArrayBuffer)) {
    return [bytesOf(body, "body").slice(), null];
  }
  if (typeof Blob === "function" && body instanceof Blob) {
    throw new TypeError("a Blob body is not supported here: give a string, a Uint8Array or an ArrayBuffer");
  }
  return [utf8Encode(toUSV(body)), "text/plain;charset=UTF-8"];
}

const BODY = Symbol("body");

/** What Request and Response share: the body, read once. */
class Body {
  #bytes;
  #used = false;

  constructor(bytes) {
    this.#bytes = bytes;
  }

  get bodyUsed() {
    return this.#used;
  }

  [BODY]() {
    return this.#bytes;
  }

  #consume() {
    if (this.#used) {
      return SyncPromise.reject(new TypeError("Body is unusable: Body has already been read"));
    }
    if (this.#bytes === null) return SyncPromise.resolve(new Uint8Array(0));
    this.#used = true;
    return SyncPromise.resolve(this.#bytes.slice());
  }

  arrayBuffer() {
    return this.#consume().then((bytes) => bytes.buffer);
  }

  bytes() {
    return this.#consume();
  }

  text() {
    return this.#consume().then((bytes) => utf8Decode(bytes));
  }

  json() {
    return this.text().then((text) => JSON.parse(text));
  }

  blob() {
    return SyncPromise.reject(new TypeError("blob() is not supported here (there is no Blob): use bytes() or arrayBuffer()"));
  }

  formData() {
    return SyncPromise.reject(new TypeError("formData() is not supported here: use text() and URLSearchParams"));
  }
}

// --- Request -------------------------------------------------------------------

const NORMALIZED_METHODS = ["DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT"];
const FORBIDDEN_METHODS = ["CONNECT", "TRACE", "TRACK"];
const REDIRECT_MODES = ["follow", "manual", "error"];

function normalizeMethod(method) {
  const text = String(method);
  if (!TOKEN.test(text)) throw new TypeError(`'${text}' is not a valid HTTP method.`);
  const upper = text.toUpperCase();
  if (FORBIDDEN_METHODS.includes(upper)) throw new TypeError(`'${text}' HTTP method is unsupported.`);
  return NORMALIZED_METHODS.includes(upper) ? upper : text;
}

/** The standard's Request, enough for `fetch`: `url`, `method`,
 * `headers`, `redirect`, the body methods, and `timeout` (toolhost's own:
 * milliseconds, the host's bound on the request). */
export class Request extends Body {
  #url;
  #method;
  #headers;
  #redirect;
  #timeout;

  constructor(input, init = {}) {
    init = init ?? {};
    let url;
    let method = "GET";
    let headers;
    let body = null;
    let type = null;
    let redirect = "follow";
    let timeout;
    if (input instanceof Request) {
      url = input.#url;
      method = input.#method;
      headers = input.#headers;
      redirect = input.#redirect;
      timeout = input.#timeout;
      if (input.bodyUsed) throw new TypeError("Request: the input's body has already been read");
      body = input[BODY]();
    } else {
      const text = toUSV(isObjectLike(input) && !(input instanceof URL) && typeof input.url === "string" ? input.url : input);
      let parsed;
      try {
        parsed = new URL(text);
      } catch {
        throw new TypeError(`Failed to parse URL from ${text}`);
      }
      if (parsed.username !== "" || parsed.password !== "") {
        throw new TypeError(`Request cannot be constructed from a URL that includes credentials: ${text}`);
      }
      url = parsed.href;
    }
    if (init.method !== undefined) method = normalizeMethod(init.method);
    if (init.redirect !== undefined) {
      if (!REDIRECT_MODES.includes(init.redirect)) {
        throw new TypeError(`Request: redirect must be "follow", "manual" or "error", not ${JSON.stringify(init.redirect)}`);
      }
      redirect = init.redirect;
    }
    if (init.timeout !== undefined && init.timeout !== null) {
      const ms = Number(init.timeout);
      if (!Number.isFinite(ms) || ms < 0) throw new TypeError("Request: timeout must be a number of milliseconds");
      timeout = Math.min(Math.floor(ms), 0xffffffff);
    }
    headers = new Headers(init.headers !== undefined ? init.headers : headers);
    if (init.body !== undefined && init.body !== null) {
      if (method === "GET" || method === "HEAD") throw new TypeError("Request with GET/HEAD method cannot have body.");
      [body, type] = extractBody(init.body);
      if (type !== null && !headers.has("content-type")) headers.append("content-type", type);
    } else if (init.body === null) {
      body = null;
    }
    if (body !== null && (method === "GET" || method === "HEAD")) {
      throw new TypeError("Request with GET/HEAD method cannot have body.");
    }
    super(body);
    this.#url = url;
    this.#method = method;
    this.#headers = headers;
    this.#redirect = redirect;
    this.#timeout = timeout;
  }

  get url() {
    return this.#url;
  }

  get method() {
    return this.#method;
  }

  get headers() {
    return this.#headers;
  }

  get redirect() {
    return this.#redirect;
  }

  get timeout() {
    return this.#timeout;
  }

  get signal() {
    return null;
  }

  clone() {
    if (this.bodyUsed) throw new TypeError("Request.clone: the body has already been read");
    return new Request(this);
  }

  get [Symbol.toStringTag]() {
    return "Request";
  }
}

// --- Response ------------------------------------------------------------------

const STATUS_TEXT = {
  100: "Continue", 101: "Switching Protocols", 102: "Processing", 103: "Early Hints",
  200: "OK", 201: "Created", 202: "Accepted", 203: "Non-Authoritative Information", 204: "No Content",
  205: "Reset Content", 206: "Partial Content", 207: "Multi-Status", 208: "Already Reported", 226: "IM Used",
  300: "Multiple Choices", 301: "Moved Permanently", 302: "Found", 303: "See Other", 304: "Not Modified",
  305: "Use Proxy", 307: "Temporary Redirect", 308: "Permanent Redirect",
  400: "Bad Request", 401: "Unauthorized", 402: "Payment Required", 403: "Forbidden", 404: "Not Found",
  405: "Method Not Allowed", 406: "Not Acceptable", 407: "Proxy Authentication Required", 408: "Request Timeout",
  409: "Conflict", 410: "Gone", 411: "Length Required", 412: "Precondition Failed", 413: "Payload Too Large",
  414: "URI Too Long", 415: "Unsupported Media Type", 416: "Range Not Satisfiable", 417: "Expectation Failed",
  418: "I'm a Teapot", 421: "Misdirected Request", 422: "Unprocessable Entity", 423: "Locked",
  424: "Failed Dependency", 425: "Too Early", 426: "Upgrade Required", 428: "Precondition Required",
  429: "Too Many Requests", 431: "Request Header Fields Too Large", 451: "Unavailable For Legal Reasons",
  500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable",
  504: "Gateway Timeout", 505: "HTTP Version Not Supported", 506: "Variant Also Negotiates",
  507: "Insufficient Storage", 508: "Loop Detected", 510: "Not Extended", 511: "Network Authentication Required",
};
const REDIRECT_STATUSES = [301, 302, 303, 307, 308];
const NULL_BODY_STATUSES = [101, 103, 204, 205, 304];
const RAW = Symbol("Response.raw");

/** The standard's Response: `status`, `ok`, `statusText`, `url`,
 * `headers`, `redirected`, `type`, the body methods (each answers a
 * SyncPromise), `clone`, and `Response.json`, `Response.error`,
 * `Response.redirect`. */
export class Response extends Body {
  #status;
  #statusText;
  #headers;
  #url;
  #redirected;
  #type;

  constructor(body = null, init = {}) {
    init = init ?? {};
    // A response made here (fetched, an error, a redirect, a clone):
    // its state as it is, unchecked.
    const raw = isObjectLike(init) && Object.hasOwn(init, RAW) ? init[RAW] : null;
    if (raw) {
      super(raw.body);
      this.#status = raw.status;
      this.#statusText = raw.statusText;
      this.#headers = raw.immutable ? Headers[IMMUTABLE](raw.headers) : raw.headers;
      this.#url = raw.url;
      this.#redirected = raw.redirected;
      this.#type = raw.type;
      return;
    }
    const status = init.status === undefined ? 200 : Number(init.status);
    if (!Number.isInteger(status) || status < 200 || status > 599) {
      throw new RangeError('init["status"] must be in the range of 200 to 599, inclusive.');
    }
    const statusText = init.statusText === undefined ? "" : String(init.statusText);
    if (/[^\t\x20-\x7E\x80-\xFF]/.test(statusText)) throw new TypeError("Response: invalid statusText");
    const headers = new Headers(init.headers);
    const [bytes, type] = extractBody(body);
    if (bytes !== null && NULL_BODY_STATUSES.includes(status)) {
      throw new TypeError(`Response with null body status ${status} cannot have body`);
    }
    if (type !== null && !headers.has("content-type")) headers.append("content-type", type);
    super(bytes);
    this.#status = status;
    this.#statusText = statusText;
    this.#headers = headers;
    this.#url = "";
    this.#redirected = false;
    this.#type = "default";
  }

  static json(data, init = {}) {
    const text = JSON.stringify(data);
    if (text === undefined) throw new TypeError("Response.json: the data is not JSON-serializable");
    const headers = new Headers(init?.headers);
    if (!headers.has("content-type")) headers.set("content-type", "application/json");
    return new Response(text, { ...init, headers });
  }

  static error() {
    return new Response(null, { [RAW]: {
      body: null, status: 0, statusText: "", headers: new Headers(), immutable: true, url: "", redirected: false, type: "error",
    } });
  }

  static redirect(url, status = 302) {
    const parsed = new URL(url);
    if (!REDIRECT_STATUSES.includes(status)) throw new RangeError(`Invalid status code ${status}`);
    return new Response(null, { [RAW]: {
      body: null, status, statusText: "", headers: new Headers({ location: parsed.href }), immutable: true,
      url: "", redirected: false, type: "default",
    } });
  }

  get status() {
    return this.#status;
  }

  get ok() {
    return this.#status >= 200 && this.#status <= 299;
  }

  get statusText() {
    return this.#statusText;
  }

  get headers() {
    return this.#headers;
  }

  get url() {
    return this.#url;
  }

  get redirected() {
    return this.#redirected;
  }

  get type() {
    return this.#type;
  }

  clone() {
    if (this.bodyUsed) throw new TypeError("Response.clone: Body has already been consumed.");
    const bytes = this[BODY]();
    return new Response(null, { [RAW]: {
      body: bytes === null ? null : bytes.slice(),
      status: this.#status,
      statusText: this.#statusText,
      headers: new Headers(this.#headers),
      immutable: this.#type !== "default",
      url: this.#url,
      redirected: this.#redirected,
      type: this.#type,
    } });
  }

  get [Symbol.toStringTag]() {
    return "Response";
  }
}

// --- fetch ---------------------------------------------------------------------

function messageOf(error) {
  if (error instanceof Error) return error.message;
  if (typeof error === "string") return error;
  if (isObjectLike(error) && typeof error.payload === "string") return error.payload;
  return String(error);
}

/** A TypeError whose message is the transport's, unchanged. */
function networkError(error) {
  const wrapped = new TypeError(messageOf(error));
  wrapped.cause = error;
  return wrapped;
}

/** `fetch(input, init)` over the synchronous transport `send` (see the
 * top of this file). It answers a SyncPromise of a Response; a refusal or
 * a failure rejects it with a TypeError carrying the transport's message.
 * `init`: `method`, `headers` (an object, pairs or Headers), `body` (a
 * string, Uint8Array, ArrayBuffer, a view or URLSearchParams), `redirect`
 * ("follow", "manual": the 3xx answer itself, "error": a 3xx rejects),
 * and `timeout` in milliseconds (toolhost's own). */
export function makeFetch(send) {
  if (typeof send !== "function") throw new TypeError("makeFetch: send must be a function");
  return function fetch(input, init = undefined) {
    try {
      const request = new Request(input, init);
      const url = new URL(request.url);
      if (url.protocol !== "http:" && url.protocol !== "https:") {
        throw new TypeError(`fetch: ${url.protocol} URLs are not supported here, only http: and https: (${request.url})`);
      }
      url.hash = "";
      const headers = [...request.headers];
      if (!request.headers.has("accept")) headers.push(["accept", "*/*"]);
      const body = request[BODY]();
      let answer;
      try {
        answer = send({
          method: request.method,
          url: url.href,
          headers,
          body: body === null ? undefined : body,
          timeoutMs: request.timeout,
          followRedirects: request.redirect === "follow",
        });
      } catch (error) {
        throw networkError(error);
      }
      const status = Number(answer.status);
      if (request.redirect === "error" && REDIRECT_STATUSES.includes(status)) {
        throw new TypeError(`fetch: ${url.href} answered a redirect (${status}) and redirect is "error"`);
      }
      const responseHeaders = new Headers();
      for (const [name, value] of answer.headers ?? []) Headers[RECEIVED](responseHeaders, name, value);
      const finalURL = new URL(answer.url || url.href);
      finalURL.hash = "";
      const bytes = answer.body === undefined || answer.body === null || NULL_BODY_STATUSES.includes(status)
        ? null
        : bytesOf(answer.body instanceof Uint8Array || ArrayBuffer.isView(answer.body) || answer.body instanceof ArrayBuffer
          ? answer.body
          : Uint8Array.from(answer.body), "fetch");
      return SyncPromise.resolve(new Response(null, { [RAW]: {
        body: bytes,
        status,
        statusText: STATUS_TEXT[status] ?? "",
        headers: responseHeaders,
        immutable: true,
        url: finalURL.href,
        redirected: request.redirect === "follow" && finalURL.href !== url.href,
        type: "basic",
      } }));
    } catch (error) {
      return SyncPromise.reject(error);
    }
  };
}

// --- install -------------------------------------------------------------------

/** Defines on `target` (globalThis) each of URL, URLSearchParams, Headers,
 * Request, Response, TextEncoder, TextDecoder and (given `send`) fetch
 * that it lacks; answers the names defined. */
export function install(target = globalThis, send = undefined) {
  const globals = { URL, URLSearchParams, Headers, Request, Response, TextEncoder, TextDecoder };
  if (typeof send === "function") globals.fetch = makeFetch(send);
  const defined = [];
  for (const [name, value] of Object.entries(globals)) {
    if (target[name] !== undefined) continue;
    Object.defineProperty(target, name, { value, writable: true, configurable: true, enumerable: false });
    defined.push(name);
  }
  return defined;
}
