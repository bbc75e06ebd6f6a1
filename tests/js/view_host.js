// A small MCP Apps host for tests/test_view_browser.py: the MCP TypeScript client connects to a
// real kg-mcp over streamable HTTP (the page is served from the server's own origin), reads the
// tool's ui:// resource, renders it in a sandboxed iframe and talks to it through the ext-apps
// AppBridge, which forwards the view's tools/call and resources/read to the server.
// Bundled by tests/js/view_browser.mjs with the esbuild of view/.

import { AppBridge, PostMessageTransport, getToolUiResourceUri } from "@modelcontextprotocol/ext-apps/app-bridge";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const UI = "io.modelcontextprotocol/ui";
const MIME = "text/html;profile=mcp-app";
const log = { viewCalls: [], viewReads: [] };
let client;
let tools;
let bridge;
let context;

async function connect() {
  client = new Client(
    { name: "kg-mcp test host", version: "1" },
    { capabilities: { extensions: { [UI]: { mimeTypes: [MIME] } } } },
  );
  await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", location.href)));
  tools = new Map((await client.listTools()).tools.map((t) => [t.name, t]));
}

// Call `name` as a model would, then show its result in the tool's view.
async function show(name, args, theme) {
  if (!client) await connect();
  const tool = tools.get(name);
  const uri = getToolUiResourceUri(tool);
  if (!uri) throw new Error(`${name} names no view`);
  const html = (await client.readResource({ uri })).contents[0];
  if (html.mimeType !== MIME) throw new Error(`the view is served as ${html.mimeType}`);

  if (bridge) await bridge.teardownResource({}).catch(() => {});
  const old = document.getElementById("view");
  if (old) old.remove();
  const iframe = document.createElement("iframe");
  iframe.id = "view";
  iframe.setAttribute("sandbox", "allow-scripts");
  iframe.title = `${name} view`;
  document.body.append(iframe);

  context = { theme, toolInfo: { tool }, displayMode: "inline", containerDimensions: { width: 960, maxHeight: 640 } };
  bridge = new AppBridge(client, { name: "kg-mcp test host", version: "1" }, { serverTools: {}, serverResources: {}, logging: {} }, { hostContext: context });
  // Listening before the page loads: the view's App says ui/initialize as soon as it runs.
  const initialized = new Promise((resolve) => (bridge.oninitialized = resolve));
  await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
  // connect() set the bridge to forward the view's requests to the server; these do the same
  // and record them on the way.
  bridge.oncalltool = async (params) => {
    log.viewCalls.push(params);
    return client.callTool(params);
  };
  bridge.onreadresource = async (params) => {
    log.viewReads.push(params.uri);
    return client.readResource(params);
  };
  iframe.srcdoc = html.text;
  await initialized;

  await bridge.sendToolInput({ arguments: args });
  const result = await client.callTool({ name, arguments: args });
  await bridge.sendToolResult(result);
  return { isError: Boolean(result.isError), text: result.content.map((c) => c.text || "").join("\n") };
}

function setTheme(theme) {
  context = { ...context, theme };
  bridge.setHostContext(context);
}

window.host = { show, setTheme, log };
