// Tests for __NAME__: plain Node, no component needed (node --test test.mjs).
// `tools.callTool` is what the host calls: it returns the WIT output
// (`{ content, structured }`) or throws the WIT tool-error.

import { test } from "node:test";
import assert from "node:assert/strict";

import { tools } from "./app.js";

test("greets by name, as the host calls it", () => {
  const answer = tools.callTool("__NAME__", JSON.stringify({ name: "Ada" }));
  assert.deepEqual(JSON.parse(answer.structured), { greeting: "Hello, Ada!" });
});

test("an empty name is a business error", () => {
  assert.throws(() => tools.callTool("__NAME__", JSON.stringify({ name: " " })), { code: "EMPTY_NAME" });
});
