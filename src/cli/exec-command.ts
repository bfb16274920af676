import { readFileSync } from "node:fs";
import { join } from "node:path";
import { loadTaskFile, validateTask, type Task } from "../config/load-task.js";
import { ConfigError } from "../errors.js";
import { exitCodeFor, type RunReport } from "../run/run-report.js";
import { runnerHome } from "../runner/runner-home.js";
import { Runner, type ApprovalBroker, type RunHandle } from "../runner/runner.js";
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

/** `runner exec`: validate everything, sweep leftovers, run, print the outcome; returns the exit code. */
export async function execCommand(taskFile: string | undefined, options: ExecOptions, signal: AbortSignal): Promise<number> {
  const task = loadTask(taskFile, options);
  // Fail on what the user can fix before anything starts (no branch, no container yet).
  const runner = Runner.create({ home: runnerHome() });
  const run = await runner.startTask(task, { signal, merge: options.merge, ...approvals() });
  return follow(run, task, options);
}

/**
 * `runner resume <run-id>`: continue an interrupted, crashed or errored run
 * (same branch, a new container, the persisted conversation); returns the exit code.
 */
export async function resumeCommand(idOrPrefix: string, options: { json?: boolean; maxSteps?: string }, signal: AbortSignal): Promise<number> {
  const maxSteps = options.maxSteps ? positiveInteger(options.maxSteps, "--max-steps") : undefined;
  const runner = Runner.create({ home: runnerHome() });
  const run = await runner.resume(idOrPrefix, { signal, ...(maxSteps ? { maxSteps } : {}), ...approvals() });
  if (!options.json) process.stdout.write(`resuming run ${run.id} at model call ${run.resumed!.atModelCall}\n`);
  // The validated task the run keeps (task.json); the terminal shows this attempt's events only.
  const task = JSON.parse(readFileSync(join(run.directory, "task.json"), "utf8")) as Task;
  return follow(run, task, options, run.resumed!.earlierEvents);
}

/**
 * Shows a run as it happens (the progress view on stderr, or with `--json`
 * the CloudEvents lines on stdout, from sequence number `from`), then the
 * outcome; returns the exit code.
 */
async function follow(run: RunHandle, task: Task, options: { json?: boolean }, from = 0): Promise<number> {
  const view = options.json ? null : new ProgressView();
  const shown = (async () => {
    for await (const envelope of run.events({ from })) {
      if (options.json) process.stdout.write(terminalSafeJson(`${JSON.stringify(envelope)}\n`));
      else view!.show(envelope);
    }
  })();
  const report = await run.result;
  await shown;
  if (!options.json) printOutcome(task, { report, runDirectory: run.directory });
  return exitCodeFor(report.status);
}

/** How long an approval question waits for an answer; no answer is a no. */
const APPROVAL_TIMEOUT_MS = 5 * 60 * 1000;

/** The terminal prompt as the run's approval broker; without a terminal on both ends, none (the policy's `confirmations` decides). */
function approvals(): { approvals?: ApprovalBroker } {
  if (!process.stdin.isTTY || !process.stderr.isTTY) return {};
  return {
    approvals: {
      request: ({ question, canRemember }, signal) =>
        promptForApproval({ input: process.stdin, output: process.stderr, question: terminalSafe(question), canRemember, timeoutMs: APPROVAL_TIMEOUT_MS, signal }),
    },
  };
}

function printOutcome(task: Task, { report, runDirectory }: { report: RunReport; runDirectory: string }): void {
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
