// "Connect a client": for the signed-in person and this server, the MCP
// URL, the header a client must send, and a configuration for each of the
// clients people bring (Claude Desktop, VS Code, Cursor, the MCP Inspector
// and curl), and a complete program for each SDK people embed (Python,
// TypeScript), each with a copy button. The token shows only after a
// click ("Show token"), and never goes into the page's URL.

import { el } from "./dom.js";

// The versions the snippets name: the ones this server's tests run.
export const MCP_REMOTE = "mcp-remote@0.15.1";
export const INSPECTOR = "@modelcontextprotocol/inspector@2.12.0";
export const PYTHON_SDK = "mcp==2.3.0";
export const TS_SDK = "@modelcontextprotocol/sdk@1.32.2";

const LOOPBACK = new Set(["localhost", "127.0.0.1", "[::1]", "::1"]);

/// Every snippet, as text, for `url` (the MCP endpoint) and `token` (the
/// person's, or `null` on a server without tokens). Exported for the
/// tests, which parse each one and run the ones a test can run.
export function snippets(url, token) {
  const header = token ? `Authorization: Bearer ${token}` : null;
  const host = new URL(url).hostname;
  const plainHttp = url.startsWith("http:") && !LOOPBACK.has(host);
  const remoteArgs = [MCP_REMOTE, url];
  if (header) remoteArgs.push("--header", "Authorization:${TOOLHOST_AUTH}");
  if (plainHttp) remoteArgs.push("--allow-http");
  const claude = { mcpServers: { toolhost: { command: "npx", args: remoteArgs } } };
  if (header) claude.mcpServers.toolhost.env = { TOOLHOST_AUTH: `Bearer ${token}` };
  const vscode = { servers: { toolhost: { type: "http", url } } };
  if (header) {
    // VS Code asks for the token once and keeps it in its secret storage.
    vscode.inputs = [{ type: "promptString", id: "toolhost-token", description: "Your toolhost token", password: true }];
    vscode.servers.toolhost.headers = { Authorization: "Bearer ${input:toolhost-token}" };
  }
  const cursor = { mcpServers: { toolhost: { url } } };
  if (header) cursor.mcpServers.toolhost.headers = { Authorization: `Bearer ${token}` };
  const quote = (text) => `'${text.replace(/'/g, "'\\''")}'`;
  const inspector = [`npx ${INSPECTOR} --cli ${url}`];
  if (header) inspector.push(`--header ${quote(header)}`);
  inspector.push("--method tools/list");
  const base = url.replace(/\/mcp$/, "");
  const curl = [`curl -s ${base}/tools`];
  if (header) curl.push(`-H ${quote(header)}`);
  const python = [
    `# toolhost_client.py: pip install "${PYTHON_SDK}", then python toolhost_client.py`,
    "import asyncio",
    "",
    "import httpx2",
    "from mcp import Client",
    "from mcp.client.streamable_http import streamable_http_client",
    "",
    `URL = ${JSON.stringify(url)}`,
    ...(header ? [`TOKEN = ${JSON.stringify(token)}`] : []),
    "",
    "",
    "async def main():",
    "    # The SDK sends a header only through an HTTP client of your own.",
    `    async with httpx2.AsyncClient(${header ? 'headers={"Authorization": f"Bearer {TOKEN}"}' : ""}) as http:`,
    "        async with Client(streamable_http_client(URL, http_client=http)) as client:",
    "            listed = await client.list_tools()",
    "            for tool in listed.tools:",
    "                print(tool.name)",
    "            # A call: await client.call_tool(\"NAME\", {\"argument\": \"value\"})",
    "",
    "",
    "asyncio.run(main())",
    "",
  ].join("\n");
  const typescript = [
    `// toolhost_client.mjs: npm install ${TS_SDK}, then node toolhost_client.mjs`,
    'import { Client } from "@modelcontextprotocol/sdk/client/index.js";',
    'import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";',
    "",
    `const url = new URL(${JSON.stringify(url)});`,
    header
      ? `const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers: { Authorization: ${JSON.stringify(`Bearer ${token}`)} } } });`
      : "const transport = new StreamableHTTPClientTransport(url);",
    'const client = new Client({ name: "my-agent", version: "1.0.0" });',
    "await client.connect(transport);",
    "const { tools } = await client.listTools();",
    "for (const tool of tools) console.log(tool.name);",
    '// A call: await client.callTool({ name: "NAME", arguments: { argument: "value" } });',
    "await client.close();",
    "",
  ].join("\n");
  return [
    {
      id: "claude",
      title: "Claude Desktop",
      where: "claude_desktop_config.json (Settings → Developer → Edit Config); Claude Desktop starts mcp-remote (Node 18+), which speaks to this server",
      format: "json",
      text: JSON.stringify(claude, null, 2),
    },
    {
      id: "vscode",
      title: "VS Code",
      where: ".vscode/mcp.json in your project (or MCP: Open User Configuration); VS Code asks for your token once",
      format: "json",
      text: JSON.stringify(vscode, null, 2),
    },
    {
      id: "cursor",
      title: "Cursor",
      where: "~/.cursor/mcp.json (or .cursor/mcp.json in a project)",
      format: "json",
      text: JSON.stringify(cursor, null, 2),
    },
    {
      id: "inspector",
      title: "MCP Inspector (command line)",
      where: "a terminal, with Node 22.19 or later",
      format: "shell",
      text: inspector.join(" "),
    },
    {
      id: "curl",
      title: "curl",
      where: "a terminal: the tools over REST (POST /tools/NAME calls one)",
      format: "shell",
      text: curl.join(" "),
    },
    {
      id: "python-sdk",
      title: "Python SDK",
      where: `a program of your own, with the MCP Python SDK (${PYTHON_SDK}, Python 3.10+): it lists your tools`,
      format: "python",
      text: python,
    },
    {
      id: "typescript-sdk",
      title: "TypeScript SDK",
      where: `a program of your own, with the MCP TypeScript SDK (${TS_SDK}, Node 18+): it lists your tools`,
      format: "javascript",
      text: typescript,
    },
  ];
}

/// Fills the panel `root` for `me` (GET /me's answer) and `token`.
export function renderConnect(root, me, token) {
  const url = `${location.origin}/mcp`;
  const needsToken = Boolean(me && me.name);
  let shown = false;
  const header = el("code", { id: "connect-header" });
  const reveal = el("button", { type: "button", class: "secondary", id: "connect-reveal" }, "Show token");
  const list = el("div", { id: "connect-snippets" });
  const draw = () => {
    const secret = needsToken ? (shown ? token : "YOUR_TOKEN") : null;
    header.textContent = needsToken ? `Authorization: Bearer ${secret}` : "(none: this server takes no token)";
    reveal.textContent = shown ? "Hide token" : "Show token";
    list.replaceChildren();
    for (const snippet of snippets(url, secret)) {
      const text = el("pre", { class: "snippet", "data-snippet": snippet.id, "data-format": snippet.format }, snippet.text);
      const copy = el("button", { type: "button", class: "secondary", "aria-label": `Copy the ${snippet.title} configuration` }, "Copy");
      copy.addEventListener("click", async () => {
        // The copy always holds the real token, shown or not.
        const real = snippets(url, needsToken ? token : null).find((s) => s.id === snippet.id).text;
        try {
          await navigator.clipboard.writeText(real);
          copy.textContent = "Copied";
        } catch {
          copy.textContent = "Select and copy it";
        }
        setTimeout(() => (copy.textContent = "Copy"), 2000);
      });
      list.append(el("details", { class: "client" },
        el("summary", {}, snippet.title),
        el("p", { class: "note" }, snippet.where),
        text,
        copy));
    }
  };
  reveal.hidden = !needsToken;
  reveal.addEventListener("click", () => {
    shown = !shown;
    draw();
  });
  root.replaceChildren(
    el("p", {}, el("strong", {}, "MCP URL: "), el("code", { id: "connect-url" }, url)),
    el("p", {}, el("strong", {}, "Header: "), header, " ", reveal),
    me && me.namespace
      ? el("p", { class: "note" }, `Your tools are served as ${me.namespace}__<tool>: that is the name a client calls.`)
      : "",
    list);
  draw();
}
