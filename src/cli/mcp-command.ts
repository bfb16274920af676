import { existsSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { loadDefaults } from "../config/defaults-file.js";
import { ConfigError } from "../errors.js";
import { randomBytes } from "node:crypto";
import { serveMcpHttp } from "../mcp-server/mcp-http.js";
import { RunnerMcpService } from "../mcp-server/runner-mcp-server.js";
import { runnerHome } from "../runner/runner-home.js";
import { describeCeilings, parseCeilingFlags } from "../runner/operator-ceilings.js";
import { Runner } from "../runner/runner.js";
import { terminalSafe } from "../terminal-text.js";

/**
 * `runner mcp`: the MCP server over stdio (docs/mcp-server.md). Stdout is
 * the protocol; notes and logs go to stderr. Returns when the client closes
 * the connection (stdin ends) or `signal` aborts, after cancelling the runs
 * it started (their partial work committed; `runner resume` continues them).
 *
 * With `http`: streamable HTTP on 127.0.0.1:`port` (0, the default: a free
 * port), every request with `Authorization: Bearer <token>` (RUNNER_MCP_TOKEN,
 * else a random one); the URL and the token are printed on stdout. Runs until
 * `signal` aborts.
 *
 * `ceiling`: `--ceiling FIELD=VALUE` flags over the built-in ceilings
 * (src/runner/operator-ceilings.ts), the most a caller's run_start and
 * run_resume may ask for.
 *
 * ConfigError (exit 2) for a workspace root that is not a directory, a bad port or a bad ceiling.
 */
export async function mcpCommand(
  options: { workspaceRoot?: string[]; http?: boolean; port?: string; ceiling?: string[] },
  version: string,
  signal: AbortSignal,
): Promise<number> {
  const roots = (options.workspaceRoot?.length ? options.workspaceRoot : [process.cwd()]).map((root) => resolve(root));
  for (const root of roots) {
    if (!existsSync(root) || !statSync(root).isDirectory()) throw new ConfigError(`--workspace-root: ${root} is not a directory`);
  }
  const port = options.port === undefined ? 0 : Number(options.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new ConfigError(`--port: expected a TCP port (0-65535; 0 picks a free one), got "${options.port}"`);
  if (options.port !== undefined && !options.http) throw new ConfigError("--port: only with --http");
  const ceilings = parseCeilingFlags(options.ceiling ?? []);
  const home = runnerHome();
  const service = new RunnerMcpService({
    runner: Runner.create({ home }),
    workspaceRoots: roots,
    ceilings,
    version,
    defaults: (workspace) => {
      const defaults = loadDefaults({ home, cwd: process.cwd(), workspace });
      for (const note of defaults.notes) process.stderr.write(`runner mcp: note: ${terminalSafe(note)}\n`);
      return defaults;
    },
  });
  if (options.http) {
    const token = process.env.RUNNER_MCP_TOKEN || randomBytes(32).toString("base64url");
    const http = await serveMcpHttp(service, { port, token });
    process.stdout.write(`runner mcp: listening on ${http.url}\ntoken: ${token}\n`);
    process.stderr.write(`runner mcp: workspace roots: ${roots.join(", ")}; RUNNER_HOME ${home}\nrunner mcp: ceilings: ${describeCeilings(ceilings)}\n`);
    await new Promise<void>((resolveStopped) => signal.addEventListener("abort", () => resolveStopped(), { once: true }));
    await http.close();
    await service.close();
    return 130;
  }
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolveClosed) => {
    transport.onclose = () => resolveClosed();
    // StdioServerTransport does not end on stdin's end by itself.
    process.stdin.once("end", () => resolveClosed());
    signal.addEventListener("abort", () => resolveClosed(), { once: true });
  });
  await service.createSession().connect(transport);
  process.stderr.write(
    `runner mcp: serving on stdio; workspace roots: ${roots.join(", ")}; RUNNER_HOME ${home}\nrunner mcp: ceilings: ${describeCeilings(ceilings)}\n`,
  );
  await closed;
  await service.close();
  return signal.aborted ? 130 : 0;
}
