// The MCP TypeScript SDK's own client against a kg-mcp server: list every tool, then call each
// with the example arguments given, and print what came back as one JSON object on stdout.
//   node ts_sdk_client.mjs stdio '<command json array>' '<examples json>'
//   node ts_sdk_client.mjs http|sse URL '<examples json>'   (bearer token from KG_MCP_TOKEN)
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";

const [kind, target, examplesJson] = process.argv.slice(2);
const examples = JSON.parse(examplesJson);
const token = process.env.KG_MCP_TOKEN;
const headers = token ? { Authorization: `Bearer ${token}` } : {};

let transport;
if (kind === "stdio") {
  const [command, ...args] = JSON.parse(target);
  transport = new StdioClientTransport({ command, args, stderr: "inherit" });
} else if (kind === "http") {
  transport = new StreamableHTTPClientTransport(new URL(target), { requestInit: { headers } });
} else {
  transport = new SSEClientTransport(new URL(target), {
    requestInit: { headers },
    eventSourceInit: { fetch: (url, init) => fetch(url, { ...init, headers: { ...init?.headers, ...headers } }) },
  });
}

const client = new Client({ name: "kg-mcp-ts-check", version: "1.0.0" });
await client.connect(transport);
const { tools } = await client.listTools();
const calls = {};
for (const tool of tools) {
  if (!(tool.name in examples)) continue;
  const result = await client.callTool({ name: tool.name, arguments: examples[tool.name] });
  calls[tool.name] = { isError: Boolean(result.isError), text: result.content.map((c) => c.text ?? "").join("\n") };
}
const { resources } = await client.listResources();
const { prompts } = await client.listPrompts();
console.log(JSON.stringify({ tools: tools.map((t) => ({ name: t.name, inputSchema: t.inputSchema })), calls,
  resources: resources.map((r) => r.uri), prompts: prompts.map((p) => p.name) }));
await client.close();
