// What a tool asks while it runs, answered on the page, and a tool that
// runs as a task, followed there: over REST, as any client would.
// - A call says what the page can answer (`Toolhost-Input: elicitation,
//   sampling, roots`). An input-required answer shows each request: an
//   elicitation as a form made from its requested schema (accept, decline,
//   cancel), a sampling request's messages with a reply written by hand
//   (or refused: the call is not made again), the roots the person names
//   (none by default). The call is then made again with the answers and
//   the signed `requestState`.
// - A tool that runs as a task is called with `Prefer: respond-async`; the
//   page reads the task (`GET /tasks/{id}`) at the interval it says,
//   shows its status, answers what it waits for (`POST /tasks/{id}`), lets
//   the person cancel it (`DELETE`), and hands back its result.
// Every text a tool sends is set as text.

import { el, pretty } from "./dom.js";
import { buildForm } from "./form.js";

const INPUT = "elicitation, sampling, roots";

/** The task support a tool declares (`execution.taskSupport`), if any. */
export function taskSupport(tool) {
  const support = tool?.execution?.taskSupport;
  return support === "optional" || support === "required" ? support : null;
}

/** What a call becomes once the page has moved on (another call, another
 * tool): nothing to show. */
const STALE = Object.freeze({ status: 0, json: null, stale: true });

/** Calls `tool` with `args`, answering in `target` each round of input
 * it asks for; the last answer (`{status, json}`), or a refusal's. It stops
 * as soon as `alive()` is false. */
export async function callAnswering(api, tool, args, target, alive) {
  let headers = { "Toolhost-Input": INPUT };
  let body = JSON.stringify(args);
  for (;;) {
    const answer = await api("POST", `/tools/${encodeURIComponent(tool.name)}`, body, "application/json", headers);
    if (!alive()) return STALE;
    if (answer.json?.resultType !== "input_required") return answer;
    const responses = await answerRequests(answer.json.inputRequests ?? {}, target);
    if (!alive()) return STALE;
    if (!responses) return refused("You refused what the tool asked: it was not called again.");
    headers = { "Toolhost-Request-State": answer.json.requestState };
    body = JSON.stringify({ arguments: args, inputResponses: responses });
  }
}

/** Runs `tool` as a task, its status in `target`; its result as a call's
 * answer (`{status, json}`). It stops following the task (which runs on)
 * as soon as `alive()` is false. */
export async function runTask(api, tool, args, target, alive) {
  const created = await api("POST", `/tools/${encodeURIComponent(tool.name)}`, JSON.stringify(args),
    "application/json", { Prefer: "respond-async" });
  if (!alive()) return STALE;
  if (created.status !== 202 || !created.json?.taskId) return created;
  const id = created.json.taskId;
  const path = `/tasks/${encodeURIComponent(id)}`;
  const status = el("p", { class: "task-status", role: "status" }, "Task created");
  const cancel = el("button", { type: "button", class: "secondary", id: "task-cancel" }, "Cancel the task");
  const box = el("div", { class: "task", "data-task": id }, el("p", {}, "Task ", el("code", {}, id)), status, cancel);
  const asks = el("div", { class: "task-asks" });
  box.append(asks);
  target.append(box);
  let stopAsking = null;
  cancel.addEventListener("click", async () => {
    cancel.disabled = true;
    await api("DELETE", path);
    stopAsking?.();
  });
  const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  try {
    for (;;) {
      const read = await api("GET", path);
      if (!alive()) return STALE;
      const task = read.json;
      if (read.status !== 200 || !task) return read;
      status.textContent = `Status: ${task.status}${task.statusMessage ? ` · ${task.statusMessage}` : ""}`;
      status.dataset.status = task.status;
      const ended = { id, status: task.status };
      if (task.status === "completed") return { status: 200, json: task.result, task: ended };
      if (task.status === "failed") {
        const error = task.error?.data ?? { code: String(task.error?.code ?? "FAILED"), message: task.error?.message ?? "" };
        return { status: 200, json: { isError: true, error, content: [{ type: "text", text: `Error: ${error.message ?? ""}` }] }, task: ended };
      }
      if (task.status === "cancelled") return { ...refused("The task was cancelled."), task: ended };
      const wait = Math.min(Math.max(Number(task.pollIntervalMs) || 500, 200), 2000);
      if (task.status === "input_required" && task.inputRequests) {
        const stop = new Promise((resolve) => { stopAsking = () => resolve(undefined); });
        const responses = await Promise.race([answerRequests(task.inputRequests, asks), stop]);
        stopAsking = null;
        asks.replaceChildren();
        if (!alive()) return STALE;
        if (responses === null) {
          // Refused (or not answerable here): the task is cancelled, not
          // asked again and again.
          await api("DELETE", path);
          status.textContent = "You refused what the task asked: it was cancelled.";
        } else if (responses) {
          const sent = await api("POST", path, JSON.stringify({ inputResponses: responses }), "application/json");
          if (sent.status !== 200) {
            asks.append(el("p", { class: "bad" }, `The answer was refused (HTTP ${sent.status}): ${sent.json?.error?.message ?? ""}`));
          }
        }
      }
      await pause(wait);
    }
  } finally {
    cancel.disabled = true;
  }
}

function refused(text) {
  return { status: 200, json: { isError: true, content: [{ type: "text", text }] } };
}

/** Each request answered in turn in `target`; `{key: result}`, or null if
 * the person refused one. */
async function answerRequests(requests, target) {
  const responses = {};
  for (const [key, request] of Object.entries(requests)) {
    const box = el("fieldset", { class: "ask", "data-ask": key, "data-method": request?.method ?? "" });
    target.append(box);
    try {
      const answer = await answerOne(request ?? {}, box);
      if (answer === null) return null;
      responses[key] = answer;
    } finally {
      box.remove();
    }
  }
  return responses;
}

function answerOne({ method, params = {} }, box) {
  return new Promise((resolve) => {
    const button = (label, action, secondary = true) => {
      const node = el("button", { type: "button", class: secondary ? "secondary" : "", "data-action": action }, label);
      return node;
    };
    if (method === "elicitation/create") {
      box.append(el("legend", {}, "The tool asks you"), el("p", { class: "ask-message" }, params.message ?? ""));
      if (params.mode === "url") {
        box.append(el("p", {}, "It asks you to open: ", el("code", {}, String(params.url ?? ""))));
      }
      const fields = el("div", { class: "ask-fields" });
      box.append(fields);
      const read = params.mode === "url" ? () => undefined : buildForm(params.requestedSchema ?? { type: "object" }, fields);
      const problem = el("p", { class: "bad" });
      const accept = button("Accept", "accept", false);
      const decline = button("Decline", "decline");
      const cancel = button("Cancel", "cancel");
      box.append(el("p", {}, accept, " ", decline, " ", cancel), problem);
      accept.addEventListener("click", () => {
        try {
          const content = read();
          resolve(content === undefined ? { action: "accept" } : { action: "accept", content });
        } catch (error) {
          problem.textContent = error.message;
        }
      });
      decline.addEventListener("click", () => resolve({ action: "decline" }));
      cancel.addEventListener("click", () => resolve({ action: "cancel" }));
    } else if (method === "sampling/createMessage") {
      box.append(el("legend", {}, "The tool asks for a model's reply"));
      if (params.systemPrompt) box.append(el("p", {}, el("strong", {}, "System: "), params.systemPrompt));
      for (const message of params.messages ?? []) {
        const text = message?.content?.type === "text" ? message.content.text : pretty(message?.content);
        box.append(el("p", {}, el("strong", {}, `${message?.role ?? "?"}: `), text));
      }
      const id = `reply-${Math.random().toString(36).slice(2)}`;
      const reply = el("textarea", { id, rows: 3 });
      const send = button("Send this reply", "send", false);
      const refuse = button("Refuse", "refuse");
      box.append(el("label", { for: id }, "Your reply"), reply, el("p", {}, send, " ", refuse));
      send.addEventListener("click", () => resolve({
        role: "assistant",
        content: { type: "text", text: reply.value },
        model: "a person on the toolhost page",
        stopReason: "endTurn",
      }));
      refuse.addEventListener("click", () => resolve(null));
    } else if (method === "roots/list") {
      const id = `roots-${Math.random().toString(36).slice(2)}`;
      const roots = el("textarea", { id, rows: 2, placeholder: "file:///home/me/project (one a line; none is fine)" });
      const send = button("Send these roots", "send", false);
      box.append(el("legend", {}, "The tool asks for your roots"), el("label", { for: id }, "Roots"), roots, el("p", {}, send));
      send.addEventListener("click", () => resolve({
        roots: roots.value.split("\n").map((line) => line.trim()).filter(Boolean).map((uri) => ({ uri })),
      }));
    } else {
      box.append(el("p", { class: "bad" }, `The tool asks for ${method}, which this page cannot answer.`));
      resolve(null);
    }
  });
}
