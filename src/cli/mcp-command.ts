import { existsSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { loadDefaults } from "../config/defaults-file.js";
import { ConfigError } from "../errors.js";
import { createRunnerMcpServer } from "../mcp-server/runner-mcp-server.js";
import { runnerHome } from "../runner/runner-home.js";
import { Runner } from "../runner/runner.js";
import { terminalSafe } from "../terminal-text.js";

/**
 * `runner mcp`: the MCP server over stdio (docs/mcp-server.md). Stdout is
 * the protocol; notes and logs go to stderr. Returns when the client closes
 * the connection (stdin ends) or `signal` aborts, after cancelling the runs
 * it started (their partial work committed; `runner resume` continues them).
 * ConfigError (exit 2) for a workspace root that is not a directory.
 */
export async function mcpCommand(options: { workspaceRoot?: string[] }, version: string, signal: AbortSignal): Promise<number> {
  const roots = (options.workspaceRoot?.length ? options.workspaceRoot : [process.cwd()]).map((root) => resolve(root));
  for (const root of roots) {
    if (!existsSync(root) || !statSync(root).isDirectory()) throw new ConfigError(`--workspace-root: ${root} is not a directory`);
  }
  const home = runnerHome();
  const runner = Runner.create({ home });
  const { server, close } = createRunnerMcpServer({
    runner,
    workspaceRoots: roots,
    version,
    defaults: (workspace) => {
      const defaults = loadDefaults({ home, cwd: process.cwd(), workspace });
      for (const note of defaults.notes) process.stderr.write(`runner mcp: note: ${terminalSafe(note)}\n`);
      return defaults;
    },
  });
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolveClosed) => {
    transport.onclose = () => resolveClosed();
    // StdioServerTransport does not end on stdin's end by itself.
    process.stdin.once("end", () => resolveClosed());
    signal.addEventListener("abort", () => resolveClosed(), { once: true });
  });
  await server.connect(transport);
  process.stderr.write(`runner mcp: serving on stdio; workspace roots: ${roots.join(", ")}; RUNNER_HOME ${home}\n`);
  await closed;
  await close();
  return signal.aborted ? 130 : 0;
}
