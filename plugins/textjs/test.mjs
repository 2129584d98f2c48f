// Tests of the text utilities in plain Node (20+), without building the
// component: node plugins/textjs/test.mjs
// `tools.callTool` is what the host calls: it returns the WIT output
// (`{ content: [{ tag, val }], structured }`) or throws the WIT tool-error.

import { test } from "node:test";
import assert from "node:assert/strict";

import { tools } from "./app.js";

function call(name, args) {
  return tools.callTool(name, JSON.stringify(args));
}

function changeCase(text, to) {
  const { content } = call("change_case", { text, to });
  return content[0].val;
}

test("the tools are listed with their schemas", () => {
  const listed = tools.listTools();
  assert.deepEqual(listed.map((t) => t.name), ["change_case", "find_all"]);
  assert.equal(listed[0].outputSchema, null);
  assert.deepEqual(listed[0].annotations, { readOnly: true, destructive: null, idempotent: true, openWorld: null });
  assert.deepEqual(JSON.parse(listed[1].outputSchema).required, ["count", "matches"]);
});

test("change_case", () => {
  const text = "XMLHttpRequest and the quick-brown fox, version2Beta";
  assert.equal(changeCase(text, "snake"), "xml_http_request_and_the_quick_brown_fox_version_2_beta");
  assert.equal(changeCase(text, "kebab"), "xml-http-request-and-the-quick-brown-fox-version-2-beta");
  assert.equal(changeCase(text, "camel"), "xmlHttpRequestAndTheQuickBrownFoxVersion2Beta");
  assert.equal(changeCase("hello wörld, isn't it", "title"), "Hello Wörld, Isn't It");
  assert.equal(changeCase("Straße", "upper"), "STRASSE");
  assert.equal(changeCase("ÉTÉ", "lower"), "été");
  assert.equal(changeCase("  ", "snake"), "");
});

test("find_all gives structured matches, positions in code points", () => {
  const out = call("find_all", { text: "a1 😀22 é333", pattern: "\\d+" });
  const data = { count: 3, matches: [{ match: "1", index: 1 }, { match: "22", index: 4 }, { match: "333", index: 8 }] };
  assert.deepEqual(JSON.parse(out.structured), data);
  assert.deepEqual(JSON.parse(out.content[0].val), data);
  const ignoreCase = JSON.parse(call("find_all", { text: "Ab ab AB", pattern: "ab", flags: "gi" }).structured);
  assert.equal(ignoreCase.count, 3);
  const none = JSON.parse(call("find_all", { text: "abc", pattern: "x" }).structured);
  assert.deepEqual(none, { count: 0, matches: [] });
});

test("an invalid pattern is the business error INVALID_PATTERN", () => {
  for (const args of [{ pattern: "(unclosed" }, { pattern: "a", flags: "q" }]) {
    assert.throws(() => call("find_all", { text: "abc", ...args }), (error) => {
      assert.equal(error.code, "INVALID_PATTERN");
      assert.equal(JSON.parse(error.details).pattern, args.pattern);
      return true;
    });
  }
});
