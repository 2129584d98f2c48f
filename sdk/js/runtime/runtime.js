// toolhost's JavaScript runtime: QuickJS and the helper library
// (../toolhost.js), built once (`make runtimes`), that runs an author's
// `app.js` as a plugin. The host hands each instance the source through the
// `source` import; at the instance's first export call it is run as a
// script, its `import … from "./toolhost.js"` lines reading the helper
// this runtime carries and its `export` keywords dropped (every line keeps
// its number, so an error names the author's line), and what its
// `exportPlugin(..)` or `exportTools(..)` made serves the exports. A
// source may import the helper alone: the host answers any other import
// before anything runs.

import * as helper from "../toolhost.js";
import source from "toolhost:plugin/source@0.2.0";

let exported = null;

/** `text` with its helper imports read from `name` and its `export`
 * keywords dropped, line for line. */
function asScript(text, name) {
  const sameLines = (match, replacement) => replacement + "\n".repeat((match.match(/\n/g) || []).length);
  return text
    .replace(/^[ \t]*import\s*\{([^}]*)\}\s*from\s*["'](?:\.\/)?toolhost\.js["'][ \t]*;?/gm, (match, names) =>
      sameLines(match, `const {${names.replace(/\s+as\s+/g, ": ")}} = ${name};`))
    .replace(/^[ \t]*import\s*\*\s*as\s+([A-Za-z_$][\w$]*)\s*from\s*["'](?:\.\/)?toolhost\.js["'][ \t]*;?/gm, (match, alias) =>
      sameLines(match, `const ${alias} = ${name};`))
    .replace(/^[ \t]*export\s*\{[^}]*\}[ \t]*;?/gm, (match) => sameLines(match, ""))
    .replace(/^([ \t]*)export\s+default\s+/gm, "$1")
    .replace(/^([ \t]*)export\s+/gm, "$1");
}

/** The author's exports, made once per instance. */
function load() {
  if (exported) return exported;
  const [name, text] = source.read();
  if (!name) throw new Error("toolhost gave this runtime no source to run");
  let made = null;
  globalThis.__toolhost_helper__ = Object.freeze({
    ...helper,
    exportPlugin: (...args) => (made = helper.exportPlugin(...args)),
    exportTools: (...args) => (made = { tools: helper.exportTools(...args) }),
  });
  try {
    (0, eval)(asScript(text, "globalThis.__toolhost_helper__"));
  } catch (error) {
    // The author's line first, as a failed build says it: the script's
    // lines are the file's (`<input>:LINE:COLUMN` in its stack).
    const at = /<input>:(\d+)/.exec(String(error?.stack ?? ""));
    const what = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    throw new Error(at ? `${name}:${at[1]}: ${what}` : `${name}: ${what}`);
  }
  if (!made) throw new Error(`${name} exported no tools: end it with export const { tools, resources, prompts, completion } = exportPlugin({ tools: [...] })`);
  exported = made;
  return exported;
}

const none = { values: [], total: 0, hasMore: false };

export const tools = {
  listTools() { return load().tools.listTools(); },
  callTool(name, args) { return load().tools.callTool(name, args); },
};

export const resources = {
  listResources() { return load().resources?.listResources() ?? []; },
  listTemplates() { return load().resources?.listTemplates() ?? []; },
  readResource(uri) { return load().resources.readResource(uri); },
};

export const prompts = {
  listPrompts() { return load().prompts?.listPrompts() ?? []; },
  getPrompt(name, args) { return load().prompts.getPrompt(name, args); },
};

export const completion = {
  complete(reference, argument, value, context) {
    return load().completion?.complete(reference, argument, value, context) ?? none;
  },
};
