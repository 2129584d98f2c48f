// A tool's view (MCP Apps) in try-it. The view's HTML is read with the
// person's token, as any resource is, and runs in a frame of its own
// (/ui/view-frame): a sandboxed, opaque origin under the CSP its `_meta`
// declares and nothing more, so it reads nothing of this page (the token,
// its storage) and fetches from no origin it did not declare. The official
// ext-apps AppBridge speaks the extension's protocol to it: the view is
// told the call's input and result, and its own tool calls are this
// page's REST calls, with the person's token and tool set (a tool the
// server does not show them answers as one that does not exist; a tool
// whose visibility leaves the app out is refused here). A view reaches the
// tools of its own plugin only, and, in a namespace, the resources under
// its namespace's authority only. A view that loads another page in its
// frame (which no CSP can forbid) is closed at once.

import { AppBridge, PostMessageTransport, getToolUiResourceUri, isToolVisibilityModelOnly } from "./vendor/app-bridge.js";
import { el } from "./dom.js";

let current = null;
// Each view shown draws a number; a view whose number is no longer the
// last stops wherever it is (another call, another tool).
let generation = 0;

/** The `ui://` URI of the tool's view, if it has one. */
export function viewOf(tool) {
  return getToolUiResourceUri(tool);
}

/** Ends the view shown, if any. */
export async function closeView() {
  generation += 1;
  const shown = current;
  current = null;
  if (!shown) return;
  shown.box.remove();
  if (!shown.bridge) return;
  try {
    await Promise.race([shown.bridge.teardownResource({}), new Promise((resolve) => setTimeout(resolve, 500))]);
  } catch {
    /* a view that does not answer is closed anyway */
  }
  await shown.bridge.close().catch(() => {});
}

/** What a REST envelope is as an MCP tool result. */
function toolResult(status, envelope) {
  const result = {
    content: Array.isArray(envelope?.content) ? envelope.content : [],
    isError: envelope ? Boolean(envelope.isError) : true,
  };
  const structured = envelope?.structuredContent;
  if (structured && typeof structured === "object" && !Array.isArray(structured)) result.structuredContent = structured;
  if (!envelope) result.content = [{ type: "text", text: `The server answered HTTP ${status}, not JSON.` }];
  return result;
}

/** Shows `tool`'s view under `target`, told `args` and the call's answer
 * (`status`, `envelope`). `api` is the page's REST call with the token;
 * `tools()` the tools the person sees now. */
export async function showView(target, { tool, args, status, envelope, api, tools, pluginOf }) {
  await closeView();
  const uri = viewOf(tool);
  if (!uri) return;
  const mine = generation;
  const stale = () => mine !== generation;
  const read = await api("GET", `/resources/${encodeURIComponent(uri)}`);
  if (stale()) return;
  const contents = read.json?.contents?.[0];
  if (read.status !== 200 || typeof contents?.text !== "string") {
    target.append(el("p", { class: "bad" }, `The view ${uri} could not be read (HTTP ${read.status}).`));
    return;
  }
  const ui = contents._meta?.ui ?? {};
  const query = new URLSearchParams();
  const csp = ui.csp ?? {};
  for (const [key, list] of [["connect", csp.connectDomains], ["resource", csp.resourceDomains],
    ["frame", csp.frameDomains], ["base", csp.baseUriDomains]]) {
    if (Array.isArray(list) && list.length) query.set(key, list.join(" "));
  }
  const frame = el("iframe", {
    class: ui.prefersBorder === false ? "view borderless" : "view",
    title: `View of ${tool.name}`,
    sandbox: "allow-scripts",
    referrerpolicy: "no-referrer",
    src: `/ui/view-frame?${query}`,
  });
  const box = el("figure", { class: "view-box", "data-view": uri }, el("figcaption", {}, `View ${uri}`), frame);
  current = { bridge: null, box };
  // Its frame loads twice: the empty document, then the view written into
  // it. A third load is the view taking the frame elsewhere.
  let loads = 0;
  frame.addEventListener("load", () => {
    loads += 1;
    if (loads > 2 && !stale()) {
      closeView();
      target.append(el("p", { class: "bad view-left" }, `The view ${uri} loaded another page in its frame, and was closed.`));
    }
  });
  const ready = new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      removeEventListener("message", heard);
      reject(new Error("its frame did not load"));
    }, 15000);
    function heard(event) {
      if (event.source === frame.contentWindow && event.data?.toolhostFrame === "ready") {
        clearTimeout(timer);
        removeEventListener("message", heard);
        resolve();
      }
    }
    addEventListener("message", heard);
  });
  target.append(box);
  try {
    await ready;
  } catch (error) {
    box.append(el("p", { class: "bad" }, `The view did not start: ${error.message}`));
    return;
  }
  if (stale()) return;
  const own = pluginOf(tool.name);
  const authority = /^ui:\/\/([^/]+)\//.exec(uri)?.[1];
  const namespaced = tool.name.includes("__");
  const bridge = new AppBridge(
    null,
    { name: "toolhost", version: "1" },
    { serverTools: {}, serverResources: {} },
    { hostContext: { theme: "light", displayMode: "inline", platform: "web" } },
  );
  const refuse = (text) => ({ isError: true, content: [{ type: "text", text: `Error: ${text}` }] });
  bridge.oncalltool = async (params) => {
    const name = String(params?.name ?? "");
    const known = tools().find((t) => t.name === name);
    if (!known || !own || pluginOf(name) !== own) return refuse(`${name} is not a tool of this view's plugin`);
    if (isToolVisibilityModelOnly(known)) return refuse(`${name} is not for views to call`);
    const called = await api("POST", `/tools/${encodeURIComponent(name)}`, JSON.stringify(params?.arguments ?? {}), "application/json");
    return toolResult(called.status, called.json);
  };
  bridge.onreadresource = async (params) => {
    const wanted = String(params?.uri ?? "");
    // In a namespace, only what is served under its authority.
    if (namespaced && !new RegExp(`^[A-Za-z][A-Za-z0-9+.-]*://${authority}/`).test(wanted)) {
      throw new Error(`${wanted} is not of this view's namespace`);
    }
    const got = await api("GET", `/resources/${encodeURIComponent(wanted)}`);
    if (got.status !== 200) throw new Error(got.json?.error?.message ?? `HTTP ${got.status}`);
    return got.json;
  };
  bridge.onsizechange = ({ height }) => {
    if (typeof height === "number" && height > 0) frame.style.height = `${Math.min(Math.ceil(height), 2000)}px`;
  };
  bridge.oninitialized = () => {
    bridge.sendToolInput({ arguments: args });
    bridge.sendToolResult(toolResult(status, envelope));
  };
  current.bridge = bridge;
  await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow));
  if (stale()) return;
  frame.contentWindow.postMessage({ toolhostView: contents.text }, "*");
}
