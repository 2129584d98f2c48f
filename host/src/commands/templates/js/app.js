// __NAME__: a toolhost plugin in JavaScript (QuickJS, via componentize-qjs).
//
// Live while you edit: `toolhost dev` (rebuilds on save and serves it), or
// `toolhost dev --server URL` onto a server that builds JavaScript.
// Publish once: `toolhost push . --server URL`.
// Test: node --test test.mjs
//
// A tool is a JSON Schema for its arguments and a `run` function: a string
// it returns is text, an object structured content (its schema `output`).
// See toolhost.js. The engine is QuickJS: no Node APIs, no fetch.
// @ts-check

import { tool, exportPlugin, ToolError } from "./toolhost.js";

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

// A prompt (a template a client offers its user) is declared with
// definePrompt({ name, description, arguments, get }) from ./toolhost.js and
// listed under `prompts` below; resources with defineResource({ uri, .. }).

// What the component exports: the host lists and calls the tools through
// these.
export const { tools, resources, prompts, completion, views, toolDetails } = exportPlugin({
  tools: [greet],
});
