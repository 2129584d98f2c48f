// __NAME__: a toolhost plugin in JavaScript (QuickJS, via componentize-qjs).
//
// Live while you edit: `toolhost dev` (rebuilds on save and serves it).
// Build once: componentize-qjs --sync --wit wit --world full --js app.js -o target/__ID__.wasm
// Test: node --test test.mjs
//
// A tool is a JSON Schema for its arguments and a `run` function: a string
// it returns is text, an object structured content (its schema `output`).
// See toolhost.js. The engine is QuickJS: no Node APIs, no fetch.
// @ts-check

import { tool, definePrompt, exportPlugin, ToolError } from "./toolhost.js";

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

// A prompt (contract 0.2.0): a template a client offers its user.
// Resources are declared the same way, with defineResource({ uri, .. }).
const greeting = definePrompt({
  name: "__NAME___prompt",
  description: "Asks the model for a warm greeting.",
  arguments: [{ name: "name", description: "Who to greet", required: true }],
  get: ({ name }) => `Write a short, warm greeting for ${name}.`,
});

// What the component exports: the host lists and calls the tools (and
// gets the prompt) through these.
export const { tools, resources, prompts, completion } = exportPlugin({
  tools: [greet],
  prompts: [greeting],
});
