// The MCP TypeScript SDK's client against `kg-mcp serve` over stdio, for tests/test_ts_protocol.py:
// what is offered besides the tools' results. Prints what it saw as one JSON object on stdout.
//   node ts_protocol_client.mjs store '<command json array>'   completions, a card, progress, protocol errors (MetaQA)
//   node ts_protocol_client.mjs logs '<command json array>' LEVEL   the log records of one call at LEVEL (an endpoint that fails once)
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { LoggingMessageNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [part, target, level] = process.argv.slice(2);
const [command, ...args] = JSON.parse(target);
const client = new Client({ name: "kg-mcp-ts-protocol", version: "1.0.0" });
const logs = [];
client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => logs.push(n.params));
// This client handles a notification a moment after the message it came in, a result at once: a
// progress notification read together with its call's result finds the token forgotten and is
// reported here instead of to onprogress. Those are kept too: the server did send them.
const late = [];
client.onerror = (error) => {
  const found = /progress notification for an unknown token: (.*)$/s.exec(error.message);
  if (found) late.push(JSON.parse(found[1]).params);
};
const byProgress = (a, b) => a.progress - b.progress;
await client.connect(new StdioClientTransport({ command, args, stderr: "inherit" }));
const out = { capabilities: client.getServerCapabilities() };

async function error(call) {
  try {
    await call();
    return null;
  } catch (e) {
    return { code: e.code, message: e.message };
  }
}

if (part === "store") {
  const entity = { type: "ref/resource", uri: "kg://entity/{id}" };
  out.templates = (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
  out.resources = (await client.listResources()).resources.map((r) => r.uri);
  out.completed = (await client.complete({ ref: entity, argument: { name: "id", value: "Catch Me If" } })).completion;
  out.card = (await client.readResource({ uri: `kg://entity/${encodeURIComponent(out.completed.values[0])}` })).contents[0];
  out.question = (await client.complete({ ref: { type: "ref/prompt", name: "search_on_graph" },
    argument: { name: "question", value: "who directed Catch Me If You" } })).completion;
  out.progress = [];
  const follow = await client.callTool({ name: "follow", arguments: { entity: "kg:Carrie", path: ["directed_by", "~directed_by"] } },
    undefined, { onprogress: (p) => out.progress.push(p) });
  out.followError = Boolean(follow.isError);
  await new Promise((resolve) => setTimeout(resolve, 50)); // the late ones' microtasks
  out.progress = [...out.progress, ...late.splice(0).map(({ progressToken, ...p }) => p)].sort(byProgress);
  out.verifyProgress = [];
  const claims = Array.from({ length: 40 }, () => ({ subject: "kg:Carrie", relation: "directed_by", object: "kg:Brian_De_Palma" }));
  await client.callTool({ name: "verify", arguments: { claims } }, undefined, { onprogress: (p) => out.verifyProgress.push(p) });
  await new Promise((resolve) => setTimeout(resolve, 50));
  out.verifyProgress = [...out.verifyProgress, ...late.splice(0).map(({ progressToken, ...p }) => p)].sort(byProgress);
  out.errors = {
    tool: await error(() => client.callTool({ name: "no_such_tool", arguments: {} })),
    prompt: await error(() => client.getPrompt({ name: "no_such_prompt", arguments: {} })),
    missing: await error(() => client.getPrompt({ name: "ground_answer", arguments: { question: "q" } })),
    card: await error(() => client.readResource({ uri: "kg://entity/kg%3ANo_Such_Film_At_All" })),
  };
} else {
  await client.setLoggingLevel(level);
  const result = await client.callTool({ name: "get_relations", arguments: { entity: "wd:Q42" } });
  out.isError = Boolean(result.isError);
  out.logs = logs;
}
console.log(JSON.stringify(out));
await client.close();
