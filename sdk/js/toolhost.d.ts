// Types for toolhost.js. With `tool({ input: {..} })` the schema literal is
// inferred as a constant (a `const` type parameter, TypeScript 5.0+), and
// `run` receives arguments typed from it: `FromSchema` below understands
// object (properties, required), string, number, integer, boolean, null,
// array (items), enum, const and anyOf. A schema kept in a variable needs
// `as const` for the same result.

// --- JSON Schema -------------------------------------------------------------

/** A JSON Schema (the keywords a portable tool schema uses, and any other). */
export interface JsonSchema {
  readonly type?: "object" | "string" | "number" | "integer" | "boolean" | "array" | "null" | readonly string[];
  readonly description?: string;
  readonly properties?: { readonly [name: string]: JsonSchema };
  readonly required?: readonly string[];
  readonly items?: JsonSchema;
  readonly enum?: readonly (string | number | boolean)[];
  readonly const?: unknown;
  readonly anyOf?: readonly JsonSchema[];
  readonly [keyword: string]: unknown;
}

/** An object schema: what `input` and `output` must be. */
export interface ObjectSchema extends JsonSchema {
  readonly type: "object";
}

type Simplify<T> = { -readonly [K in keyof T]: T[K] } & {};

type TypeName<T> =
  T extends "string" ? string :
  T extends "number" | "integer" ? number :
  T extends "boolean" ? boolean :
  T extends "null" ? null :
  T extends "array" ? unknown[] :
  T extends "object" ? { [key: string]: unknown } :
  unknown;

type ObjectOf<P, R> = Simplify<
  { [K in keyof P as K extends R ? K : never]: FromSchema<P[K]> } &
  { [K in keyof P as K extends R ? never : K]?: FromSchema<P[K]> }
>;

/** The TypeScript type of the values a JSON Schema literal accepts. */
export type FromSchema<S> =
  S extends { readonly enum: readonly (infer E)[] } ? E :
  S extends { readonly const: infer C } ? C :
  S extends { readonly anyOf: readonly (infer B)[] } ? FromSchema<B> :
  S extends { readonly type: "object"; readonly properties: infer P } ?
    ObjectOf<P, S extends { readonly required: readonly (infer R)[] } ? R : never> :
  S extends { readonly type: "array"; readonly items: infer I } ? FromSchema<I>[] :
  S extends { readonly type: readonly (infer T)[] } ? TypeName<T> :
  S extends { readonly type: infer T } ? TypeName<T> :
  unknown;

// --- Content -----------------------------------------------------------------

/** One content block, in the WIT shape. */
export declare class Block {
  private constructor();
  readonly tag: "text" | "image" | "audio" | "resource-link" | "resource";
  readonly val: unknown;
}

/** A result: blocks and optional structured data. */
export declare class Output<T = Record<string, unknown>> {
  private constructor();
  readonly content: readonly Block[];
  readonly structured: T | undefined;
}

export type Bytes = Uint8Array | ArrayBuffer | ArrayBufferView | readonly number[];

export function text(value: string): Block;
export function image(data: Bytes, mimeType: string): Block;
export function audio(data: Bytes, mimeType: string): Block;
export function link(
  uri: string,
  name: string,
  options?: { title?: string; description?: string; mimeType?: string },
): Block;
export function resource(uri: string, body: string | Bytes, mimeType?: string): Block;

/** A result with exactly these blocks (strings become text blocks). */
export function content(...blocks: (Block | string | readonly (Block | string)[])[]): Output<never>;

/** A result with content and/or structured data. Structured data without
 * content is rendered as text by the host. */
export function result<T extends Record<string, unknown> = Record<string, unknown>>(parts: {
  content?: Block | string | readonly (Block | string)[];
  structured?: T;
}): Output<T>;

// --- Errors ------------------------------------------------------------------

/** A business error: the host answers `isError: true` (REST: 422). */
export declare class ToolError extends Error {
  constructor(code: string, message: string, details?: unknown);
  readonly code: string;
  readonly details: unknown;
}

/** The MCP client did not serve a request; the message says why. */
export declare class ClientError extends Error {
  constructor(message: string);
}

// --- Tools -------------------------------------------------------------------

export interface Annotations {
  /** The tool does not change anything outside itself. */
  readOnly?: boolean;
  /** The tool may delete or overwrite things (when not read-only). */
  destructive?: boolean;
  /** Calling it twice with the same arguments has no further effect. */
  idempotent?: boolean;
  /** The tool talks to an open world (the internet, other people's systems). */
  openWorld?: boolean;
}

/** What `run` receives beside its arguments. */
export interface Context {
  /** The name of the tool being called. */
  readonly tool: string;
  readonly config: typeof config;
  readonly log: typeof log;
  readonly progress: typeof progress;
  readonly createMessage: typeof createMessage;
  readonly elicit: typeof elicit;
}

/** What `run` may return: with an output schema, the structured object
 * (or a `result(..)` carrying it); without one, a string, an object,
 * blocks, `content(..)`/`result(..)` or any JSON value (sent as text). */
export type RunResult<O> = [O] extends [ObjectSchema]
  ? FromSchema<O> | Output<FromSchema<O>>
  : string | Block | readonly Block[] | Output<any> | { [key: string]: unknown } | number | boolean | readonly unknown[];

export interface ToolDefinition<I extends ObjectSchema, O extends ObjectSchema | undefined> {
  /** Unique across the host; `^[A-Za-z0-9_.-]{1,64}$`. */
  name: string;
  /** A short human-readable name. */
  title?: string;
  /** What the tool does, for people and for a model choosing a tool. */
  description: string;
  /** JSON Schema of the arguments: `{ type: "object", properties, required }`. */
  input: I;
  /** JSON Schema of the structured result, when there is one. */
  output?: O;
  annotations?: Annotations;
  /** The `ui://` URI of a `view(..)` its results are shown in (MCP Apps). */
  view?: string;
  /** Who may call it: the model (an agent's list), the app (its view). */
  visibility?: readonly ("model" | "app")[];
  /** Whether it runs as an MCP task; a policy's `[tasks]` overrides it. */
  task?: "forbidden" | "optional" | "required";
  /** Does the work; synchronous. Throw `ToolError` for a business error. */
  run(args: FromSchema<I>, ctx: Context): RunResult<O>;
}

/** A checked tool definition. */
export declare class Tool<I extends ObjectSchema = ObjectSchema, O extends ObjectSchema | undefined = any> {
  private constructor();
  readonly name: string;
  readonly title: string | null;
  readonly description: string;
  readonly input: I;
  readonly output: O | null;
  readonly annotations: Required<{ [K in keyof Annotations]: boolean | null }> | null;
  readonly run: (args: FromSchema<I>, ctx: Context) => RunResult<O>;
}

/** Declares a tool; throws (naming it) when the definition is wrong. */
export function tool<const I extends ObjectSchema, const O extends ObjectSchema | undefined = undefined>(
  definition: ToolDefinition<I, O>,
): Tool<I, O>;

/** The WIT shapes componentize-qjs exchanges. */
export interface WitTool {
  name: string;
  title: string | null;
  description: string;
  inputSchema: string;
  outputSchema: string | null;
  annotations: { readOnly: boolean | null; destructive: boolean | null; idempotent: boolean | null; openWorld: boolean | null } | null;
}
export interface WitOutput {
  content: { tag: string; val: unknown }[];
  structured: string | null;
}
/** What `callTool` throws. */
export interface WitToolError {
  code: string;
  message: string;
  details: string | null;
}

/** The object an app exports as `tools`. */
export interface ToolsExport {
  listTools(): WitTool[];
  /** Returns the WIT output, or throws a `WitToolError`. */
  callTool(name: string, argumentsJson: string): WitOutput;
  /** Each tool's view, visibility and task, as declared. */
  listToolDetails(): object[];
}

export function exportTools(...tools: (Tool<any, any> | readonly Tool<any, any>[])[]): ToolsExport;

// --- Resources and prompts (contract 0.2.0) -------------------------------------

/** Suggestions for a variable or argument from what the user typed. */
export type Completer = (typed: string) => readonly string[];

export interface ResourceDefinition {
  /** An absolute URI; `{name}` parts make it a template. */
  readonly uri: string;
  readonly name?: string;
  readonly title?: string;
  readonly description: string;
  readonly mimeType?: string;
  /** The template's variables (none for a fixed URI); a string is text,
   * bytes a blob. Throw `new ToolError("NOT_FOUND", ..)` for none. */
  readonly read: (vars: Record<string, string>) => string | Uint8Array;
  readonly complete?: Readonly<Record<string, Completer>>;
}

export interface Resource extends ResourceDefinition {
  readonly template: boolean;
}

export function defineResource(definition: ResourceDefinition): Resource;

export interface PromptDefinition {
  readonly name: string;
  readonly title?: string;
  readonly description: string;
  readonly arguments?: readonly { name: string; title?: string; description?: string; required?: boolean }[];
  /** The messages: a string (one user message), a block, `content(..)`,
   * or a list of blocks and `user(..)` / `assistant(..)` messages. */
  readonly get: (args: Record<string, string>) => string | Block | Output | readonly (Block | Message)[];
  readonly complete?: Readonly<Record<string, Completer>>;
}

export interface Prompt extends PromptDefinition {}

export interface Message {
  readonly role: "user" | "assistant";
  readonly block: Block;
}

export function definePrompt(definition: PromptDefinition): Prompt;
export function user(value: string | Block): Message;
export function assistant(value: string | Block): Message;
export function readResource(resources: readonly Resource[], uri: string): string | Uint8Array;
export function getPrompt(prompts: readonly Prompt[], name: string, args?: Record<string, string>): Message[];

/** The origins a view may reach, by the extension's lists. */
export interface ViewCsp {
  connectDomains?: readonly string[];
  resourceDomains?: readonly string[];
  frameDomains?: readonly string[];
  baseUriDomains?: readonly string[];
}

/** A view (MCP Apps): HTML a client shows beside a tool's result. */
export interface ViewDefinition {
  /** `ui://...` */
  uri: string;
  /** The whole HTML document. */
  html: string;
  name?: string;
  title?: string;
  description?: string;
  csp?: ViewCsp;
  prefersBorder?: boolean;
  domain?: string;
}

/** A checked view. */
export interface View extends Readonly<ViewDefinition> {
  readonly __view: true;
}

export function view(definition: ViewDefinition | View): View;

/** Every export of the `apps` world:
 * `export const { tools, resources, prompts, completion, views, toolDetails } = exportPlugin({..})`. */
export function exportPlugin(plugin: {
  readonly tools: readonly Tool<any, any>[];
  readonly resources?: readonly (Resource | ResourceDefinition)[];
  readonly prompts?: readonly (Prompt | PromptDefinition)[];
  readonly views?: readonly (View | ViewDefinition)[];
}): {
  tools: ToolsExport;
  resources: object;
  prompts: object;
  completion: object;
  views: object;
  toolDetails: object;
};

// --- Schema builders -----------------------------------------------------------

type Keywords = { readonly description?: string; readonly [keyword: string]: unknown };

export declare const s: {
  string(): { type: "string" };
  string<const K extends Keywords>(keywords: K): { type: "string" } & K;
  number(): { type: "number" };
  number<const K extends Keywords>(keywords: K): { type: "number" } & K;
  integer(): { type: "integer" };
  integer<const K extends Keywords>(keywords: K): { type: "integer" } & K;
  boolean(): { type: "boolean" };
  boolean<const K extends Keywords>(keywords: K): { type: "boolean" } & K;
  enum<const V extends readonly (string | number | boolean)[]>(values: V): { enum: V };
  enum<const V extends readonly (string | number | boolean)[], const K extends Keywords>(values: V, keywords: K): { enum: V } & K;
  array<const I extends JsonSchema>(items: I): { type: "array"; items: I };
  array<const I extends JsonSchema, const K extends Keywords>(items: I, keywords: K): { type: "array"; items: I } & K;
  /** Every property is required except those named in `optional`. */
  object<const P extends { readonly [name: string]: JsonSchema }, const N extends keyof P & string = never>(
    properties: P,
    keywords?: Keywords & { readonly optional?: readonly N[] },
  ): { type: "object"; properties: P; required: Exclude<keyof P & string, N>[] };
};

// --- Host services -------------------------------------------------------------

export type LogLevel = "debug" | "info" | "notice" | "warning" | "error" | "critical" | "alert" | "emergency";
export declare const LOG_LEVELS: readonly LogLevel[];

export declare const config: {
  /** The policy's `[config]` value for `key`, or null. */
  get(key: string): string | null;
};

export function log(level: LogLevel, message: string): void;
export function progress(progress: number, total?: number | null, message?: string | null): void;
/** `sampling/createMessage`; throws ClientError. */
export function createMessage(params: Record<string, unknown>): Record<string, unknown>;
/** `elicitation/create`; throws ClientError. */
export function elicit(params: Record<string, unknown>): Record<string, unknown>;

/** Replaces the WIT imports, for tests outside a component. */
export function _setWitImportsForTesting(imports?: {
  client?: {
    log(level: LogLevel, message: string): void;
    progress(progress: number, total: number | null, message: string | null): void;
    createMessage(params: string): string;
    elicit(params: string): string;
  } | null;
  config?: { get(key: string): string | null } | null;
}): void;
