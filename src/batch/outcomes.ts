import { ConfigError, RunnerError, errorMessage } from "../errors.js";
import type { RunReport } from "../run/run-report.js";

/** A batch task's (and a task attempt's) outcome (docs/batch.md "Outcomes"). */
export type BatchTaskStatus = "succeeded" | "failed" | "error" | "skipped";

/** The outcome of one finished run (or refused start); `skipped` is the batch's word for what never finished. */
export interface Outcome {
  status: Exclude<BatchTaskStatus, "skipped">;
  /** The run's report.json reason (`verified`, `verify_failed`, `rate_limited`, `docker_unreachable`, ...), or the batch's (`interrupted`, `not_run`, `not_merged`, ...). */
  reason: string;
  error: string | null;
}

/**
 * Run reasons of status `error` that the agent's own doing causes, so they are
 * `failed` and never earn a retry: the conversation outgrew the model's
 * context window after clearing and compaction (docs/runs.md "Context management"),
 * which another attempt of the same agent reproduces.
 */
const AGENT_CAUSED_ERROR_REASONS = new Set(["context_window_exceeded"]);

/**
 * The batch outcome of one finished run (the contract in docs/batch.md
 * "Outcomes"): `succeeded` as the run says, unless the task's
 * `on_success: merge` did not happen: then `failed`, reason `not_merged`
 * (exit 4 of `runner exec`; not retried: a new attempt redoes the agent's
 * work, while the cause is your checkout); `failed` for everything the
 * agent's work causes (the run's own `failed`: verify failed or timed out,
 * also when the verify code killed its sandbox or ran out of memory in it,
 * `max_steps`, `commit_timed_out`, `disk_limit_exceeded`; and
 * {@link AGENT_CAUSED_ERROR_REASONS}); `error` for the infrastructure reasons
 * a run reports with status `error` (Docker and the sandbox: `docker_unreachable`, `image_missing`, `sandbox_start_failed`, ...;
 * the model endpoint after its retries: `rate_limited`, `server_error`,
 * `timeout`, `connection_error`, ...; `runner_died`, `internal_error`).
 * Returns null for `cancelled`: the run did not finish, and `runner batch
 * resume` continues it.
 */
export function outcomeOfReport(report: Pick<RunReport, "status" | "reason" | "error"> & Partial<Pick<RunReport, "merge">>): Outcome | null {
  switch (report.status) {
    case "succeeded":
      // As `runner exec` exits 4 for it: the merge the task asked for is part of what it asked for.
      if (report.merge && !report.merge.merged) return { status: "failed", reason: "not_merged", error: report.merge.detail };
      return { status: report.status, reason: report.reason, error: report.error ?? null };
    case "failed":
      return { status: report.status, reason: report.reason, error: report.error ?? null };
    case "error":
      return { status: AGENT_CAUSED_ERROR_REASONS.has(report.reason) ? "failed" : "error", reason: report.reason, error: report.error ?? null };
    case "cancelled":
      return null;
  }
}

/**
 * The outcome of a start that was refused before a run existed
 * (`Runner.startTask` rejected): Docker or the image unusable is the
 * infrastructure's; its reason says what failed ({@link RunnerError.reason}:
 * `image_missing`, `docker_unreachable`, ...), as report.json names the
 * errors that end a run. A task the runner refuses as bad input (a
 * ConfigError: e.g. its verify command's program is not in its image) is
 * `task_invalid`.
 */
export function outcomeOfStartFailure(error: unknown): Outcome {
  if (error instanceof ConfigError) return invalidTask(errorMessage(error));
  return { status: "error", reason: error instanceof RunnerError ? error.reason : "internal_error", error: errorMessage(error) };
}

/** A task the loader (or the runner, before its run) refused: `error`, reason `task_invalid`, the message as its error. */
export function invalidTask(message: string): Outcome {
  return { status: "error", reason: "task_invalid", error: message };
}

/**
 * Reasons of errors known before a run of the task starts: its task file
 * refused (`task_invalid`) or its image not to be had (`image_unavailable`,
 * src/batch/prepare-images.ts). Such an error is its task's outcome: it is
 * never retried (another try fails the same way) and never counts toward
 * the `--max-errors` rule that stops a batch, which is for errors of runs (a
 * daemon that went away, an endpoint that is down); the gate counts it.
 */
const BEFORE_RUN_REASONS = new Set(["task_invalid", "image_unavailable"]);

/** Whether an outcome is an error known before any run of its task started ({@link BEFORE_RUN_REASONS}). */
export function isBeforeRunError(outcome: { status: string; reason: string }): boolean {
  return outcome.status === "error" && BEFORE_RUN_REASONS.has(outcome.reason);
}
