/**
 * Drives the built CLI (`dist/cli/main.js`) as a user would, for end-to-end
 * tests: a task directory with its own git repository and script, a
 * RUNNER_HOME of the test's own, the runner as a child process (so a test can
 * signal or `kill -9` it), and readers for what a run leaves in its directory.
 * Waiting is always on an observable condition (an event in events.jsonl, a
 * process exit), polled with a deadline; never on a fixed sleep.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { cloudEventType, readEvent, type RunEventName } from "../../src/events/event-catalogue.js";

export const ROOT = fileURLToPath(new URL("../..", import.meta.url));
export const CLI = join(ROOT, "dist/cli/main.js");

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface RunningCli {
  child: ChildProcess;
  pid: number;
  /** Resolves when the process has exited and its output is closed. */
  result: Promise<CliResult>;
  /** Output so far. */
  output(): { stdout: string; stderr: string };
  /** Set once the process has exited. */
  exited: CliResult | null;
}

/** Starts `node dist/cli/main.js ...args` with the test's environment on top of ours. */
export function startCli(args: string[], environment: Record<string, string>, cwd?: string): RunningCli {
  if (!existsSync(CLI)) throw new Error("dist/cli/main.js is missing: run `make build` (make test does)");
  const child = spawn(process.execPath, [CLI, ...args], {
    env: { ...process.env, ...environment },
    stdio: ["ignore", "pipe", "pipe"],
    ...(cwd ? { cwd } : {}),
  });
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (chunk) => (stdout += chunk));
  child.stderr!.on("data", (chunk) => (stderr += chunk));
  const running: RunningCli = {
    child,
    pid: child.pid!,
    output: () => ({ stdout, stderr }),
    exited: null,
    result: new Promise((resolve) => {
      child.on("close", (code, signal) => {
        running.exited = { code, signal, stdout, stderr };
        resolve(running.exited);
      });
    }),
  };
  return running;
}

/** Runs the CLI to completion. */
export function runCli(args: string[], environment: Record<string, string>, cwd?: string): Promise<CliResult> {
  return startCli(args, environment, cwd).result;
}

/**
 * Polls `probe` until it returns something other than undefined/null/false,
 * and returns that. Fails after `timeoutMs`, or as soon as `process` (when
 * given) has exited, with its output.
 */
export async function waitFor<T>(
  what: string,
  probe: () => T | undefined | null | false,
  options: { timeoutMs?: number; process?: RunningCli } = {},
): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 30_000);
  for (;;) {
    const value = probe();
    if (value !== undefined && value !== null && value !== false) return value;
    const exited = options.process?.exited;
    if (exited)
      throw new Error(
        `waiting for ${what}: the runner exited (code ${exited.code}, signal ${exited.signal})\nstdout:\n${exited.stdout}\nstderr:\n${exited.stderr}`,
      );
    if (Date.now() > deadline) {
      const output = options.process?.output();
      throw new Error(`timed out waiting for ${what}${output ? `\nstdout:\n${output.stdout}\nstderr:\n${output.stderr}` : ""}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** One CloudEvents envelope of events.jsonl. */
export interface RunEnvelope {
  type: string;
  source: string;
  data: Record<string, unknown>;
  [key: string]: unknown;
}

/**
 * The envelopes of `<run>/events.jsonl` so far (an incomplete last line is
 * skipped). Throws when a line does not read strictly against the event
 * catalogue (src/events/event-catalogue.ts): every e2e test that looks at a
 * run's events also checks that its emit sites match their schemas.
 */
export function readEvents(runDirectory: string): RunEnvelope[] {
  const path = join(runDirectory, "events.jsonl");
  if (!existsSync(path)) return [];
  const events: RunEnvelope[] = [];
  for (const [index, line] of readFileSync(path, "utf8").split("\n").entries()) {
    if (!line.trim()) continue;
    let envelope: RunEnvelope;
    try {
      envelope = JSON.parse(line) as RunEnvelope;
    } catch {
      continue; // a line being written
    }
    const read = readEvent(envelope, { strict: true });
    if (read.kind !== "event") throw new Error(`${path}: line ${index + 1} is not a catalogue event (${read.kind}): ${read.reason}\n${line}`);
    events.push(envelope);
  }
  return events;
}

/** Envelopes of one event type, given by its catalogue name (`tool_call.started`). */
export function eventsOfType(events: RunEnvelope[], type: RunEventName): RunEnvelope[] {
  return events.filter((event) => event.type === cloudEventType(type));
}

/** The run directories under `<home>/runs`. */
export function runDirectories(home: string): string[] {
  const runs = join(home, "runs");
  return existsSync(runs) ? readdirSync(runs).map((id) => join(runs, id)) : [];
}

/** The single run directory under `<home>/runs` (fails when there are several). */
export function onlyRunDirectory(home: string): string | undefined {
  const directories = runDirectories(home);
  if (directories.length > 1) throw new Error(`expected one run in ${home}, found ${directories.length}`);
  return directories[0];
}

/**
 * Waits until the only run in `home` has logged an event of `type` whose data
 * satisfies `matches`; returns the run directory and the event.
 */
export function waitForRunEvent(
  home: string,
  type: RunEventName,
  matches: (data: Record<string, unknown>) => boolean,
  options: { timeoutMs?: number; process?: RunningCli } = {},
): Promise<{ runDirectory: string; event: RunEnvelope }> {
  return waitFor(
    `a ${type} event in ${home}/runs/*/events.jsonl`,
    () => {
      const runDirectory = onlyRunDirectory(home);
      if (!runDirectory) return undefined;
      const event = eventsOfType(readEvents(runDirectory), type).find((candidate) => matches(candidate.data));
      return event ? { runDirectory, event } : undefined;
    },
    options,
  );
}

export function readJson<T = Record<string, unknown>>(path: string): T {
  return JSON.parse(readFileSync(path, "utf8")) as T;
}

export interface TaskDirectory {
  /** Path of task.yaml. */
  task: string;
  /** The task's git repository (branch main, one commit). */
  repo: string;
  git(...args: string[]): string;
}

/**
 * Writes, under `directory`: `repo/` (a git repository with `files` committed
 * on main), `script.yaml` (the scripted model's script, any JSON-able value)
 * and `task.yaml` (a scripted task on that repository; `task` fields are
 * merged over the defaults, objects one level deep).
 */
/**
 * Writes a policy allowing every tool and command (hard rules still apply) to
 * `<directory>/allow-all.yaml`, outside any repository; returns its path. For
 * tests of what the sandbox and host-side git hold when the policy layer is
 * talked around.
 */
export function allowAllPolicy(directory: string): string {
  const path = join(directory, "allow-all.yaml");
  writeFileSync(path, "name: allow-all\ndescription: every tool and command\ntools: { allow: ['*'] }\ndefault_command_risk: allow\nconfirmations: allow\n");
  return path;
}

export function writeScriptedTask(
  directory: string,
  options: { script: unknown; files?: Record<string, string>; task?: Record<string, unknown> },
): TaskDirectory {
  const repo = join(directory, "repo");
  mkdirSync(repo, { recursive: true });
  for (const [path, content] of Object.entries(options.files ?? { "README.md": "test repository\n" })) {
    mkdirSync(dirname(join(repo, path)), { recursive: true });
    writeFileSync(join(repo, path), content);
  }
  const git = (...args: string[]) => execFileSync("git", ["-c", "user.name=test", "-c", "user.email=test@localhost", ...args], { cwd: repo, encoding: "utf8" });
  git("init", "-q", "-b", "main");
  git("add", "-A");
  git("commit", "-q", "-m", "initial");
  // YAML is a superset of JSON: both files are written as JSON.
  writeFileSync(join(directory, "script.yaml"), JSON.stringify(options.script, null, 2));
  const defaults: Record<string, unknown> = {
    name: "e2e-task",
    instruction: "Do what the script says.",
    workspace: "./repo",
    model: { provider: "scripted", script: "./script.yaml" },
    sandbox: {
      image: process.env.RUNNER_TEST_IMAGE ?? "agent-runner/sandbox:bookworm",
      network: { allow: [] },
      limits: { cpus: 1, memory: "512m", pids: 256 },
    },
    max_steps: 20,
  };
  const task: Record<string, unknown> = { ...defaults };
  for (const [key, value] of Object.entries(options.task ?? {})) {
    const base = defaults[key];
    task[key] = isPlainObject(base) && isPlainObject(value) ? { ...base, ...value } : value;
  }
  const taskFile = join(directory, "task.yaml");
  writeFileSync(taskFile, JSON.stringify(task, null, 2));
  return { task: taskFile, repo, git };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A scripted tool call. */
export function toolCall(name: string, args: Record<string, unknown>): { name: string; arguments: Record<string, unknown> } {
  return { name, arguments: args };
}

/** Ids of the containers (running or not) labelled with this run id. */
export function containersOfRun(runId: string): string[] {
  return execFileSync("docker", ["ps", "-aq", "--filter", `label=dev.agent-runner.run-id=${runId}`], { encoding: "utf8" })
    .split("\n")
    .filter(Boolean);
}

/** Removes every container labelled with this run id (test cleanup after a deliberate `kill -9`). */
export function removeContainersOfRun(runId: string): void {
  const ids = containersOfRun(runId);
  if (ids.length) execFileSync("docker", ["rm", "-f", ...ids], { stdio: "ignore" });
}

/** `git worktree list --porcelain` paths of a repository. */
export function worktreePaths(repo: string): string[] {
  return execFileSync("git", ["worktree", "list", "--porcelain"], { cwd: repo, encoding: "utf8" })
    .split("\n")
    .filter((line) => line.startsWith("worktree "))
    .map((line) => line.slice("worktree ".length));
}
