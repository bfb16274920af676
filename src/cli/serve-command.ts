import { randomBytes } from "node:crypto";
import { existsSync, readFileSync, statSync } from "node:fs";
import { isIP } from "node:net";
import { resolve } from "node:path";
import { Command } from "commander";
import { ConfigError } from "../errors.js";
import { runnerHome } from "../runner/runner-home.js";

// The server's modules (hono, the Runner) load when the command runs: src/cli/main.ts keeps quick commands quick.

/** Flags of `runner serve`. */
interface ServeFlags {
  host: string;
  port: string;
  tokenFile?: string;
  tasksRoot: string[];
  approvalTimeout?: string;
  ceiling: string[];
}

/**
 * `runner serve` (docs/http-api.md): the HTTP API and the page on one port,
 * until Ctrl-C (`signal`), which cancels the runs it started and waits for
 * them; `exit` receives the exit code (0 after a clean stop, 2 bad flags).
 */
export function serveCommand(signal: AbortSignal, exit: (code: number) => void): Command {
  return new Command("serve")
    .description("the HTTP API (/v1) and a web page (/) to start and watch runs, answer approvals and merge verified diffs (docs/http-api.md)")
    .option("--host <address>", "address to listen on; anything but loopback needs --token-file (and TLS in front)", "127.0.0.1")
    .option("--port <n>", "port to listen on (0: any free one)", "7420")
    .option("--token-file <file>", "read the token from this file (else a new random one is printed at each start)")
    .option(
      "--tasks-root <dir>",
      "a directory whose task files (and, for task objects, whose workspaces and scripts) callers may use; repeat for more",
      (dir: string, dirs: string[]) => [...dirs, dir],
      [] as string[],
    )
    .option("--approval-timeout <seconds>", "how long an approval waits for an answer before the policy's non-interactive answer (default 300)")
    .option(
      "--ceiling <field=value>",
      'the most a caller\'s task or agency may ask for, e.g. sandbox.limits.memory=8g, timeout_sec=7200, agency.budget.max_cost_usd=100; repeat for more (docs/security.md "Ceilings")',
      (value: string, values: string[]) => [...values, value],
      [] as string[],
    )
    .exitOverride()
    .addHelpText(
      "after",
      [
        "",
        "Examples:",
        "  runner serve --tasks-root ~/tasks                  prints http://127.0.0.1:7420/?token=… ; open it once in a browser",
        "  runner serve --host 0.0.0.0 --token-file /etc/runner/token --tasks-root /srv/tasks   behind a TLS proxy",
        "",
        "Every request but GET /v1/health carries the token, in an Authorization: Bearer header or the page's cookie.",
      ].join("\n"),
    )
    .action(async (flags: ServeFlags) => exit(await serve(flags, signal)));
}

async function serve(flags: ServeFlags, signal: AbortSignal): Promise<number> {
  const port = Number(flags.port);
  if (!/^\d+$/.test(flags.port) || port > 65535) throw new ConfigError(`--port: expected a port number from 0 to 65535, got "${flags.port}"`);
  const loopback = isLoopback(flags.host);
  if (!loopback && !flags.tokenFile) {
    throw new ConfigError(
      `--host ${flags.host}: listening beyond loopback needs --token-file FILE (a token you keep, not one printed to a terminal); and TLS belongs in front: put a reverse proxy with TLS before it, the server speaks plain HTTP`,
    );
  }
  const token = flags.tokenFile ? readToken(flags.tokenFile) : randomBytes(24).toString("base64url");
  const roots = flags.tasksRoot.map((root) => {
    const absolute = resolve(root);
    if (!existsSync(absolute) || !statSync(absolute).isDirectory()) throw new ConfigError(`--tasks-root ${root}: not a directory`);
    return absolute;
  });
  const approvalTimeoutMs = flags.approvalTimeout === undefined ? undefined : seconds(flags.approvalTimeout) * 1000;
  const { describeCeilings, parseCeilingFlags } = await import("../runner/operator-ceilings.js");
  const ceilings = parseCeilingFlags(flags.ceiling);
  const { createRunner } = await import("../worker/agency-runner.js");
  const { createServerApp } = await import("../server/server-app.js");
  const { listen } = await import("../server/listen.js");
  const runner = await createRunner({ home: runnerHome() });
  const server = createServerApp({ runner, token, tasksRoots: roots, ceilings, ...(approvalTimeoutMs === undefined ? {} : { approvalTimeoutMs }) });
  const listening = await listen(server.app, flags.host, port).catch((error: NodeJS.ErrnoException) => {
    throw new ConfigError(
      `--host ${flags.host} --port ${flags.port}: cannot listen (${error.code ?? error.message})${error.code === "EADDRINUSE" ? "; pick another --port" : ""}`,
    );
  });
  process.stdout.write(`runner serve: ${listening.url}/?token=${token}\n`);
  process.stdout.write(`  API: ${listening.url}/v1 (Authorization: Bearer <token>; OpenAPI at /v1/openapi.json)\n`);
  if (roots.length === 0) process.stdout.write("  no --tasks-root: runs can only be watched here, not started\n");
  else process.stdout.write(`  ceilings: ${describeCeilings(ceilings)}\n`);
  if (!loopback) process.stdout.write("  listening beyond loopback over plain HTTP: TLS belongs in front (a reverse proxy)\n");
  await new Promise<void>((done) => (signal.aborted ? done() : signal.addEventListener("abort", () => done(), { once: true })));
  await server.close();
  await listening.close();
  await runner.close();
  return 0;
}

function isLoopback(host: string): boolean {
  if (host === "localhost") return true;
  if (isIP(host) === 4) return host.startsWith("127.");
  return host === "::1";
}

function readToken(file: string): string {
  let token: string;
  try {
    token = readFileSync(file, "utf8").trim();
  } catch (error) {
    throw new ConfigError(`--token-file ${file}: cannot read it (${(error as Error).message})`);
  }
  if (token.length < 16 || /\s/.test(token))
    throw new ConfigError(`--token-file ${file}: expected one token of at least 16 characters without spaces (e.g. \`openssl rand -hex 24\`)`);
  return token;
}

function seconds(value: string): number {
  const number = Number(value);
  if (!/^\d+$/.test(value) || number < 1) throw new ConfigError(`--approval-timeout: expected whole seconds of at least 1, got "${value}"`);
  return number;
}
