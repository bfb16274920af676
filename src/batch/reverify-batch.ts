import { Semaphore } from "async-mutex";
import { errorMessage, RunnerError } from "../errors.js";
import type { Reverified } from "../run/reverify-run.js";
import type { BatchReport } from "./batch-report.js";

/** One run verified again by {@link reverifyBatch}. */
export interface ReverifiedRun {
  task: string;
  attempt: number;
  run_id: string;
  /** The attempt's outcome in the batch (`succeeded` or `failed`). */
  status: "succeeded" | "failed";
  /** The run's own verdict (report.json `verify.passed`); null when it had none. */
  before: boolean | null;
  /** The verdict now; null when there was nothing to verify (no verify command, no commit) or it could not run (`error`). */
  after: boolean | null;
  exit_code: number | null;
  timed_out: boolean;
  /** Why the verification could not run (infrastructure: Docker, the image, the repository); null when it ran. */
  error: string | null;
}

/** batch-verify.json: the regrade of a batch. */
export interface BatchVerifyReport {
  batch_id: string;
  verified_at: string;
  runs: ReverifiedRun[];
  totals: {
    tasks: number;
    /** Tasks with at least one attempt whose commit passes now, or that succeeded with nothing to verify (pass@k, as the batch counts). */
    passed: number;
    /** passed / tasks; null for no tasks. */
    pass_rate: number | null;
    /** Runs whose verdict is not the one they had. */
    changed: number;
    /** Runs that could not be verified (infrastructure). */
    errors: number;
  };
  /** The batch's `--min-pass-rate` applied to the regraded pass rate. */
  gate: { min_pass_rate: number; passed: boolean };
}

/**
 * Regrades a batch (`runner batch verify`): verifies again the commit of the
 * last try of every attempt that ran to an outcome (`succeeded` or `failed`;
 * infrastructure errors have no commit worth grading), `jobs` at once, with
 * no model call. `reverify` is the Runner's. Never throws for one run: its
 * failure is that run's `error`.
 */
export async function reverifyBatch(
  report: BatchReport,
  reverify: (runId: string) => Promise<Reverified>,
  options: { jobs: number; onRun?: (run: ReverifiedRun) => void },
): Promise<BatchVerifyReport> {
  const targets = report.tasks.flatMap((task) => {
    const lastTries = new Map<number, (typeof task.attempts)[number]>();
    for (const entry of task.attempts) lastTries.set(entry.attempt, entry);
    return [...lastTries.values()]
      .filter((entry) => entry.run_id !== null && (entry.status === "succeeded" || entry.status === "failed"))
      .map((entry) => ({ task: task.name, attempt: entry.attempt, runId: entry.run_id!, status: entry.status as "succeeded" | "failed" }));
  });
  const semaphore = new Semaphore(options.jobs);
  const runs = await Promise.all(
    targets.map((target) =>
      semaphore.runExclusive(async (): Promise<ReverifiedRun> => {
        const base = { task: target.task, attempt: target.attempt, run_id: target.runId, status: target.status };
        let run: ReverifiedRun;
        try {
          const result = await reverify(target.runId);
          run = {
            ...base,
            before: result.before,
            after: result.verify ? result.verify.passed : null,
            exit_code: result.verify?.exit_code ?? null,
            timed_out: result.verify?.timed_out ?? false,
            error: null,
          };
        } catch (error) {
          if (!(error instanceof RunnerError)) throw error;
          run = { ...base, before: null, after: null, exit_code: null, timed_out: false, error: errorMessage(error) };
        }
        options.onRun?.(run);
        return run;
      }),
    ),
  );
  // A run with nothing to verify (no verify command) keeps the outcome it had.
  const passes = (run: ReverifiedRun) => run.after === true || (run.after === null && run.error === null && run.status === "succeeded");
  const passedTasks = new Set(runs.filter(passes).map((run) => run.task));
  const tasks = report.tasks.length;
  const passRate = tasks === 0 ? null : passedTasks.size / tasks;
  const minPassRate = report.options.min_pass_rate;
  return {
    batch_id: report.batch_id,
    verified_at: new Date().toISOString(),
    runs,
    totals: {
      tasks,
      passed: passedTasks.size,
      pass_rate: passRate,
      changed: runs.filter((run) => run.error === null && run.after !== null && run.before !== run.after).length,
      errors: runs.filter((run) => run.error !== null).length,
    },
    gate: { min_pass_rate: minPassRate, passed: (passRate ?? 1) >= minPassRate },
  };
}
