// The command a host starts for an unpacked MCP Bundle: its manifest's server.mcp_config with the
// variables filled in by the mcpb library's own getMcpConfigForManifest (${__dirname}: the bundle's
// folder; ${user_config.KEY}: the value given here, else the manifest's default; ${HOME} and the other
// folders: the user's). Prints {"command", "args", "env"} as JSON.
//
//   node tests/mcpb_config.mjs MCPB_PACKAGE_DIR BUNDLE_DIR HOME_DIR [KEY=VALUE ...]
//
// MCPB_PACKAGE_DIR is where @anthropic-ai/mcpb is installed (.cache/mcpb/node_modules/@anthropic-ai/mcpb).
// Exits 1 when the library gives no config (a required user_config value is missing) or leaves a ${...}
// in it: it keeps a placeholder it has no value for, and the server would get that text as the value.
import { readFileSync } from "node:fs";
import { join, resolve, sep } from "node:path";
import { pathToFileURL } from "node:url";

const [packageDir, bundleArg, home, ...pairs] = process.argv.slice(2);
if (!packageDir || !bundleArg || !home) {
  console.error("usage: node mcpb_config.mjs MCPB_PACKAGE_DIR BUNDLE_DIR HOME_DIR [KEY=VALUE ...]");
  process.exit(2);
}
const { getMcpConfigForManifest } = await import(pathToFileURL(join(resolve(packageDir), "dist", "index.js")).href);

const bundleDir = resolve(bundleArg);
const manifest = JSON.parse(readFileSync(join(bundleDir, "manifest.json"), "utf8"));
const userConfig = {};
for (const pair of pairs) {
  const at = pair.indexOf("=");
  if (at < 1) {
    console.error(`expected KEY=VALUE, got ${pair}`);
    process.exit(2);
  }
  userConfig[pair.slice(0, at)] = pair.slice(at + 1);
}

const config = await getMcpConfigForManifest({
  manifest,
  extensionPath: bundleDir,
  systemDirs: {
    HOME: home,
    DESKTOP: join(home, "Desktop"),
    DOCUMENTS: join(home, "Documents"),
    DOWNLOADS: join(home, "Downloads"),
  },
  userConfig,
  pathSeparator: sep,
  logger: console,
});
if (!config) {
  console.error("the mcpb library gave no config: a required user_config value is missing");
  process.exit(1);
}
const text = JSON.stringify({ command: config.command, args: config.args ?? [], env: config.env ?? {} }, null, 2);
const left = text.match(/\$\{[^}]*\}/g);
if (left) {
  console.error(`placeholders left unfilled: ${[...new Set(left)].join(" ")}\n${text}`);
  process.exit(1);
}
console.log(text);
