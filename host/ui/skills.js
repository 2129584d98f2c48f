// The person's skills (GET /skills): each one they see, with its
// namespace, description and files, its SKILL.md shown as text when
// opened; and why theirs that do not serve do not (refused with the
// line, or waiting for an admin's approval). Nothing a skill says is
// parsed as HTML (dom.js).

import { el } from "./dom.js";

const $ = (id) => document.getElementById(id);

// Each load draws a number; an answer whose number is no longer the last
// draws nothing (a newer load was asked for since).
let loading = 0;

export async function loadSkills(api) {
  const mine = ++loading;
  const { status, json } = await api("GET", "/skills");
  if (mine !== loading) return;
  const list = $("skills");
  const notes = $("skills-not-serving");
  list.replaceChildren();
  notes.replaceChildren();
  if (status !== 200 || !json) {
    list.append(el("li", {}, "Skills cannot be read with this token."));
    return;
  }
  for (const skill of json.skills || []) list.append(skillItem(api, skill));
  if (!(json.skills || []).length) {
    list.append(el("li", { class: "note" }, "No skill yet. Put a folder with a SKILL.md into skills/ of your namespace, or PUT one to /skills/{namespace}/{name}."));
  }
  for (const skill of json.notServing || []) {
    const where = skill.namespace ? `${skill.namespace}/${skill.name}` : skill.name;
    const why = skill.state === "pending" ? "waits for an admin's approval" : skill.reason;
    notes.append(el("li", { "data-skill": where, class: skill.state }, el("span", { class: "name" }, where), ` ${skill.state}: `, why));
  }
  $("skills-not-serving-box").hidden = !(json.notServing || []).length;
}

function skillItem(api, skill) {
  const where = skill.namespace ? `namespace ${skill.namespace}` : "the room's";
  const files = (skill.files || []).map((file) => `${file.path} (${file.size} bytes)`).join(", ");
  const text = el("pre", { class: "skill-text" });
  const details = el("details", {}, el("summary", {}, "SKILL.md and files"), el("div", { class: "meta" }, files), text);
  // The text is fetched when it is first opened, as an agent loads it.
  details.addEventListener("toggle", async () => {
    if (!details.open || text.dataset.loaded) return;
    const path = skill.namespace ? `/skills/${encodeURIComponent(skill.namespace)}/${encodeURIComponent(skill.name)}` : `/skills/${encodeURIComponent(skill.name)}`;
    const { status, json } = await api("GET", path);
    text.textContent = status === 200 && json ? json.text : `Cannot read it (${status}).`;
    text.dataset.loaded = "1";
  });
  return el("li", { "data-skill": skill.uri },
    el("div", {}, el("span", { class: "name" }, skill.name), " ", el("code", {}, skill.uri)),
    el("div", { class: "meta" }, where),
    el("div", { class: "description" }, skill.description || ""),
    details);
}
