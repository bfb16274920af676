import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { Task } from "../config/load-task.js";
import { newTraceId } from "../events/cloud-event-log.js";
import type { EventSink } from "../events/run-events.js";
import type { ModelClient } from "../model/model-client.js";
import type { SandboxProvider } from "../sandbox/sandbox.js";
import type { DiskEnforcementChoice } from "../workspace/run-disk.js";
import type { LogSettings } from "../logging/logger.js";
import type { AskApproval } from "./permission-guard.js";
import type { RunEmbedding } from "./run-embedding.js";
import { deliverMainAgent, throwIfAborted } from "./phases/deliver-main.js";
import { finalizeRun, recordFailure } from "./phases/finalize.js";
import { openWorkspace } from "./phases/open-workspace.js";
import { runMainAgent } from "./phases/run-main-agent.js";
import { startEnvironment } from "./phases/start-environment.js";
import { claimRun, type ResumableRun } from "./resumable-run.js";
import { newRunId } from "./run-id.js";
import { exitCodeOfReport, type RunReport } from "./run-report.js";
import { openRunScope } from "./run-scope.js";
import { RunStore } from "./run-store.js";

export { containerEnvironment } from "./phases/start-environment.js";
export { finalAnswerOf, findContinuableRun, findResumableRun, type ResumableRun } from "./resumable-run.js";

export interface RunDependencies {
  sandboxProvider: SandboxProvider;
  /** Opens the task's model (for a scripted task this starts the local server); `close` stops it. */
  openModel(task: Task): Promise<{ client: ModelClient; close(): Promise<void> }>;
  /** `$RUNNER_HOME`; runs go to `<home>/runs/<run-id>/`. */
  runnerHome: string;
  /** How `sandbox.limits.disk` is held: `auto` (default; a filesystem of the run's own when the runner can make one) or `monitor` ($RUNNER_DISK_ENFORCEMENT). */
  diskEnforcement?: DiskEnforcementChoice;
  /** Where runs write their diagnostic log (default fd 2 at RUNNER_LOG_LEVEL). */
  log?: LogSettings;
}

export interface RunOptions {
  signal: AbortSignal;
  /** Extra live consumer of run events (the terminal view). */
  events?: EventSink;
  /** Receives every CloudEvents line as written (for `--json`). */
  onEnvelope?: (line: string) => void;
  /** Called as soon as the run id and directory exist. */
  onRunCreated?: (runId: string, runDirectory: string) => void;
  /** Host variables the task may pass in (`sandbox.pass_env`); default process.env. */
  hostEnvironment?: NodeJS.ProcessEnv;
  /** Asks the person at the terminal to approve a call; absent when nobody can be asked (then the policy's `confirmations` decides). */
  askApproval?: AskApproval;
  /** Where a front end places the run (base and merge branch, host tools, read-only workspace). */
  embedding?: RunEmbedding;
}

export interface RunResult {
  report: RunReport;
  exitCode: number;
  runDirectory: string;
}

/**
 * Runs one task end to end: worktree on its run branch `runner/<task-name>-<short-id>`, sandbox, agent
 * loop, host-side commit, verification in the sandbox, patch.diff and
 * report.json. Everything it started (container, model server, worktree
 * directory) is gone when it returns or throws; the branch stays. Fatal
 * problems become the report's `error` status rather than exceptions, except
 * for failures before the run directory exists (bad workspace: ConfigError).
 */
export async function runTask(task: Task, dependencies: RunDependencies, options: RunOptions): Promise<RunResult> {
  const runId = newRunId();
  const runDirectory = join(dependencies.runnerHome, "runs", runId);
  mkdirSync(runDirectory, { recursive: true, mode: 0o700 });
  // What `runner resume` needs to continue the run: the validated task, paths made absolute.
  new RunStore(runDirectory).writeJson("task", task);
  const trace = options.embedding?.trace;
  return executeRun(
    { task, runId, traceId: trace?.traceId ?? newTraceId(), parentSpanId: trace?.parentSpanId ?? null, runDirectory, resume: null },
    dependencies,
    options,
  );
}

/**
 * Continues a run found by {@link findResumableRun}, or by
 * {@link findContinuableRun} with the user's message (with `maxSteps`,
 * `maxCostUsd`, `timeoutSec` as the run's new limits): the same branch and
 * worktree path (the old directory when it is still there, else a new
 * worktree of the branch), a new container, the persisted conversation.
 * Tool calls that finished are not run again; calls that were in flight get
 * an "interrupted" result. Then commit, verification and report as usual.
 */
export async function resumeRun(
  run: ResumableRun,
  dependencies: RunDependencies,
  options: RunOptions & { maxSteps?: number; maxCostUsd?: number; timeoutSec?: number },
): Promise<RunResult> {
  const store = new RunStore(run.runDirectory);
  claimRun(store, run.runId);
  const { maxSteps, maxCostUsd, timeoutSec } = options;
  const task: Task = {
    ...run.task,
    ...(maxSteps ? { max_steps: maxSteps } : {}),
    ...(timeoutSec ? { timeout_sec: timeoutSec } : {}),
    model: maxCostUsd === undefined ? run.task.model : { ...run.task.model, max_cost_usd: maxCostUsd },
  };
  // Raised limits are the run's from now on (a later resume reads task.json).
  if (maxSteps || maxCostUsd !== undefined || timeoutSec) store.writeJson("task", task);
  store.remove("report");
  // The trace recorded in run.json wins: a resume stays in the trace the run began in.
  const parentSpanId = run.lock.parent_span_id ?? options.embedding?.trace?.parentSpanId ?? null;
  return executeRun({ task, runId: run.runId, traceId: run.traceId, parentSpanId, runDirectory: run.runDirectory, resume: run }, dependencies, options);
}

/**
 * One attempt of a run, as five phases over a {@link openRunScope run scope}:
 * open the workspace, start the environment, run the agent, deliver
 * (commit → verify → merge), finalize. Each phase defers what it opened on the
 * scope's clean-up stack; finalize undoes it whatever happened.
 */
async function executeRun(
  run: { task: Task; runId: string; traceId: string; parentSpanId: string | null; runDirectory: string; resume: ResumableRun | null },
  dependencies: RunDependencies,
  options: RunOptions,
): Promise<RunResult> {
  const scope = openRunScope({
    ...run,
    signal: options.signal,
    hostEnvironment: options.hostEnvironment ?? process.env,
    ...(options.events ? { events: options.events } : {}),
    ...(options.onEnvelope ? { onEnvelope: options.onEnvelope } : {}),
    ...(dependencies.log ? { logSettings: dependencies.log } : {}),
    embedding: options.embedding ?? {},
  });
  scope.logger.info({ task: run.task.name, resume: run.resume !== null }, "run started");
  options.onRunCreated?.(run.runId, run.runDirectory);
  const provider = dependencies.sandboxProvider;
  try {
    const workspace = await openWorkspace(scope, provider, dependencies.diskEnforcement);
    throwIfAborted(scope.signal);
    const environment = await startEnvironment(scope, workspace, {
      sandboxProvider: provider,
      openModel: dependencies.openModel,
      askApproval: options.askApproval ?? null,
    });
    const outcome = await runMainAgent(scope, workspace, environment, provider);
    await deliverMainAgent(scope, workspace, environment, outcome, provider);
  } catch (error) {
    recordFailure(scope, error);
  }
  const report = await finalizeRun(scope);
  scope.logger.info({ status: report.status, reason: report.reason, duration_ms: report.duration_ms }, "run finished");
  return { report, exitCode: exitCodeOfReport(report), runDirectory: run.runDirectory };
}
