/**
 * Helpers for the subagent and merge end-to-end tests (tests/e2e/subagents.test.ts,
 * tests/e2e/merge-on-success.test.ts), on top of runner-cli.ts.
 *
 * Pausing a scripted agent at a known point: the agent runs {@link waitForRelease}
 * as a `run_shell` command, which polls (with a deadline) for a file the test
 * writes into that agent's worktree with {@link release} once it has observed
 * what it needed to (an event, a container, a process). No fixed sleeps.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { containersOfRun, readJson, type CliResult } from "./runner-cli.js";
import { runPaths } from "../../src/workspace/run-disk.js";

/**
 * A bash command that waits (up to `timeoutSeconds`) until the file
 * `.release-<name>` appears in /workspace, removes it and prints
 * `released-<name>`; prints `never-released-<name>` and exits 1 on timeout.
 */
export function waitForRelease(name: string, timeoutSeconds = 60): string {
  const file = `.release-${name}`;
  return `for i in $(seq 1 ${timeoutSeconds * 20}); do if [ -e ${file} ]; then rm -f ${file}; echo released-${name}; exit 0; fi; sleep 0.05; done; echo never-released-${name}; exit 1`;
}

/** Lets an agent waiting in {@link waitForRelease} go on: writes `.release-<name>` into its worktree (host path). */
export function release(worktree: string, name: string): void {
  writeFileSync(join(worktree, `.release-${name}`), "");
}

/** The main agent's worktree of a run (exists while the run is active). */
export function mainWorktree(runDirectory: string): string {
  return runPaths(runDirectory).worktree;
}

/** The environment host-side inspection git gets: no user or system config, no inherited GIT_* variables. */
export function isolatedGitEnvironment(): NodeJS.ProcessEnv {
  const environment: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith("GIT_")) environment[key] = value;
  return { ...environment, GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null", GIT_OPTIONAL_LOCKS: "0" };
}

/**
 * Read-only git for assertions, safe on a repository whose config names
 * hostile drivers: hooks, fsmonitor and the listed filter/diff/merge drivers off.
 */
export function inspectGit(repo: string, args: string[], options: { drivers?: string[] } = {}): string {
  return execFileSync("git", inspectionArguments(args, options), { cwd: repo, encoding: "utf8", env: isolatedGitEnvironment() });
}

/** {@link inspectGit} where a non-zero exit is an answer (e.g. `git grep` finding nothing exits 1). */
export function inspectGitStatus(repo: string, args: string[], options: { drivers?: string[] } = {}): { code: number | null; stdout: string; stderr: string } {
  const done = spawnSync("git", inspectionArguments(args, options), { cwd: repo, encoding: "utf8", env: isolatedGitEnvironment() });
  return { code: done.status, stdout: done.stdout, stderr: done.stderr };
}

function inspectionArguments(args: string[], options: { drivers?: string[] }): string[] {
  const overrides = ["core.hooksPath=/dev/null/none", "core.fsmonitor=false"];
  for (const name of options.drivers ?? []) {
    overrides.push(
      `filter.${name}.clean=`,
      `filter.${name}.smudge=`,
      `filter.${name}.process=`,
      `filter.${name}.required=false`,
      `diff.${name}.textconv=`,
      `diff.${name}.command=`,
      `merge.${name}.driver=`,
    );
  }
  return [...overrides.flatMap((entry) => ["-c", entry]), ...args];
}

/** Branch names (without the `* ` marker) matching a pattern. */
export function branches(repo: string, pattern: string): string[] {
  return inspectGit(repo, ["branch", "--list", "--format=%(refname:short)", pattern]).split("\n").filter(Boolean);
}

/** Containers (any state) labelled with this run id and agent id. */
export function containersOfAgent(runId: string, agentId: string): string[] {
  return execFileSync("docker", ["ps", "-aq", "--filter", `label=dev.agent-runner.run-id=${runId}`, "--filter", `label=dev.agent-runner.agent-id=${agentId}`], {
    encoding: "utf8",
  })
    .split("\n")
    .filter(Boolean);
}

/**
 * Test cleanup after a deliberate `kill -9`: removes the run's containers,
 * tolerating ones Docker is already removing (they end themselves when the
 * runner's connection drops), and waits until none is listed.
 */
export async function removeRunContainers(runId: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const ids = containersOfRun(runId);
    if (ids.length === 0) return;
    if (Date.now() > deadline) throw new Error(`containers of run ${runId} still listed: ${ids.join(", ")}`);
    spawnSync("docker", ["rm", "-f", ...ids], { stdio: "ignore" });
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Containers (any state) with exactly this name (`agent-runner-<run>-<agent>`). */
export function containersNamed(name: string): string[] {
  return execFileSync("docker", ["ps", "-aq", "--filter", `name=^/${name}$`], { encoding: "utf8" })
    .split("\n")
    .filter(Boolean);
}

/**
 * Host processes whose full command line matches the extended regex
 * `pattern` (container processes are host processes too). The test's own
 * pgrep is excluded by pgrep itself.
 */
export function hostProcesses(pattern: string): string[] {
  const found = spawnSync("pgrep", ["-af", pattern], { encoding: "utf8" });
  return found.stdout.split("\n").filter(Boolean);
}

/** The run directory a finished `runner exec` printed (`run directory: ...`). */
export function runDirectoryOf(result: CliResult): string {
  const match = /run directory: (\S+)/.exec(result.stdout);
  if (!match) throw new Error(`no "run directory:" line in the runner's output\nstdout:\n${result.stdout}\nstderr:\n${result.stderr}`);
  return match[1]!;
}

/** A subagent entry of report.json `agents`. */
export interface AgentEntry {
  id: string;
  mode: string;
  description: string;
  task_id: string | null;
  background: boolean;
  branch: string | null;
  status: string;
  steps: number;
  verify: { command: string; exit_code: number | null; passed: boolean } | null;
  merge: { status: string; files: string[]; detail: string } | null;
  error: string | null;
}

export interface Report {
  run_id: string;
  status: string;
  reason: string;
  error: string | null;
  branch: string;
  base_commit: string;
  head_commit: string;
  verify: { passed: boolean; exit_code: number | null; output_tail: string } | null;
  agents: AgentEntry[];
  merge: { merged: boolean; branch: string | null; detail: string } | null;
  [key: string]: unknown;
}

export function readReport(runDirectory: string): Report {
  return readJson<Report>(join(runDirectory, "report.json"));
}

/** The tool results the main agent got, in order (from session.json). */
export function mainToolResults(runDirectory: string): string[] {
  const session = JSON.parse(readFileSync(join(runDirectory, "session.json"), "utf8")) as {
    agents: Record<string, { messages: { role: string; content: string | null }[] }>;
  };
  return session.agents.main!.messages.filter((message) => message.role === "tool").map((message) => String(message.content));
}

/** Escapes text for use inside a RegExp source (scripted `expect`). */
export function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
