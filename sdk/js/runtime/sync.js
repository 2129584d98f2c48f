// sync.js: `async`/`await` for toolhost's JavaScript runtime, where the
// promise job queue never runs during a tool call. One ES module, no
// dependencies beyond web.js.
//
// `asSync(text)` rewrites an author's source so its async code runs
// synchronously, every line keeping its number: the `async` of async
// functions, arrows and methods becomes spaces, `await EXPR` becomes
// `__toolhost_await__(EXPR)` and `for await (` becomes `for       (`. The
// text is then run with `__toolhost_await__` bound to `unwrapAwait` and
// `Promise` to `SyncPromise` (see `wrap`), so awaiting `fetch(..)`, a
// Response body or `Promise.all([...fetches])` takes the value at once.
//
// The transform reads tokens, not a syntax tree: strings, template
// literals (with `${..}` nesting), comments and regular expression
// literals (told from division by the token before them) are skipped, so
// `await` in a string or a comment stays, and so do `awaited` or
// `asyncTask`. Known limits are listed at `asSync` below.

import { SyncPromise } from "./web.js";

const NativePromise = Promise;

export const NATIVE_PROMISE_MESSAGE = "await works here on fetch, Response bodies and values that are already there; "
  + "a native Promise cannot be waited for inside a tool";
export const PENDING_MESSAGE = "await works here on fetch, Response bodies and values that are already there; "
  + "this promise has not settled, and nothing can settle it inside a tool (it waits on a native Promise or a callback that never runs)";

/** The value `await value` gives, now: a SyncPromise's (or a thenable's
 * that settles as soon as its `then` is called) value, or its reason
 * thrown; any other value as it is. A native Promise, or a thenable still
 * pending, throws an Error saying so. */
export function unwrapAwait(value) {
  if (value instanceof NativePromise) throw new Error(NATIVE_PROMISE_MESSAGE);
  if (value === null || (typeof value !== "object" && typeof value !== "function")) return value;
  const then = value.then;
  if (typeof then !== "function") return value;
  let state = "pending";
  let result;
  then.call(
    value,
    (fulfilled) => {
      if (state !== "pending") return;
      state = "fulfilled";
      result = fulfilled;
    },
    (reason) => {
      if (state !== "pending") return;
      state = "rejected";
      result = reason;
    },
  );
  if (state === "fulfilled") {
    // A thenable may fulfil with another (a SyncPromise never does).
    return result !== value ? unwrapAwait(result) : result;
  }
  if (state === "rejected") throw result;
  throw new Error(PENDING_MESSAGE);
}

/** The transformed `text` as a script that runs it with `Promise` and
 * `__toolhost_await__` bound to `${name}.SyncPromise` and
 * `${name}.unwrapAwait` (`name` an expression naming an object with
 * both, such as this module's namespace): a function around it, opened on
 * line 1 and closed after the last line, so every line keeps its number.
 * The text's top-level declarations are the function's, not globals. */
export function wrap(text, name) {
  return `(function (Promise, __toolhost_await__) {${text}\n})(${name}.SyncPromise, ${name}.unwrapAwait);`;
}

/** A one-line prefix (no newline) binding the same two names as global
 * constants instead; for a script evaluated once per realm. */
export function prelude(name) {
  return `const Promise = ${name}.SyncPromise, __toolhost_await__ = ${name}.unwrapAwait; `;
}

export { SyncPromise };

// --- Tokens ------------------------------------------------------------------

const PUNCTUATORS = new Set([
  ">>>=", "...", "===", "!==", "**=", "<<=", ">>=", ">>>", "&&=", "||=", "??=",
  "=>", "==", "!=", "<=", ">=", "&&", "||", "??", "?.", "++", "--", "+=", "-=", "*=", "/=", "%=",
  "&=", "|=", "^=", "**", "<<", ">>",
]);

// Names after which a `/` starts a regular expression.
const BEFORE_EXPRESSION = new Set([
  "return", "typeof", "instanceof", "in", "of", "new", "delete", "void", "throw", "case", "do", "else",
  "yield", "await", "extends",
]);

const LINE_END = /[\n\r\u2028\u2029]/;
const NUMBER = /(?:0[xXoObB][0-9a-fA-F_]*|(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?[\d_]+)?)n?/y;
const NAME_START = /[A-Za-z_$\\\u0080-\uFFFF]/;
const NAME_PART = /[\w$\\\u0080-\uFFFF]/;

/**
 * The tokens of `src`: `{ type, value, start, end, nl }`, `nl` telling
 * whether a line ends between it and the one before. Types: name, num,
 * str, regex, punct, private (`#x`), template (no substitutions),
 * templateHead (`` `..${ ``), templateMiddle (`}..${`), templateTail
 * (`` }..` ``). Comments and white space are skipped.
 */
export function tokenize(src) {
  const tokens = [];
  const braces = []; // true: the `{` of a template's `${`
  const n = src.length;
  let i = 0;
  let nl = false;
  const push = (type, start, end) => {
    tokens.push({ type, value: src.slice(start, end), start, end, nl });
    nl = false;
  };
  // A template's text from `j` (just after "`" or "}"): its end, and
  // whether it stops at a "${".
  const templateText = (j) => {
    while (j < n) {
      const c = src[j];
      if (c === "\\") j += 2;
      else if (c === "`") return [j + 1, false];
      else if (c === "$" && src[j + 1] === "{") return [j + 2, true];
      else j++;
    }
    return [n, false];
  };
  const regexEnd = (j) => {
    let inClass = false;
    for (j++; j < n; j++) {
      const c = src[j];
      if (LINE_END.test(c)) return -1;
      if (c === "\\") {
        j++;
        continue;
      }
      if (inClass) {
        if (c === "]") inClass = false;
      } else if (c === "[") {
        inClass = true;
      } else if (c === "/") {
        j++;
        while (j < n && NAME_PART.test(src[j])) j++;
        return j;
      }
    }
    return -1;
  };
  const regexAllowed = () => {
    const prev = tokens[tokens.length - 1];
    if (!prev) return true;
    switch (prev.type) {
      case "name":
        return BEFORE_EXPRESSION.has(prev.value);
      case "punct":
        return prev.value !== ")" && prev.value !== "]" && prev.value !== "++" && prev.value !== "--";
      case "templateHead":
      case "templateMiddle":
        return true;
      default:
        return false;
    }
  };

  if (src.startsWith("#!")) {
    while (i < n && !LINE_END.test(src[i])) i++;
  }
  while (i < n) {
    const c = src[i];
    if (LINE_END.test(c)) {
      nl = true;
      i++;
      continue;
    }
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    if (c === "/" && src[i + 1] === "/") {
      while (i < n && !LINE_END.test(src[i])) i++;
      continue;
    }
    if (c === "/" && src[i + 1] === "*") {
      const close = src.indexOf("*/", i + 2);
      const end = close < 0 ? n : close + 2;
      if (LINE_END.test(src.slice(i, end))) nl = true;
      i = end;
      continue;
    }
    if (c === '"' || c === "'") {
      let j = i + 1;
      while (j < n && src[j] !== c && !LINE_END.test(src[j])) j += src[j] === "\\" ? 2 : 1;
      const end = src[j] === c ? j + 1 : Math.min(j, n); // unterminated: up to the line's end
      push("str", i, end);
      i = end;
      continue;
    }
    if (c === "`") {
      const [end, open] = templateText(i + 1);
      push(open ? "templateHead" : "template", i, end);
      if (open) braces.push(true);
      i = end;
      continue;
    }
    if (c === "}" && braces.length > 0 && braces[braces.length - 1] === true) {
      braces.pop();
      const [end, open] = templateText(i + 1);
      push(open ? "templateMiddle" : "templateTail", i, end);
      if (open) braces.push(true);
      i = end;
      continue;
    }
    if (c >= "0" && c <= "9" || (c === "." && src[i + 1] >= "0" && src[i + 1] <= "9")) {
      NUMBER.lastIndex = i;
      NUMBER.test(src);
      let end = Math.max(NUMBER.lastIndex, i + 1);
      while (end < n && NAME_PART.test(src[end])) end++; // a malformed number: one token all the same
      push("num", i, end);
      i = end;
      continue;
    }
    if (NAME_START.test(c) || (c === "#" && NAME_START.test(src[i + 1] ?? ""))) {
      let j = i + 1;
      while (j < n && NAME_PART.test(src[j])) j++;
      push(c === "#" ? "private" : "name", i, j);
      i = j;
      continue;
    }
    if (c === "/" && regexAllowed()) {
      const end = regexEnd(i);
      if (end > 0) {
        push("regex", i, end);
        i = end;
        continue;
      }
    }
    let length = 1;
    for (const size of [4, 3, 2]) {
      if (PUNCTUATORS.has(src.slice(i, i + size))) {
        length = size;
        break;
      }
    }
    if (length === 2 && src.slice(i, i + 2) === "?." && src[i + 2] >= "0" && src[i + 2] <= "9") length = 1; // a ? .5 : b
    const value = src.slice(i, i + length);
    if (value === "{") braces.push(false);
    else if (value === "}") braces.pop();
    push("punct", i, i + length);
    i += length;
  }
  return tokens;
}

/** For each opening token (`(`, `[`, `{`, a template head or middle) the
 * index of its closing one (a template's next middle or its tail); -1 when
 * there is none. */
export function matchBrackets(tokens) {
  const match = new Array(tokens.length).fill(-1);
  const stack = [];
  const pairs = { ")": "(", "]": "[", "}": "{" };
  tokens.forEach((token, index) => {
    if (token.type === "templateMiddle" || token.type === "templateTail") {
      for (let k = stack.length - 1; k >= 0; k--) {
        const open = tokens[stack[k]];
        if (open.type === "templateHead" || open.type === "templateMiddle") {
          match[stack[k]] = index;
          stack.length = k;
          break;
        }
      }
      if (token.type === "templateMiddle") stack.push(index);
    } else if (token.type === "templateHead") stack.push(index);
    else if (token.type === "punct") {
      if (token.value === "(" || token.value === "[" || token.value === "{") stack.push(index);
      else if (pairs[token.value]) {
        const top = stack[stack.length - 1];
        if (top !== undefined && tokens[top].type === "punct" && tokens[top].value === pairs[token.value]) {
          match[top] = index;
          stack.pop();
        }
      }
    }
  });
  return match;
}

// --- The transform -------------------------------------------------------------

const PREFIX_OPERATORS = new Set(["!", "~", "+", "-", "++", "--"]);
const PREFIX_KEYWORDS = new Set(["typeof", "void", "delete", "await"]);
// Names that cannot begin an operand (binary operators and such).
const NOT_OPERAND = new Set(["in", "instanceof", "of"]);
// Tokens after which `async name(` / `async [..](` / `async *` is a method.
const METHOD_CONTEXT = new Set(["{", ",", ";", "}"]);
const METHOD_KEYWORDS = new Set(["static", "get", "set"]);

const isPunct = (token, value) => token !== undefined && token.type === "punct" && token.value === value;
const isName = (token, value) => token !== undefined && token.type === "name" && (value === undefined || token.value === value);

function startsOperand(token) {
  if (!token) return false;
  switch (token.type) {
    case "name":
      return !NOT_OPERAND.has(token.value);
    case "num":
    case "str":
    case "regex":
    case "template":
    case "templateHead":
    case "private":
      return true;
    case "punct":
      return ["(", "[", "{", "!", "~", "+", "-", "++", "--"].includes(token.value);
    default:
      return false;
  }
}

/**
 * `text` with its async code made synchronous, line for line (see the top
 * of this file). Columns move only on lines with an `await`.
 *
 * Known limits: an async function now returns its value, not a promise
 * (`f().then(..)` on one fails unless it returns a SyncPromise), and it
 * throws where it would have rejected; `for await` iterates synchronously
 * (an async iterable, or yielded promises, are not awaited); a variable
 * named `async` called with brackets right after a comma or a brace
 * (`f(a, async[0]())`) would be taken for an async method; a regular
 * expression right after `)` (as in `if (x) /re/.test(y)`) is read as
 * division, and a division right after `}` as a regular expression when
 * the line has another `/`.
 */
export function asSync(text) {
  const src = String(text);
  const tokens = tokenize(src);
  const match = matchBrackets(tokens);
  const last = tokens.length - 1;
  // A bracket's closing token; a template's tail (through its middles).
  const closeOf = (index) => {
    let close = match[index];
    while (close >= 0 && tokens[close].type === "templateMiddle") close = match[close];
    return close >= 0 ? close : last;
  };
  const edits = [];

  // The index of an operand's last token, the operand starting at `j`: a
  // unary expression (prefix operators, then a call or member chain or a
  // `new` expression, then a postfix ++ or --).
  function unary(j) {
    const token = tokens[j];
    if (!token) return j - 1;
    if ((token.type === "punct" && PREFIX_OPERATORS.has(token.value)) || (token.type === "name" && PREFIX_KEYWORDS.has(token.value))) {
      return unary(j + 1);
    }
    let end = chain(j, true);
    const next = tokens[end + 1];
    if (next && !next.nl && (isPunct(next, "++") || isPunct(next, "--"))) end++;
    return end;
  }

  function primary(j) {
    const token = tokens[j];
    if (!token) return j - 1;
    if (token.type === "punct" && (token.value === "(" || token.value === "[" || token.value === "{")) return closeOf(j);
    if (token.type === "templateHead") return closeOf(j);
    if (isName(token, "async") && isName(tokens[j + 1], "function") && !tokens[j + 1].nl) return primary(j + 1);
    if (isName(token, "function")) {
      let k = j + 1;
      if (isPunct(tokens[k], "*")) k++;
      if (isName(tokens[k])) k++;
      if (!isPunct(tokens[k], "(")) return j;
      k = closeOf(k) + 1;
      return isPunct(tokens[k], "{") ? closeOf(k) : k - 1;
    }
    if (isName(token, "class")) {
      let k = j + 1;
      while (k <= last && !isPunct(tokens[k], "{")) {
        if (tokens[k].type === "punct" && (tokens[k].value === "(" || tokens[k].value === "[")) k = closeOf(k);
        k++;
      }
      return k <= last ? closeOf(k) : last;
    }
    return j;
  }

  // A member or call chain from `j`; `calls` false for `new X.Y` before
  // its arguments.
  function chain(j, calls) {
    let end;
    if (isName(tokens[j], "new")) {
      if (isPunct(tokens[j + 1], ".")) {
        end = j + 2; // new.target
      } else {
        end = chain(j + 1, false);
        if (isPunct(tokens[end + 1], "(")) end = closeOf(end + 1);
      }
    } else {
      end = primary(j);
    }
    for (;;) {
      const next = tokens[end + 1];
      if (!next) break;
      if (isPunct(next, ".")) {
        end += 2;
      } else if (calls && isPunct(next, "?.")) {
        const after = tokens[end + 2];
        end = isPunct(after, "(") || isPunct(after, "[") ? closeOf(end + 2) : end + 2;
      } else if (isPunct(next, "[")) {
        end = closeOf(end + 1);
      } else if (calls && isPunct(next, "(")) {
        end = closeOf(end + 1);
      } else if (next.type === "template") {
        end += 1;
      } else if (next.type === "templateHead") {
        end = closeOf(end + 1);
      } else {
        break;
      }
    }
    return Math.min(end, last);
  }

  function isAsyncKeyword(i) {
    const prev = tokens[i - 1];
    const next = tokens[i + 1];
    if (!next || next.nl) return false;
    if (isName(next, "function")) return true;
    // async x => ..
    if (isName(next) && !NOT_OPERAND.has(next.value) && isPunct(tokens[i + 2], "=>") && !tokens[i + 2].nl) return true;
    // async (..) => ..
    if (isPunct(next, "(")) {
      const close = match[i + 1];
      return close >= 0 && isPunct(tokens[close + 1], "=>");
    }
    // async methods: async name(, async "name"(, async 1(, async #name(,
    // async [key](, async *name(
    const methodContext = !prev || (prev.type === "punct" && METHOD_CONTEXT.has(prev.value))
      || (isName(prev) && METHOD_KEYWORDS.has(prev.value));
    if ((next.type === "name" || next.type === "str" || next.type === "num" || next.type === "private")
      && isPunct(tokens[i + 2], "(")) return true;
    if (isPunct(next, "[") && methodContext) {
      const close = match[i + 1];
      return close >= 0 && isPunct(tokens[close + 1], "(");
    }
    if (isPunct(next, "*") && methodContext) return true;
    return false;
  }

  // `await(x) {` in a class or object: a method named await.
  function isMethodNamedAwait(i) {
    const prev = tokens[i - 1];
    if (prev && !(prev.type === "punct" && METHOD_CONTEXT.has(prev.value)) && !(isName(prev) && METHOD_KEYWORDS.has(prev.value))) {
      return false;
    }
    if (!isPunct(tokens[i + 1], "(")) return false;
    const close = match[i + 1];
    return close >= 0 && isPunct(tokens[close + 1], "{");
  }

  for (let i = 0; i <= last; i++) {
    const token = tokens[i];
    if (token.type !== "name" || (token.value !== "async" && token.value !== "await")) continue;
    const prev = tokens[i - 1];
    if (isPunct(prev, ".") || isPunct(prev, "?.")) continue; // x.async, x.await
    if (token.value === "async") {
      if (isAsyncKeyword(i)) edits.push({ start: token.start, end: token.end, text: "     " });
      continue;
    }
    if (isName(prev, "for") && isPunct(tokens[i + 1], "(")) {
      edits.push({ start: token.start, end: token.end, text: "     " }); // for await (
      continue;
    }
    if (!startsOperand(tokens[i + 1]) || isMethodNamedAwait(i)) continue;
    const end = unary(i + 1);
    if (end < i + 1) continue;
    // "await " (one space) becomes "__toolhost_await__(", the operand
    // follows on, and ")" closes it.
    const spaced = src[token.end] === " " && tokens[i + 1].start > token.end;
    edits.push({ start: token.start, end: token.end + (spaced ? 1 : 0), text: "__toolhost_await__(" });
    edits.push({ start: tokens[end].end, end: tokens[end].end, text: ")" });
  }

  edits.sort((a, b) => a.start - b.start || (a.end - a.start) - (b.end - b.start));
  let out = "";
  let at = 0;
  for (const edit of edits) {
    out += src.slice(at, edit.start) + edit.text;
    at = edit.end;
  }
  return out + src.slice(at);
}
