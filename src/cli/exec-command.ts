import { existsSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { applyDefaults, defaultTimeout, loadDefaults, type TaskDefaults } from "../config/defaults-file.js";
import { loadTaskFile, TaskValidationError, validateTask, type Task } from "../config/load-task.js";
import { ConfigError } from "../errors.js";
import { modelFlag } from "../config/model-flag.js";
import { exitCodeOfReport, type RunReport } from "../run/run-report.js";
import { RUN_FILES } from "../run/run-store.js";
import { runnerHome } from "../runner/runner-home.js";
import { Runner, type ModelText, type RunHandle } from "../runner/runner.js";
import { terminalSafe, terminalSafeJson } from "../terminal-text.js";
import { ProgressView } from "./progress-view.js";
import { outcomeText } from "./run-summary.js";
import { terminalApprovals } from "./terminal-approvals.js";
import { otlpTracesEnabled } from "../agency/trace/otlp-enabled.js";

export interface ExecOptions {
  json?: boolean;
  /** `-o FILE`: the agent's final answer goes there. */
  outputLastMessage?: string;
  instruction?: string;
  workspace?: string;
  name?: string;
  maxSteps?: string;
  merge?: boolean;
  verify?: string;
  image?: string;
  model?: string;
  policy?: string;
  /** `--allow-host`, repeatable: entries of sandbox.network.allow. */
  allowHost?: string[];
  /** `--timeout`: the run's wall-clock limit (`timeout_sec`), a {@link parseDuration} duration. */
  timeout?: string;
  /** `--max-cost`: the run's budget (`model.max_cost_usd`), USD. */
  maxCost?: string;
}

/** The flags that build an ad-hoc task (with a task file, the file says these). */
const AD_HOC_FLAGS = [
  ["name", "--name"],
  ["verify", "--verify"],
  ["image", "--image"],
  ["model", "--model"],
  ["policy", "--policy"],
  ["allowHost", "--allow-host"],
] as const;

/** `runner exec`: validate everything, sweep leftovers, run, print the outcome; returns the exit code. */
export async function execCommand(taskFile: string | undefined, options: ExecOptions, signal: AbortSignal): Promise<number> {
  let defaults: TaskDefaults | null = null;
  let task = loadTask(taskFile, options, (workspace) => {
    defaults = loadDefaults({ home: runnerHome(), cwd: process.cwd(), workspace });
    for (const note of defaults.notes) process.stderr.write(`note: ${terminalSafe(note)}\n`);
    return defaults;
  });
  // The defaults file's `timeout` where neither the task (timeout_sec) nor --timeout sets one.
  const timeout = defaults && task.timeout_sec === undefined ? defaultTimeout(defaults) : null;
  if (timeout) task = { ...task, timeout_sec: parseDuration(timeout.value, `timeout (${timeout.source})`) / 1000 };
  // Fail on what the user can fix before anything starts (no branch, no container yet).
  const runner = Runner.create({ home: runnerHome() });
  const view = options.json ? null : new ProgressView();
  const run = await runner.startTask(task, { signal, merge: options.merge, ...terminalApprovals(view), ...streamedText(view) });
  return follow(run, task, options, view);
}

/**
 * A duration in seconds: "90", "90s", "10m", "1.5h" (s, m, h; no unit is
 * seconds), returned in ms. Written here rather than with a library (such as
 * `ms`): three units and a clear error naming `flag` are all the CLI needs.
 * Throws ConfigError naming `flag` for anything else, or for zero.
 */
export function parseDuration(value: string, flag: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*$/i.exec(value);
  const milliseconds = match ? Number(match[1]) * { "": 1000, s: 1000, m: 60_000, h: 3_600_000 }[match[2]!.toLowerCase() as "" | "s" | "m" | "h"] : NaN;
  if (!(milliseconds >= 1000) || milliseconds > 7 * 24 * 3_600_000) {
    throw new ConfigError(`${flag}: expected a duration from 1s to 168h such as "90s", "10m" or "1.5h", got "${value}"`);
  }
  return Math.round(milliseconds);
}

/**
 * An amount of USD as `--max-cost` takes it: "5", "0.50", "$2" (a leading `$`
 * allowed). Throws ConfigError naming `flag` for anything else, or for zero.
 */
export function parseUsd(value: string, flag: string): number {
  const match = /^\s*\$?\s*(\d+(?:\.\d+)?)\s*$/.exec(value);
  const usd = match ? Number(match[1]) : NaN;
  if (!(usd > 0) || usd > 1_000_000) throw new ConfigError(`${flag}: expected an amount of USD above 0 such as "5" or "0.50", got "${value}"`);
  return usd;
}

/** The limits `runner resume` and `runner continue` give a new attempt: `--max-steps`, `--max-cost` (USD), `--timeout` (s); ConfigError naming the flag. */
function attemptLimits(options: { maxSteps?: string; maxCost?: string; timeout?: string }): { maxSteps?: number; maxCostUsd?: number; timeoutSec?: number } {
  const maxSteps = options.maxSteps ? positiveInteger(options.maxSteps, "--max-steps") : undefined;
  const maxCostUsd = options.maxCost === undefined ? undefined : parseUsd(options.maxCost, "--max-cost");
  const timeoutSec = options.timeout === undefined ? undefined : parseDuration(options.timeout, "--timeout") / 1000;
  return {
    ...(maxSteps ? { maxSteps } : {}),
    ...(maxCostUsd === undefined ? {} : { maxCostUsd }),
    ...(timeoutSec === undefined ? {} : { timeoutSec }),
  };
}

/**
 * `runner resume <run-id>`: continue an interrupted, crashed or errored run
 * (same branch, a new container, the persisted conversation); returns the exit code.
 */
export async function resumeCommand(
  idOrPrefix: string,
  options: { json?: boolean; maxSteps?: string; maxCost?: string; timeout?: string; outputLastMessage?: string },
  signal: AbortSignal,
): Promise<number> {
  const limits = attemptLimits(options);
  const runner = Runner.create({ home: runnerHome() });
  const view = options.json ? null : new ProgressView();
  const run = await runner.resume(idOrPrefix, {
    signal,
    ...limits,
    ...terminalApprovals(view),
    ...streamedText(view),
  });
  if (!options.json) process.stdout.write(`resuming run ${run.id} at model call ${run.resumed!.atModelCall}\n`);
  // The validated task the run keeps (task.json); the terminal shows this attempt's events only.
  const task = run.task;
  return follow(run, task, options, view, run.resumed!.earlierEvents);
}

/**
 * `runner continue <run-id> "message"`: a new attempt of an ended run with
 * the user's message after its conversation (Runner.continue); returns the exit code.
 */
export async function continueCommand(
  idOrPrefix: string,
  message: string,
  options: { json?: boolean; maxSteps?: string; maxCost?: string; timeout?: string; merge?: boolean; outputLastMessage?: string },
  signal: AbortSignal,
): Promise<number> {
  const limits = attemptLimits(options);
  const runner = Runner.create({ home: runnerHome() });
  const view = options.json ? null : new ProgressView();
  const run = await runner.continue(idOrPrefix, message, {
    signal,
    ...limits,
    ...(options.merge ? { merge: true } : {}),
    ...terminalApprovals(view),
    ...streamedText(view),
  });
  if (!options.json) process.stdout.write(`continuing run ${run.id} at model call ${run.resumed!.atModelCall}\n`);
  return follow(run, run.task, options, view, run.resumed!.earlierEvents);
}

/**
 * Shows a run as it happens (the progress view on stderr, or with `--json`
 * the CloudEvents lines on stdout, from sequence number `from`), then the
 * outcome; returns the exit code.
 */
async function follow(
  run: RunHandle,
  task: Task,
  options: { json?: boolean; outputLastMessage?: string },
  view: ProgressView | null,
  from = 0,
): Promise<number> {
  const shown = (async () => {
    for await (const envelope of run.events({ from })) {
      if (options.json) process.stdout.write(terminalSafeJson(`${JSON.stringify(envelope)}\n`));
      else view!.show(envelope);
    }
  })();
  const report = await run.result;
  await shown;
  view?.close();
  // OpenTelemetry (opt-in, OTEL_EXPORTER_OTLP_ENDPOINT): sent before the CLI exits.
  if (otlpTracesEnabled(process.env)) {
    const problem = await (await import("../agency/trace/otlp-export.js")).exportRunTrace({ directory: run.directory, report, model: task.model });
    if (problem) process.stderr.write(terminalSafe(`warning: ${problem}\n`));
  }
  // For scripts: the agent's final answer alone (empty when it gave none), whatever the outcome.
  if (options.outputLastMessage) writeFileSync(options.outputLastMessage, report.final_message ?? "");
  if (options.json) process.stdout.write(terminalSafeJson(`${JSON.stringify(resultLine(report, run.directory))}\n`));
  else process.stdout.write(outcomeText(task, { report, runDirectory: run.directory }));
  return exitCodeOfReport(report);
}

/** The main agent's reply shown as it streams, when the progress view is on a terminal (live only: not in events.jsonl). */
function streamedText(view: ProgressView | null): { onModelText?: (text: ModelText) => void } {
  return view?.showsStreamedText ? { onModelText: (text) => view.showModelText(text) } : {};
}

/**
 * The last line of `--json` (docs/command-line.md "Command line"): not an event (no
 * `specversion`, not in events.jsonl), so the lines before it are
 * events.jsonl's exactly and a reader stops at `type: "runner.result"`.
 * `report` is the absolute path of report.json. (No exit code: the
 * command's is its own, e.g. 1 where `--timeout` cancelled the run.)
 */
function resultLine(report: RunReport, runDirectory: string) {
  return {
    type: "runner.result",
    run_id: report.run_id,
    status: report.status,
    reason: report.reason,
    report: join(runDirectory, RUN_FILES.report),
  };
}

/**
 * The task of `runner exec`: the task file (with `--max-steps` applied), or
 * the ad-hoc task the flags describe, validated like a task file (paths
 * relative to the current directory). Throws ConfigError / TaskValidationError
 * naming the flag or field.
 */
export function loadTask(taskFile: string | undefined, options: ExecOptions, defaults?: (workspacePath: string) => TaskDefaults): Task {
  if (taskFile && (options.instruction || options.workspace)) {
    throw new ConfigError("give either a task file or --instruction/--workspace (-C), not both");
  }
  if (taskFile && !existsSync(taskFile) && !/\.ya?ml$/i.test(taskFile) && /\s/.test(taskFile.trim())) {
    // `codex exec "fix the test"` takes a prompt; here the argument is a task file, and a prompt needs its flag.
    throw new ConfigError(
      `${JSON.stringify(taskFile)} is not a task file; for an ad-hoc task give the instruction as a flag: runner exec --instruction ${JSON.stringify(taskFile)}`,
    );
  }
  if (taskFile) {
    const adHoc = AD_HOC_FLAGS.filter(([key]) => options[key] !== undefined && !(Array.isArray(options[key]) && options[key].length === 0));
    if (adHoc.length) {
      throw new ConfigError(
        `${adHoc.map(([, flag]) => flag).join(", ")}: ad-hoc task flags (with --instruction); with a task file, set the field in ${taskFile}`,
      );
    }
    return withLimitFlags(loadTaskFile(taskFile, { defaults }), options);
  }
  if (!options.instruction) {
    throw new ConfigError('missing task: run `runner exec path/to/task.yaml`, or `runner exec --instruction "..." --workspace DIR`');
  }
  const workspace = options.workspace ?? enclosingRepository(process.cwd());
  if (!workspace) {
    throw new ConfigError("--workspace: an ad-hoc task needs the repository to work on: run it inside one, or give `--workspace DIR` (`-C DIR`)");
  }
  const raw: Record<string, unknown> = {
    name: options.name ?? "adhoc",
    instruction: options.instruction,
    workspace,
  };
  if (options.maxSteps) raw.max_steps = positiveInteger(options.maxSteps, "--max-steps");
  if (options.verify) raw.verify = { command: options.verify };
  if (options.model) raw.model = modelFlag(options.model);
  if (options.policy) raw.policy = options.policy;
  const sandbox: Record<string, unknown> = {};
  if (options.image) sandbox.image = options.image;
  if (options.allowHost?.length) sandbox.network = { allow: options.allowHost };
  if (Object.keys(sandbox).length) raw.sandbox = sandbox;
  try {
    return withLimitFlags(validateTask(defaults ? applyDefaults(raw, defaults(resolve(workspace))) : raw, null, process.cwd()), options);
  } catch (error) {
    // The problems name task fields; say which flag set each.
    if (error instanceof TaskValidationError)
      throw new TaskValidationError(
        "ad-hoc task",
        error.problems.map((problem) => ({ ...problem, path: flagOf(problem.path) })),
      );
    throw error;
  }
}

/** The limits flags set on any task: `--max-steps` (max_steps), `--timeout` (timeout_sec), `--max-cost` (model.max_cost_usd). */
function withLimitFlags(task: Task, options: ExecOptions): Task {
  return {
    ...task,
    ...(options.maxSteps ? { max_steps: positiveInteger(options.maxSteps, "--max-steps") } : {}),
    ...(options.timeout === undefined ? {} : { timeout_sec: parseDuration(options.timeout, "--timeout") / 1000 }),
    model: options.maxCost === undefined ? task.model : { ...task.model, max_cost_usd: parseUsd(options.maxCost, "--max-cost") },
  };
}

/** The flag of an ad-hoc task's field path, e.g. `sandbox.network.allow.0` → `--allow-host (sandbox.network.allow.0)`. */
function flagOf(path: string): string {
  const flags: [string, string][] = [
    ["sandbox.network.allow", "--allow-host"],
    ["sandbox.image", "--image"],
    ["model.name", "--model"],
    ["policy", "--policy"],
    ["verify.command", "--verify"],
    ["name", "--name"],
    ["max_steps", "--max-steps"],
    ["workspace", "--workspace"],
    ["instruction", "--instruction"],
  ];
  const flag = flags.find(([field]) => path === field || path.startsWith(`${field}.`))?.[1];
  return flag ? `${flag} (${path})` : path;
}

function positiveInteger(value: string, flag: string): number {
  const number = Number(value);
  if (!Number.isInteger(number) || number <= 0) throw new ConfigError(`${flag}: expected a positive whole number, got "${value}"`);
  return number;
}

/**
 * The top level of the git repository `directory` lies in (the nearest
 * ancestor with a `.git` entry, as git finds it without GIT_DIR, not looking
 * above a GIT_CEILING_DIRECTORIES entry), or null. Found by looking at the
 * file system: nothing of the repository is run. ConfigError when that
 * repository is not the current user's (a `.git` another user planted above,
 * e.g. in /tmp): git itself calls such a repository dubious.
 */
function enclosingRepository(directory: string): string | null {
  const ceilings = (process.env.GIT_CEILING_DIRECTORIES ?? "")
    .split(":")
    .filter(Boolean)
    .map((ceiling) => resolve(ceiling));
  const start = resolve(directory);
  for (let current = start; ; current = dirname(current)) {
    // As git: it never goes up into a ceiling directory (git(1), GIT_CEILING_DIRECTORIES).
    if (current !== start && ceilings.includes(current)) return null;
    const dotGit = join(current, ".git");
    if (existsSync(dotGit)) {
      const uid = process.getuid?.();
      const owner = statSync(dotGit).uid;
      if (uid !== undefined && owner !== uid) {
        throw new ConfigError(`--workspace: the repository at ${current} belongs to another user (uid ${owner}); give the repository to work on with -C DIR`);
      }
      return current;
    }
    if (dirname(current) === current) return null;
  }
}
