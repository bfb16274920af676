import { accessSync, constants, existsSync, mkdirSync, statSync } from "node:fs";
import { setMaxListeners } from "node:events";
import { homedir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { loadTaskFile, validateTask, type Task } from "../config/load-task.js";
import { ConfigError, errorMessage } from "../errors.js";
import { loadScript } from "../model/scripted-model-server.js";
import { createLogger } from "../logging/logger.js";
import { sweepDeadRuns } from "../run/run-lock.js";
import { finalAnswerOf, findResumableRun, resumeRun, runTask, type RunResult } from "../run/run-task.js";
import { DockerSandboxProvider } from "../sandbox/docker/docker-sandbox-provider.js";
import { sweepLeftovers } from "../sandbox/docker/sweep-leftovers.js";
import { resolveRepository } from "../workspace/run-worktree.js";
import type { DiskEnforcementChoice } from "../workspace/run-disk.js";
import { openAIClient, openModel } from "./open-model.js";
import { terminalSafe, terminalSafeJson } from "../terminal-text.js";
import { describeLeftOut, ProgressView } from "./progress-view.js";
import { promptForApproval } from "../policy/approval-prompt.js";

export interface ExecOptions {
  json?: boolean;
  instruction?: string;
  workspace?: string;
  name?: string;
  maxSteps?: string;
  merge?: boolean;
  verify?: string;
  image?: string;
}

/**
 * `$RUNNER_HOME` (default `~/.runner`), created if missing. Throws ConfigError
 * naming RUNNER_HOME when it cannot be a writable directory.
 */
export function runnerHome(environment: NodeJS.ProcessEnv = process.env): string {
  const home = resolve(environment.RUNNER_HOME || join(homedir(), ".runner"));
  // One level at a time: a recursive mkdir under /proc or /sys can spin forever (Node 20).
  const missing: string[] = [];
  let existing = home;
  while (!existsSync(existing)) {
    missing.unshift(existing);
    existing = dirname(existing);
  }
  try {
    if (!statSync(existing).isDirectory()) throw new Error(`${existing} is not a directory`);
    for (const directory of missing) mkdirSync(directory, { mode: 0o700 });
    accessSync(home, constants.W_OK);
  } catch (error) {
    throw new ConfigError(`RUNNER_HOME: cannot use ${home} for run records (${errorMessage(error)}); point RUNNER_HOME at a writable directory`);
  }
  return home;
}

/**
 * `$RUNNER_DISK_ENFORCEMENT`: `monitor` makes every run measure its disk limit
 * instead of giving it a filesystem of its own (README "Security model");
 * unset or `auto`: a filesystem when the runner can make one. Throws ConfigError otherwise.
 */
export function diskEnforcementChoice(environment: NodeJS.ProcessEnv = process.env): DiskEnforcementChoice {
  const value = environment.RUNNER_DISK_ENFORCEMENT || "auto";
  if (value !== "auto" && value !== "monitor") throw new ConfigError(`RUNNER_DISK_ENFORCEMENT: expected "auto" or "monitor", got ${JSON.stringify(value)}`);
  return value;
}

/** `runner exec`: validate everything, sweep leftovers, run, print the outcome; returns the exit code. */
export async function execCommand(taskFile: string | undefined, options: ExecOptions, signal: AbortSignal): Promise<number> {
  const loaded = loadTask(taskFile, options);
  const task: Task = options.merge ? { ...loaded, on_success: "merge" } : loaded;
  // Fail on what the user can fix before anything starts (no branch, no container yet).
  const home = runnerHome();
  const diskEnforcement = diskEnforcementChoice();
  await resolveRepository(task.workspacePath);
  const provider = await prepareRun(task, home, signal);
  const view = options.json ? undefined : new ProgressView();
  const result = await runTask(task, { sandboxProvider: provider, openModel: (current) => openModel(current), runnerHome: home, diskEnforcement }, runOptions(options, view, signal));
  if (!options.json) printOutcome(task, result);
  return result.exitCode;
}

/**
 * `runner resume <run-id>`: continue an interrupted, crashed or errored run
 * (same branch, a new container, the persisted conversation); returns the exit code.
 */
export async function resumeCommand(idOrPrefix: string, options: { json?: boolean; maxSteps?: string }, signal: AbortSignal): Promise<number> {
  const home = runnerHome();
  const diskEnforcement = diskEnforcementChoice();
  // Sweep first: a run whose runner died gets its worktree committed before we look at it.
  const provider = new DockerSandboxProvider({ egressNetwork: process.env.RUNNER_EGRESS_NETWORK });
  await sweep(provider, home);
  const run = findResumableRun(home, idOrPrefix);
  const maxSteps = options.maxSteps ? positiveInteger(options.maxSteps, "--max-steps") : undefined;
  // A run that already has its final answer needs no model call, only commit and verification.
  if (finalAnswerOf(run.restored) === undefined && (maxSteps ?? run.task.max_steps) <= run.restored.nextStep) {
    throw new ConfigError(`run ${run.runId} already made ${run.restored.nextStep} of its ${run.task.max_steps} model calls (max_steps); give --max-steps with a higher number`);
  }
  await resolveRepository(run.task.workspacePath);
  await prepareRun(run.task, home, signal, provider);
  const view = options.json ? undefined : new ProgressView();
  if (!options.json) process.stdout.write(`resuming run ${run.runId} at model call ${run.restored.nextStep + 1}\n`);
  const result = await resumeRun(
    run,
    { sandboxProvider: provider, openModel: (current) => openModel(current), runnerHome: home, diskEnforcement },
    { ...runOptions(options, view, signal), ...(maxSteps ? { maxSteps } : {}) },
  );
  if (!options.json) printOutcome(run.task, result);
  return result.exitCode;
}

/** Checks the model settings and Docker, and sweeps what dead runs left; returns the sandbox provider. */
async function prepareRun(task: Task, home: string, signal: AbortSignal, existing?: DockerSandboxProvider): Promise<DockerSandboxProvider> {
  if (task.model.provider === "openai") openAIClient(task, process.env);
  else loadScript(task.scriptPath!);
  setMaxListeners(0, signal); // one abort listener per concurrent tool call and model call
  const provider = existing ?? new DockerSandboxProvider({ egressNetwork: process.env.RUNNER_EGRESS_NETWORK });
  await provider.checkReady(task.sandbox.image, { egress: task.sandbox.network.allow.length > 0 });
  if (!existing) await sweep(provider, home);
  return provider;
}

/** Leftovers of runs whose runner died (kill -9, crash): containers and networks first, then their worktrees. */
async function sweep(provider: DockerSandboxProvider, home: string): Promise<void> {
  const logger = createLogger({ component: "cli" });
  await sweepLeftovers(provider.docker).then(
    (swept) => (swept.containers.length || swept.networks.length) && logger.info({ swept }, "removed leftovers of dead runs"),
    (error: unknown) => logger.warn({ err: error }, "could not sweep leftover containers"),
  );
  await sweepDeadRuns(home, provider).then(
    (runs) => runs.length && logger.info({ runs }, "committed and removed the worktrees of runs whose runner died (continue them with runner resume)"),
    (error: unknown) => logger.warn({ err: error }, "could not sweep dead runs"),
  );
}

/** How long an approval question waits for an answer; no answer is a no. */
const APPROVAL_TIMEOUT_MS = 5 * 60 * 1000;

function runOptions(options: { json?: boolean }, view: ProgressView | undefined, signal: AbortSignal) {
  // Questions need a person at a terminal; without one (CI, pipes) the policy's `confirmations` decides.
  const interactive = Boolean(process.stdin.isTTY && process.stderr.isTTY);
  return {
    signal,
    events: view,
    onEnvelope: options.json ? (line: string) => process.stdout.write(terminalSafeJson(line)) : undefined,
    ...(interactive
      ? {
          askApproval: (question: string, canRemember: boolean, askSignal: AbortSignal) =>
            promptForApproval({ input: process.stdin, output: process.stderr, question: terminalSafe(question), canRemember, timeoutMs: APPROVAL_TIMEOUT_MS, signal: askSignal }),
        }
      : {}),
  };
}

function printOutcome(task: Task, { report, runDirectory }: RunResult): void {
  const lines = [
    "",
    `status: ${report.status} (${report.reason})${report.error ? `\nerror: ${report.error}` : ""}`,
    report.verify
      ? `verify: ${report.verify.command} → ${report.verify.sandbox_lost ? "sandbox lost while it ran" : `exit ${report.verify.exit_code}`}${
          report.verify.protected ? ` (protected: ${report.verify.protected.restored.length} restored, ${report.verify.protected.deleted.length} deleted)` : ""
        }`
      : task.verify
        ? "verify: not run"
        : "verify: (no verify.command in the task)",
    `branch: ${report.branch ?? "-"}`,
    report.commit?.left_out_count ? `left out of the commit: ${describeLeftOut(report.commit.left_out, report.commit.left_out_count)} (see report.json commit.left_out)` : "",
    `steps: ${report.steps}, tool calls: ${report.tool_calls}, tokens: ${report.usage.prompt_tokens} in / ${report.usage.completion_tokens} out, ${(report.duration_ms / 1000).toFixed(1)} s`,
    `run directory: ${runDirectory}`,
    report.patch ? `patch: ${join(runDirectory, report.patch)}` : "",
    Object.keys(report.denials).length
      ? `denied: ${Object.entries(report.denials).map(([rule, count]) => `${rule} ×${count}`).join(", ")} (rules of the agents' policies; see events.jsonl tool_call.denied)`
      : "",
    report.merge ? `merge: ${report.merge.merged ? "" : "not merged: "}${terminalSafe(report.merge.detail)}` : "",
    report.disk?.limit_reached
      ? `disk: the limit (${Math.round(report.disk.limit_bytes / 1024 ** 2)} MiB) was reached; ${report.disk.enforcement === "filesystem" ? "writes past it were refused" : "the sandbox's processes were stopped"}`
      : "",
    report.agents.length ? `subagents: ${report.agents.map((agent) => `${agent.id} ${agent.status}`).join(", ")}` : "",
    (report.status === "cancelled" || report.status === "error") && report.steps > 0 ? `continue it: runner resume ${report.run_id}` : "",
  ];
  // The verify command, branch, error and merge detail come from the task file, the repository and the agent's work.
  process.stdout.write(`${terminalSafe(lines.filter(Boolean).join("\n"))}\n`);
}

function loadTask(taskFile: string | undefined, options: ExecOptions): Task {
  if (taskFile && (options.instruction || options.workspace)) {
    throw new ConfigError("give either a task file or --instruction/--workspace, not both");
  }
  if (taskFile) {
    const task = loadTaskFile(taskFile);
    return options.maxSteps ? { ...task, max_steps: positiveInteger(options.maxSteps, "--max-steps") } : task;
  }
  if (!options.instruction) {
    throw new ConfigError("missing task: run `runner exec path/to/task.yaml`, or `runner exec --instruction \"...\" --workspace DIR`");
  }
  if (!options.workspace) {
    throw new ConfigError("--workspace: an ad-hoc task needs the repository to work on (`--workspace DIR`; `--workspace .` for this directory)");
  }
  const raw: Record<string, unknown> = {
    name: options.name ?? "adhoc",
    instruction: options.instruction,
    workspace: options.workspace ?? ".",
  };
  if (options.maxSteps) raw.max_steps = positiveInteger(options.maxSteps, "--max-steps");
  if (options.verify) raw.verify = { command: options.verify };
  if (options.image) raw.sandbox = { image: options.image };
  return validateTask(raw, null, process.cwd());
}

function positiveInteger(value: string, flag: string): number {
  const number = Number(value);
  if (!Number.isInteger(number) || number <= 0) throw new ConfigError(`${flag}: expected a positive whole number, got "${value}"`);
  return number;
}
