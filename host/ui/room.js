// The room's view: who published what and when, each publish's build time
// and outcome (GET /publishes, kept by the server, then `build` events and
// load events as they come), and per person the calls of their tools (the
// call ledger's summaries, grouped by namespace). A person sees their own
// publishes first; reasons only for their own (the server leaves out the
// others'), all of them for an admin.

import { el } from "./dom.js";

const $ = (id) => document.getElementById(id);
let publishes = [];
let mine = null;

/// Loads what the server kept, for `me` (GET /me's answer).
export async function loadRoom(api, me) {
  mine = me && me.namespace ? `${me.namespace}/` : null;
  const { status, json } = await api("GET", "/publishes");
  publishes = status === 200 && json && Array.isArray(json.publishes) ? json.publishes : [];
  renderPublishes();
  return publishes;
}

/// A build's end, from /events, as a row until the next load of the list.
export function onBuildEvent(event) {
  if (event.stage !== "failed") return;
  publishes.unshift({
    plugin: event.plugin,
    by: event.person,
    at: new Date().toISOString(),
    outcome: event.error && event.error.startsWith("a newer source") ? "replaced" : "build_failed",
    language: event.language,
    buildSeconds: event.seconds,
    reason: event.error,
    line: event.line,
  });
  renderPublishes();
}

/// A plugin that went live or was refused: refresh the list from the
/// server (it has the who and when).
export async function refresh(api) {
  const { status, json } = await api("GET", "/publishes");
  if (status === 200 && json && Array.isArray(json.publishes)) {
    publishes = json.publishes;
    renderPublishes();
  }
}

function renderPublishes() {
  const body = $("publishes").querySelector("tbody");
  body.replaceChildren();
  const ordered = mine
    ? [...publishes.filter((p) => p.plugin.startsWith(mine)), ...publishes.filter((p) => !p.plugin.startsWith(mine))]
    : publishes;
  for (const p of ordered.slice(0, 50)) {
    const at = new Date(p.at);
    const when = Number.isNaN(at.getTime()) ? p.at : at.toLocaleTimeString();
    const outcome = { live: "live", refused: "refused", build_failed: "build failed", replaced: "replaced by a newer source" }[p.outcome] || p.outcome;
    const reason = p.reason ? el("div", { class: "reason" }, p.line ? `line ${p.line}: ${p.reason}` : p.reason) : "";
    body.append(el("tr", { "data-plugin": p.plugin, "data-outcome": p.outcome },
      el("td", {}, p.plugin),
      el("td", {}, p.by),
      el("td", { title: p.at }, when),
      el("td", {}, p.language ? `${p.language}${p.buildSeconds !== undefined && p.buildSeconds !== null ? `, ${Number(p.buildSeconds).toFixed(1)} s` : ""}` : "component"),
      el("td", { class: `outcome-${p.outcome}` }, outcome, reason)));
  }
  if (!ordered.length) body.append(el("tr", {}, el("td", { colspan: "5" }, "Nothing published since the server started.")));
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
