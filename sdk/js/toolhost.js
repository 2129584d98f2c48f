// toolhost.js: write toolhost plugins in JavaScript. One ES module, no
// dependencies; built into a component by componentize-qjs (QuickJS):
//
//   componentize-qjs --sync --wit wit --world plugin --js app.js -o app.wasm
//
// (`--world full` for an app that exports with `exportPlugin`: tools,
// resources, prompts and completion; see "Resources and prompts" below.)
//
// An app declares tools and exports them as the WIT `tools` interface:
//
//   import { tool, exportTools, ToolError } from "./toolhost.js";
//
//   const shout = tool({
//     name: "shout",
//     description: "Upper-cases a text",
//     input: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
//     annotations: { readOnly: true },
//     run: ({ text }) => text.toUpperCase(),
//   });
//
//   export const tools = exportTools(shout);
//
// What `run` returns becomes the result (see `toOutput` below and
// README.md): a string is one text block; an object is structured content
// plus its JSON as text; `text(..)`, `image(..)`, ... blocks, `content(..)`
// and `result({ content, structured })` say exactly what to send.
// `throw new ToolError(code, message, details)` is a business error; any
// other exception is INTERNAL_ERROR.
//
// The definitions are checked when the module is loaded, which for a
// component is at build time (Wizer): a duplicate name, a missing
// description or an input schema that is not an object schema fails the
// build with a message naming the tool.
//
// The WIT imports (`toolhost:plugin/client`, `toolhost:plugin/config`) are
// loaded with a top-level `await import(..)` that is allowed to fail, so
// this module also loads in plain Node (for unit tests): there `config.get`
// answers null and `log` prints to stderr.

let witClient = null;
let witConfig = null;
let witInput = null;
try {
  witClient = (await import("toolhost:plugin/client@0.1.0")).default;
  witConfig = (await import("toolhost:plugin/config@0.1.0")).default;
} catch {
  // Not inside a component (plain Node, a browser, a test runner).
  witClient = witConfig = null;
}
try {
  // Asking several things at once, and for roots (contract 0.2.0's `input`).
  witInput = (await import("toolhost:plugin/input@0.2.0")).default;
} catch {
  witInput = null;
}

/** Replaces the WIT imports, for tests outside a component:
 * `{ client: { log, progress, createMessage, elicit }, config: { get } }`
 * (each optional; `null` restores "no host"). */
export function _setWitImportsForTesting(imports) {
  witClient = imports?.client ?? null;
  witConfig = imports?.config ?? null;
}

const NAME = /^[A-Za-z0-9_.-]{1,64}$/;
const ANNOTATIONS = ["readOnly", "destructive", "idempotent", "openWorld"];
const DEFINITION_KEYS = ["name", "title", "description", "input", "output", "annotations", "run", "view", "visibility", "task"];
const TASKS = ["forbidden", "optional", "required"];
const AUDIENCES = ["model", "app"];
export const LOG_LEVELS = Object.freeze([
  "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency",
]);

// --- Errors ------------------------------------------------------------------

/** A business error: the tool ran and says the request cannot be served.
 * `code` is stable and machine-readable (UPPER_SNAKE_CASE), `message` a
 * sentence, `details` anything JSON-serialisable that helps the caller. */
export class ToolError extends Error {
  constructor(code, message, details) {
    super(message);
    this.name = "ToolError";
    this.code = String(code);
    this.details = details;
  }
}

/** The MCP client did not serve a request (there is none behind the call,
 * or it lacks the capability); the message says why. */
export class ClientError extends Error {
  constructor(message) {
    super(message);
    this.name = "ClientError";
  }
}

// --- Content -----------------------------------------------------------------

/** One content block, in the WIT shape (`{ tag, val }`). Made by `text`,
 * `image`, `audio`, `link` and `resource`. */
export class Block {
  constructor(tag, val) {
    this.tag = tag;
    this.val = val;
    Object.freeze(this);
  }
}

/** A result: blocks in order, and optional structured data (an object).
 * Made by `result(..)` and `content(..)`. */
export class Output {
  constructor(blocks, structured) {
    this.content = blocks;
    this.structured = structured;
    Object.freeze(this);
  }
}

function bytes(data, what) {
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (Array.isArray(data)) return Uint8Array.from(data);
  throw new TypeError(`${what}: data must be a Uint8Array, an ArrayBuffer or an array of bytes`);
}

function optionalString(value, what) {
  if (value === undefined || value === null) return null;
  if (typeof value !== "string") throw new TypeError(`${what} must be a string`);
  return value;
}

/** A text (or markdown) block. */
export function text(value) {
  return new Block("text", String(value));
}

/** An image block; the host base64-encodes `data`. */
export function image(data, mimeType) {
  return new Block("image", { data: bytes(data, "image"), mimeType: String(mimeType) });
}

/** An audio block; the host base64-encodes `data`. */
export function audio(data, mimeType) {
  return new Block("audio", { data: bytes(data, "audio"), mimeType: String(mimeType) });
}

/** A link to a resource the client may fetch or open. */
export function link(uri, name, { title, description, mimeType } = {}) {
  return new Block("resource-link", {
    uri: String(uri),
    name: String(name),
    title: optionalString(title, "link title"),
    description: optionalString(description, "link description"),
    mimeType: optionalString(mimeType, "link mimeType"),
  });
}

/** A resource carried in the result: `body` a string (text) or bytes (a
 * blob, base64-encoded on the wire). */
export function resource(uri, body, mimeType) {
  const value = typeof body === "string"
    ? { tag: "text", val: body }
    : { tag: "blob", val: bytes(body, "resource") };
  return new Block("resource", {
    uri: String(uri),
    mimeType: optionalString(mimeType, "resource mimeType"),
    body: value,
  });
}

function blocksOf(value, what) {
  if (value === undefined || value === null) return [];
  const list = Array.isArray(value) ? value : [value];
  return list.map((item, index) => {
    if (item instanceof Block) return item;
    if (typeof item === "string") return text(item);
    throw new TypeError(`${what}[${index}] is not a content block: use text(..), image(..), ...`);
  });
}

function isPlainData(value) {
  return typeof value === "object" && value !== null && !Array.isArray(value)
    && !(value instanceof Block) && !(value instanceof Output) && !ArrayBuffer.isView(value);
}

/** A result with exactly these blocks (strings become text blocks):
 * `content(text("a"), image(png, "image/png"))` or `content([..])`. */
export function content(...blocks) {
  return new Output(blocksOf(blocks.flat(), "content"), undefined);
}

/** A result with `content` (a string, a block or a list of them) and/or
 * `structured` data (an object). Structured data without content is
 * rendered as text by the host (its `--text-format`). */
export function result({ content: blocks, structured } = {}) {
  if (structured !== undefined && structured !== null && !isPlainData(structured)) {
    throw new TypeError("result: structured must be an object");
  }
  return new Output(blocksOf(blocks, "result content"), structured ?? undefined);
}

// --- Schema builders (optional) ----------------------------------------------

function objectSchema(properties, { optional = [], ...keywords } = {}) {
  for (const key of optional) {
    if (!Object.hasOwn(properties, key)) {
      throw new TypeError(`s.object: optional names ${JSON.stringify(key)}, which is not a property`);
    }
  }
  const required = Object.keys(properties).filter((key) => !optional.includes(key));
  return { type: "object", properties, ...(required.length ? { required } : {}), ...keywords };
}

function enumSchema(values, keywords = {}) {
  if (!Array.isArray(values) || values.length === 0) throw new TypeError("s.enum: give a non-empty list");
  if (values.some((v) => v === null)) throw new TypeError("s.enum: null is not portable; leave the property optional");
  const types = new Set(values.map((v) => (Number.isInteger(v) ? "integer" : typeof v)));
  const type = types.size === 1 ? [...types][0] : undefined;
  return { ...(type ? { type } : {}), enum: [...values], ...keywords };
}

/** Small builders for the portable subset of JSON Schema; plain literals
 * work just as well. Every builder takes extra keywords (`description`,
 * `minimum`, ...) as its last argument. `s.object` lists every property as
 * required except those named in `optional`. */
export const s = Object.freeze({
  string: (keywords = {}) => ({ type: "string", ...keywords }),
  number: (keywords = {}) => ({ type: "number", ...keywords }),
  integer: (keywords = {}) => ({ type: "integer", ...keywords }),
  boolean: (keywords = {}) => ({ type: "boolean", ...keywords }),
  enum: enumSchema,
  array: (items, keywords = {}) => ({ type: "array", items, ...keywords }),
  object: objectSchema,
});

// --- Tools -------------------------------------------------------------------

/** A checked tool definition, made by `tool(..)`. */
export class Tool {
  constructor(definition) {
    Object.assign(this, definition);
    Object.freeze(this);
  }
}

function fail(where, problem) {
  throw new TypeError(`${where}: ${problem}`);
}

function toJson(value, where) {
  try {
    return JSON.stringify(value);
  } catch (error) {
    return fail(where, `is not JSON-serialisable (${error.message})`);
  }
}

function checkObjectSchema(schema, where) {
  if (!isPlainData(schema)) fail(where, "must be a JSON Schema object literal");
  if (schema.type !== "object") {
    fail(where, `must be an object schema ({ type: "object", properties: {..} }), not type ${JSON.stringify(schema.type)}`);
  }
  const { properties = {}, required = [] } = schema;
  if (!isPlainData(properties)) fail(where, "properties must be an object of schemas");
  if (!Array.isArray(required)) fail(where, "required must be a list of property names");
  for (const name of required) {
    if (!Object.hasOwn(properties, name)) fail(where, `required names ${JSON.stringify(name)}, which is not in properties`);
  }
  for (const [name, sub] of Object.entries(properties)) {
    if (!isPlainData(sub) && typeof sub !== "boolean") fail(`${where}.properties.${name}`, "must be a schema object");
  }
  return toJson(schema, where);
}

/** Declares a tool: `{ name, title?, description, input, output?,
 * annotations?, run(args, ctx) }`. `input` (and `output`) are JSON Schema
 * object literals. Throws, naming the tool, when the definition is wrong. */
export function tool(definition) {
  if (definition instanceof Tool) return definition;
  if (!isPlainData(definition)) throw new TypeError("tool(..) takes an object: { name, description, input, run }");
  const { name, title, description, input, output, annotations, run } = definition;
  if (typeof name !== "string" || !NAME.test(name)) {
    fail(`tool ${JSON.stringify(name)}`, `a name must match ${NAME.source}`);
  }
  const where = `tool "${name}"`;
  for (const key of Object.keys(definition)) {
    if (!DEFINITION_KEYS.includes(key)) fail(where, `unknown field ${JSON.stringify(key)} (known: ${DEFINITION_KEYS.join(", ")})`);
  }
  if (typeof description !== "string" || !description.trim()) {
    fail(where, "needs a description: what it does, for people and for a model choosing a tool");
  }
  if (title !== undefined && title !== null && typeof title !== "string") fail(where, "title must be a string");
  if (input === undefined) fail(where, 'needs an input schema: { type: "object", properties: {..} } ({ type: "object" } for no arguments)');
  const inputSchema = checkObjectSchema(input, `${where}: input`);
  const outputSchema = output === undefined || output === null ? null : checkObjectSchema(output, `${where}: output`);
  let hints = null;
  if (annotations !== undefined && annotations !== null) {
    if (!isPlainData(annotations)) fail(where, "annotations must be an object");
    for (const [key, value] of Object.entries(annotations)) {
      if (!ANNOTATIONS.includes(key)) fail(where, `unknown annotation ${JSON.stringify(key)} (known: ${ANNOTATIONS.join(", ")})`);
      if (value !== undefined && value !== null && typeof value !== "boolean") fail(where, `annotation ${key} must be true or false`);
    }
    hints = Object.fromEntries(ANNOTATIONS.map((key) => [key, annotations[key] ?? null]));
  }
  if (typeof run !== "function") fail(where, "needs run(args, ctx): the function that does the work");
  if (run.constructor?.name === "AsyncFunction") {
    fail(where, "run must be synchronous: the component is built with --sync and cannot await");
  }
  const { view, visibility, task } = definition;
  if (view !== undefined && view !== null && !(typeof view === "string" && view.startsWith("ui://"))) {
    fail(where, "view is a view's URI, ui://...");
  }
  if (task !== undefined && task !== null && !TASKS.includes(task)) fail(where, `task is one of ${TASKS.join(", ")}`);
  if (visibility !== undefined && visibility !== null
    && !(Array.isArray(visibility) && visibility.length > 0 && visibility.every((a) => AUDIENCES.includes(a)))) {
    fail(where, 'visibility is a list of "model" and "app"');
  }
  const details = view || visibility || task
    ? { tool: name, view: view ?? null, visibility: visibility ? [...visibility] : null, task: task ?? null }
    : null;
  return new Tool({
    name,
    title: title ?? null,
    description,
    input,
    output: output ?? null,
    annotations: hints,
    run,
    details,
    listing: { name, title: title ?? null, description, inputSchema, outputSchema, annotations: hints },
  });
}

/** What `run` returned, as an Output:
 * - an Output (`result(..)`, `content(..)`): as is;
 * - a Block, or a non-empty list of Blocks: those blocks;
 * - a string: one text block;
 * - an object (not an array): structured content, and its JSON as text;
 * - any other JSON value (number, boolean, array): its JSON as text;
 * - undefined, null, a Promise: a mistake, reported as INVALID_RESULT. */
function toOutput(value, name) {
  value = settledValue(value);
  if (value instanceof Output) return value;
  if (value instanceof Block) return new Output([value], undefined);
  if (Array.isArray(value) && value.length > 0 && value.every((item) => item instanceof Block)) {
    return new Output(value, undefined);
  }
  if (typeof value === "string") return new Output([text(value)], undefined);
  if (value === undefined || value === null) {
    throw new ToolError("INVALID_RESULT", `tool ${name} returned ${value}: return a string, an object or content(..)`);
  }
  if (typeof value?.then === "function") {
    throw new ToolError("INVALID_RESULT", `tool ${name} returned a Promise that has not settled: a component cannot wait for it (in toolhost's runtime, await works on fetch and Response bodies)`);
  }
  const json = serialise(value, name);
  if (isPlainData(value) && json.startsWith("{")) return new Output([text(json)], value);
  return new Output([text(json)], undefined);
}

/** A thenable that is already settled (the runtime's `fetch` and what an
 * `async run` gives there): its value, or its reason thrown. A native
 * Promise, or a thenable still pending, comes back as it is. */
function settledValue(value) {
  if (value instanceof Promise || typeof value?.then !== "function") return value;
  let state = "pending";
  let result;
  value.then(
    (fulfilled) => { if (state === "pending") { state = "fulfilled"; result = fulfilled; } },
    (reason) => { if (state === "pending") { state = "rejected"; result = reason; } },
  );
  if (state === "fulfilled") return result === value ? result : settledValue(result);
  if (state === "rejected") throw result;
  return value;
}

function serialise(value, name) {
  let json;
  try {
    json = JSON.stringify(value);
  } catch (error) {
    throw new ToolError("INVALID_RESULT", `the result of tool ${name} could not be serialised: ${error.message}`);
  }
  if (json === undefined) throw new ToolError("INVALID_RESULT", `the result of tool ${name} is not JSON`);
  return json;
}

function toWitOutput(output, name) {
  if (output.content.length === 0 && output.structured === undefined) {
    throw new ToolError("INVALID_RESULT", `tool ${name} returned an empty result: give content or structured data`);
  }
  let structured = null;
  if (output.structured !== undefined) {
    structured = serialise(output.structured, name);
    if (!structured.startsWith("{")) throw new ToolError("INVALID_RESULT", `the structured result of tool ${name} must be an object`);
  }
  return { content: output.content.map((block) => ({ tag: block.tag, val: block.val })), structured };
}

/** The WIT `tool-error` record for anything thrown. */
function toWitError(error) {
  if (error instanceof ToolError) {
    let details = null;
    if (error.details !== undefined && error.details !== null) {
      try {
        details = JSON.stringify(error.details) ?? null;
      } catch {
        details = JSON.stringify(String(error.details));
      }
    }
    return { code: error.code, message: String(error.message), details };
  }
  if (error instanceof Error) {
    const stack = typeof error.stack === "string" ? error.stack.trim().split("\n").slice(0, 8).join("\n") : undefined;
    return {
      code: "INTERNAL_ERROR",
      message: `${error.name}: ${error.message}`,
      details: JSON.stringify({ error: error.name, stack }),
    };
  }
  return { code: "INTERNAL_ERROR", message: `uncaught exception: ${describe(error)}`, details: null };
}

function describe(value) {
  try {
    return typeof value === "string" ? value : JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

/** The `ctx` each run receives: the tool's name and the host services. */
function context(name) {
  return Object.freeze({ tool: name, config, log, progress, createMessage, elicit });
}

/** The object an app exports as `tools` (the WIT interface): `listTools`
 * and `callTool`. Takes `tool(..)` definitions (or plain definition
 * objects, which are checked the same way), or lists of them. */
export function exportTools(...definitions) {
  const byName = new Map();
  for (const definition of definitions.flat()) {
    const checked = tool(definition);
    if (byName.has(checked.name)) throw new TypeError(`tool "${checked.name}": there is already a tool with this name`);
    byName.set(checked.name, checked);
  }
  if (byName.size === 0) throw new TypeError("exportTools(..): give at least one tool");
  const listing = [...byName.values()].map((t) => t.listing);
  const details = [...byName.values()].filter((t) => t.details).map((t) => t.details);
  return Object.freeze({
    /** WIT `list-tools`. */
    listTools() {
      return listing.map((entry) => ({ ...entry, annotations: entry.annotations && { ...entry.annotations } }));
    },
    /** WIT `list-tool-details` (a tool's view, visibility and task). */
    listToolDetails() {
      return details.map((d) => ({ ...d, visibility: d.visibility && [...d.visibility] }));
    },
    /** WIT `call-tool`: returns `{ content, structured }` or throws
     * `{ code, message, details }` (what componentize-qjs maps to
     * `result<output, tool-error>`). */
    callTool(name, argumentsJson) {
      try {
        const definition = byName.get(name);
        if (!definition) {
          throw new ToolError("UNKNOWN_TOOL", `this plugin has no tool named ${name}`, { tool: name });
        }
        let args;
        try {
          args = argumentsJson === "" ? {} : JSON.parse(argumentsJson);
        } catch (error) {
          throw new ToolError("INVALID_ARGUMENTS", `the arguments are not JSON: ${error.message}`);
        }
        if (!isPlainData(args)) throw new ToolError("INVALID_ARGUMENTS", "the arguments must be a JSON object");
        const value = definition.run(args, context(name));
        return toWitOutput(toOutput(value, name), name);
      } catch (error) {
        throw toWitError(error);
      }
    },
  });
}

// --- Resources and prompts (contract 0.2.0) -----------------------------------

const VARIABLE = /\{(\w+)\}/g;

/** Declares a resource: `{ uri, name?, title?, description, mimeType?,
 * read(vars), complete? }`. A `uri` with `{name}` parts is a template and
 * `read` gets those parts as an object; it returns a string (text) or bytes
 * (a blob), or throws `new ToolError("NOT_FOUND", ..)`. `complete` maps a
 * variable to a function from what the user typed to suggestions. */
export function defineResource({ uri, name, title, description, mimeType, read, complete = {} }) {
  const where = `resource ${JSON.stringify(uri)}`;
  if (typeof uri !== "string" || !/^[A-Za-z][A-Za-z0-9+.-]*:./.test(uri)) fail(where, "needs an absolute URI");
  if (typeof description !== "string" || !description.trim()) fail(where, "needs a description");
  if (typeof read !== "function") fail(where, "needs read(vars): the function that reads it");
  const variables = [...uri.matchAll(VARIABLE)].map((m) => m[1]);
  const pattern = new RegExp(`^${uri.split(VARIABLE).map((part, i) =>
    i % 2 ? `(?<${part}>[^/?#]+)` : part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")).join("")}$`);
  return Object.freeze({
    uri,
    template: variables.length > 0,
    name: name ?? uri,
    title: optionalString(title, `${where} title`),
    description,
    mimeType: optionalString(mimeType, `${where} mimeType`),
    read,
    complete,
    match: (candidate) => (variables.length ? pattern.exec(candidate)?.groups ?? null : candidate === uri ? {} : null),
  });
}

/** Declares a prompt: `{ name, title?, description, arguments: [{ name,
 * description?, required? }], get(args), complete? }`. `get` returns a
 * string (one user message), a block, `content(..)`, or a list of blocks and
 * `user(..)` / `assistant(..)` messages. */
export function definePrompt({ name, title, description, arguments: args = [], get, complete = {} }) {
  const where = `prompt ${JSON.stringify(name)}`;
  if (typeof name !== "string" || !NAME.test(name)) fail(where, `a name must match ${NAME.source}`);
  if (typeof description !== "string" || !description.trim()) fail(where, "needs a description");
  if (typeof get !== "function") fail(where, "needs get(args): the function that builds the messages");
  const argumentsList = args.map((a) => ({
    name: String(a.name),
    title: optionalString(a.title, `${where} argument title`),
    description: optionalString(a.description, `${where} argument description`),
    required: Boolean(a.required),
  }));
  return Object.freeze({ name, title: optionalString(title, `${where} title`), description, arguments: argumentsList, get, complete });
}

/** One message of a prompt from the user (a string or a block). */
export function user(value) {
  return Object.freeze({ role: "user", block: typeof value === "string" ? text(value) : value });
}

/** One message of a prompt from the assistant. */
export function assistant(value) {
  return Object.freeze({ role: "assistant", block: typeof value === "string" ? text(value) : value });
}

function messagesOf(value) {
  if (value instanceof Output) value = value.content;
  const list = Array.isArray(value) ? value : [value];
  return list.map((item) => (item?.role ? item : user(item)));
}

/** The resource that serves `uri` and what it read. */
function read(resources, uri) {
  for (const r of resources) {
    const vars = r.match(uri);
    if (vars) return { resource: r, value: r.read(vars) };
  }
  throw new ToolError("NOT_FOUND", `there is no resource at ${uri}`, { uri });
}

/** Reads a resource as the host does (for tests): its body. */
export function readResource(resources, uri) {
  return read(resources, uri).value;
}

/** Gets a prompt as the host does (for tests): its messages. */
export function getPrompt(prompts, name, args = {}) {
  const p = prompts.find((candidate) => candidate.name === name);
  if (!p) throw new ToolError("NOT_FOUND", `there is no prompt named ${name}`);
  return messagesOf(p.get(args));
}

// --- Views (MCP Apps) ------------------------------------------------------------

const CSP_LISTS = ["connectDomains", "resourceDomains", "frameDomains", "baseUriDomains"];

/** Declares a view (MCP Apps): `{ uri, html, name?, title?, description?,
 * csp?, prefersBorder?, domain? }`, HTML a client shows beside a tool's
 * result in a sandboxed frame. `uri` starts with `ui://`; `csp` names the
 * origins it may reach (`{ connectDomains: ["https://api.example.com"],
 * resourceDomains: [..] }`), none by default. A tool shows its results in
 * it with `tool({ .., view: uri })`. */
const MADE_VIEWS = new WeakSet();

export function view(definition) {
  if (MADE_VIEWS.has(definition)) return definition;
  if (!isPlainData(definition)) throw new TypeError("view(..) takes an object: { uri, html }");
  const { uri, html, name, title, description, csp, prefersBorder, domain } = definition;
  const where = `view ${JSON.stringify(uri)}`;
  if (typeof uri !== "string" || !uri.startsWith("ui://")) fail(where, "a view's URI starts with ui://");
  if (typeof html !== "string") fail(where, "needs its HTML, a string");
  let lists = null;
  if (csp !== undefined && csp !== null) {
    if (!isPlainData(csp)) fail(where, "csp is an object of origin lists");
    for (const [key, origins] of Object.entries(csp)) {
      if (!CSP_LISTS.includes(key)) fail(where, `csp has no list ${JSON.stringify(key)} (it has ${CSP_LISTS.join(", ")})`);
      if (!Array.isArray(origins) || !origins.every((o) => typeof o === "string")) fail(where, `csp ${key} is a list of origins`);
    }
    lists = Object.fromEntries(CSP_LISTS.map((key) => [key, [...(csp[key] ?? [])]]));
  }
  const made = Object.freeze({
    __view: true,
    uri,
    name: name ?? (uri.slice("ui://".length).replace(/^\/+|\/+$/g, "") || uri),
    title: title ?? null,
    description: description ?? null,
    html,
    csp: lists,
    prefersBorder: prefersBorder ?? null,
    domain: domain ?? null,
  });
  MADE_VIEWS.add(made);
  return made;
}

/** Everything an app exports, for the `apps` world: `export const { tools,
 * resources, prompts, completion, views, toolDetails } = exportPlugin({
 * tools: [..], resources: [..], prompts: [..], views: [..] })`.
 * (`toolhost dev` builds an app that calls `exportPlugin` for the `apps`
 * world, or `full` when it does not export `toolDetails`; one that calls
 * only `exportTools` for `plugin`.) */
export function exportPlugin({ tools = [], resources = [], prompts = [], views = [] } = {}) {
  const viewList = views.map(view);
  const seenViews = new Set();
  for (const v of viewList) {
    if (seenViews.has(v.uri)) throw new TypeError(`view ${JSON.stringify(v.uri)}: there is already a view with this URI`);
    seenViews.add(v.uri);
  }
  const exportedTools = exportTools(...tools);
  const declared = resources.map((r) => (r.match ? r : defineResource(r)));
  const promptList = prompts.map((p) => (Object.isFrozen(p) && p.get ? p : definePrompt(p)));
  const body = (value) => (typeof value === "string"
    ? { tag: "text", val: value }
    : { tag: "blob", val: bytes(value, "resource body") });
  const listing = (r) => ({ name: r.name, title: r.title, description: r.description, mimeType: r.mimeType });
  return Object.freeze({
    tools: exportedTools,
    views: Object.freeze({
      listViews: () => viewList.map((v) => ({
        uri: v.uri, name: v.name, title: v.title, description: v.description, html: v.html,
        csp: v.csp && Object.fromEntries(CSP_LISTS.map((key) => [key, [...v.csp[key]]])),
        prefersBorder: v.prefersBorder, domain: v.domain,
      })),
    }),
    toolDetails: Object.freeze({
      listToolDetails: () => exportedTools.listToolDetails(),
    }),
    resources: Object.freeze({
      listResources: () => declared.filter((r) => !r.template).map((r) => ({ uri: r.uri, ...listing(r) })),
      listTemplates: () => declared.filter((r) => r.template).map((r) => ({ uriTemplate: r.uri, ...listing(r) })),
      readResource(uri) {
        try {
          const { resource: r, value } = read(declared, uri);
          return [{ uri, mimeType: r.mimeType, body: body(value) }];
        } catch (error) {
          throw toWitError(error);
        }
      },
    }),
    prompts: Object.freeze({
      listPrompts: () => promptList.map((p) => ({ name: p.name, title: p.title, description: p.description, arguments: p.arguments })),
      getPrompt(name, args) {
        try {
          const messages = getPrompt(promptList, name, Object.fromEntries(args));
          return { description: null, messages: messages.map((m) => ({ role: m.role, content: { tag: m.block.tag, val: m.block.val } })) };
        } catch (error) {
          throw toWitError(error);
        }
      },
    }),
    completion: Object.freeze({
      complete(ref, argument, value) {
        const owner = ref.tag === "prompt"
          ? promptList.find((p) => p.name === ref.val)
          : declared.find((r) => r.uri === ref.val);
        let values = [];
        try {
          values = (owner?.complete?.[argument]?.(value) ?? []).map(String);
        } catch {
          values = [];
        }
        return { values: values.slice(0, 100), total: values.length, hasMore: values.length > 100 };
      },
    }),
  });
}

// --- Host services -----------------------------------------------------------

/** The `[config]` values the plugin's policy grants. */
export const config = Object.freeze({
  /** The value of `key` (a string), or null when the policy does not grant
   * it (always null outside a component). */
  get(key) {
    return witConfig ? witConfig.get(String(key)) ?? null : null;
  },
});

/** MCP `notifications/message` at `level` (one of LOG_LEVELS), if the
 * client asked for that level; nothing when no MCP client is behind the
 * call. Outside a component, printed to stderr. */
export function log(level, message) {
  if (!LOG_LEVELS.includes(level)) throw new TypeError(`log level ${JSON.stringify(level)} is not one of ${LOG_LEVELS.join(", ")}`);
  if (witClient) witClient.log(level, String(message));
  else globalThis.console?.error(`[${level}] ${message}`);
}

/** MCP `notifications/progress`, when the request carried a progress
 * token; `progress` should grow with every call. */
export function progress(progress, total = null, message = null) {
  if (witClient) witClient.progress(Number(progress), total === null ? null : Number(total), message === null ? null : String(message));
}

function request(method, params) {
  if (!witClient) throw new ClientError("not running inside toolhost: there is no MCP client");
  let answer;
  try {
    answer = witClient[method](JSON.stringify(params));
  } catch (error) {
    throw new ClientError(error instanceof Error ? error.message : String(error));
  }
  return JSON.parse(answer);
}

/** Asks the client for an LLM completion: `sampling/createMessage` params
 * in, its result out (objects). Throws ClientError. */
export function createMessage(params) {
  return request("createMessage", params);
}

/** Asks the user for input: `elicitation/create` params (`message`,
 * `requestedSchema`) in, its result (`action`, `content`) out. Throws
 * ClientError. */
export function elicit(params) {
  return request("elicit", params);
}

const ASKABLE = { elicit: "elicitation/create", createMessage: "sampling/createMessage", roots: "roots/list" };

/** Asks several things at once, each under a key of yours:
 * `ask({ name: ["elicit", {...}], greeting: ["createMessage", {...}], roots: ["roots", {}] })`.
 * A client of MCP 2026-07-28 gets them in one input-required result (and
 * the call runs again with the answers). Each answer is the client's
 * result, or a ClientError saying why there is none (not thrown). */
export function ask(requests) {
  const keys = Object.keys(requests);
  for (const key of keys) {
    const [kind] = requests[key];
    if (!(kind in ASKABLE)) throw new TypeError(`ask: ${JSON.stringify(kind)} is not one of ${Object.keys(ASKABLE).join(", ")}`);
  }
  if (!witInput) return Object.fromEntries(keys.map((key) => [key, new ClientError("not running inside toolhost: there is no MCP client")]));
  const asked = keys.map((key) => ({ key, method: ASKABLE[requests[key][0]], params: JSON.stringify(requests[key][1] ?? {}) }));
  const answers = witInput.ask(asked);
  return Object.fromEntries(keys.map((key, index) => {
    const answer = answers[index];
    const failed = answer?.tag === "err";
    const value = answer?.tag ? answer.val : answer;
    return [key, failed ? new ClientError(String(value)) : JSON.parse(value)];
  }));
}

let rootsAsked = 0;

/** The client's roots (`roots/list`): the result holds `roots`. Throws
 * ClientError. */
export function listRoots() {
  rootsAsked += 1;
  const answer = Object.values(ask({ [`roots-${rootsAsked}`]: ["roots", {}] }))[0];
  if (answer instanceof ClientError) throw answer;
  return answer;
}

// QuickJS has no `console`: give it one that sends MCP log messages, so a
// stray console.log does not fail the call with a ReferenceError.
if (globalThis.console === undefined) {
  const send = (level) => (...parts) => {
    if (witClient) witClient.log(level, parts.map((part) => (typeof part === "string" ? part : describe(part))).join(" "));
  };
  globalThis.console = {
    debug: send("debug"), log: send("info"), info: send("info"), warn: send("warning"), error: send("error"),
  };
}
