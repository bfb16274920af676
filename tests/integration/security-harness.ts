/**
 * Shared pieces of the security-invariant tests (tests/integration/security-*.test.ts):
 * running a scripted task end to end through the real `runTask` (real Docker,
 * real git, the real scripted OpenAI-compatible server), reading back what the
 * tools saw inside the container, and inspecting Docker and git from the host
 * without letting anything in a repository run code here.
 */
import { allowAllPolicy } from "../helpers/runner-cli.js";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Docker from "dockerode";
import { openModel } from "../../src/runner/open-model.js";
import { validateTask, type Task } from "../../src/config/load-task.js";
import type { EventSink, RunEvent } from "../../src/events/run-events.js";
import { runTask, type RunDependencies, type RunResult } from "../../src/run/run-task.js";
import { DockerSandboxProvider } from "../../src/sandbox/docker/docker-sandbox-provider.js";
import { LABEL_RUN_ID } from "../../src/sandbox/docker/labels.js";
import type { Sandbox, SandboxProvider, SandboxSpec } from "../../src/sandbox/sandbox.js";
import { SANDBOX_IMAGE } from "../helpers/docker.js";

/** A scripted model turn (DESIGN.md "Scripted model"). */
export type Turn = Record<string, unknown>;

export function shellTurn(command: string, timeoutMs?: number): Turn {
  return { tool_calls: [{ name: "run_shell", arguments: timeoutMs ? { command, timeout_ms: timeoutMs } : { command } }] };
}

export function writeTurn(path: string, content: string): Turn {
  return { tool_calls: [{ name: "write_file", arguments: { path, content } }] };
}

/** A run_shell tool result split into its parts. */
export interface ShellResult {
  exitCode: string;
  timedOut: boolean;
  stdout: string;
  stderr: string;
  raw: string;
}

export function parseShellResult(raw: string | undefined): ShellResult {
  if (raw === undefined) throw new Error("no tool result at this index (the run ended early?)");
  const stdoutStart = raw.indexOf("\nstdout:\n");
  const stderrStart = raw.indexOf("\nstderr:\n", stdoutStart + 1);
  if (stdoutStart < 0 || stderrStart < 0) throw new Error(`not a run_shell result: ${raw.slice(0, 300)}`);
  return {
    exitCode: /^exit_code: (\S+)/.exec(raw)?.[1] ?? "?",
    timedOut: /\ntimed_out: true/.test(raw.slice(0, stdoutStart + 1)),
    stdout: raw.slice(stdoutStart + "\nstdout:\n".length, stderrStart),
    stderr: raw.slice(stderrStart + "\nstderr:\n".length),
    raw,
  };
}

export interface ScriptedRunOptions {
  repository: string;
  turns: Turn[];
  /** The script's `subagents` (turns by the `description` of the agent call). */
  subagents?: Record<string, { turns: Turn[] }>;
  /** Merged into the task's `sandbox` mapping. */
  sandbox?: Record<string, unknown>;
  toolTimeoutMs?: number;
  /** The task's `verify` mapping (command, timeout_sec, protect, ...). */
  verify?: { command: string; [field: string]: unknown };
  /** Further top-level task fields (e.g. `commit`). */
  task?: Record<string, unknown>;
  hostEnvironment?: NodeJS.ProcessEnv;
  /** Called with every sandbox right after creation (e.g. to look at the container while it runs). */
  onSandboxCreated?: (spec: SandboxSpec, sandbox: Sandbox) => Promise<void>;
  events?: EventSink;
  /** `monitor` forces the measured disk limit (what a runner that is not root gets). */
  diskEnforcement?: RunDependencies["diskEnforcement"];
}

export interface ScriptedRun extends RunResult {
  runId: string;
  task: Task;
  runnerHome: string;
  /** Tool result texts in call order (from session.json). */
  toolResults: string[];
  /** Every event type emitted, in order. */
  eventTypes: string[];
  /** Removes the temporary runner home and task directory. */
  dispose(): void;
}

/**
 * Writes a task + script into a temporary directory (outside the repository,
 * so the user's checkout gets no untracked files), runs it through `runTask`
 * with a fresh RUNNER_HOME, and returns the report plus what the tools saw.
 */
export async function runScriptedTask(options: ScriptedRunOptions): Promise<ScriptedRun> {
  const taskDirectory = mkdtempSync(join(tmpdir(), "agent-runner-sec-task-"));
  const runnerHome = mkdtempSync(join(tmpdir(), "agent-runner-sec-home-"));
  const scriptPath = join(taskDirectory, "script.yaml");
  // JSON is YAML: no quoting surprises in shell commands.
  writeFileSync(
    scriptPath,
    JSON.stringify({ turns: [...options.turns, { content: "Done." }], ...(options.subagents ? { subagents: options.subagents } : {}) }, null, 2),
  );
  const task = validateTask(
    {
      name: "security-probe",
      instruction: "Probe the sandbox (scripted).",
      workspace: options.repository,
      model: { provider: "scripted", script: scriptPath },
      sandbox: { image: SANDBOX_IMAGE, ...(options.sandbox ?? {}) },
      // These probes test the sandbox and host-side git, the real boundary: the policy layer is
      // opened up (its hard rules still apply) so it cannot hide a hole underneath.
      policy: allowAllPolicy(taskDirectory),
      max_steps: options.turns.length + 5,
      ...(options.toolTimeoutMs ? { tool_timeout_ms: options.toolTimeoutMs } : {}),
      ...(options.verify ? { verify: options.verify } : {}),
      ...options.task,
    },
    null,
    taskDirectory,
  );
  const docker = new DockerSandboxProvider();
  const provider: SandboxProvider = {
    async create(spec) {
      const sandbox = await docker.create(spec);
      if (options.onSandboxCreated) await options.onSandboxCreated(spec, sandbox);
      return sandbox;
    },
    ensureWorkspaceIdle: (hostPath) => docker.ensureWorkspaceIdle(hostPath),
  };
  const eventTypes: string[] = [];
  let runId = "";
  const result = await runTask(
    task,
    { sandboxProvider: provider, openModel: (current) => openModel(current), runnerHome, diskEnforcement: options.diskEnforcement },
    {
      signal: new AbortController().signal,
      hostEnvironment: options.hostEnvironment,
      onRunCreated: (id) => {
        runId = id;
      },
      events: {
        emit(event: RunEvent) {
          eventTypes.push(event.type);
          options.events?.emit(event);
        },
      },
    },
  );
  let toolResults: string[] = [];
  try {
    const session = JSON.parse(readFileSync(join(result.runDirectory, "session.json"), "utf8")) as {
      agents: { main: { messages: { role: string; content: string }[] } };
    };
    toolResults = session.agents.main.messages.filter((message) => message.role === "tool").map((message) => message.content);
  } catch {
    // no session (the run failed before the loop): toolResults stays empty
  }
  return {
    ...result,
    runId,
    task,
    runnerHome,
    toolResults,
    eventTypes,
    dispose() {
      rmSync(taskDirectory, { recursive: true, force: true });
      rmSync(runnerHome, { recursive: true, force: true });
    },
  };
}

/** Describes a run for assertion messages: report status/error and the tool results. */
export function describeRun(run: ScriptedRun): string {
  return `status=${run.report.status} reason=${run.report.reason} error=${run.report.error}\n${run.toolResults
    .map((text, index) => `--- tool result ${index} ---\n${text.slice(0, 1500)}`)
    .join("\n")}`;
}

/**
 * Environment for the test's own host git: nothing inherited, no global or
 * system config. Used with {@link inspectGit}, which also disarms hooks and
 * fsmonitor, so inspecting a hostile repository never runs its code.
 */
export function isolatedGitEnvironment(): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: tmpdir(),
    LANG: "C",
    LC_ALL: "C",
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_TERMINAL_PROMPT: "0",
  };
}

/** Read-only inspection of a repository from the test (plumbing only: no filters, hooks or drivers run). */
export function inspectGit(repository: string, args: string[]): string {
  return execFileSync("git", ["-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-C", repository, ...args], {
    encoding: "utf8",
    env: isolatedGitEnvironment(),
  });
}

export async function containersOfRun(docker: Docker, runId: string): Promise<Docker.ContainerInfo[]> {
  return docker.listContainers({ all: true, filters: { label: [`${LABEL_RUN_ID}=${runId}`] } });
}

export async function networksOfRun(docker: Docker, runId: string): Promise<Docker.NetworkInspectInfo[]> {
  return docker.listNetworks({ filters: { label: [`${LABEL_RUN_ID}=${runId}`] } });
}

/**
 * Polls `check` until it returns a truthy value or `timeoutMs` passes. For
 * waiting on an outside condition (a file, a container); never a fixed sleep.
 */
export async function waitFor<T>(what: string, timeoutMs: number, check: () => T | Promise<T>): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export function randomToken(prefix: string): string {
  return `${prefix}${Math.random().toString(36).slice(2, 10)}${Date.now().toString(36)}`;
}
