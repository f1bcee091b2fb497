// Test-only MCP Apps host: what Claude Desktop or VS Code do with a tool that has `_meta.ui.resourceUri`,
// done by the reference host side (the ext-apps AppBridge) with the TS MCP client, over streamable HTTP.
// It reads the view's ui:// resource, shows it in a sandboxed iframe (scripts only, no same-origin),
// sends the tool's input, calls run_team, and sends the result. The page's query: request, token, theme.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import {
  AppBridge,
  PostMessageTransport,
  RESOURCE_MIME_TYPE,
  getToolUiResourceUri,
} from "@modelcontextprotocol/ext-apps/app-bridge";

const params = new URLSearchParams(location.search);
const host = (window.host = { log: [], sizes: [], resource: null, toolResult: null, error: null });
const log = (message) => {
  host.log.push(message);
  console.log("[host] " + message);
};

async function main() {
  const client = new Client(
    { name: "mcp-team-test-host", version: "1.0.0" },
    { capabilities: { extensions: { "io.modelcontextprotocol/ui": { mimeTypes: [RESOURCE_MIME_TYPE] } } } },
  );
  const headers = params.get("token") ? { Authorization: `Bearer ${params.get("token")}` } : {};
  await client.connect(new StreamableHTTPClientTransport(new URL("/mcp", location.origin), { requestInit: { headers } }));
  const tool = (await client.listTools()).tools.find((t) => t.name === "run_team");
  const uri = getToolUiResourceUri(tool);
  const resource = (await client.readResource({ uri })).contents[0];
  host.resource = { uri, mimeType: resource.mimeType, meta: resource._meta, length: resource.text.length };
  log(`ui resource ${uri} ${resource.mimeType}`);

  const iframe = document.createElement("iframe");
  iframe.setAttribute("sandbox", "allow-scripts");
  iframe.style.cssText = "width: 100%; height: 200px; border: 1px solid #8888; display: block";
  document.getElementById("slot").append(iframe);

  const theme = params.get("theme") || "light";
  let context = { theme, displayMode: "inline", platform: "web", containerDimensions: { maxHeight: 6000 } };
  const bridge = new AppBridge(
    client,
    { name: "mcp-team-test-host", version: "1.0.0" },
    { serverTools: {}, serverResources: {}, openLinks: {}, logging: {} },
    { hostContext: context },
  );
  bridge.onsizechange = ({ width, height }) => {
    host.sizes.push({ width, height });
    if (height) iframe.style.height = `${height}px`;
  };
  bridge.onopenlink = async ({ url }) => {
    host.openedLinks = [...(host.openedLinks || []), url];
    return {};
  };
  bridge.oninitialized = async () => {
    log("app initialized");
    const args = { request: params.get("request") };
    await bridge.sendToolInput({ arguments: args });
    const result = await client.callTool({ name: "run_team", arguments: args }, { timeout: 600000 });
    host.toolResult = result;
    await bridge.sendToolResult(result);
    log("tool result sent");
  };
  host.setTheme = (next) => {
    context = { ...context, theme: next };
    bridge.setHostContext(context);
  };
  host.teardown = () => bridge.teardownResource({});
  await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
  iframe.srcdoc = resource.text;
}

main().catch((e) => {
  host.error = String(e && e.stack ? e.stack : e);
  log("ERROR " + host.error);
});
