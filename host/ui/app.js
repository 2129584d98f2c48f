// The dashboard: tools with try-it, plugins live from /events, activity
// from the call ledger's summaries, publishing by drop or file input,
// writing a tool in the page (editor.js), connecting a client
// (connect.js), the room's view (room.js) and the person's skills
// (skills.js).
// Everything goes through the same REST routes as curl, with the token
// the person signs in with (kept in sessionStorage: this tab only).

import { el, pretty } from "./dom.js";
import { buildForm } from "./form.js";
import { initEditor, showEditor, editSource, onBuildEvent as editorBuildEvent, onLine as editorLine } from "./editor.js";
import { renderConnect } from "./connect.js";
import { showView, closeView } from "./views.js";
import { callAnswering, runTask, taskSupport } from "./asks.js";
import { loadSkills } from "./skills.js";
import { loadRoom, refresh as refreshRoom, onLine as roomLine, onPublish as roomPublish, onRemoved as roomRemoved, clearRoom, renderPeople, renderUnseen } from "./room.js";

const $ = (id) => document.getElementById(id);
const state = {
  token: sessionStorage.getItem("toolhost-token") || "",
  me: null,
  tools: [],
  plugins: new Map(),
  selected: null,
  readForm: null,
  // Each try-it call draws a number; one whose number is no longer the
  // last shows nothing (another call or tool was chosen since).
  calling: 0,
  lastEventId: null,
  events: null,
};

function headers(extra = {}) {
  const h = { ...extra };
  if (state.token) h.Authorization = `Bearer ${state.token}`;
  return h;
}

async function api(method, path, body, contentType, extra = {}) {
  const init = { method, headers: headers({ ...(contentType ? { "Content-Type": contentType } : {}), ...extra }) };
  if (body !== undefined) init.body = body;
  const response = await fetch(path, init);
  let json = null;
  try {
    json = await response.json();
  } catch {
    json = null;
  }
  return { status: response.status, json };
}

function setStatus(text) {
  $("status").textContent = text;
}

// ---- sign in ----------------------------------------------------------

async function signIn() {
  const { status, json } = await api("GET", "/me");
  if (status === 401 || status === 403) {
    // 403: a scrape-only token, which reads /metrics and nothing this
    // page shows.
    state.me = null;
    $("who").textContent = status === 403
      ? "This token may only read /metrics; sign in with another to use this page."
      : state.token
        ? "This server does not know that token."
        : "This server needs a token: paste yours and sign in.";
    showSignIn(true);
    $("signout").hidden = !state.token;
    $("publish-section").hidden = true;
    $("write-section").hidden = true;
    $("connect-section").hidden = true;
    clearRoom();
    setStatus("Signed out");
    $("token").focus();
    return false;
  }
  state.me = json;
  const role = json.role;
  $("who").textContent = json.name
    ? `Signed in as ${json.name} (${role}): you may ${mayDo(json)}.`
    : `Open server: you may ${mayDo(json)}.`;
  // An open server takes no token: no sign-in form to wonder about.
  // Signed in, the form shrinks to "Sign out".
  $("signin").hidden = !json.name && !state.token;
  showSignIn(!state.token);
  $("signout").hidden = !state.token;
  $("publish-section").hidden = role === "caller";
  $("publish-where").textContent = json.namespace
    ? `Your plugins go into namespace ${json.namespace}; their tools are served as ${json.namespace}__<tool>.`
    : "Plugins go to the top level of the server's folder.";
  showEditor(role === "caller" ? null : json);
  $("connect-section").hidden = false;
  renderConnect($("connect"), json, state.token);
  loadRoom(api, json).then(seedRejections);
  renderUnseen(json);
  return true;
}

/// What the person may do, from their role and their real tool set
/// (GET /me's `tools`: null is every tool).
function mayDo(me) {
  const sees = seesWhat(me);
  if (me.role === "admin") return `see and call ${sees}, publish anywhere, remove any plugin`;
  if (me.role === "publisher") return `see and call ${sees}, and publish into ${me.namespace}`;
  if (me.role === "caller") return `see and call ${sees} (not publish)`;
  return me.role;
}

function seesWhat(me) {
  if (!Array.isArray(me.tools)) return "every tool";
  const own = me.namespace ? `${me.namespace}/*` : null;
  // The server's own first, the person's own last.
  const order = (pattern) => (pattern === "*" ? 0 : pattern === own ? 2 : 1);
  const words = [...me.tools].sort((a, b) => order(a) - order(b)).map((pattern) => {
    if (pattern === own) return "your own tools";
    if (pattern === "*") return "the server's own tools";
    if (pattern === "**") return "every tool";
    const ns = pattern.match(/^([A-Za-z][A-Za-z0-9_-]*)\/\*$/);
    return ns ? `${ns[1]}'s tools` : `the tools of ${pattern}`;
  });
  if (!words.length) return "no tools";
  return words.length === 1 ? words[0] : `${words.slice(0, -1).join(", ")} and ${words[words.length - 1]}`;
}

/// Shows or hides the token field and its button (not "Sign out").
function showSignIn(shown) {
  for (const node of [$("token"), $("token").labels[0], $("signin-button")]) node.hidden = !shown;
}

$("signin").addEventListener("submit", async (event) => {
  event.preventDefault();
  state.token = $("token").value.trim();
  $("token").value = "";
  if (state.token) sessionStorage.setItem("toolhost-token", state.token);
  else sessionStorage.removeItem("toolhost-token");
  await start();
});

$("signout").addEventListener("click", async () => {
  state.token = "";
  sessionStorage.removeItem("toolhost-token");
  await start();
});

// ---- large type -------------------------------------------------------

function applyLargeType(on) {
  document.documentElement.classList.toggle("large", on);
  $("large-type").setAttribute("aria-pressed", String(on));
}
applyLargeType(localStorage.getItem("toolhost-large") === "1");
$("large-type").addEventListener("click", () => {
  const on = !document.documentElement.classList.contains("large");
  localStorage.setItem("toolhost-large", on ? "1" : "0");
  applyLargeType(on);
});

// ---- tools ------------------------------------------------------------

async function loadTools() {
  const { status, json } = await api("GET", "/tools");
  if (status !== 200 || !Array.isArray(json)) return;
  state.tools = json;
  renderTools();
}

function namespaceOf(name) {
  const at = name.indexOf("__");
  return at > 0 ? name.slice(0, at) : "";
}

function pluginOf(name) {
  for (const plugin of state.plugins.values()) {
    if ((plugin.tools || []).includes(name)) return plugin.id;
  }
  return "";
}

function renderTools() {
  const filter = $("filter").value.trim().toLowerCase();
  const list = $("tools");
  list.replaceChildren();
  for (const tool of state.tools) {
    const plugin = pluginOf(tool.name);
    const namespace = namespaceOf(tool.name);
    const haystack = `${tool.name} ${plugin} ${tool.description || ""}`.toLowerCase();
    if (filter && !haystack.includes(filter)) continue;
    const tryButton = el("button", { type: "button", class: "secondary", "aria-label": `Try ${tool.name}` }, "Try");
    tryButton.addEventListener("click", () => selectTool(tool.name));
    const meta = [plugin && `plugin ${plugin}`, namespace && `namespace ${namespace}`].filter(Boolean).join(" · ");
    const schemas = el("details", {},
      el("summary", {}, "Schemas"),
      el("pre", {}, `input: ${pretty(tool.inputSchema)}`),
      tool.outputSchema ? el("pre", {}, `output: ${pretty(tool.outputSchema)}`) : "");
    list.append(el("li", { "data-tool": tool.name },
      el("div", {}, el("span", { class: "name" }, tool.name), " ", tryButton),
      meta ? el("div", { class: "meta" }, meta) : "",
      el("div", { class: "description" }, tool.description || ""),
      schemas));
  }
  if (!list.children.length) {
    const empty = !state.me ? "Sign in to see the tools." : state.tools.length ? "No tool matches the filter." : "No tools are live yet.";
    list.append(el("li", {}, empty));
  }
}

$("filter").addEventListener("input", renderTools);

function selectTool(name) {
  const tool = state.tools.find((t) => t.name === name);
  if (!tool) return;
  state.selected = tool;
  // A call still running for the tool shown before stops showing itself.
  state.calling += 1;
  $("call").disabled = false;
  $("try-section").hidden = false;
  $("try-name").textContent = tool.name;
  $("try-description").textContent = tool.description || "";
  state.readForm = buildForm(tool.inputSchema || {}, $("try-fields"));
  $("raw").value = "{}";
  $("use-raw").checked = false;
  closeView();
  $("result").replaceChildren();
  const first = $("try-fields").querySelector("input, select, textarea");
  (first || $("call")).focus();
}

$("raw-details").addEventListener("toggle", () => {
  if ($("raw-details").open && !$("use-raw").checked && state.readForm) {
    try {
      $("raw").value = pretty(state.readForm());
    } catch {
      /* the form has a field that is not valid yet */
    }
  }
});

$("try-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  const tool = state.selected;
  if (!tool) return;
  const result = $("result");
  let body;
  try {
    body = $("use-raw").checked ? JSON.stringify(JSON.parse($("raw").value)) : JSON.stringify(state.readForm());
  } catch (error) {
    result.replaceChildren(el("p", { class: "bad" }, `Not sent: ${error.message}`));
    return;
  }
  const mine = ++state.calling;
  const alive = () => mine === state.calling;
  $("call").disabled = true;
  await closeView();
  result.replaceChildren(el("p", {}, "Calling…"));
  const started = performance.now();
  // What the tool asks is answered here; a task tool runs as a task.
  const args = JSON.parse(body);
  let answer;
  try {
    answer = taskSupport(tool)
      ? await runTask(api, tool, args, result, alive)
      : await callAnswering(api, tool, args, result, alive);
  } catch (error) {
    answer = { status: 0, json: null, failed: error };
  } finally {
    if (alive()) $("call").disabled = false;
  }
  const { status, json, task, stale } = answer;
  if (stale || !alive()) return;
  const took = performance.now() - started;
  showEnvelope(result, status, json, took);
  if (task) {
    result.prepend(el("p", { class: "task-ended", "data-status": task.status }, "Task ", el("code", {}, task.id), `: ${task.status}`));
  }
  // A tool with a view (MCP Apps): shown under the result, told the call.
  await showView(result, { tool, args, status, envelope: json, api, tools: () => state.tools, pluginOf });
});

function showEnvelope(target, status, envelope, took) {
  const parts = [];
  const failed = !envelope || envelope.isError;
  parts.push(el("p", { class: failed ? "bad" : "ok" },
    `${failed ? "Error" : "OK"} · HTTP ${status} · ${took.toFixed(1)} ms`));
  const cost = envelope && envelope.meta;
  if (cost && cost.cpuMs !== undefined) {
    parts.push(el("p", { class: "note cost" },
      `In the host ${cost.durationMs} ms · guest CPU ${cost.cpuMs} ms · fuel ${cost.fuel.toLocaleString()} · ` +
      `peak memory ${(cost.peakMemoryBytes / 1024).toFixed(0)} KiB · ${cost.code} code`));
  }
  if (envelope && envelope.error) {
    parts.push(el("p", {}, el("strong", {}, "Code: "), el("code", { class: "error-code" }, envelope.error.code)));
    parts.push(el("p", {}, el("strong", {}, "Message: "), envelope.error.message || ""));
    if (envelope.error.details !== undefined && envelope.error.details !== null) {
      parts.push(el("p", {}, el("strong", {}, "Details:")), el("pre", { class: "error-details" }, pretty(envelope.error.details)));
    }
  }
  for (const block of (envelope && envelope.content) || []) {
    if (block.type === "text") parts.push(el("pre", { class: "text-content" }, block.text));
    else parts.push(el("pre", {}, `${block.type} block: ${pretty(block).slice(0, 2000)}`));
  }
  if (envelope && envelope.structuredContent !== undefined && envelope.structuredContent !== null) {
    parts.push(el("p", {}, el("strong", {}, "Structured result:")), el("pre", { class: "structured" }, pretty(envelope.structuredContent)));
  }
  if (!envelope) parts.push(el("p", {}, "The server's answer was not JSON."));
  target.replaceChildren(...parts);
}

// ---- plugins and events ----------------------------------------------

function renderPlugins() {
  const body = $("plugins").querySelector("tbody");
  body.replaceChildren();
  const plugins = [...state.plugins.values()].sort((a, b) => a.id.localeCompare(b.id));
  for (const plugin of plugins) {
    const stateText = plugin.compiling ? "compiling" : plugin.state;
    const compiler = plugin.compiler ? ` (${plugin.compiler === "baseline" ? "baseline" : "optimised"} code)` : "";
    const cell = el("td", { class: `state-${stateText}` }, `${stateText}${compiler}`);
    if (plugin.reason) cell.append(el("div", { class: "reason" }, plugin.reason));
    if (plugin.state === "pending") renderHeld(plugin, cell);
    else if (plugin.serving) cell.append(el("div", { class: "note" }, "the previous version serves on"));
    const idCell = el("td", {}, plugin.id);
    if (plugin.builtFrom && mayEdit(plugin.id)) {
      const edit = el("button", { type: "button", class: "secondary", "aria-label": `Edit the source of ${plugin.id}` }, "Edit source");
      edit.addEventListener("click", () => editSource(plugin.id, plugin.builtFrom));
      idCell.append(" ", edit);
    }
    body.append(el("tr", { "data-plugin": plugin.id },
      idCell,
      cell,
      el("td", {}, (plugin.tools || []).join(", ")),
      publishedCell(plugin)));
  }
  if (!plugins.length) {
    const empty = state.me ? "No plugin files yet." : "Sign in to see the plugins.";
    body.append(el("tr", {}, el("td", { colspan: "4" }, empty)));
  }
}

/// A version held for approval (`--require-approval`): what changed from
/// the approved definitions, field by field, and for an admin the
/// buttons that decide (POST /plugins/{id}/approve or /refuse).
function renderHeld(plugin, cell) {
  cell.append(el("div", { class: "note" }, plugin.serving
    ? "the approved version serves until an admin decides"
    : "nothing of it serves until an admin approves"));
  const changes = el("ul", { class: "changes", "aria-label": `What changed in ${plugin.id}` });
  for (const change of (plugin.pending && plugin.pending.changes) || []) {
    const item = el("li", {}, `${change.change} ${change.kind} ${change.name}`);
    // What an added definition says, as a model will read it.
    if (change.pending && change.pending.description) {
      item.append(el("div", { class: "reason" }, `description: ${JSON.stringify(change.pending.description)}`));
    }
    for (const [field, values] of Object.entries(change.fields || {})) {
      item.append(el("div", { class: "reason" },
        `${field}: ${JSON.stringify(values.approved)} → ${JSON.stringify(values.pending)}`));
    }
    changes.append(item);
  }
  cell.append(changes);
  if (!state.me || state.me.role !== "admin") return;
  for (const [action, label] of [["approve", "Approve"], ["refuse", "Refuse"]]) {
    const button = el("button", {
      type: "button",
      class: action === "approve" ? "" : "secondary",
      "data-decide": action,
      "aria-label": `${label} ${plugin.id}`,
    }, label);
    button.addEventListener("click", () => decide(plugin.id, action, plugin.contentHash));
    cell.append(" ", button);
  }
}

/// Decides on the version shown (its hash): one held since is not.
async function decide(id, action, hash) {
  const shown = hash ? `?hash=${encodeURIComponent(hash)}` : "";
  const path = `/plugins/${id.split("/").map(encodeURIComponent).join("/")}/${action}${shown}`;
  const { status, json } = await api("POST", path);
  if (status === 200) setStatus(`${action === "approve" ? "Approved" : "Refused"}: ${id}`);
  else setStatus(`Could not ${action} ${id}: ${(json && json.error && json.error.message) || status}`);
}

/// Whether the signed-in person may read (and so edit) a plugin's source:
/// an admin, anyone on an open server, a publisher their own.
function mayEdit(id) {
  const me = state.me;
  if (!me || me.role === "caller") return false;
  if (me.role === "admin") return true;
  return Boolean(me.namespace) && id.startsWith(`${me.namespace}/`);
}

/// Who published a plugin and when, in the reader's local time (the
/// exact UTC instant on hover).
function publishedCell(plugin) {
  if (!plugin.publishedBy) return el("td", {}, "");
  const at = plugin.publishedAt ? new Date(plugin.publishedAt) : null;
  const when = at && !Number.isNaN(at.getTime())
    ? at.toLocaleString(undefined, { dateStyle: "short", timeStyle: "medium" })
    : "";
  return el("td", plugin.publishedAt ? { title: plugin.publishedAt } : {}, when ? `${plugin.publishedBy}, ${when}` : plugin.publishedBy);
}

function renderActivity(tools) {
  const body = $("activity").querySelector("tbody");
  body.replaceChildren();
  for (const tool of tools) {
    const outcomes = tool.outcomes || {};
    const calls = Object.values(outcomes).reduce((a, b) => a + b, 0);
    const errors = Object.entries(outcomes).filter(([code]) => code !== "ok").map(([code, n]) => `${code} ${n}`).join(", ");
    const ms = (v) => (v === null || v === undefined ? "" : v.toFixed(2));
    body.append(el("tr", {},
      el("td", {}, tool.tool || "(names that are not tools)"),
      el("td", {}, String(calls)),
      el("td", {}, errors),
      el("td", {}, ms(tool.recentP50Ms)),
      el("td", {}, ms(tool.recentP95Ms))));
  }
  if (!tools.length) body.append(el("tr", {}, el("td", { colspan: "5" }, "No calls yet.")));
  renderPeople(tools);
}

function onEvent(name, data) {
  if (name === "snapshot") {
    state.plugins = new Map((data.plugins || []).map((p) => [p.id, p]));
    renderPlugins();
    loadTools();
    loadSkills(api);
    // Files the server refused before this page opened.
    for (const plugin of state.plugins.values()) {
      if (plugin.state !== "rejected" || $("rejections").querySelector(`li[data-plugin="${CSS.escape(plugin.id)}"]`)) continue;
      const at = new Date(plugin.rejectedAt);
      noteRejection(plugin.id, plugin, "rejected", Number.isNaN(at.getTime()) ? new Date() : at);
    }
    return;
  }
  if (name === "calls") {
    renderActivity(data.tools || []);
    return;
  }
  if (name === "build") {
    editorBuildEvent(data);
    if (data.stage === "failed" && !(data.error || "").startsWith("a newer source")) {
      noteRejection(data.plugin, { reason: data.error }, "did not build");
    }
    return;
  }
  if (name === "publish") {
    roomPublish(data);
    return;
  }
  if (name === "skills") {
    loadSkills(api);
    return;
  }
  if (name === "line") {
    roomLine(data);
    editorLine(data);
    return;
  }
  if (!data || !data.plugin) return;
  // A refused upload is rejected, then its file goes: say so, not "Removed".
  const wasRejected = state.plugins.get(data.plugin)?.state === "rejected";
  if (name === "removed") {
    state.plugins.delete(data.plugin);
    roomRemoved(data.plugin);
  }
  else state.plugins.set(data.plugin, data.report);
  renderPlugins();
  if (["loaded", "replaced", "removed"].includes(name)) loadTools();
  if (name === "rejected") noteRejection(data.plugin, data.report);
  if (name === "rejected") setStatus(`Rejected: ${data.plugin}`);
  else if (name === "removed" && wasRejected) setStatus(`Rejected: ${data.plugin}; nothing of it stays`);
  else setStatus(`${name[0].toUpperCase()}${name.slice(1)}: ${data.plugin}`);
}

/// Keeps the last rejections in view: a refused upload leaves no file, so
/// its row goes again at once, but the instructor still sees it and why.
function noteRejection(plugin, report, what = "rejected", at = new Date()) {
  const list = $("rejections");
  const when = at.toLocaleTimeString();
  const reason = (report && report.reason) || "(its reason is its publisher's)";
  list.prepend(el("li", { "data-plugin": plugin },
    el("strong", {}, plugin), ` ${what} at ${when}: `, el("span", { class: "reason" }, reason)));
  while (list.children.length > 10) list.lastElementChild.remove();
  $("rejections-box").hidden = false;
}

/// The rejections the server remembers, for a page opened after them:
/// refused and failed publishes (GET /publishes), oldest first so that
/// the newest ends on top.
function seedRejections(publishes) {
  $("rejections").replaceChildren();
  $("rejections-box").hidden = true;
  const refused = (publishes || []).filter((p) => p.outcome === "refused" || p.outcome === "build_failed");
  for (const p of refused.slice(0, 10).reverse()) {
    const at = new Date(p.at);
    noteRejection(p.plugin, { reason: p.reason }, p.outcome === "refused" ? "rejected" : "did not build",
      Number.isNaN(at.getTime()) ? new Date() : at);
  }
}

/// Follows /events with fetch (an EventSource cannot send a token),
/// reconnecting with Last-Event-ID.
async function follow(generation) {
  while (generation === state.events) {
    try {
      const h = headers({ Accept: "text/event-stream" });
      if (state.lastEventId !== null) h["Last-Event-ID"] = state.lastEventId;
      const response = await fetch("/events", { headers: h });
      if (response.status !== 200) throw new Error(`HTTP ${response.status}`);
      setStatus("Live: this page follows the server as it changes");
      // What the room's view missed while this page was not listening.
      refreshRoom(api);
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { done, value } = await reader.read();
        if (done || generation !== state.events) break;
        buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const chunk = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          let name = "message";
          const data = [];
          for (const line of chunk.split("\n")) {
            if (line.startsWith("event:")) name = line.slice(6).trim();
            else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
            else if (line.startsWith("id:")) state.lastEventId = line.slice(3).trim();
          }
          if (!data.length) continue;
          let parsed;
          try {
            parsed = JSON.parse(data.join("\n"));
          } catch {
            continue; /* not JSON: an event this page does not know */
          }
          try {
            onEvent(name, parsed);
          } catch (error) {
            // A fault of this page, said where a developer looks; the
            // stream goes on.
            console.error(`the page could not show a ${name} event:`, error);
          }
        }
      }
    } catch {
      /* reconnect below */
    }
    if (generation !== state.events) return;
    setStatus("Reconnecting…");
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

// ---- publishing -------------------------------------------------------

async function publish(file) {
  const out = $("publish-result");
  const fromFile = file.name.replace(/\.wasm$/i, "").replace(/[^A-Za-z0-9_-]/g, "_");
  const name = $("publish-name").value.trim() || fromFile;
  const id = state.me && state.me.namespace ? `${state.me.namespace}/${name}` : name;
  out.replaceChildren(el("p", {}, `Publishing ${id}…`));
  const bytes = await file.arrayBuffer();
  const started = performance.now();
  const { status, json } = await api("PUT", `/plugins/${id.split("/").map(encodeURIComponent).join("/")}`, bytes, "application/wasm");
  const took = performance.now() - started;
  if (status === 200 || status === 201) {
    await loadTools();
    const tries = (json.tools || []).map((name) => {
      const button = el("button", { type: "button", class: "secondary", "aria-label": `Try ${name}` }, name);
      button.addEventListener("click", () => selectTool(name));
      return button;
    });
    out.replaceChildren(
      el("p", { class: "ok" }, `Live in ${took.toFixed(0)} ms: ${json.id}`),
      el("p", { class: "tries" }, "Tools (press one to try it): ", ...(tries.length ? tries : ["(none)"])));
  } else {
    const error = (json && json.error) || {};
    const reason = (error.details && error.details.reason) || error.message || `HTTP ${status}`;
    out.replaceChildren(
      el("p", { class: "bad" }, `Refused (HTTP ${status}${error.code ? `, ${error.code}` : ""})`),
      el("pre", { class: "reason" }, reason));
  }
}

// A file dropped anywhere on the page is published (when this person may
// publish); the browser never navigates away to show it.
const zone = $("dropzone");
const mayPublish = () => !$("publish-section").hidden;
document.addEventListener("dragover", (event) => {
  event.preventDefault();
  if (event.dataTransfer) event.dataTransfer.dropEffect = mayPublish() ? "copy" : "none";
  zone.classList.toggle("over", mayPublish());
});
document.addEventListener("dragleave", (event) => {
  if (!event.relatedTarget) zone.classList.remove("over");
});
document.addEventListener("drop", (event) => {
  event.preventDefault();
  zone.classList.remove("over");
  const file = event.dataTransfer && event.dataTransfer.files && event.dataTransfer.files[0];
  if (file && mayPublish()) publish(file);
});
$("file").addEventListener("change", () => {
  const file = $("file").files[0];
  if (file) publish(file);
  $("file").value = "";
});

// ---- start ------------------------------------------------------------

initEditor({
  api,
  headers,
  me: () => state.me,
  loadTools,
  selectTool,
});

async function start() {
  state.events = Symbol("events");
  state.lastEventId = null;
  const signedIn = await signIn();
  if (!signedIn) {
    state.tools = [];
    state.plugins = new Map();
    renderTools();
    renderPlugins();
    return;
  }
  await loadTools();
  loadSkills(api);
  follow(state.events);
}

start();
