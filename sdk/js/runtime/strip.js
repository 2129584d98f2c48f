// strip.js: TypeScript to JavaScript by erasing, in the manner of
// Bloomberg's ts-blank-space and Node's --experimental-strip-types. Every
// type-only piece of the author's text becomes spaces (its line breaks
// kept), so each token that stays keeps its line and its column and an
// error names the author's own place in app.ts. What cannot be erased
// (an enum, a namespace with values, a constructor parameter property,
// `import x = require(..)`, `export =`, a `<T>expr` assertion) throws a
// TypeScriptError naming it, its line and column, and what to write
// instead.
//
// No parser: the tokens of sync.js's `tokenize`, their bracket pairs, a
// stack of what each open bracket holds (statements, a class body, an
// object literal, parameters, an expression) and a reader of TypeScript
// types that says where a type ends.
//
// Not handled: JSX; decorators (left as written); `new X<T>` without
// brackets; a type argument list followed by neither `(` nor a template
// (`f<T>` alone); an arrow with a return type but no typed parameter as
// the first branch of `?:` (`c ? (x): T => x : y` stays JavaScript);
// `declare` fields with initialisers; `x!` after `}` or a literal. The
// tokenizer's own limits hold too (a regular expression right after `)`).

import { matchBrackets, tokenize } from "./sync.js";

export class TypeScriptError extends Error {
  constructor(message, line, column) {
    super(`${message} (line ${line}, column ${column})`);
    this.name = "TypeScriptError";
    this.line = line;
    this.column = column;
  }
}

const LINE_END = /[\n\r\u2028\u2029]/;
const TS_MODIFIERS = new Set(["public", "private", "protected", "readonly", "override", "abstract", "declare"]);
const JS_MODIFIERS = new Set(["static", "async", "get", "set", "accessor"]);
const PARAM_MODIFIERS = new Set(["public", "private", "protected", "readonly", "override"]);
// Names after which an operand starts.
const OPERAND_KEYWORDS = new Set([
  "return", "typeof", "instanceof", "in", "of", "new", "delete", "void", "throw", "case", "do", "else",
  "yield", "await", "extends", "default", "export",
]);
// Names that end no operand.
const NOT_OPERAND_END = new Set([
  ...OPERAND_KEYWORDS, "let", "const", "var", "import", "function", "class", "if", "while", "for", "switch",
  "try", "catch", "finally", "with", "break", "continue", "as", "satisfies",
]);
// Names that are no type.
const NOT_TYPE = new Set([
  "in", "instanceof", "return", "function", "class", "let", "var", "if", "else", "for", "while", "do", "switch",
  "case", "default", "throw", "try", "catch", "finally", "delete", "await", "yield", "export", "extends", "as",
  "satisfies", "with", "break", "continue", "debugger", "enum", "implements", "is",
]);
// Tokens that would join the line before when what separates them is erased.
const HAZARDS = new Set(["(", "[", "+", "-", "/", "/=", "*", "**", "<"]);
const BINARY = new Set([
  "+", "-", "*", "/", "%", "**", "==", "===", "!=", "!==", "<", ">", "<=", "&&", "||", "??", "&", "|", "^",
  "<<", "?", "=", "+=", "-=", "*=", "/=", "%=", "&&=", "||=", "??=", "&=", "|=", "^=", "<<=",
]);

const MESSAGES = {
  enum: "enum is not erasable TypeScript: use a plain object (const Color = { Red: 0, Green: 1 } as const)",
  namespace: "a namespace or module holding values is not erasable TypeScript: use a plain object or the module itself",
  parameter: "a constructor parameter property is not erasable TypeScript: declare the field in the class body and assign it in the constructor",
  importEquals: "`import x = require(..)` is not erasable TypeScript: use `import x from \"..\"`",
  exportEquals: "`export =` is not erasable TypeScript: use `export default`",
  cast: "a `<T>expr` type assertion is not erasable TypeScript: write `expr as T`",
};

/** `>>`, `>=`, `>>>=`, .. as single `>` and `=` tokens, so that a type
 * argument list can close on each `>`. */
function splitAngles(tokens) {
  const out = [];
  for (const token of tokens) {
    if (token.type === "punct" && token.value.length > 1 && token.value[0] === ">") {
      for (let k = 0; k < token.value.length; k++) {
        const start = token.start + k;
        out.push({ type: "punct", value: token.value[k], start, end: start + 1, nl: k === 0 && token.nl });
      }
    } else out.push(token);
  }
  return out;
}


/** Line and column (both from 1) of `offset` in `src`. */
function position(src, offset) {
  let line = 1;
  let lineStart = 0;
  for (let c = 0; c < offset; c++) {
    if (LINE_END.test(src[c]) && !(src[c] === "\r" && src[c + 1] === "\n")) {
      line++;
      lineStart = c + 1;
    }
  }
  return [line, offset - lineStart + 1];
}

/**
 * `text` (TypeScript) as JavaScript: its type-only syntax replaced by
 * spaces, every line break kept, so that each remaining token stays on its
 * line and column. Throws a TypeScriptError for what cannot be erased.
 */
export function stripTypes(text) {
  const src = String(text);
  const tokens = splitAngles(tokenize(src));
  const n = tokens.length;
  const match = matchBrackets(tokens);
  const out = src.split("");
  const dead = new Uint8Array(n + 1);
  const paramsOpen = new Set(); // `(` of a parameter list
  const blockOpen = new Set(); // `{` of a function body or block
  const classOpen = new Set(); // `{` of a class body
  const caseColon = new Set(); // `:` of a `case`
  const statementOf = new Map(); // `function` token -> its statement's first token

  const P = (k, value) => tokens[k] !== undefined && tokens[k].type === "punct" && tokens[k].value === value;
  const N = (k, value) => tokens[k] !== undefined && tokens[k].type === "name" && (value === undefined || tokens[k].value === value);
  const S = (k) => tokens[k] !== undefined && tokens[k].type === "str";
  const sameLine = (k) => tokens[k] !== undefined && !tokens[k].nl;
  const semi = (k) => (P(k, ";") ? k + 1 : k);
  const semiComma = (k) => (P(k, ",") ? k + 1 : k);
  const fail = (k, what) => {
    const [line, column] = position(src, tokens[k].start);
    throw new TypeScriptError(MESSAGES[what], line, column);
  };
  const hazard = (k) => {
    const t = tokens[k];
    if (!t) return false;
    if (t.type === "template" || t.type === "templateHead" || t.type === "regex") return true;
    return t.type === "punct" && HAZARDS.has(t.value);
  };
  /** Tokens `from` up to (not with) `to` become spaces; with `semicolon`, the
   * first becomes a `;` that ends the statement before. */
  const blank = (from, to, semicolon = false) => {
    if (from < 0 || to <= from) return;
    for (let c = tokens[from].start; c < tokens[to - 1].end; c++) if (!LINE_END.test(src[c])) out[c] = " ";
    if (semicolon) out[tokens[from].start] = ";";
    for (let k = from; k < to; k++) dead[k] = 1;
  };
  const blankStatement = (from, to) => blank(from, to, hazard(to));
  // Erases from `j` up to `e` when `e` is an end; the index to go on from.
  const cut = (j, e) => (e > 0 ? (blank(j, e), e) : j);
  const prevLive = (k) => {
    let p = k - 1;
    while (p >= 0 && dead[p]) p--;
    return p;
  };
  const operandEnd = (k) => {
    const t = tokens[k];
    if (!t) return false;
    switch (t.type) {
      case "name":
        return !NOT_OPERAND_END.has(t.value);
      case "punct":
        return t.value === ")" || t.value === "]" || t.value === "}";
      case "templateHead":
      case "templateMiddle":
        return false;
      default:
        return true;
    }
  };
  const isKey = (k) => {
    const t = tokens[k];
    return t !== undefined && (t.type === "name" || t.type === "str" || t.type === "num" || t.type === "private" || P(k, "[") || P(k, "*"));
  };

  // --- Types: each reader returns the index just after what it read, or -1.

  function type(i) {
    if (P(i, "<")) {
      const e = typeParams(i);
      return e > 0 && P(e, "(") ? functionType(e) : -1;
    }
    if (N(i, "abstract") && N(i + 1, "new")) i++;
    if (N(i, "new")) {
      let j = i + 1;
      if (P(j, "<")) j = typeParams(j);
      return j > 0 && P(j, "(") ? functionType(j) : -1;
    }
    if (P(i, "(") && match[i] > 0 && P(match[i] + 1, "=>")) return functionType(i);
    if (N(i, "asserts") && N(i + 1) && sameLine(i + 1)) return N(i + 2, "is") ? type(i + 3) : i + 2;
    if (N(i) && N(i + 1, "is") && sameLine(i + 1)) return type(i + 2);
    const j = union(i);
    if (j > 0 && N(j, "extends") && sameLine(j)) {
      const a = union(j + 1);
      if (a > 0 && P(a, "?")) {
        const b = type(a + 1);
        if (b > 0 && P(b, ":")) return type(b + 1);
      }
    }
    return j;
  }
  function functionType(i) {
    const m = match[i];
    return m > 0 && P(m + 1, "=>") ? type(m + 2) : -1;
  }
  // `A | B`, `A & B`, each with an optional leading separator.
  function joined(i, separator, part) {
    let j = part(P(i, separator) ? i + 1 : i);
    while (j > 0 && P(j, separator)) j = part(j + 1);
    return j;
  }
  const union = (i) => joined(i, "|", intersection);
  const intersection = (i) => joined(i, "&", operator);
  function operator(i) {
    if ((N(i, "keyof") || N(i, "unique") || N(i, "readonly")) && (N(i + 1) || P(i + 1, "(") || P(i + 1, "[") || P(i + 1, "{"))) {
      return operator(i + 1);
    }
    if (N(i, "infer") && N(i + 1)) return i + 2;
    let j = primary(i);
    while (j > 0 && P(j, "[") && sameLine(j) && match[j] > 0) j = match[j] + 1;
    return j;
  }
  function primary(i) {
    const t = tokens[i];
    if (!t) return -1;
    switch (t.type) {
      case "num": case "str": case "template":
        return i + 1;
      case "templateHead": {
        let k = i;
        while (k > 0 && tokens[k].type !== "templateTail") k = match[k];
        return k > 0 ? k + 1 : -1;
      }
      case "punct":
        if (t.value === "-" && tokens[i + 1]?.type === "num") return i + 2;
        if ((t.value === "{" || t.value === "[" || t.value === "(") && match[i] > 0) return match[i] + 1;
        return -1;
      case "name": {
        if (NOT_TYPE.has(t.value)) return -1;
        let j = i + 1;
        if (t.value === "typeof" && (N(j) || P(j, "("))) j++;
        if (t.value === "import" && P(j, "(") && match[j] > 0) j = match[j] + 1;
        else if (N(i, "typeof") && N(j - 1, "import") && P(j, "(") && match[j] > 0) j = match[j] + 1;
        while (P(j, ".") && (N(j + 1) || tokens[j + 1]?.type === "private")) j += 2;
        return P(j, "<") && typeArgs(j) > 0 ? typeArgs(j) : j;
      }
      default:
        return -1;
    }
  }
  function typeArgs(i) {
    if (!P(i, "<")) return -1;
    let j = i + 1;
    for (;;) {
      j = type(j);
      if (j < 0) return -1;
      if (P(j, ",")) j++;
      else return P(j, ">") ? j + 1 : -1;
    }
  }
  function typeParams(i) {
    if (!P(i, "<")) return -1;
    let j = i + 1;
    for (;;) {
      while ((N(j, "const") || N(j, "in") || N(j, "out")) && N(j + 1)) j++;
      if (!N(j)) return -1;
      j++;
      if (N(j, "extends")) j = type(j + 1);
      if (j > 0 && P(j, "=")) j = type(j + 1);
      if (j < 0) return -1;
      if (P(j, ",") && P(j + 1, ">")) return j + 2;
      if (!P(j, ",")) return P(j, ">") ? j + 1 : -1;
      j++;
    }
  }
  const typeList = (i) => joined(i, ",", type);

  // --- Declarations that are types only: each returns its end, or -1.

  function interfaceEnd(j) {
    let k = j + 2;
    if (P(k, "<")) k = typeParams(k);
    if (k > 0 && N(k, "extends")) k = typeList(k + 1);
    return k > 0 && P(k, "{") && match[k] > 0 ? semi(match[k] + 1) : -1;
  }
  function aliasEnd(j) {
    let k = j + 2;
    if (P(k, "<")) k = typeParams(k);
    if (k < 0 || !P(k, "=")) return -1;
    k = type(k + 1);
    return k > 0 ? semi(k) : -1;
  }
  function classEnd(k) {
    if (N(k) && !N(k, "extends") && !N(k, "implements")) k++;
    if (P(k, "<")) k = typeParams(k);
    if (k > 0 && N(k, "extends")) k = type(k + 1);
    if (k > 0 && N(k, "implements")) k = typeList(k + 1);
    return k > 0 && P(k, "{") && match[k] > 0 ? match[k] + 1 : -1;
  }
  function declareEnd(j) {
    let k = j + 1;
    const what = tokens[k]?.value;
    if (what === "const" && N(k + 1, "enum")) k++;
    switch (tokens[k]?.type === "name" ? tokens[k].value : "") {
      case "const": case "let": case "var":
        for (k++; ; k++) {
          if (N(k)) k++;
          else if ((P(k, "{") || P(k, "[")) && match[k] > 0) k = match[k] + 1;
          else return -1;
          if (P(k, ":")) k = type(k + 1);
          if (k < 0) return -1;
          if (P(k, "=")) {
            for (k++; k < n && !P(k, ",") && !P(k, ";") && sameLine(k); k++) if (match[k] > 0) k = match[k];
          }
          if (!P(k, ",")) return semi(k);
        }
      case "async": case "function":
        if (N(k, "async")) k++;
        if (!N(k, "function")) return -1;
        k++;
        if (P(k, "*")) k++;
        if (N(k)) k++;
        if (P(k, "<")) k = typeParams(k);
        if (k < 0 || !P(k, "(") || match[k] < 0) return -1;
        k = match[k] + 1;
        if (P(k, ":")) k = type(k + 1);
        return k > 0 ? semi(k) : -1;
      case "abstract":
        return N(k + 1, "class") ? classEnd(k + 2) : -1;
      case "class":
        return classEnd(k + 1);
      case "enum":
        return P(k + 2, "{") && match[k + 2] > 0 ? match[k + 2] + 1 : -1;
      case "namespace": case "module": case "global":
        for (k++; N(k) || S(k) || P(k, "."); k++);
        return P(k, "{") && match[k] > 0 ? match[k] + 1 : semi(k);
      case "type":
        return aliasEnd(k);
      case "interface":
        return interfaceEnd(k);
      default:
        return -1;
    }
  }
  /** Whether the statements from `a` up to `b` declare types only. */
  function typesOnly(a, b) {
    for (let k = a; k < b; ) {
      if (P(k, ";")) {
        k++;
        continue;
      }
      if (N(k, "export")) k++;
      let e = -1;
      if (N(k, "interface")) e = interfaceEnd(k);
      else if (N(k, "type") && N(k + 1)) e = aliasEnd(k);
      else if (N(k, "declare")) e = declareEnd(k);
      else if ((N(k, "namespace") || N(k, "module")) && N(k + 1)) {
        let o = k + 1;
        while (N(o) || P(o, ".")) o++;
        if (P(o, "{") && match[o] > 0 && typesOnly(o + 1, match[o])) e = match[o] + 1;
      } else if (N(k, "import") && N(k + 1, "type")) e = moduleEnd(k + 2);
      if (e < 0) return false;
      k = e;
    }
    return true;
  }
  /** The end of an import or export clause from `k`: up to and with its
   * module name, its attributes and its `;`. */
  function moduleEnd(k) {
    while (k < n && !S(k) && !P(k, ";") && !(k > 0 && tokens[k].nl && !N(k, "from"))) k = match[k] > 0 ? match[k] + 1 : k + 1;
    if (S(k)) k++;
    if ((N(k, "with") || N(k, "assert")) && sameLine(k) && P(k + 1, "{") && match[k + 1] > 0) k = match[k + 1] + 1;
    return semi(k);
  }
  /** `{ a, type B, type C as D }`: the `type` specifiers erased. */
  function specifiers(open) {
    const close = match[open];
    for (let k = open + 1; k > 0 && k < close; ) {
      const rename = N(k + 1, "as") && (N(k + 2) || S(k + 2)) && (P(k + 3, ",") || P(k + 3, "}"));
      if (N(k, "type") && !P(k + 1, ",") && !P(k + 1, "}") && !rename) {
        const e = N(k + 2, "as") ? k + 4 : k + 2;
        k = cut(k, semiComma(e));
        continue;
      }
      while (k < close && !P(k, ",")) k++;
      k++;
    }
  }

  // --- Statements, members and parameters --------------------------------------

  function importStatement(i) {
    if (P(i + 1, "(") || P(i + 1, ".")) return -1;
    if (N(i + 1, "type") && (P(i + 2, "{") || P(i + 2, "*") || (N(i + 2) && !(N(i + 2, "from") && S(i + 3))))) {
      let e;
      if (N(i + 2) && P(i + 3, "=")) {
        e = i + 4;
        while (N(e) || P(e, ".")) e++;
        if (P(e, "(") && match[e] > 0) e = match[e] + 1;
        e = semi(e);
      } else e = moduleEnd(i + 2);
      blankStatement(i, e);
      return e;
    }
    if (N(i + 1) && P(i + 2, "=")) fail(i, "importEquals");
    let k = i + 1;
    while (k < n && !S(k) && !P(k, ";")) {
      if (P(k, "{") && match[k] > 0) specifiers(k);
      k = match[k] > 0 ? match[k] + 1 : k + 1;
    }
    return moduleEnd(k);
  }

  /** A statement's TypeScript beginning at `i`: the index to go on from, or -1. */
  function statement(i) {
    if (!N(i)) return -1;
    let j = i;
    if (N(i, "export")) {
      if (P(i + 1, "=")) fail(i, "exportEquals");
      if (N(i + 1, "import") && N(i + 2) && P(i + 3, "=")) fail(i + 1, "importEquals");
      let e = -1;
      if (N(i + 1, "type") && (P(i + 2, "{") || P(i + 2, "*"))) e = moduleEnd(i + 2);
      else if (N(i + 1, "as") && N(i + 2, "namespace")) e = semi(i + 4);
      if (e > 0) {
        blankStatement(i, e);
        return e;
      }
      if (P(i + 1, "{") && match[i + 1] > 0) {
        specifiers(i + 1);
        return moduleEnd(match[i + 1] + 1);
      }
      if (P(i + 1, "*")) return moduleEnd(i + 1);
      j = N(i + 1, "default") ? i + 2 : i + 1;
    }
    if (!N(j) || (j > i && !sameLine(j))) return -1;
    const named = N(j + 1) && sameLine(j + 1);
    let e = -1;
    switch (tokens[j].value) {
      case "interface":
        if (named) e = interfaceEnd(j);
        break;
      case "type":
        if (named && (P(j + 2, "=") || P(j + 2, "<"))) e = aliasEnd(j);
        break;
      case "declare":
        if (named) e = declareEnd(j);
        break;
      case "enum":
        if (named) fail(j, "enum");
        break;
      case "const":
        if (N(j + 1, "enum")) fail(j + 1, "enum");
        break;
      case "namespace": case "module": {
        if (!(named || (S(j + 1) && tokens[j].value === "module" && sameLine(j + 1)))) break;
        let o = j + 1;
        while (N(o) || S(o) || P(o, ".")) o++;
        if (!P(o, "{") || match[o] < 0) break;
        if (!typesOnly(o + 1, match[o])) fail(j, "namespace");
        e = match[o] + 1;
        break;
      }
      case "abstract":
        if (N(j + 1, "class") && sameLine(j + 1)) blank(j, j + 1);
        return -1;
      case "import":
        return j === i ? importStatement(i) : -1;
      case "async":
        if (N(j + 1, "function") && sameLine(j + 1)) statementOf.set(j + 1, i);
        return -1;
      case "function":
        statementOf.set(j, i);
        return -1;
      default:
        return -1;
    }
    if (e > 0) blankStatement(i, e);
    return e;
  }

  /** A method's rest from its `(` at `j`: parameters, return type, body. Its
   * end when it has no body (an overload), else -1. */
  function method(j) {
    paramsOpen.add(j);
    let k = match[j] + 1;
    if (P(k, ":")) k = cut(k, type(k + 1));
    if (!P(k, "{")) return semi(k);
    blockOpen.add(k);
    return -1;
  }

  function functionKeyword(i) {
    let j = i + 1;
    if (P(j, "*")) j++;
    if (N(j)) j++;
    if (P(j, "<")) j = cut(j, typeParams(j));
    if (!P(j, "(") || match[j] < 0) return;
    const end = method(j);
    if (end > 0 && statementOf.has(i)) blankStatement(statementOf.get(i), end);
  }

  function classKeyword(i) {
    let j = i + 1;
    if (N(j) && !N(j, "extends") && !N(j, "implements")) j++;
    if (P(j, "<")) j = cut(j, typeParams(j));
    if (N(j, "extends")) {
      for (j++; j < n && !P(j, "{") && !N(j, "implements"); ) {
        const e = P(j, "<") ? typeArgs(j) : -1;
        if (P(e, "{") || N(e, "implements")) j = cut(j, e);
        else j = (P(j, "(") || P(j, "[")) && match[j] > 0 ? match[j] + 1 : j + 1;
      }
    }
    if (N(j, "implements")) j = cut(j, typeList(j + 1));
    if (P(j, "{")) classOpen.add(j);
  }

  /** A class member from `s`: the index to go on from, or -1. */
  function classMember(s, frame) {
    if (N(s, "static") && P(s + 1, "{")) {
      blockOpen.add(s + 1);
      return -1;
    }
    let j = s;
    let whole = false;
    const modifiers = [];
    while (N(j) && (TS_MODIFIERS.has(tokens[j].value) || JS_MODIFIERS.has(tokens[j].value)) && isKey(j + 1)) {
      if (TS_MODIFIERS.has(tokens[j].value)) modifiers.push(j);
      if (N(j, "declare") || N(j, "abstract")) whole = true;
      j++;
    }
    if (P(j, "*")) j++;
    const erase = (e) => {
      blankStatement(s, e);
      frame.member = true;
      return e;
    };
    if (P(j, "[") && N(j + 1) && P(j + 2, ":") && match[j] > 0) {
      // An index signature.
      const e = P(match[j] + 1, ":") ? type(match[j] + 2) : match[j] + 1;
      return e > 0 ? erase(semi(e)) : -1;
    }
    const key = j;
    if (P(j, "[") && match[j] > 0) j = match[j] + 1;
    else if (isKey(j) && !P(j, "[") && !P(j, "*")) j++;
    else return -1;
    if (P(j, "?") || P(j, "!")) j = cut(j, j + 1);
    const e = P(j, "<") ? typeParams(j) : -1;
    if (P(e, "(")) j = cut(j, e);
    if (P(j, "(") && match[j] > 0) {
      const end = method(j);
      if (end > 0) return erase(end);
    } else {
      if (P(j, ":")) j = cut(j, type(j + 1));
      if (whole) return erase(semi(j));
    }
    if (whole) return -1;
    for (const m of modifiers) blank(m, m + 1, m === s && (P(key, "[") || P(key, "*")));
    return -1;
  }

  function objectMember(i) {
    let j = i;
    while ((N(j, "async") || N(j, "get") || N(j, "set")) && isKey(j + 1)) j++;
    if (P(j, "*")) j++;
    if (P(j, "[") && match[j] > 0) j = match[j] + 1;
    else if (isKey(j) && !P(j, "[") && !P(j, "*")) j++;
    else return;
    const e = P(j, "<") ? typeParams(j) : -1;
    if (P(e, "(")) j = cut(j, e);
    if (P(j, "(") && match[j] > 0) method(j);
  }

  function parameter(i, frame) {
    if (N(i) && PARAM_MODIFIERS.has(tokens[i].value) && (N(i + 1) || P(i + 1, "{") || P(i + 1, "[") || P(i + 1, "..."))) {
      fail(i, "parameter");
    }
    if (N(i, "this") && P(i + 1, ":")) {
      const e = type(i + 2);
      if (P(e, ",")) frame.param = true; // the next parameter's start is erased with it
      cut(i, e > 0 ? semiComma(e) : e);
      return;
    }
    let j = P(i, "...") ? i + 1 : i;
    if (N(j)) j++;
    else if ((P(j, "{") || P(j, "[")) && match[j] > 0) j = match[j] + 1;
    else return;
    if (P(j, "?")) j = cut(j, j + 1);
    if (P(j, ":")) cut(j, type(j + 1));
  }

  function declarator(k) {
    let j;
    if (N(k)) j = k + 1;
    else if ((P(k, "{") || P(k, "[")) && match[k] > 0) j = match[k] + 1;
    else return;
    if (P(j, "!")) j = cut(j, j + 1);
    if (P(j, ":")) cut(j, type(j + 1));
  }

  /** `(` at `i`: whether it opens a parameter list (an arrow's). */
  function arrowParams(i) {
    const p = prevLive(i);
    if (!(p < 0 || !operandEnd(p) || N(p, "async")) || match[i] < 0) return false;
    const m = match[i];
    if (P(m + 1, "=>")) return true;
    // After `?`, `(x): y => z` is JavaScript (`?:` whose second branch is
    // an arrow) unless the brackets hold what only parameters can.
    const first = (P(i + 1, "{") || P(i + 1, "[")) && match[i + 1] > 0 ? match[i + 1] + 1 : N(i + 1) ? i + 2 : -1;
    const typed = m === i + 1 || P(i + 1, "...") || P(first, ":") || (P(first, "?") && (P(first + 1, ":") || P(first + 1, ",") || P(first + 1, ")")));
    if (P(m + 1, ":") && (!P(p, "?") || typed)) {
      const e = type(m + 2);
      if (P(e, "=>") && sameLine(e)) return cut(m + 1, e) > 0;
    }
    return false;
  }

  function angle(i) {
    const p = prevLive(i);
    if (P(p, "?.") || operandEnd(p) && !N(p, "async")) {
      const e = typeArgs(i);
      const next = tokens[e]?.type;
      if (e > 0 && (P(e, "(") || ((next === "template" || next === "templateHead") && !P(p, "?.")))) blank(i, e);
      return;
    }
    // Where an operand starts: a generic arrow, else an assertion.
    const e = typeParams(i);
    if (e > 0 && P(e, "(") && match[e] > 0) {
      const m = match[e];
      let r = -1;
      if (P(m + 1, ":")) r = type(m + 2);
      if (P(m + 1, "=>") || (r > 0 && P(r, "=>"))) {
        blank(i, e);
        if (r > 0) blank(m + 1, r);
        paramsOpen.add(e);
        return;
      }
    }
    if (typeArgs(i) > 0) fail(i, "cast");
  }

  function nonNull(i) {
    const p = i - 1;
    if (p < 0 || tokens[p].end !== tokens[i].start) return;
    if (!(P(p, ")") || P(p, "]") || tokens[p].type === "private" || (N(p) && !NOT_OPERAND_END.has(tokens[p].value)))) return;
    const next = tokens[i + 1];
    const follows = !next || next.nl || [".", "?.", ")", "]", ",", ";", "[", "}", ":", "="].includes(next.type === "punct" ? next.value : "") ||
      (next.start > tokens[i].end && ((next.type === "punct" && BINARY.has(next.value)) || N(i + 1, "as") || N(i + 1, "satisfies") || N(i + 1, "instanceof") || N(i + 1, "in")));
    if (follows) blank(i, i + 1);
  }

  function assertion(i) {
    if (!sameLine(i) || !operandEnd(prevLive(i))) return;
    const e = type(i + 1);
    if (e > 0) blank(i, e, tokens[e] !== undefined && tokens[e].nl && hazard(e));
  }

  function braceKind(i, frame) {
    if (classOpen.has(i)) return "class";
    if (blockOpen.has(i)) return "block";
    const p = prevLive(i);
    if (p < 0) return "block";
    const t = tokens[p];
    if (t.type === "punct") {
      if ([")", ";", "{", "}", "=>"].includes(t.value)) return "block";
      if (t.value === ":") {
        const label = N(p - 1) && (p - 1 === 0 || tokens[p - 1].nl || P(p - 2, ";") || P(p - 2, "{") || P(p - 2, "}"));
        return caseColon.has(p) || (frame.kind === "block" && label) ? "block" : "object";
      }
      return "object";
    }
    if (t.type === "name") return OPERAND_KEYWORDS.has(t.value) && t.value !== "else" && t.value !== "do" ? "object" : "block";
    return t.type === "templateHead" || t.type === "templateMiddle" ? "object" : "block";
  }

  const continues = (p) => {
    if (p < 0 || dead[p]) return false;
    const t = tokens[p];
    if (t.type === "punct") return ![")", "]", "}", ";", "++", "--"].includes(t.value);
    return t.type === "name" && OPERAND_KEYWORDS.has(t.value);
  };

  // --- The walk -------------------------------------------------------------------

  const stack = [{ kind: "block", close: n }];
  for (let i = 0; i < n; i++) {
    if (dead[i]) continue;
    const t = tokens[i];
    if (t.type === "templateMiddle" || t.type === "templateTail" || P(i, ")") || P(i, "]") || P(i, "}")) {
      let at = stack.length - 1;
      while (at > 0 && stack[at].close !== i) at--;
      if (at > 0) {
        stack.length = at;
        const parent = stack[at - 1];
        if (parent.kind === "class" && P(i, "}")) parent.member = true;
      }
      if (t.type === "templateMiddle") stack.push({ kind: "expr", close: match[i] });
      continue;
    }
    const frame = stack[stack.length - 1];
    if (frame.decl && t.nl && !P(i - 1, ",") && !P(i, ",")) frame.decl = false;
    let resume = -1;
    if (frame.kind === "class" && (frame.member || (t.nl && !continues(i - 1)))) {
      frame.member = false;
      resume = classMember(i, frame);
    } else if (frame.kind === "object" && frame.member) {
      frame.member = false;
      objectMember(i);
    } else if (frame.kind === "params" && frame.param) {
      frame.param = false;
      parameter(i, frame);
    } else if (frame.kind === "block" && (i === 0 || t.nl || P(i - 1, ";") || P(i - 1, "{") || P(i - 1, "}"))) {
      resume = statement(i);
    }
    if (resume >= 0) {
      i = resume - 1;
      continue;
    }
    if (dead[i]) continue;
    if (t.type === "templateHead") {
      stack.push({ kind: "expr", close: match[i] });
    } else if (t.type === "name") {
      switch (t.value) {
        case "function": functionKeyword(i); break;
        case "class": classKeyword(i); break;
        case "as": case "satisfies": assertion(i); break;
        case "case": frame.caseOpen = true; break;
        case "default": if (P(i + 1, ":")) frame.caseOpen = true; break;
        case "catch": if (P(i + 1, "(")) paramsOpen.add(i + 1); break;
        case "let": case "const": case "var":
          frame.decl = N(i + 1) || P(i + 1, "{") || P(i + 1, "[");
          if (frame.decl) declarator(i + 1);
          break;
      }
    } else if (t.type === "punct") {
      switch (t.value) {
        case "(": {
          const params = paramsOpen.has(i) || arrowParams(i);
          stack.push({ kind: params ? "params" : "expr", close: match[i], param: params });
          break;
        }
        case "[": stack.push({ kind: "expr", close: match[i] }); break;
        case "{": stack.push({ kind: braceKind(i, frame), close: match[i], member: true }); break;
        case "<": angle(i); break;
        case "!": nonNull(i); break;
        case ",":
          if (frame.kind === "params") frame.param = true;
          else if (frame.kind === "object") frame.member = true;
          if (frame.decl) declarator(i + 1);
          break;
        case ";":
          frame.decl = false;
          if (frame.kind === "class") frame.member = true;
          break;
        case ":":
          if (frame.caseOpen) caseColon.add(i);
          frame.caseOpen = false;
          break;
      }
    }
  }
  return out.join("");
}
