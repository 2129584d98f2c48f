// Unit tests of toolhost.js in plain Node (20+), without a component:
//   node sdk/js/test.mjs
// The WIT imports are absent here (toolhost.js loads them with an
// `await import(..)` that may fail); the host services are tested through
// `_setWitImportsForTesting`.

import { test } from "node:test";
import assert from "node:assert/strict";

import {
  tool, exportTools, ToolError, ClientError, text, image, audio, link, resource, content, result, s,
  config, log, createMessage, elicit, progress, _setWitImportsForTesting,
  defineResource, definePrompt, exportPlugin, user, assistant, view,
} from "./toolhost.js";

const NO_ARGS = { type: "object" };

/** The WIT error `callTool` throws, or fails. */
function callError(tools, name, args) {
  try {
    tools.callTool(name, args);
  } catch (error) {
    return error;
  }
  assert.fail(`${name} did not fail`);
}

function one(run, extra = {}) {
  return exportTools(tool({ name: "t", description: "A test tool", input: NO_ARGS, run, ...extra }));
}

test("listTools gives the WIT records, schemas as JSON text", () => {
  const tools = exportTools(
    tool({
      name: "add",
      title: "Add",
      description: "Adds two numbers",
      input: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a"] },
      output: { type: "object", properties: { sum: { type: "number" } }, required: ["sum"] },
      annotations: { readOnly: true },
      run: ({ a, b = 0 }) => ({ sum: a + b }),
    }),
    { name: "plain", description: "A plain definition object", input: NO_ARGS, run: () => "ok" },
  );
  assert.deepEqual(tools.listTools(), [
    {
      name: "add",
      title: "Add",
      description: "Adds two numbers",
      inputSchema: '{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a"]}',
      outputSchema: '{"type":"object","properties":{"sum":{"type":"number"}},"required":["sum"]}',
      annotations: { readOnly: true, destructive: null, idempotent: null, openWorld: null },
    },
    {
      name: "plain",
      title: null,
      description: "A plain definition object",
      inputSchema: '{"type":"object"}',
      outputSchema: null,
      annotations: null,
    },
  ]);
  assert.deepEqual(tools.callTool("add", '{"a":2,"b":3}'), {
    content: [{ tag: "text", val: '{"sum":5}' }],
    structured: '{"sum":5}',
  });
  assert.deepEqual(tools.callTool("plain", "{}"), { content: [{ tag: "text", val: "ok" }], structured: null });
});

test("run gets the parsed arguments and a context", () => {
  let seen;
  const tools = one((args, ctx) => {
    seen = { args, tool: ctx.tool, hasConfig: typeof ctx.config.get, hasLog: typeof ctx.log };
    return "done";
  });
  tools.callTool("t", '{"x":[1,2]}');
  assert.deepEqual(seen, { args: { x: [1, 2] }, tool: "t", hasConfig: "function", hasLog: "function" });
  tools.callTool("t", "");
  assert.deepEqual(seen.args, {});
});

test("result rules", () => {
  const cases = [
    ["a string is one text block", "hi", { content: [{ tag: "text", val: "hi" }], structured: null }],
    ["an object is structured data and its JSON", { n: 1, s: "é" },
      { content: [{ tag: "text", val: '{"n":1,"s":"é"}' }], structured: '{"n":1,"s":"é"}' }],
    ["a number is its JSON as text", 42, { content: [{ tag: "text", val: "42" }], structured: null }],
    ["false is its JSON as text", false, { content: [{ tag: "text", val: "false" }], structured: null }],
    ["an array of values is its JSON as text", [1, "a"], { content: [{ tag: "text", val: '[1,"a"]' }], structured: null }],
    ["a block is sent as is", text("t"), { content: [{ tag: "text", val: "t" }], structured: null }],
    ["a list of blocks is sent as is", [text("a"), text("b")],
      { content: [{ tag: "text", val: "a" }, { tag: "text", val: "b" }], structured: null }],
    ["content(..) takes blocks, lists and strings", content(text("a"), ["b", text("c")]),
      { content: [{ tag: "text", val: "a" }, { tag: "text", val: "b" }, { tag: "text", val: "c" }], structured: null }],
    ["result(..) with both", result({ content: "my text", structured: { a: 1 } }),
      { content: [{ tag: "text", val: "my text" }], structured: '{"a":1}' }],
    ["result(..) with structured data only leaves the text to the host", result({ structured: { a: 1 } }),
      { content: [], structured: '{"a":1}' }],
  ];
  for (const [what, value, expected] of cases) {
    assert.deepEqual(one(() => value).callTool("t", "{}"), expected, what);
  }
});

test("binary blocks carry bytes", () => {
  const png = [137, 80, 78, 71];
  const out = one(() => content(
    image(png, "image/png"),
    audio(new Uint8Array([1, 2]).buffer, "audio/wav"),
    link("https://example.com/a", "a", { mimeType: "text/html" }),
    resource("mem:/t", "body"),
    resource("mem:/b", new Uint8Array([9]), "application/octet-stream"),
  )).callTool("t", "{}");
  assert.deepEqual(out.content, [
    { tag: "image", val: { data: new Uint8Array(png), mimeType: "image/png" } },
    { tag: "audio", val: { data: new Uint8Array([1, 2]), mimeType: "audio/wav" } },
    { tag: "resource-link", val: { uri: "https://example.com/a", name: "a", title: null, description: null, mimeType: "text/html" } },
    { tag: "resource", val: { uri: "mem:/t", mimeType: null, body: { tag: "text", val: "body" } } },
    { tag: "resource", val: { uri: "mem:/b", mimeType: "application/octet-stream", body: { tag: "blob", val: new Uint8Array([9]) } } },
  ]);
  assert.ok(out.content[0].val.data instanceof Uint8Array);
  assert.throws(() => image("not bytes", "image/png"), /Uint8Array/);
});

test("results that are mistakes are INVALID_RESULT", () => {
  for (const [value, pattern] of [
    [undefined, /returned undefined/],
    [null, /returned null/],
    [Promise.resolve("x"), /Promise/],
    [content(), /empty result/],
    [{ big: 1n }, /could not be serialised/],
  ]) {
    const error = callError(one(() => value), "t", "{}");
    assert.equal(error.code, "INVALID_RESULT");
    assert.match(error.message, pattern);
  }
  assert.throws(() => result({ structured: [1] }), /structured must be an object/);
});

test("ToolError is the WIT tool-error, details as JSON text", () => {
  const error = callError(one(() => {
    throw new ToolError("NOT_FOUND", "no such city", { city: "Atlantis", tried: 2 });
  }), "t", "{}");
  assert.deepEqual(error, { code: "NOT_FOUND", message: "no such city", details: '{"city":"Atlantis","tried":2}' });
  const bare = callError(one(() => {
    throw new ToolError("DIVISION_BY_ZERO", "cannot divide by zero");
  }), "t", "{}");
  assert.deepEqual(bare, { code: "DIVISION_BY_ZERO", message: "cannot divide by zero", details: null });
});

test("other exceptions are INTERNAL_ERROR", () => {
  const error = callError(one(() => null.field), "t", "{}");
  assert.equal(error.code, "INTERNAL_ERROR");
  assert.match(error.message, /^TypeError: /);
  assert.equal(JSON.parse(error.details).error, "TypeError");
  assert.match(JSON.parse(error.details).stack, /TypeError/);
  const thrown = callError(one(() => {
    throw "a string"; // eslint-disable-line no-throw-literal
  }), "t", "{}");
  assert.deepEqual(thrown, { code: "INTERNAL_ERROR", message: "uncaught exception: a string", details: null });
});

test("unknown tools and bad arguments", () => {
  const tools = one(() => "x");
  assert.deepEqual(callError(tools, "nope", "{}"), {
    code: "UNKNOWN_TOOL", message: "this plugin has no tool named nope", details: '{"tool":"nope"}',
  });
  const notJson = callError(tools, "t", "{oops");
  assert.equal(notJson.code, "INVALID_ARGUMENTS");
  assert.match(notJson.message, /not JSON/);
  for (const args of ["[1]", "null", '"s"', "3"]) {
    assert.equal(callError(tools, "t", args).code, "INVALID_ARGUMENTS", args);
  }
});

test("definitions are checked when they are made", () => {
  const ok = { name: "ok", description: "Fine", input: NO_ARGS, run: () => "" };
  const bad = [
    [{ ...ok, name: "has space" }, /a name must match/],
    [{ ...ok, name: "x".repeat(65) }, /a name must match/],
    [{ ...ok, description: undefined }, /tool "ok": needs a description/],
    [{ ...ok, description: "  " }, /needs a description/],
    [{ ...ok, input: undefined }, /needs an input schema/],
    [{ ...ok, input: { type: "string" } }, /tool "ok": input: must be an object schema/],
    [{ ...ok, input: { anyOf: [NO_ARGS] } }, /must be an object schema/],
    [{ ...ok, input: { type: "object", properties: {}, required: ["a"] } }, /required names "a", which is not in properties/],
    [{ ...ok, input: { type: "object", properties: { a: "string" } } }, /properties\.a: must be a schema object/],
    [{ ...ok, output: { type: "array" } }, /tool "ok": output: must be an object schema/],
    [{ ...ok, annotations: { readonly: true } }, /unknown annotation "readonly"/],
    [{ ...ok, annotations: { readOnly: "yes" } }, /must be true or false/],
    [{ ...ok, inputSchema: NO_ARGS }, /unknown field "inputSchema"/],
    [{ ...ok, run: undefined }, /needs run/],
    [{ ...ok, run: async () => "" }, /run must be synchronous/],
  ];
  for (const [definition, message] of bad) {
    assert.throws(() => tool(definition), message, JSON.stringify(definition));
  }
  const a = tool(ok);
  assert.throws(() => exportTools(a, { ...ok, description: "Again" }), /tool "ok": there is already a tool with this name/);
  assert.throws(() => exportTools(), /at least one tool/);
  assert.equal(exportTools([a]).listTools().length, 1);
});

test("schema builders write the portable form", () => {
  const schema = s.object({
    text: s.string({ description: "The text" }),
    count: s.integer({ minimum: 0 }),
    mode: s.enum(["a", "b"]),
    tags: s.array(s.string()),
    strict: s.boolean(),
  }, { optional: ["count", "tags", "strict"], description: "Arguments" });
  assert.deepEqual(schema, {
    type: "object",
    properties: {
      text: { type: "string", description: "The text" },
      count: { type: "integer", minimum: 0 },
      mode: { type: "string", enum: ["a", "b"] },
      tags: { type: "array", items: { type: "string" } },
      strict: { type: "boolean" },
    },
    required: ["text", "mode"],
    description: "Arguments",
  });
  assert.deepEqual(s.object({}), { type: "object", properties: {} });
  assert.deepEqual(s.enum([1, 2]), { type: "integer", enum: [1, 2] });
  assert.throws(() => s.enum(["a", null]), /null is not portable/);
  assert.throws(() => s.object({ a: s.string() }, { optional: ["b"] }), /not a property/);
  assert.doesNotThrow(() => tool({ name: "b", description: "Built", input: schema, run: () => "" }));
});

test("host services without a host, and with stubs", () => {
  _setWitImportsForTesting(null);
  assert.equal(config.get("key"), null);
  assert.throws(() => createMessage({}), ClientError);
  assert.throws(() => log("loud", "x"), /not one of/);
  progress(1); // nothing to send to: no error

  const sent = [];
  _setWitImportsForTesting({
    config: { get: (key) => (key === "greeting" ? "hello" : null) },
    client: {
      log: (level, message) => sent.push(["log", level, message]),
      progress: (...args) => sent.push(["progress", ...args]),
      createMessage: (params) => JSON.stringify({ echoed: JSON.parse(params) }),
      elicit: () => {
        throw new Error("the client does not support elicitation");
      },
    },
  });
  try {
    assert.equal(config.get("greeting"), "hello");
    assert.equal(config.get("other"), null);
    log("warning", "careful");
    progress(2, 4);
    assert.deepEqual(createMessage({ maxTokens: 1 }), { echoed: { maxTokens: 1 } });
    assert.throws(() => elicit({ message: "?" }), (e) => e instanceof ClientError && /elicitation/.test(e.message));
    assert.deepEqual(sent, [["log", "warning", "careful"], ["progress", 2, 4, null]]);
  } finally {
    _setWitImportsForTesting();
  }
});

test("exportPlugin: resources, templates, prompts and completion in the WIT shapes", () => {
  const plugin = exportPlugin({
    tools: [tool({ name: "t", description: "A test tool", input: NO_ARGS, run: () => "ok" })],
    resources: [
      defineResource({ uri: "test://static", description: "fixed", mimeType: "text/plain", read: () => "static" }),
      defineResource({
        uri: "test://item/{id}/data",
        description: "a template",
        read: ({ id }) => {
          if (id === "none") throw new ToolError("NOT_FOUND", "no such item");
          return new Uint8Array([id.length]);
        },
        complete: { id: (typed) => ["1", "12"].filter((v) => v.startsWith(typed)) },
      }),
    ],
    prompts: [definePrompt({
      name: "p",
      description: "a prompt",
      arguments: [{ name: "topic", description: "what about", required: true }, { name: "style" }],
      get: ({ topic, style = "short" }) => [user(`${style} text on ${topic}`), assistant(image([1], "image/png"))],
    })],
  });
  assert.deepEqual(plugin.resources.listResources().map((r) => r.uri), ["test://static"]);
  assert.deepEqual(plugin.resources.listTemplates().map((r) => r.uriTemplate), ["test://item/{id}/data"]);
  assert.deepEqual(plugin.resources.readResource("test://static"), [
    { uri: "test://static", mimeType: "text/plain", body: { tag: "text", val: "static" } },
  ]);
  assert.deepEqual(plugin.resources.readResource("test://item/abc/data")[0].body, { tag: "blob", val: new Uint8Array([3]) });
  for (const missing of ["test://item//data", "test://item/1/2/data", "test://item/none/data", "test://other"]) {
    assert.throws(() => plugin.resources.readResource(missing), { code: "NOT_FOUND" }, missing);
  }
  const listed = plugin.prompts.listPrompts()[0];
  assert.deepEqual(listed.arguments.map((a) => [a.name, a.required]), [["topic", true], ["style", false]]);
  const got = plugin.prompts.getPrompt("p", [["topic", "rust"]]);
  assert.deepEqual(got.messages.map((m) => m.role), ["user", "assistant"]);
  assert.deepEqual(got.messages[0].content, { tag: "text", val: "short text on rust" });
  assert.throws(() => plugin.prompts.getPrompt("nope", []), { code: "NOT_FOUND" });
  const completed = plugin.completion.complete({ tag: "resource-template", val: "test://item/{id}/data" }, "id", "1", []);
  assert.deepEqual(completed, { values: ["1", "12"], total: 2, hasMore: false });
  assert.deepEqual(plugin.completion.complete({ tag: "prompt", val: "p" }, "style", "", []).values, []);
  assert.throws(() => definePrompt({ name: "bad name", description: "x", get: () => "" }), /a name must match/);
  assert.throws(() => defineResource({ uri: "no-scheme", description: "x", read: () => "" }), /absolute URI/);
});

test("ask says why for each key outside a component, and refuses what cannot be asked", async () => {
  const { ask, ClientError } = await import("./toolhost.js");
  const answers = ask({ name: ["elicit", { message: "Name?" }], roots: ["roots", {}] });
  assert.deepEqual(Object.keys(answers), ["name", "roots"]);
  assert.ok(Object.values(answers).every((answer) => answer instanceof ClientError));
  assert.throws(() => ask({ x: ["telepathy", {}] }), /not one of/);
});

test("views and a tool's details are exported", () => {
  const chart = view({ uri: "ui://chart", html: "<p>chart</p>", csp: { connectDomains: ["https://api.example"] }, prefersBorder: true });
  const plugin = exportPlugin({
    tools: [tool({ name: "chart", description: "Draws", input: NO_ARGS, view: "ui://chart", task: "optional", visibility: ["app"], run: () => "ok" })],
    views: [chart],
  });
  const [listed] = plugin.views.listViews();
  assert.equal(listed.uri, "ui://chart");
  assert.equal(listed.name, "chart");
  assert.deepEqual(listed.csp, { connectDomains: ["https://api.example"], resourceDomains: [], frameDomains: [], baseUriDomains: [] });
  assert.equal(listed.prefersBorder, true);
  assert.deepEqual(plugin.toolDetails.listToolDetails(), [{ tool: "chart", view: "ui://chart", visibility: ["app"], task: "optional" }]);
  assert.throws(() => view({ uri: "https://x", html: "" }), /starts with ui:\/\//);
  assert.throws(() => view({ uri: "ui://x", html: "", csp: { script: [] } }), /csp has no list "script"/);
  assert.throws(() => tool({ name: "t", description: "d", input: NO_ARGS, task: "sometimes", run: () => "" }), /task is one of/);
  assert.throws(() => exportPlugin({ tools: [], views: [chart, chart] }), /already a view/);
});
