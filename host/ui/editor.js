// "Write a tool": a publisher writes a Python or JavaScript tool in the
// page and publishes it as source (PUT /plugins/{namespace}/{name} with
// text/x-python or text/javascript). CodeMirror 6 (./vendor/codemirror.js,
// bundled from pinned packages) is the editor. A new tool starts from the
// template `toolhost new` writes, with a header for the browser; a failed
// build's line is marked in the editor; a tool that went live opens in
// try-it. One of the person's own source-built plugins loads back with
// "Edit source".
//
// One save is one publish, and only the newest one speaks: each publish
// is numbered (sent as Toolhost-Publish), an answer or a build stage of
// any but the newest is ignored, and the status beside Publish moves only
// forward (queued with its place in line, building, loading) until the
// newest publish ends, when it is cleared and the outcome shown.

import { el } from "./dom.js";
import {
  EditorView, basicSetup, EditorState, Compartment, keymap,
  python, javascript, setDiagnostics, lintGutter, indentWithTab,
} from "./vendor/codemirror.js";

const LANGUAGES = {
  python: { label: "Python", mime: "text/x-python", template: "/ui/templates/app.py", mode: python },
  js: { label: "JavaScript", mime: "text/javascript", template: "/ui/templates/app.js", mode: javascript },
  // The JavaScript template is TypeScript as it is; types are erased on the
  // server, every line kept.
  ts: { label: "TypeScript", mime: "text/typescript", template: "/ui/templates/app.js", mode: () => javascript({ typescript: true }) },
};

const NAME = /^[A-Za-z][A-Za-z0-9_-]{0,63}$/;

let context = null;
let view = null;
const languageMode = new Compartment();
const current = { language: "python", building: null, publish: null, stage: 0 };
/// This page's publishes: the newest number is the only one that speaks.
let published = 0;
const PAGE = Math.random().toString(36).slice(2, 10);
/// The stages of a build, in the order they come.
const STAGES = { queued: 1, building: 2, built: 3 };

/// This page's publishes the server is not yet known to have (its answer,
/// or a build event or the build line naming it), by number; and the
/// newest made. Each publish is sent only once the one before it is known
/// received, so that the server takes a page's publishes in the order they
/// were made, whatever order the network gives their requests (a later
/// save overtaken by an earlier one would be replaced by it). One not
/// known within RECEIPT_WAIT_MS of being sent (no /events) lets the next
/// go anyway.
const unreceived = new Map();
let lastMade = null;
const RECEIPT_WAIT_MS = 3000;

function received(publish) {
  const made = unreceived.get(publish);
  if (made) made.resolve();
}
/// Each load into the editor (a template, a plugin's source) takes the next
/// number; one whose fetch ends after a later load began is dropped, so a
/// slow template cannot overwrite a source opened after it.
let loads = 0;

const $ = (id) => document.getElementById(id);

/// Sets the panel up once; `ctx` gives the page's api, who is signed in,
/// and how to refresh and try tools.
export function initEditor(ctx) {
  context = ctx;
  const host = $("editor");
  view = new EditorView({
    parent: host,
    state: EditorState.create({
      doc: "",
      extensions: [
        basicSetup,
        lintGutter(),
        // CodeMirror writes its theme into a <style> element; the page's
        // CSP admits it by this page's nonce only.
        EditorView.cspNonce.of(document.querySelector('meta[name="style-nonce"]')?.content ?? ""),
        keymap.of([
          indentWithTab,
          { key: "Mod-s", preventDefault: true, run: () => { publishSource(); return true; } },
        ]),
        // Brackets close themselves; quotes do not (closing each quote of
        // a docstring's three doubled them). Before the language, so that
        // this is the data asked first.
        EditorState.languageData.of(() => [{ closeBrackets: { brackets: ["(", "[", "{"] } }]),
        languageMode.of(LANGUAGES.python.mode()),
        EditorView.contentAttributes.of({ "aria-label": "Source of the tool" }),
        // Text typed over a selection, or several lines at once, goes in
        // as a change of the editor's own: left to the browser, Chrome
        // keeps the look of what it replaces in a style attribute on each
        // new line, which the page's CSP refuses (and the editor redraws).
        EditorView.domEventHandlers({
          beforeinput(event, editor) {
            if (event.isComposing) return false;
            if (event.inputType !== "insertText" && event.inputType !== "insertReplacementText") return false;
            const text = event.data ?? event.dataTransfer?.getData("text/plain");
            if (text === null || text === undefined) return false;
            if (editor.state.selection.main.empty && !text.includes("\n")) return false;
            event.preventDefault();
            editor.dispatch(editor.state.update(editor.state.replaceSelection(text), { userEvent: "input.type", scrollIntoView: true }));
            return true;
          },
        }),
        // How many lines there are, for whoever reads the page (its tests).
        EditorView.updateListener.of((update) => {
          if (update.docChanged) update.view.dom.dataset.lines = String(update.state.doc.lines);
        }),
      ],
    }),
  });
  // Ctrl/Cmd-S anywhere in the panel publishes; never the browser's Save.
  // In the editor its own binding has published already (and prevented
  // the default): one save, one publish.
  $("write-section").addEventListener("keydown", (event) => {
    if (event.defaultPrevented) return;
    if ((event.ctrlKey || event.metaKey) && event.key.toLowerCase() === "s") {
      event.preventDefault();
      publishSource();
    }
  });
  $("write-new").addEventListener("click", () => startFromTemplate());
  $("write-publish").addEventListener("click", () => publishSource());
  $("write-language").addEventListener("change", () => setLanguage($("write-language").value));
}

/// Which languages this server builds for the person (GET /me's
/// `builds`); the panel shows only when there is one.
export function showEditor(me) {
  const builds = (me && me.builds) || [];
  const section = $("write-section");
  section.hidden = builds.length === 0;
  const select = $("write-language");
  select.replaceChildren(...builds.filter((b) => LANGUAGES[b]).map((b) => el("option", { value: b }, LANGUAGES[b].label)));
  if (builds.length && !builds.includes(current.language)) setLanguage(builds[0]);
  else if (builds.length) select.value = current.language;
}

function setLanguage(language) {
  current.language = language;
  $("write-language").value = language;
  view.dispatch({ effects: languageMode.reconfigure(LANGUAGES[language].mode()) });
}

function setSource(text) {
  view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } });
  clearMark();
}

function clearMark() {
  view.dispatch(setDiagnostics(view.state, []));
  view.dom.removeAttribute("data-error-line");
}

/// A new tool from the template `toolhost new` writes, named by the name
/// field (or `my_tool`), with a header for someone writing in the page.
async function startFromTemplate() {
  const name = $("write-name").value.trim() || "my_tool";
  if (!NAME.test(name)) return say("bad", "A name is letters, digits, _ or -, starting with a letter.");
  $("write-name").value = name;
  const load = ++loads;
  const response = await fetch(LANGUAGES[current.language].template);
  const template = await response.text();
  if (load !== loads) return;
  const filled = template.replaceAll("__NAME__", name).replaceAll("__ID__", name.replace(/-/g, "_"));
  setSource(forTheBrowser(filled, current.language, name));
  say("", `A new ${LANGUAGES[current.language].label} tool from the template: edit it, then Publish (Ctrl/Cmd-S).`);
  view.focus();
}

/// The template's header speaks of a terminal (toolhost dev, push, the
/// tests); in the page it says what Publish does instead.
function forTheBrowser(text, language, name) {
  const me = context.me();
  const served = me && me.namespace ? `${me.namespace}__${name}` : name;
  const lines = [
    `${name}: a tool you write in this page.`,
    "",
    "Publish (the button, or Ctrl/Cmd-S) sends this file to the server; it",
    `is live within a second as ${served}, under Tools on this page, where`,
    "Try calls it. Every MCP client you connect (see Connect a client)",
    "lists it too. A mistake marks its line here, and what served before",
    "serves on.",
    "",
  ];
  if (language === "python") {
    const end = text.indexOf('"""', 3);
    if (!text.startsWith('"""') || end < 0) return text;
    return ['"""' + lines[0], ...lines.slice(1),
      "A tool is a typed function with a docstring: the parameters' type hints",
      "become the input schema, a dataclass return type the output schema.",
      "Import what a tool needs at the top of the file: the standard library,",
      "and the packages your instructor added (toolhost packages add).",
      "",
      "To call a web API (an origin your instructor allowed):",
      "    from toolhost_plugin import config, http",
      "    answer = http.get(url, params={...}, headers={\"X-Api-Key\": config.get(\"api_key\")})",
      "    answer.raise_for_status(); data = answer.json()",
      '"""'].join("\n") + text.slice(end + 3);
  }
  const body = text.split("\n");
  let first = 0;
  while (first < body.length && body[first].startsWith("//") && !body[first].startsWith("// @ts-check")) first++;
  const header = [...lines, "A tool is a JSON Schema for its arguments and a `run` function: a string",
    "it returns is text, an object structured content.",
    "",
    "To call a web API (an origin your instructor allowed), make run async:",
    "  async run({ city }) { const answer = await fetch(url, { headers: { \"X-Api-Key\": config.get(\"api_key\") } });",
    "    return await answer.json(); }   // import { config } from \"./toolhost.js\""].map((line) => (line ? `// ${line}` : "//"));
  return [...header, ...body.slice(first)].join("\n");
}

/// Loads one of the person's own source-built plugins back (`id` is
/// `namespace/name`, `language` its `builtFrom`).
export async function editSource(id, language) {
  const load = ++loads;
  const response = await fetch(`/plugins/${id.split("/").map(encodeURIComponent).join("/")}/source`, {
    headers: context.headers(),
  });
  const source = await response.text();
  if (load !== loads) return;
  if (response.status !== 200) return say("bad", `Cannot load the source of ${id} (HTTP ${response.status}).`);
  setLanguage(language in LANGUAGES ? language : "python");
  setSource(source);
  $("write-name").value = id.split("/").pop();
  $("write-section").scrollIntoView({ block: "start" });
  say("", `The source ${id} serves from: edit it, then Publish.`);
  view.focus();
}

/// A build stage from /events: only the newest publish's, and only
/// forward (a `queued` again only moves its place in line).
export function onBuildEvent(event) {
  received(event.publish);
  if (!current.publish || event.publish !== current.publish) return;
  const rank = STAGES[event.stage];
  if (!rank || rank < current.stage) return;
  current.stage = rank;
  if (event.stage === "queued") return sayQueued(event.position, event.estimateSeconds);
  if (event.stage === "building") return say("", `Building on the server${estimate(event.estimateSeconds)}…`);
  say("", `Built in ${(event.seconds || 0).toFixed(1)} s; loading…`);
}

/// The build line from /events: the newest publish's place, while it waits.
export function onLine(line) {
  for (const entry of line.entries || []) received(entry.publish);
  if (!current.publish || current.stage !== STAGES.queued) return;
  const mine = (line.entries || []).find((entry) => entry.publish === current.publish);
  if (!mine) return;
  if (mine.stage === "building") {
    current.stage = STAGES.building;
    return say("", `Building on the server${estimate(mine.estimateSeconds)}…`);
  }
  sayQueued(mine.position, mine.estimateSeconds, line.waiting);
}

function sayQueued(position, seconds, waiting) {
  const place = position === 1 ? "next in line" : `number ${position} in line`;
  const of = waiting ? ` of ${waiting}` : "";
  say("", `Queued for a build: ${position ? place + of : "in line"}${estimate(seconds)}…`);
}

function estimate(seconds) {
  return Number.isFinite(seconds) ? `, live in about ${Math.max(1, Math.round(seconds))} s` : "";
}

async function publishSource() {
  const me = context.me();
  const name = $("write-name").value.trim();
  if (!NAME.test(name)) {
    $("write-name").focus();
    return say("bad", "Name the tool first: letters, digits, _ or -, starting with a letter.");
  }
  const text = view.state.doc.toString();
  if (!text.trim()) return say("bad", "There is nothing to publish: start from the template.");
  const id = me && me.namespace ? `${me.namespace}/${name}` : name;
  const language = LANGUAGES[current.language];
  const number = ++published;
  current.building = id;
  current.publish = `${PAGE}-${number}`;
  current.stage = 0;
  clearMark();
  say("", `Publishing ${id}…`);
  const started = performance.now();
  const before = lastMade;
  let settle;
  const mine = { publish: current.publish, done: new Promise((resolve) => { settle = resolve; }) };
  mine.resolve = () => {
    settle();
    unreceived.delete(mine.publish);
  };
  unreceived.set(mine.publish, mine);
  lastMade = mine;
  if (before) await before.done;
  setTimeout(mine.resolve, RECEIPT_WAIT_MS);
  let answer;
  try {
    answer = await context.api("PUT", `/plugins/${id.split("/").map(encodeURIComponent).join("/")}`, text, language.mime,
      { "Toolhost-Publish": mine.publish });
  } catch {
    mine.resolve();
    if (number !== published) return;
    current.building = null;
    current.publish = null;
    current.stage = 0;
    return say("bad", "The server did not answer: nothing was published. Publish again once it is back.");
  }
  mine.resolve();
  const { status, json } = answer;
  // A newer publish from this page speaks instead.
  if (number !== published) return;
  current.building = null;
  current.publish = null;
  current.stage = 0;
  $("write-status").textContent = "";
  $("write-status").className = "";
  const took = ((performance.now() - started) / 1000).toFixed(1);
  if (status === 200 || status === 201) {
    await context.loadTools();
    if (number !== published) return;
    const build = json.build || {};
    const tries = (json.tools || []).map((tool) => {
      const button = el("button", { type: "button", class: "secondary", "aria-label": `Try ${tool}` }, tool);
      button.addEventListener("click", () => context.selectTool(tool));
      return button;
    });
    const notes = (build.notes || []).map((note) => el("p", { class: "note" }, note));
    $("write-result").replaceChildren(
      el("p", { class: "ok", "data-publish": String(number) }, build.servedBy === "build"
        ? `Live in ${took} s (built in ${(build.seconds || 0).toFixed(1)} s): ${json.id}`
        : `Live in ${took} s: ${json.id}`),
      el("p", { class: "tries" }, "Tools (press one to try it): ", ...(tries.length ? tries : ["(none)"])),
      ...notes);
    if (json.tools && json.tools.length) context.selectTool(json.tools[0]);
    return;
  }
  const error = (json && json.error) || {};
  const details = error.details || {};
  const parts = [el("p", { class: "bad", "data-publish": String(number) }, `Not live (HTTP ${status}${error.code ? `, ${error.code}` : ""}); what served before serves on.`)];
  parts.push(el("pre", { class: "reason", id: "write-error" }, error.message || `HTTP ${status}`));
  if (details.log) {
    parts.push(el("details", {}, el("summary", {}, "The build's log"), el("pre", { class: "build-log" }, details.log)));
  }
  $("write-result").replaceChildren(...parts);
  const line = details.line;
  if (Number.isInteger(line) && line >= 1 && line <= view.state.doc.lines) {
    const at = view.state.doc.line(line);
    view.dispatch(setDiagnostics(view.state, [{
      from: at.from,
      to: at.to,
      severity: "error",
      message: error.message || "the build failed here",
    }]));
    view.dispatch({ selection: { anchor: at.from }, scrollIntoView: true });
    view.dom.setAttribute("data-error-line", String(line));
  }
}

function say(kind, text) {
  const status = $("write-status");
  status.className = kind;
  status.textContent = text;
  if (kind === "bad") $("write-result").replaceChildren();
}
