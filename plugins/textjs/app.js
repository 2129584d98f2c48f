// Text utilities: a toolhost plugin written in JavaScript, on the helper
// library sdk/js/toolhost.js. Build (from the repository root):
//
//   make plugins/textjs.wasm
//
// which runs
//
//   target/toolchains/js/node_modules/.bin/componentize-qjs --sync --wit wit \
//     --world full --js plugins/textjs/app.js --module-root . -o plugins/textjs.wasm
//
// (`--sync`: the host does not enable component-model async; `--module-root .`
// lets this file import the helper from ../../sdk/js). Then try it:
//
//   target/release/toolhost check plugins/textjs.wasm
//   target/release/toolhost call --plugins plugins change_case '{"text":"Hello world","to":"snake"}'
//
// Test without building: node plugins/textjs/test.mjs
//
// `@ts-check` below: with sdk/js/toolhost.d.ts beside the helper, an editor
// types each tool's `args` from its input schema.
// @ts-check

import { tool, exportPlugin, defineResource, definePrompt, ToolError } from "../../sdk/js/toolhost.js";

// --- change_case ---------------------------------------------------------------

// A word: an upper-case run before a capitalised word ("XML" in XMLHttp), a
// capitalised or lower-case word, an upper-case run, other letters (scripts
// without case), or digits.
const WORD = /\p{Lu}+(?=\p{Lu}\p{Ll})|\p{Lu}?[\p{Ll}\p{M}]+|\p{Lu}+[\p{M}]*|[\p{Lt}\p{Lm}\p{Lo}][\p{L}\p{M}]*|\p{N}+/gu;

/** @param {string} text */
function words(text) {
  return text.replace(/['’]/g, "").match(WORD) ?? [];
}

/** @param {string} word */
function capitalise(word) {
  const [first = "", ...rest] = word;
  return first.toUpperCase() + rest.join("").toLowerCase();
}

/** @type {Record<string, (text: string) => string>} */
const CASES = {
  upper: (text) => text.toUpperCase(),
  lower: (text) => text.toLowerCase(),
  // Every word capitalised; spacing and punctuation kept.
  title: (text) => text.replace(/[\p{L}\p{M}\p{N}'’]+/gu, capitalise),
  snake: (text) => words(text).map((w) => w.toLowerCase()).join("_"),
  kebab: (text) => words(text).map((w) => w.toLowerCase()).join("-"),
  camel: (text) => words(text).map((w, i) => (i === 0 ? w.toLowerCase() : capitalise(w))).join(""),
};

const changeCase = tool({
  name: "change_case",
  title: "Change case",
  description:
    "Rewrites a text in another letter case: UPPER, lower, Title Case, snake_case, kebab-case or camelCase. " +
    "snake, kebab and camel split the text into words at spaces, punctuation and case changes (XMLHttpRequest -> xml_http_request).",
  input: {
    type: "object",
    properties: {
      text: { type: "string", description: "The text to rewrite" },
      to: {
        type: "string",
        enum: ["upper", "lower", "title", "snake", "kebab", "camel"],
        description: "The case to convert to",
      },
    },
    required: ["text", "to"],
  },
  annotations: { readOnly: true, idempotent: true },
  run: ({ text, to }) => CASES[to](text),
});

// --- find_all --------------------------------------------------------------------

const findAll = tool({
  name: "find_all",
  title: "Find all matches",
  description:
    "Finds every match of a regular expression (JavaScript syntax) in a text, " +
    "with its position. An invalid expression is the error INVALID_PATTERN.",
  input: {
    type: "object",
    properties: {
      text: { type: "string", description: "The text to search" },
      pattern: { type: "string", description: "A JavaScript regular expression, without slashes, e.g. \\d+" },
      flags: { type: "string", description: "Regular expression flags: i (ignore case), m (multi-line), s (dot matches newlines), u (Unicode), v (Unicode sets). g is implied" },
    },
    required: ["text", "pattern"],
  },
  output: {
    type: "object",
    properties: {
      count: { type: "integer", description: "How many matches there are" },
      matches: {
        type: "array",
        description: "Every match, in order",
        items: {
          type: "object",
          properties: {
            match: { type: "string", description: "The matched text" },
            index: { type: "integer", description: "Where it starts, in characters (Unicode code points) from the start of the text" },
          },
          required: ["match", "index"],
        },
      },
    },
    required: ["count", "matches"],
  },
  annotations: { readOnly: true, idempotent: true },
  run({ text, pattern, flags = "" }) {
    let regex;
    try {
      regex = new RegExp(pattern, flags.replace(/g/g, "") + "g");
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      throw new ToolError("INVALID_PATTERN", `the pattern is not a valid regular expression: ${reason}`, {
        pattern,
        flags,
        reason,
      });
    }
    const matches = [];
    // Match positions in code points: count them as the scan moves on.
    let unit = 0;
    let point = 0;
    for (const found of text.matchAll(regex)) {
      for (const _ of text.slice(unit, found.index)) point++;
      unit = found.index;
      matches.push({ match: found[0], index: point });
    }
    return { count: matches.length, matches };
  },
});

// --- A resource template and a prompt (contract 0.2.0) ------------------------

const caseOf = defineResource({
  uri: "case://snake/{text}",
  name: "snake-case",
  description: "A text (as a URL part) in snake_case",
  mimeType: "text/plain",
  read: ({ text }) => words(decodeURIComponent(text)).map((w) => w.toLowerCase()).join("_"),
});

const rename = definePrompt({
  name: "rename",
  description: "Asks the model for a better name for an identifier",
  arguments: [
    { name: "identifier", description: "The name to improve", required: true },
    { name: "style", description: "camel, snake or kebab" },
  ],
  get: ({ identifier, style = "camel" }) => `Suggest a clearer ${style}-case name for \`${identifier}\`.`,
  complete: { style: (typed) => ["camel", "snake", "kebab"].filter((s) => s.startsWith(typed)) },
});

// Everything the component exports (the `full` world): the tools, and the
// resource and prompt above.
export const { tools, resources, prompts, completion } = exportPlugin({
  tools: [changeCase, findAll],
  resources: [caseOf],
  prompts: [rename],
});
