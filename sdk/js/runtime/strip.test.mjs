// Tests of strip.js (TypeScript erased to spaces) in plain Node 20:
//   node --test sdk/js/runtime/strip.test.mjs
// The stripped text is compared character for character on small cases,
// checked to keep every line and column, and run: written as an .mjs file
// beside a toolhost.js that re-exports the real helper, then imported.
// When `npx --yes -p typescript@5` works, the behaviour of a few programs
// is compared with TypeScript's own `transpileModule`.

import { test, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, writeFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL, fileURLToPath } from "node:url";
import { spawnSync } from "node:child_process";

import { stripTypes, TypeScriptError } from "./strip.js";
import { asSync, wrap, unwrapAwait, SyncPromise } from "./sync.js";

const HELPER = fileURLToPath(new URL("../toolhost.js", import.meta.url));

/** The stripped `source`, checked to keep its length and its lines. */
function strip(source) {
  const out = stripTypes(source);
  assert.equal(out.length, source.length, "same length");
  assert.deepEqual(out.split("\n").map((l) => l.length), source.split("\n").map((l) => l.length), "same lines");
  return out;
}

/** `files` ({ name: text }) written to a new folder; `main` imported. */
const folders = [];
after(() => folders.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

async function load(files, main = "app.mjs") {
  const dir = mkdtempSync(join(tmpdir(), "strip-test-"));
  folders.push(dir);
  writeFileSync(join(dir, "toolhost.js"), `export * from ${JSON.stringify(pathToFileURL(HELPER).href)};\n`);
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return { module: await import(pathToFileURL(join(dir, main)).href), dir };
}

/** (line, column) of each offset where `word` stands alone in `text`. */
function places(text, word) {
  const found = [];
  const re = new RegExp(`(?<![\\w$])${word.replace(/\$/g, "\\$")}(?![\\w$])`, "g");
  for (const m of text.matchAll(re)) {
    const before = text.slice(0, m.index).split("\n");
    found.push([before.length, before[before.length - 1].length + 1]);
  }
  return found;
}

const APP = `import { tool, exportPlugin, type ToolError } from "./toolhost.js";
import type { Tool } from "./toolhost.js";

interface ShoutArgs {
  text: string;
  times?: number;
}

type Result = { upper: string; length: number };
export type Mode = "plain" | "loud";

const MODES = ["plain", "loud"] as const;

declare const DEBUG: boolean;

function repeat<T>(value: T, times: number = 1): T[] {
  const out: T[] = [];
  for (let i: number = 0; i < times; i++) out.push(value);
  return out;
}

export function format(text: string): string;
export function format(text: string, mode?: Mode): string {
  return mode === "loud" ? text.toUpperCase() + "!" : text;
}

abstract class Counter<K extends string = string> implements Iterable<K> {
  private readonly counts: Map<K, number> = new Map<K, number>();
  protected total!: number;
  declare label: string;
  public static created: number = 0;

  constructor() {
    this.total = 0;
    Counter.created++;
  }

  abstract name(): string;

  add(key: K, by?: number): this {
    const now = this.counts.get(key) ?? 0;
    this.counts.set(key, now + (by ?? 1));
    this.total! += by ?? 1;
    return this;
  }

  get size(): number {
    return this.counts.size;
  }

  *[Symbol.iterator](): Iterator<K> {
    yield* this.counts.keys();
  }

  count(key: K): number {
    return this.counts.get(key)!;
  }
}

export class WordCounter extends Counter<string> {
  override name(): string {
    return "words";
  }
}

const pick = <T,>(items: readonly T[], index: number): T | undefined => items[index];
const first = <T>(items: T[]): T => items[0];

const shout = tool({
  name: "shout",
  description: "Upper-cases a text",
  input: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
  run(args: ShoutArgs): Result {
    const upper = repeat<string>(args.text.toUpperCase(), args.times ?? 1).join(" ");
    return { upper, length: upper.length } satisfies Result;
  },
});

const count = tool({
  name: "count",
  description: "Counts words",
  input: { type: "object", properties: { text: { type: "string" } } },
  run: ({ text }: { text: string }): string => {
    const counter = new WordCounter();
    for (const word of text.split(/\\s+/)) if (word) counter.add(word);
    return \`\${counter.name()}: \${counter.size} of \${counter.total}, a<b: \${1 < 2 && 3 > 2}\`;
  },
});

export async function title(url: string): Promise<string> {
  const response = await fetch(url) as Response;
  const body: string = await response.text();
  return body.match(/<title>(.*?)<\\/title>/)?.[1] ?? "";
}

export const helpers = { repeat, pick, first, MODES, format };
export const { tools } = exportPlugin({ tools: [shout, count] });
`;

test("a tool's app.ts keeps its length, its lines and every kept name's place", () => {
  const out = strip(APP);
  for (const name of ["tool", "exportPlugin", "repeat", "value", "times", "out", "format", "mode", "Counter", "counts",
    "total", "add", "key", "by", "size", "count", "WordCounter", "pick", "items", "index", "first", "shout", "upper",
    "run", "args", "text", "counter", "word", "title", "url", "response", "body", "helpers", "tools"]) {
    const kept = places(out, name);
    assert.ok(kept.length > 0, name);
    for (const place of kept) assert.ok(places(APP, name).some((p) => p[0] === place[0] && p[1] === place[1]), `${name} at ${place}`);
  }
  // What is left is JavaScript: no annotation, modifier or type declaration.
  for (const gone of [/: string/, /interface/, /\btype [A-Z]/, /private|protected|public|readonly|abstract|declare|override/,
    /as const/, /satisfies/, /implements/, /<T>|<K|<string>/, /\?: /, /!:/, /\bdeclare\b/]) {
    assert.doesNotMatch(out, gone);
  }
  assert.match(out, /^import \{ tool, exportPlugin,\s+\} from "\.\/toolhost\.js";$/m);
  assert.match(out, /\bconst upper = repeat\s+\(args\.text\.toUpperCase\(\), args\.times \?\? 1\)\.join\(" "\);/);
  assert.ok(out.includes("a<b: ${1 < 2 && 3 > 2}`"), "a comparison in a template kept");
});

test("the stripped app.ts runs as JavaScript: its tools, classes and generics", async () => {
  const { module } = await load({ "app.mjs": strip(APP) });
  const shout = module.tools.callTool("shout", JSON.stringify({ text: "hi", times: 2 }));
  assert.deepEqual(JSON.parse(shout.structured), { upper: "HI HI", length: 5 });
  const count = module.tools.callTool("count", JSON.stringify({ text: "a b a" }));
  assert.equal(count.content[0].val, "words: 2 of 3, a<b: true");
  const { repeat, pick, first, MODES, format } = module.helpers;
  assert.deepEqual(repeat(7, 3), [7, 7, 7]);
  assert.equal(pick(["x", "y"], 1), "y");
  assert.equal(first([4]), 4);
  assert.deepEqual(MODES, ["plain", "loud"]);
  assert.equal(format("hey", "loud"), "HEY!");
  const words = new module.WordCounter().add("a").add("b", 2).add("a");
  assert.deepEqual([...words], ["a", "b"]);
  assert.equal(words.count("b"), 2);
  assert.equal(words.total, 4);
  assert.ok(!("label" in words), "a declared field makes no property");
});

test("an async run with `await fetch(url) as Response`, natively and made synchronous", async () => {
  const saved = globalThis.fetch;
  const fake = (url) => new SyncPromise((resolve) => resolve({ text: () => SyncPromise.resolve(`<title>${url}</title>`) }));
  globalThis.fetch = fake;
  try {
    const { module } = await load({ "app.mjs": strip(APP) });
    assert.equal(await module.title("https://a.example/"), "https://a.example/");
  } finally {
    globalThis.fetch = saved;
  }
  // The runtime's order: types erased, then async made synchronous.
  const source = `export async function run(args: { url: string }): Promise<string> {
  const response = await fetch(args.url) as Response;
  const html = await response.text() as string;
  return html.toUpperCase();
}`;
  const script = asSync(strip(source)).replace(/^export /, "");
  const box = { SyncPromise, unwrapAwait, fetch: fake };
  globalThis.__strip_test__ = box;
  try {
    (0, eval)(wrap(`const fetch = globalThis.__strip_test__.fetch; globalThis.__strip_test__.run = ${script}`, "globalThis.__strip_test__"));
    assert.equal(box.run({ url: "u" }), "<TITLE>U</TITLE>");
  } finally {
    delete globalThis.__strip_test__;
  }
});

test("an error thrown on line N of app.ts is on line N, same column, of what runs", async () => {
  const source = `interface Args {
  n: number;
}
type Out = string;
export function check(args: Args): Out {
  const limit: number = 3;
  if (args.n > limit) {
    throw new RangeError("too big");
  }
  return \`ok \${args.n}\`;
}
`;
  const { module } = await load({ "app.mjs": strip(source) });
  assert.equal(module.check({ n: 1 }), "ok 1");
  const error = (() => {
    try {
      module.check({ n: 5 });
    } catch (e) {
      return e;
    }
  })();
  assert.ok(error instanceof RangeError);
  const at = /app\.mjs:(\d+):(\d+)/.exec(error.stack);
  assert.ok(at, error.stack);
  assert.deepEqual([Number(at[1]), Number(at[2])], [8, 11]);
  assert.equal(source.split("\n")[7].indexOf("new RangeError") + 1, 11);
});

test("what cannot be erased throws a TypeScriptError at its line and column", () => {
  const cases = [
    ["const a = 1;\n  enum Color { Red, Green }\n", 2, 3, /enum is not erasable TypeScript: use a plain object/],
    ["export const enum E { A }", 1, 14, /enum/],
    ["namespace Util {\n  export const x = 1;\n}", 1, 1, /namespace .*: use a plain object/],
    ["module Util { export function f() {} }", 1, 1, /namespace/],
    ["class P {\n  constructor(private x: number, y: string) {}\n}", 2, 15, /parameter property .*declare the field/],
    ["class P { constructor(readonly x) {} }", 1, 23, /parameter property/],
    ["import fs = require(\"fs\");", 1, 1, /import x = require.*: use `import x from/],
    ["const x = 1;\nexport = x;", 2, 1, /export =.*: use `export default`/],
    ["const n = <number>value;", 1, 11, /<T>expr.*write `expr as T`/],
  ];
  for (const [source, line, column, message] of cases) {
    assert.throws(() => stripTypes(source), (error) => {
      assert.ok(error instanceof TypeScriptError, source);
      assert.ok(error instanceof Error);
      assert.deepEqual([error.line, error.column], [line, column], source);
      assert.match(error.message, message);
      return true;
    });
  }
});

test("JavaScript, comparisons, strings, templates, comments and regular expressions are left as they are", () => {
  const sources = [
    "const ok = a < b && c > d;",
    "if (x < y) z = 1;\nfor (let i = 0; i < n; i++) if (a[i] > b) f(i);",
    "const r = a < b ? c : d > e;",
    "x = a<b;\ny = c>d;",
    "const s = 'let x: string = 1'; const t = \"interface A {}\";",
    "const tpl = `type X = ${a < b}: string as const ${ `interface ${c}` }`;",
    "// let x: string\n/* interface A { b: string } */ const k = 1;",
    "const re = /a<b>(c): string/g.test(s);",
    "const o = { type: 1, interface: 2, declare: 3, as: 4, namespace: 5 };\nconst { type, as } = o;",
    "let type = 1; type = 2; const declare = (x) => x; declare(1);",
    "label: for (;;) { break label; }\nswitch (k) { case 1: { a(); } default: b(); }",
    "const f = async (a, b = 2) => a ? b : c;\nconst g = cond ? (x) : y;",
    "if (!ok) done = !x; const y = !a && b!= c;\nif (a)!b && c();\nfunction n(x) { return!x; }",
    "module.exports = { namespace: 1 };",
    "class A { static #n = 1; get x() { return A.#n < 2; } m() { return this.x > 1; } }",
    "const obj = { async *gen() { yield 1; }, get v() { return 1; }, [k]: 2 };",
  "function f(cb = () => { log(a ? b : c); }, d = { e: 1 }) { return x < y && y > (z); }",
  "const w = c ? (x) : y => z; const n = i < n >> 1; const m = a < b >= (c);",
  ];
  for (const source of sources) assert.equal(stripTypes(source), source, source);
});

/** Cases written with what is erased between « and »: the TypeScript is
 * the text without the marks, the JavaScript that part as spaces. */
const ERASED = [
  "let x«: number» = 1, y«: string[]» = [];",
  "function f(a«: T», b«?: U», ...rest«: V[]»)«: void» {}",
  "const f = async (x«: T»)«: Promise<U>» => x;",
  "const g = (x)«: x is string» => true;",
  "const h = «<T,>»(x«: T») => x;",
  "const k = «<T extends { a: 1 }>»(x«: T»)«: T» => x;",
  "const m = new Map«<string, Array<number>>»();",
  "f«<string>»(x); a.b«<{ c: D }>»(1); o?.m«<T>»();",
  "const c = [1] «as const»; const d = v «as unknown» «as T[]»;",
  "const e = x«!» + y«!».z + w«!»[0] + f()«!»;",
  "import { «type A, »b, «type C as D» } from \"m\";",
  "«import type { A } from \"m\";»\n«export type { B };»\nexport { «type C, »d };",
  "«interface A<T> extends B<T>, C {\n  x: T;\n}»\nlet a = 1;",
  "«type F = (a: string) => void;»\n«export type G<T> = T extends string ? `x${T}` : never;»",
  "«declare module \"x\" { const y: 1; }»\n«declare global { interface W {} }»\n«declare function q(): void;»",
  "«namespace Types { export interface A {} type B = 1; }»",
  "«function o(a: string): string;»\nfunction o(a«: any») { return a; }",
  "class A«<T>» extends B«<T>» «implements C, D<T>» {\n  «private »x«?: number»;\n  y«!: T»;\n  «public »m«?»()«: void» {}\n  m2«<U>»(«this: A<T>, »u«: U»)«: U» { return u; }\n}",
  "class A {\n  «m(a: string): void;»\n  m(a«: any») {}\n  «[k: string]: unknown;»\n}",
  "«export default interface X { a: 1 }»\nexport «abstract »class Y {}",
  "try { f(); } catch (e«: unknown») { g(e «as Error»); }",
  "const { a, b }«: { a: 1; b: 2 }» = o;",
  "for (const [k, v] of Object.entries(o) «as [string, number][]») s += v;",
  "const obj = { m«<T>»(x«: T»)«: T» { return x; }, n: (y«: number»)«: number» => y };",
  "function f(cb = () => { log(a ? b : c); «type X = 1;» }, { g }«: T» = {}) {}",
  "const v = cond ? (x«: number»)«: number» => x : null; const u = c ? ()«: number» => 1 : 2;",
  "let tpl = tag«<string>»`x${1}`; f«<T>»`y`;",
];

test("the project's own JavaScript passes through unchanged, and its .d.ts erases to its comments", () => {
  for (const name of ["../toolhost.js", "web.js", "sync.js", "runtime.js", "strip.js"]) {
    const source = readFileSync(fileURLToPath(new URL(name, import.meta.url)), "utf8");
    assert.equal(stripTypes(source), source, name);
  }
  const declarations = readFileSync(fileURLToPath(new URL("../toolhost.d.ts", import.meta.url)), "utf8");
  const out = strip(declarations);
  const code = out.replace(/\/\/[^\n]*|\/\*[\s\S]*?\*\//g, "");
  assert.match(code, /^\s*$/, "only comments are left");
  assert.ok(declarations.includes("export interface") && declarations.includes("export declare class") && declarations.includes("export function"));
});

test("each TypeScript construct is erased exactly", () => {
  for (const marked of ERASED) {
    const ts = marked.replace(/[«»]/g, "");
    const js = marked.replace(/«([^»]*)»/g, (_, part) => part.replace(/[^\n]/g, " ")).replace(/[«»]/g, "");
    assert.equal(stripTypes(ts), js, ts);
  }
});

test("an erased declaration that would join the lines around it leaves a `;`", () => {
  const source = `let total = 1
type Pair = [number, number]
;[2, 3].forEach((n) => (total *= n))
let s = "a"
interface I {}
\`b\`.length
const v = s as string
(total as number).toFixed()
`;
  const out = strip(source);
  assert.equal(out.split("\n")[1][0], ";");
  assert.equal(out.split("\n")[4][0], ";");
  assert.match(out.split("\n")[6], /^const v = s ;\s*$/);
  const run = new Function(`${out}; return [total, s];`);
  assert.deepEqual(run(), [6, "a"]);
  // An erased modifier before a computed member, a declared field before a generator.
  const members = strip("class A {\n  x = 1\n  private [\"y\"] = 2\n  declare z: number\n  *g() { yield 3; }\n}\nreturn new A();");
  const a = new Function(members)();
  assert.deepEqual([a.x, a.y, [...a.g()]], [1, 2, [3]]);
});

/** TypeScript's own transpileModule, when npx can fetch typescript@5. */
function transpileWithTypeScript(sources) {
  const script = `
const { execSync } = require("child_process");
const { realpathSync } = require("fs");
const path = require("path");
const tsc = realpathSync(execSync("command -v tsc", { shell: "/bin/sh" }).toString().trim());
const ts = require(path.join(path.dirname(tsc), "..", "lib", "typescript.js"));
const sources = JSON.parse(require("fs").readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(sources.map((s) => ts.transpileModule(s, { compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext } }).outputText)));
`;
  const dir = mkdtempSync(join(tmpdir(), "strip-ts-"));
  try {
    writeFileSync(join(dir, "t.cjs"), script);
    const run = spawnSync("npx", ["--yes", "-p", "typescript@5", "-c", `node ${JSON.stringify(join(dir, "t.cjs"))}`], {
      input: JSON.stringify(sources), encoding: "utf8", timeout: 120_000, cwd: dir,
    });
    return run.status === 0 ? JSON.parse(run.stdout) : null;
  } catch {
    return null;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const PROGRAMS = [
  `function main(): string {
  const xs: Array<number> = [3, 1, 2];
  const sorted = [...xs].sort((a: number, b: number): number => a - b);
  const total = xs.reduce<number>((s, x) => s + x, 0);
  const big = sorted.filter((x): x is number => x > 1)!.length;
  return JSON.stringify({ sorted, total, big, lt: total < 10 && big > 1 });
}`,
  `interface Shape { area(): number }
abstract class Base implements Shape {
  protected abstract side: number;
  static readonly kind: string = "base";
  abstract area(): number;
  describe(this: Base): string { return \`\${(this.constructor as typeof Base).kind}:\${this.area()}\`; }
}
class Square extends Base {
  protected side = 2;
  static override readonly kind = "square";
  area(): number { return this.side ** 2; }
}
function main() { return new Square().describe(); }`,
  `type Op = "add" | "mul";
const ops = { add: (a: number, b: number) => a + b, mul: (a: number, b: number) => a * b } satisfies Record<Op, Function>;
function apply<K extends keyof typeof ops>(op: K, ...args: [number, number]): number {
  return ops[op](...args);
}
let last!: number
declare const never: unique symbol
;[1, 2].forEach((n) => (last = n))
function main() { return [apply("add", 2, 3), apply("mul", 2, 3), last, (null as any) ?? "n"].join(","); }`,
];

test("programs behave as TypeScript's transpileModule makes them (needs npx typescript@5)", (t) => {
  const theirs = transpileWithTypeScript(PROGRAMS);
  if (!theirs) {
    t.skip("npx could not run typescript@5");
    return;
  }
  PROGRAMS.forEach((program, k) => {
    const run = (code) => new Function(`${code}\nreturn main();`)();
    assert.equal(run(strip(program)), run(theirs[k]), program);
  });
});
