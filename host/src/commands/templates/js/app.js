// __NAME__: a toolhost plugin in JavaScript (QuickJS, via componentize-qjs).
//
// Live while you edit: `toolhost dev` (rebuilds on save and serves it).
// Build once: componentize-qjs --sync --wit wit --world plugin --js app.js -o target/__ID__.wasm
// Test: node --test test.mjs
//
// A tool is a JSON Schema for its arguments and a `run` function: a string
// it returns is text, an object structured content (its schema `output`).
// See toolhost.js. The engine is QuickJS: no Node APIs, no fetch.
// @ts-check

import { tool, exportTools, ToolError } from "./toolhost.js";

const greet = tool({
  name: "__NAME__",
  description: "Greets someone by name.",
  input: {
    type: "object",
    properties: { name: { type: "string", description: "Who to greet" } },
    required: ["name"],
  },
  output: {
    type: "object",
    properties: { greeting: { type: "string" } },
    required: ["greeting"],
  },
  annotations: { readOnly: true },
  run: ({ name }) => {
    if (name.trim() === "") throw new ToolError("EMPTY_NAME", "name must not be empty");
    return { greeting: `Hello, ${name}!` };
  },
});

// What the component exports: the host lists and calls the tools through it.
export const tools = exportTools(greet);
