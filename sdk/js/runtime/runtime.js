// toolhost's JavaScript runtime: QuickJS, the helper library
// (../toolhost.js) and the web's fetch and its companions (web.js), built
// once (`make runtimes`), that runs an author's `app.js` as a plugin. The host hands each instance the source through the
// `source` import; at the instance's first export call it is run as a
// script, its `import … from "./toolhost.js"` lines reading the helper
// this runtime carries and its `export` keywords dropped (every line keeps
// its number, so an error names the author's line), and what its
// `exportPlugin(..)` or `exportTools(..)` made serves the exports. A
// source may import the helper alone: the host answers any other import
// before anything runs.

import * as helper from "../toolhost.js";
import source from "toolhost:plugin/source@0.2.0";
import http from "toolhost:plugin/http@0.2.0";
import { install } from "./web.js";
import { SyncPromise, asSync, unwrapAwait, wrap } from "./sync.js";
import { TypeScriptError, stripTypes } from "./strip.js";

// The web's globals a tool expects (URL, URLSearchParams, Headers,
// TextEncoder, TextDecoder, Response) and `fetch`, which sends through the
// host's `http` import: the policy's [http] allow, the call's limits. Made
// as the runtime is built, so a call pays nothing for them.
install(globalThis, (request) => http.send(request));
globalThis.__toolhost_sync__ = Object.freeze({ SyncPromise, unwrapAwait });

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
    // The room's packages (bare specifiers), read from the bundles the
    // host hands over (`__toolhost_module__`).
    .replace(/^[ \t]*import\s+([^"';]*?)\s*from\s*["']([^"'./][^"']*)["'][ \t]*;?/gm, (match, clause, specifier) =>
      sameLines(match, packageImport(clause, specifier)))
    .replace(/^[ \t]*export\s*\{[^}]*\}[ \t]*;?/gm, (match) => sameLines(match, ""))
    .replace(/^([ \t]*)export\s+default\s+/gm, "$1")
    .replace(/^([ \t]*)export\s+/gm, "$1");
}

/** The `const` that binds an import clause (`YAML`, `{ parse as p }`,
 * `* as all`, `YAML, { parse }`) from package `specifier`, on one line. */
function packageImport(clause, specifier) {
  const from = `__toolhost_module__(${JSON.stringify(specifier)})`;
  const parts = [];
  let rest = clause.replace(/\s+/g, " ").trim();
  const all = /^\*\s*as\s+([A-Za-z_$][\w$]*)$/.exec(rest);
  if (all) return `const ${all[1]} = ${from};`;
  const named = /\{([^}]*)\}/.exec(rest);
  if (named) {
    parts.push(`{${named[1].replace(/\s+as\s+/g, ": ")}} = ${from}`);
    rest = rest.replace(named[0], "").replace(/,\s*$/, "").replace(/^\s*,/, "").trim();
  }
  const namespace = /^\*\s*as\s+([A-Za-z_$][\w$]*)$/.exec(rest.replace(/,$/, "").trim());
  if (namespace) parts.unshift(`${namespace[1]} = ${from}`);
  else if (rest) parts.unshift(`${rest.replace(/,$/, "").trim()} = ${from}.default`);
  return `const ${parts.join(", ")};`;
}

/** The room's packages the source imports, each evaluated once. */
function packages() {
  const made = new Map();
  for (const [specifier, code] of source.modules()) {
    made.set(specifier, (0, eval)(`(function () {${code}\nreturn __toolhost_package;\n})()`));
  }
  return (specifier) => {
    if (!made.has(specifier)) throw new Error(`${specifier} is not among this room's packages (toolhost packages add --lang js ${specifier})`);
    return made.get(specifier);
  };
}

/** The author's exports, made once per instance. */
function load() {
  if (exported) return exported;
  globalThis.__toolhost_module__ = packages();
  const [name, text] = source.read();
  if (!name) throw new Error("toolhost gave this runtime no source to run");
  let made = null;
  globalThis.__toolhost_helper__ = Object.freeze({
    ...helper,
    exportPlugin: (...args) => (made = helper.exportPlugin(...args)),
    exportTools: (...args) => (made = { tools: helper.exportTools(...args) }),
  });
  try {
    // `async`/`await` run synchronously (the job queue never runs inside
    // a call): what a tool awaits (fetch, a body) is already there.
    // TypeScript's types are erased first, each replaced by spaces: every
    // line and column stays the author's.
    const script = name.endsWith(".ts") ? stripTypes(text) : text;
    (0, eval)(wrap(asSync(asScript(script, "globalThis.__toolhost_helper__")), "globalThis.__toolhost_sync__"));
  } catch (error) {
    // The author's line first, as a failed build says it: the script's
    // lines are the file's (`<input>:LINE:COLUMN` in its stack).
    if (error instanceof TypeScriptError) {
      throw new Error(`${name}:${error.line}:${error.column}: TypeScriptError: ${error.message}`);
    }
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

export const views = {
  listViews() { return load().views?.listViews() ?? []; },
};

export const toolDetails = {
  listToolDetails() { return (load().toolDetails ?? load().tools).listToolDetails?.() ?? []; },
};
