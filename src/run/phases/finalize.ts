import { existsSync } from "node:fs";
import { restoreSession } from "../../agent/session-journal.js";
import { CancelledError, RunnerError, errorMessage } from "../../errors.js";
import { SandboxLostToAgentError } from "../../sandbox/sandbox.js";
import { exitCodeOfReport, type RunReport } from "../run-report.js";
import type { RunScope } from "../run-scope.js";
import { setOutcome } from "./deliver-main.js";
import { readRunLock, writeRunLock } from "../run-lock.js";
import { deleteBranchAt } from "../../workspace/run-worktree.js";

/**
 * The report's outcome for a run that ended by an exception: `failed` when a
 * monitored disk limit stopped it or its sandbox was lost to what ran in it
 * past the restarts (`sandbox_lost`: the agent's doing) or its `timeout_sec`
 * passed (`timed_out`: a limit the user set, like max_steps), `cancelled` when the
 * caller cancelled it (the reason given to `RunHandle.cancel` kept), `error`
 * otherwise, with the error's reason: what failed (`rate_limited`,
 * `image_missing`, `docker_unreachable`, ...; {@link RunnerError.reason}).
 */
export function recordFailure(scope: RunScope, error: unknown): void {
  const { report } = scope;
  if (scope.diskStop.signal.aborted && !scope.callerSignal.aborted) {
    setOutcome(report, "failed", "disk_limit_exceeded");
  } else if (scope.timeStop.signal.aborted && !scope.callerSignal.aborted) {
    setOutcome(report, "failed", "timed_out");
    report.error = `the run's time limit was reached (timeout_sec ${scope.task.timeout_sec})`;
  } else if (error instanceof CancelledError || scope.callerSignal.aborted) {
    setOutcome(report, "cancelled", "interrupted");
    // The caller's reason is kept: cancel(reason), or the reason given to the start signal's abort().
    const reason: unknown = scope.callerSignal.reason;
    const said =
      reason instanceof CancelledError
        ? reason.message === "interrupted"
          ? null
          : reason.message
        : typeof reason === "string"
          ? reason
          : reason instanceof Error && reason.name !== "AbortError"
            ? reason.message
            : null;
    if (said) report.error = `cancelled: ${said}`;
  } else if (error instanceof SandboxLostToAgentError) {
    setOutcome(report, "failed", "sandbox_lost");
    report.error = errorMessage(error);
  } else {
    setOutcome(report, "error", error instanceof RunnerError ? error.reason : "internal_error");
    report.error = errorMessage(error);
  }
}

/**
 * Phase 5, finalize: undoes what the phases opened (the clean-up stack: tasks,
 * MCP servers, model, the sandbox and the worktree with its partial-work
 * commit, the disk), then writes session.json and report.json (redacted,
 * atomically), emits `run.finished`, closes events.jsonl and takes the run's
 * redactor off the loggers. Returns the report as written. Never throws for
 * a clean-up problem (those are `cleanup.failed` events).
 */
export async function finalizeRun(scope: RunScope): Promise<RunReport> {
  const { report, events, store } = scope;
  scope.cancelTimeLimit();
  await scope.cleanup.run(events, scope.logger);
  if (await dropUnchangedBranch(scope)) report.branch = null;
  scope.journal.close();
  // The conversation as the journal holds it (already redacted), for readers that want one JSON document.
  const agents = Object.fromEntries([...restoreSession(store.path("journal"))].map(([id, agent]) => [id, { messages: agent.messages }]));
  store.writeJson("session", { run_id: scope.runId, trace_id: scope.traceId, task: scope.task.name, agents });
  report.duration_ms = Date.now() - scope.started;
  // What callers get is what report.json holds: redacted (a summary printed from it must not show a secret).
  const written = scope.redactDeep(report);
  store.writeJson("report", written);
  events.emit({
    type: "run.finished",
    data: { status: report.status, exit_code: exitCodeOfReport(report), duration_ms: report.duration_ms, ...(report.error ? { error: report.error } : {}) },
  });
  scope.log.close();
  scope.releaseLogRedactor();
  if (scope.resume) store.remove("resumeLock");
  return written;
}

/**
 * Deletes the run's branch when the run changed nothing (the branch still at
 * its base commit, every worktree of the run gone): no `runner/...` branch identical to
 * the user's piles up. run.json says so (`branch_dropped`), and `runner
 * resume` or `runner continue` makes the branch again at the base commit.
 * True when it was deleted; a branch that cannot be (in use) stays.
 */
async function dropUnchangedBranch(scope: RunScope): Promise<boolean> {
  const lock = readRunLock(scope.store.directory);
  const { report } = scope;
  if (!lock?.base_commit || !report.branch || lock.branch !== report.branch) return false;
  // A worktree left behind (its sandbox not confirmed gone) keeps the disk and the branch, for the next start's sweep.
  if (existsSync(scope.paths.disk)) return false;
  if (report.head_commit !== null && report.head_commit !== lock.base_commit) return false;
  try {
    if (!(await deleteBranchAt(lock.repository, lock.branch, lock.base_commit))) return false;
  } catch (error) {
    scope.events.emit({ type: "cleanup.failed", data: { what: `the unchanged branch ${lock.branch}`, error: errorMessage(error) } });
    return false;
  }
  writeRunLock(scope.store.directory, { ...lock, branch_dropped: true });
  return true;
}
