// Reads toolhost's views (MCP Apps) as a host that shows them would: the
// official TypeScript SDK client (@modelcontextprotocol/sdk) declares the
// extension, and the official ext-apps package finds each tool's view
// (`getToolUiResourceUri`) and names the MIME type a view must have.
//
//   node views_client.mjs <url> [token]
//
// Prints one JSON line: the server's declared extensions, and for each
// tool with a view its URI, visibility and task support, and what
// `resources/read` gave for it (MIME type, `_meta`, the HTML's length and
// start). Exits non-zero on any failure.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { getToolUiResourceUri, RESOURCE_MIME_TYPE } from "@modelcontextprotocol/ext-apps/app-bridge";
import { EXTENSION_ID } from "@modelcontextprotocol/ext-apps/server";

const [url, token] = process.argv.slice(2);
const headers = token ? { Authorization: `Bearer ${token}` } : {};
const client = new Client(
  { name: "views-client", version: "1.0.0" },
  { capabilities: { extensions: { [EXTENSION_ID]: { mimeTypes: [RESOURCE_MIME_TYPE] } } } },
);
await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }));
const { tools } = await client.listTools();
const views = [];
for (const tool of tools) {
  const uri = getToolUiResourceUri(tool);
  if (!uri) continue;
  const { contents } = await client.readResource({ uri });
  views.push({
    tool: tool.name,
    uri,
    flat: tool._meta?.["ui/resourceUri"] ?? null,
    visibility: tool._meta?.ui?.visibility ?? null,
    taskSupport: tool.execution?.taskSupport ?? null,
    contents: contents.map((c) => ({
      uri: c.uri,
      mimeType: c.mimeType,
      isViewType: c.mimeType === RESOURCE_MIME_TYPE,
      meta: c._meta ?? null,
      length: (c.text ?? "").length,
      start: (c.text ?? "").slice(0, 40),
    })),
  });
}
const { resources } = await client.listResources();
console.log(JSON.stringify({
  extensions: client.getServerCapabilities()?.extensions ?? null,
  tools: tools.map((t) => t.name),
  views,
  listed: resources.filter((r) => r.mimeType === RESOURCE_MIME_TYPE).map((r) => r.uri),
}));
await client.close();
