// Drives toolhost with the official MCP TypeScript SDK client
// (@modelcontextprotocol/sdk), as agents that embed it do.
//
//   node ts_client.mjs http <url> <plugin-dir> <plugin-to-drop>
//   node ts_client.mjs stdio <toolhost> <plugin-dir> <cache-dir> <plugin-to-drop>
//   node ts_client.mjs latency <url> <calls>
//   node ts_client.mjs rejected <url> <plugin-dir>
//   node ts_client.mjs oauth <url> <client-id> <client-secret> <scope>
//   node ts_client.mjs watch <url> <uri>
//   node ts_client.mjs sees <url> <token> <tool-to-wait-for>
//
// The first two list tools, call one that succeeds, one with bad arguments
// (isError) and an unknown one (JSON-RPC -32602), drop the math plugin into
// the folder and wait for notifications/tools/list_changed, then make a
// structured call (the SDK validates it against the tool's outputSchema)
// and a business error; over HTTP the session is then ended with DELETE.
// `latency` times `tools/call` of echo on one session and as one-shot POSTs.
// `rejected` enables logging, writes a broken echo.wasm over the good one
// and waits for the warning that names the plugin and the reason.
// `oauth` connects with no token and the SDK's client-credentials provider:
// on the 401 the SDK reads the server's protected-resource metadata, the
// issuer's metadata, gets a token at its token endpoint and retries; then
// it lists tools and calls echo.
// `watch` reads the resource and prompt lists, subscribes to <uri>, prints
// `subscribed`, and waits for notifications/resources/updated for it
// (printing `updated` at the first) and for both lists' list_changed (the
// test replaces the plugin, then removes it once it reads `updated`), then gets a prompt and completes an argument before it ends.
// `sees` connects with a bearer token, lists tools and prints them as a
// first line (`{"first": [...]}`); then, at each list_changed, lists again,
// until <tool-to-wait-for> is listed (the test edits the tokens file to
// give it), counting the notifications after which nothing it sees had
// changed (`spurious`).
// `tasks` connects with a bearer token, lists tools, and runs <tool> with
// <arguments> (JSON) through `client.experimental.tasks.callToolStream`
// asking for a task (`{task: {ttl}}`, the 2025-11-25 revision's tasks):
// the kinds of message the stream gave, each status it saw, the server's
// tasks capability and the result; then makes another and cancels it.
// Each prints one JSON line and exits non-zero on any failure.

import { copyFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ClientCredentialsProvider } from "@modelcontextprotocol/sdk/client/auth-extensions.js";
import {
  LoggingMessageNotificationSchema,
  PromptListChangedNotificationSchema,
  ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

function check(condition, what, value) {
  if (!condition) {
    throw new Error(`${what}: ${JSON.stringify(value)}`);
  }
}

function drop(pluginDir, source) {
  const temporary = join(pluginDir, ".math.wasm.tmp");
  copyFileSync(source, temporary);
  renameSync(temporary, join(pluginDir, "math.wasm"));
}

async function exercise(transport, kind, pluginDir, dropSource) {
  const client = new Client({ name: "toolhost-test", version: "1.0.0" });
  let listChanged;
  const changed = new Promise((resolve) => (listChanged = resolve));
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => listChanged());
  await client.connect(transport);

  let names = (await client.listTools()).tools.map((tool) => tool.name);
  check(names.includes("echo") && !names.includes("add"), "tools before the drop", names);

  const greeting = `hello from ${kind}`;
  const ok = await client.callTool({ name: "echo", arguments: { text: greeting } });
  check(!ok.isError && ok.content[0].text === greeting, "echo", ok);

  const failed = await client.callTool({ name: "echo", arguments: { wrong: 1 } });
  check(failed.isError === true, "bad arguments are isError", failed);

  try {
    await client.callTool({ name: "no_such_tool", arguments: {} });
    throw new Error("an unknown tool must be a JSON-RPC error");
  } catch (error) {
    check(error.code === -32602, "an unknown tool is -32602", { code: error.code, message: error.message });
  }

  const started = performance.now();
  drop(pluginDir, dropSource);
  await Promise.race([
    changed,
    new Promise((_, reject) => setTimeout(() => reject(new Error("no list_changed in 15 s")), 15000)),
  ]);
  const listChangedSeconds = (performance.now() - started) / 1000;

  names = (await client.listTools()).tools.map((tool) => tool.name);
  check(names.includes("add"), "tools after the drop", names);
  const added = await client.callTool({ name: "add", arguments: { a: 2, b: 3 } });
  check(!added.isError && added.structuredContent?.result === 5, "structured add", added);
  const divided = await client.callTool({ name: "divide", arguments: { a: 1, b: 0 } });
  check(divided.isError === true, "a business error is isError", divided);

  if (transport.terminateSession) {
    await transport.terminateSession();
  }
  await client.close();
  return { transport: kind, listChangedSeconds };
}

function median(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

async function latency(url, calls) {
  const client = new Client({ name: "toolhost-bench", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  await client.listTools();
  const session = [];
  for (let i = 0; i < calls; i++) {
    const started = performance.now();
    const result = await client.callTool({ name: "echo", arguments: { text: "hello" } });
    session.push(performance.now() - started);
    check(!result.isError, "echo", result);
  }
  await transport.terminateSession();
  await client.close();
  const body = JSON.stringify({
    jsonrpc: "2.0",
    id: 1,
    method: "tools/call",
    params: { name: "echo", arguments: { text: "hello" } },
  });
  const oneShot = [];
  for (let i = 0; i < calls; i++) {
    const started = performance.now();
    const response = await fetch(url, {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
      body,
    });
    await response.json();
    oneShot.push(performance.now() - started);
  }
  return { sessionP50Ms: median(session), oneShotP50Ms: median(oneShot), calls };
}

async function rejected(url, pluginDir) {
  const client = new Client({ name: "toolhost-test", version: "1.0.0" });
  let warned;
  const warning = new Promise((resolve) => (warned = resolve));
  client.setNotificationHandler(LoggingMessageNotificationSchema, (notification) => {
    const { level, data } = notification.params;
    if (level === "warning" && data?.event === "plugin rejected") {
      warned({ level, plugin: data.plugin, reason: data.reason });
    }
  });
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  await client.setLoggingLevel("info");
  const temporary = join(pluginDir, ".echo.wasm.tmp");
  writeFileSync(temporary, "this is not a component");
  renameSync(temporary, join(pluginDir, "echo.wasm"));
  const report = await Promise.race([
    warning,
    new Promise((_, reject) => setTimeout(() => reject(new Error("no warning in 15 s")), 15000)),
  ]);
  await transport.terminateSession();
  await client.close();
  return report;
}

async function oauth(url, clientId, clientSecret, scope) {
  const authProvider = new ClientCredentialsProvider({ clientId, clientSecret, scope });
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider });
  const client = new Client({ name: "toolhost-oauth-test", version: "1.0.0" });
  await client.connect(transport);
  const { tools } = await client.listTools();
  const echoed = await client.callTool({ name: "echo", arguments: { text: "with a token" } });
  check(!echoed.isError, "echo with an OAuth token", echoed);
  const tokens = authProvider.tokens();
  await transport.terminateSession();
  await client.close();
  return {
    tools: tools.map((tool) => tool.name),
    echoed: echoed.structuredContent ?? echoed.content,
    tokenType: tokens?.token_type,
  };
}

async function watch(url, uri) {
  const transport = new StreamableHTTPClientTransport(new URL(url));
  const client = new Client({ name: "toolhost-watch-test", version: "1.0.0" });
  const heard = { updated: [], resourcesChanged: 0, promptsChanged: 0 };
  let done;
  const finished = new Promise((resolve) => (done = resolve));
  const check_done = () => {
    if (heard.updated.includes(uri) && heard.resourcesChanged > 0 && heard.promptsChanged > 0) done();
  };
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
    // Said once, so that the test may go on (remove the plugin) after it.
    if (heard.updated.length === 0) console.log("updated");
    heard.updated.push(n.params.uri);
    check_done();
  });
  client.setNotificationHandler(ResourceListChangedNotificationSchema, () => {
    heard.resourcesChanged += 1;
    check_done();
  });
  client.setNotificationHandler(PromptListChangedNotificationSchema, () => {
    heard.promptsChanged += 1;
    check_done();
  });
  await client.connect(transport);
  const capabilities = client.getServerCapabilities();
  check(capabilities?.resources?.subscribe && capabilities?.prompts && capabilities?.completions, "capabilities", capabilities);
  const { resources } = await client.listResources();
  const { resourceTemplates } = await client.listResourceTemplates();
  const { prompts } = await client.listPrompts();
  const prompt = await client.getPrompt({ name: "test_prompt_with_arguments", arguments: { arg1: "a", arg2: "b" } });
  check(JSON.stringify(prompt.messages).includes("arg1='a'"), "prompt", prompt);
  const completed = await client.complete({
    ref: { type: "ref/prompt", name: "test_prompt_with_arguments" },
    argument: { name: "arg1", value: "par" },
  });
  const read = await client.readResource({ uri });
  await client.subscribeResource({ uri });
  console.log("subscribed");
  await Promise.race([
    finished,
    new Promise((_, reject) => setTimeout(() => reject(new Error(`heard only ${JSON.stringify(heard)}`)), 30000)),
  ]);
  await transport.terminateSession();
  await client.close();
  return {
    resources: resources.map((r) => r.uri),
    templates: resourceTemplates.map((t) => t.uriTemplate),
    prompts: prompts.map((p) => p.name),
    completion: completed.completion.values,
    read: read.contents[0],
    heard,
  };
}

async function sees(url, token, awaited) {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: "toolhost-sees", version: "1.0.0" });
  const names = async () => (await client.listTools()).tools.map((t) => t.name).sort();
  let wake = () => {};
  let pending = 0;
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
    pending += 1;
    wake();
  });
  await client.connect(transport);
  const first = await names();
  console.log(JSON.stringify({ first }));
  let spurious = 0;
  let heard = 0;
  let now = first;
  const deadline = Date.now() + 60000;
  while (!now.includes(awaited)) {
    const left = deadline - Date.now();
    check(left > 0, `never listed ${awaited}; heard ${heard}, lists`, now);
    if (pending === 0) {
      let timer;
      await Promise.race([
        new Promise((resolve) => (wake = resolve)),
        new Promise((resolve) => (timer = setTimeout(resolve, left))),
      ]);
      clearTimeout(timer);
    }
    if (pending === 0) {
      continue;
    }
    heard += pending;
    pending = 0;
    const next = await names();
    if (JSON.stringify(next) === JSON.stringify(now)) {
      spurious += 1;
    }
    now = next;
  }
  await transport.terminateSession();
  await client.close();
  return { first, after: now, heard, spurious };
}

async function tasks(url, token, tool, argumentsJson) {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  const client = new Client({ name: "toolhost-tasks", version: "1.0.0" });
  await client.connect(transport);
  const listed = (await client.listTools()).tools.find((t) => t.name === tool);
  const args = JSON.parse(argumentsJson);
  const kinds = [];
  const statuses = [];
  let result = null;
  let taskId = null;
  let error = null;
  const started = Date.now();
  const stream = client.experimental.tasks.callToolStream(
    { name: tool, arguments: args },
    undefined,
    { task: { ttl: 600000 } },
  );
  for await (const message of stream) {
    kinds.push(message.type);
    if (message.type === "taskCreated") taskId = message.task.taskId;
    if (message.type === "taskStatus") statuses.push(message.task.status);
    if (message.type === "result") result = message.result;
    if (message.type === "error") error = String(message.error);
  }
  const seconds = (Date.now() - started) / 1000;
  // Another, cancelled while it works.
  const created = await client.experimental.tasks.requestStream(
    { method: "tools/call", params: { name: tool, arguments: args } },
    undefined,
    { task: { ttl: 600000 } },
  ).next();
  const other = created.value?.task?.taskId;
  const cancelled = other ? await client.experimental.tasks.cancelTask(other) : null;
  const after = other ? await client.experimental.tasks.getTask(other) : null;
  await client.close();
  return {
    taskSupport: listed?.execution?.taskSupport ?? null,
    capability: client.getServerCapabilities()?.tasks ?? null,
    kinds: [...new Set(kinds)],
    statuses: [...new Set(statuses)],
    taskId,
    result,
    error,
    seconds,
    cancelled: cancelled?.status ?? null,
    afterCancel: after?.status ?? null,
  };
}

const [mode, ...args] = process.argv.slice(2);
let report;
if (mode === "http") {
  const [url, pluginDir, dropSource] = args;
  report = await exercise(new StreamableHTTPClientTransport(new URL(url)), "http", pluginDir, dropSource);
} else if (mode === "stdio") {
  const [toolhost, pluginDir, cacheDir, dropSource] = args;
  const transport = new StdioClientTransport({
    command: toolhost,
    args: ["serve", "--stdio", "--plugins", pluginDir, "--cache-dir", cacheDir],
    env: { TOOLHOST_LOG: "warn", PATH: process.env.PATH ?? "" },
  });
  report = await exercise(transport, "stdio", pluginDir, dropSource);
} else if (mode === "rejected") {
  report = await rejected(args[0], args[1]);
} else if (mode === "watch") {
  report = await watch(args[0], args[1]);
} else if (mode === "oauth") {
  report = await oauth(args[0], args[1], args[2], args[3]);
} else if (mode === "sees") {
  report = await sees(args[0], args[1], args[2]);
} else if (mode === "tasks") {
  report = await tasks(args[0], args[1], args[2], args[3]);
} else if (mode === "latency") {
  report = await latency(args[0], Number(args[1] ?? 200));
} else {
  throw new Error(`unknown mode ${mode}`);
}
console.log(JSON.stringify(report));
