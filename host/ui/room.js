// The room's present ("Now"): one row per plugin, its newest publish or
// where its build is (queued with its place in line, building with its
// seconds, each with an estimate from the server's recent build times),
// failures with a short reason that expands, earlier publishes folded
// under the row, and no cap that hides the present. GET /publishes gives
// what the server kept (`latest`, `publishes`, `line`); `publish` and
// `line` events from /events keep it live. The header counts what waits. Per
// person, the calls of their tools (the call ledger's summaries). A person
// sees their own plugins first; reasons only for their own (the server
// leaves out the others'), all of them for an admin.

import { el } from "./dom.js";

const $ = (id) => document.getElementById(id);
let latest = [];
let history = [];
let line = { waiting: 0, building: 0, entries: [] };
let lineAt = 0;
let mine = null;
let ticking = null;
/// As many earlier publishes as the server keeps.
const HISTORY = 200;

/// Loads what the server kept, for `me` (GET /me's answer); answers the
/// history (newest first).
export async function loadRoom(api, me) {
  mine = me && me.namespace ? `${me.namespace}/` : null;
  await refresh(api);
  return history;
}

/// A plugin that went live or was refused, or a build that ended:
/// what the server kept, again.
export async function refresh(api) {
  const { status, json } = await api("GET", "/publishes");
  if (status !== 200 || !json) return;
  history = (Array.isArray(json.publishes) ? json.publishes : []).slice(0, HISTORY);
  latest = Array.isArray(json.latest) ? json.latest : [];
  if (json.line) onLine(json.line);
  else render();
}

/// A publish's outcome as the server noted it (a `publish` event): the
/// plugin's row is its newest, and the one before folds under it.
export function onPublish(noted) {
  latest = [noted, ...latest.filter((p) => p.plugin !== noted.plugin)];
  history = [noted, ...history].slice(0, HISTORY);
  render();
}

/// A plugin removed: no longer the room's present.
export function onRemoved(plugin) {
  const before = latest.length;
  latest = latest.filter((p) => p.plugin !== plugin);
  if (latest.length !== before) render();
}

/// Signed out: nothing of the room stays on the page.
export function clearRoom() {
  latest = [];
  history = [];
  line = { waiting: 0, building: 0, entries: [] };
  mine = null;
  render();
  renderUnseen(null);
}

/// The build line now (a `line` event, or GET /publishes's).
export function onLine(now) {
  line = { waiting: now.waiting || 0, building: now.building || 0, entries: now.entries || [] };
  lineAt = performance.now();
  render();
}

function seconds(value) {
  return value + (performance.now() - lineAt) / 1000;
}

function place(n, of) {
  return n === 1 ? `next of ${of}` : `place ${n} of ${of}`;
}

function render() {
  renderHeader();
  const body = $("publishes").querySelector("tbody");
  // What the reader opened stays open across the redraw (every second
  // while something waits).
  const open = new Set([...body.querySelectorAll("details[open]")].map((node) => node.dataset.key));
  body.replaceChildren();
  const rows = new Map();
  for (const noted of latest) rows.set(noted.plugin, { plugin: noted.plugin, by: noted.by, noted });
  // A plugin may have a build running and a newer save queued behind it:
  // the row shows both, the newest deciding its place.
  for (const entry of line.entries) {
    const row = rows.get(entry.plugin) || { plugin: entry.plugin, by: entry.by };
    row.entries = [...(row.entries || []), entry];
    row.entry = entry;
    rows.set(entry.plugin, row);
  }
  // What waits first (in line order), then who is stuck, then the rest,
  // newest first; the reader's own plugins ahead within each.
  const rank = (row) => (row.entry ? (row.entry.stage === "building" ? 0 : 1) : row.noted && isFailure(row.noted.outcome) ? 2 : 3);
  const ordered = [...rows.values()].sort((a, b) =>
    rank(a) - rank(b)
    || (mine ? Number(!a.plugin.startsWith(mine)) - Number(!b.plugin.startsWith(mine)) : 0)
    || ((a.entry && b.entry) ? (a.entry.position || 0) - (b.entry.position || 0) : 0)
    || String((b.noted || {}).at || "").localeCompare(String((a.noted || {}).at || "")));
  for (const row of ordered) body.append(renderRow(row));
  for (const node of body.querySelectorAll("details[data-key]")) node.open = open.has(node.dataset.key);
  if (!ordered.length) body.append(el("tr", {}, el("td", { colspan: "5" }, "Nothing published since the server started.")));
  const waiting = line.entries.length > 0;
  if (waiting && !ticking) ticking = setInterval(render, 1000);
  if (!waiting && ticking) {
    clearInterval(ticking);
    ticking = null;
  }
}

function isFailure(outcome) {
  return outcome === "build_failed" || outcome === "refused";
}

function renderRow(row) {
  const own = Boolean(mine && row.plugin.startsWith(mine));
  const entry = row.entry;
  let state;
  let outcome;
  if (entry) {
    outcome = entry.stage;
    state = row.entries.map((one) => {
      if (one.stage === "building") return el("div", {}, `building · ${Math.round(seconds(one.seconds))} s`);
      const estimate = Number.isFinite(one.estimateSeconds) ? ` · live in about ${Math.max(1, Math.round(one.estimateSeconds))} s` : "";
      return el("div", {}, `queued · ${place(one.position, line.waiting)} · waiting ${Math.round(seconds(one.seconds))} s${estimate}`);
    });
  } else {
    const noted = row.noted;
    outcome = noted.outcome;
    const words = { live: "live", refused: "refused", build_failed: "failed", replaced: "replaced by a newer source", pending: "waits for an admin" }[noted.outcome] || noted.outcome;
    const how = noted.language ? ` (${noted.language}${noted.buildSeconds !== undefined && noted.buildSeconds !== null ? `, built in ${Number(noted.buildSeconds).toFixed(1)} s` : ""})` : "";
    state = [`${words}${noted.line ? ` · line ${noted.line}` : ""}${how}`];
    if (noted.reason) state.push(reason(noted.reason, row.plugin));
  }
  const at = row.noted ? new Date(row.noted.at) : null;
  const since = entry ? new Date(entry.since) : at;
  const when = since && !Number.isNaN(since.getTime()) ? since.toLocaleTimeString() : "";
  const earlier = history.filter((p) => p.plugin === row.plugin).slice(row.noted ? 1 : 0);
  return el("tr", { "data-plugin": row.plugin, "data-outcome": outcome, class: own ? "mine" : "" },
    el("td", {}, row.plugin),
    el("td", {}, row.by || ""),
    el("td", { class: `outcome-${outcome}` }, ...state),
    el("td", { title: entry ? entry.since : (row.noted && row.noted.at) || "" }, when),
    el("td", {}, earlier.length ? folded(earlier, row.plugin) : ""));
}

/// A reason's first line, the whole of it on a click.
function reason(text, plugin) {
  const first = text.split("\n")[0];
  const short = first.length > 90 ? `${first.slice(0, 89)}…` : first;
  if (short === text) return el("div", { class: "reason" }, text);
  return el("details", { class: "reason", "data-key": `${plugin} reason` }, el("summary", {}, short), el("pre", {}, text));
}

function folded(earlier, plugin) {
  const items = earlier.map((p) => {
    const at = new Date(p.at);
    const when = Number.isNaN(at.getTime()) ? p.at : at.toLocaleTimeString();
    const words = { live: "live", refused: "refused", build_failed: "failed", replaced: "replaced", pending: "held" }[p.outcome] || p.outcome;
    return el("li", {}, `${when}: ${words}${p.line ? ` (line ${p.line})` : ""}`);
  });
  return el("details", { "data-key": `${plugin} earlier` }, el("summary", {}, `${earlier.length} earlier`), el("ul", {}, ...items));
}

/// The header's count of what waits (everyone's, whoever reads it).
function renderHeader() {
  const node = $("waiting");
  const parts = [];
  if (line.waiting) parts.push(`${line.waiting} waiting`);
  if (line.building) parts.push(`${line.building} building`);
  const text = parts.length ? `Builds: ${parts.join(", ")}` : "";
  // Said again only when it changes (it is read aloud).
  if (node.textContent !== text) node.textContent = text;
  node.hidden = !text;
}

/// For an admin: the top-level plugins people of the tokens file do not
/// see (GET /me's `unseenTopLevel`).
export function renderUnseen(me) {
  const box = $("unseen");
  const unseen = (me && me.unseenTopLevel) || [];
  box.hidden = !unseen.length;
  box.replaceChildren(...unseen.map((u) => el("p", { "data-unseen": u.plugin },
    el("strong", {}, u.plugin),
    ` is at the top level, outside the tool set of ${u.people.length === 1 ? "one person" : `${u.people.length} people`} (${u.people.slice(0, 3).join(", ")}${u.people.length > 3 ? ", …" : ""}): they never see its tools. Add "*" to their group's tools, or publish it into your own namespace.`)));
}

/// The calls of each person's tools (a tool `ns__name` is person `ns`'s;
/// the rest are the server's own).
export function renderPeople(tools) {
  const people = new Map();
  for (const tool of tools) {
    const name = tool.tool || "";
    const at = name.indexOf("__");
    const person = at > 0 ? name.slice(0, at) : "(the server's own)";
    const outcomes = tool.outcomes || {};
    const calls = Object.values(outcomes).reduce((a, b) => a + b, 0);
    const errors = Object.entries(outcomes).filter(([code]) => code !== "ok").reduce((a, [, n]) => a + n, 0);
    const row = people.get(person) || { calls: 0, errors: 0, tools: 0 };
    row.calls += calls;
    row.errors += errors;
    row.tools += 1;
    people.set(person, row);
  }
  const body = $("people").querySelector("tbody");
  body.replaceChildren();
  for (const [person, row] of [...people.entries()].sort((a, b) => b[1].calls - a[1].calls)) {
    body.append(el("tr", { "data-person": person },
      el("td", {}, person),
      el("td", {}, String(row.tools)),
      el("td", {}, String(row.calls)),
      el("td", {}, String(row.errors))));
  }
  if (!people.size) body.append(el("tr", {}, el("td", { colspan: "4" }, "No calls yet.")));
}
