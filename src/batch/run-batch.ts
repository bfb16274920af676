import { setMaxListeners } from "node:events";
import { join } from "node:path";
import { RunStore } from "../run/run-store.js";
import { Mutex, Semaphore } from "async-mutex";
import type { Task } from "../config/load-task.js";
import { ConfigError, errorMessage } from "../errors.js";
import { currentOwner, isOwnerAlive } from "../process/process-owner.js";
import type { RunReport } from "../run/run-report.js";
import type { RunHandle, StartOptions } from "../runner/runner.js";
import { attemptSettled, buildBatchReport, type BatchReport, type SkipReason } from "./batch-report.js";
import { BatchJournal, type AttemptLine, type BatchDirectory, type BatchPlan, type BatchStatus, type FinishedLine, type ProcessLine } from "./batch-state.js";
import { invalidTask, isBeforeRunError, outcomeOfReport, outcomeOfStartFailure, type Outcome } from "./outcomes.js";
import { writeBatchReports } from "./write-reports.js";

/** What a batch needs of a Runner (src/runner/runner.ts): one process, many runs. */
export interface BatchRunner {
  readonly home: string;
  /** `slot` names the batch's task id and attempt (1-based) the run is for: a runner on a queue keys its jobs by them. */
  startTask(task: Task, options?: StartOptions, slot?: { task: string; attempt: number }): Promise<RunHandle>;
  resume(runId: string, options?: StartOptions): Promise<RunHandle>;
}

export interface BatchProgress {
  /** An attempt's try has a run: a new one (`resumed` false) or one of a killed batch continued (`resumed` true). */
  started?(task: string, attempt: number, tryNumber: number, runId: string, resumed: boolean): void;
  /** An attempt's try has an outcome (`done` of `total` attempts settled so far). */
  finished(task: string, attempt: number, tryNumber: number, runId: string | null, outcome: Outcome, settled: { done: number; total: number }): void;
}

/**
 * Runs (or, with journal lines already in `directory`, resumes) a batch:
 * `plan.options.jobs` runs at once through `runner`; each attempt slot is
 * retried on infrastructure errors only (`retries`); every try is journaled
 * in batch.jsonl before and after it runs (fsynced), and batch-report.json
 * (atomically renamed) is rewritten as attempts finish.
 *
 * On resume, an attempt whose run was in flight (started, or interrupted,
 * without an outcome) takes the run's report.json when it finished;
 * otherwise it is continued with `runner.resume(runId)`, or, when the run
 * cannot be resumed, abandoned and started again as a new try. Settled
 * attempts are never run again.
 *
 * Stops starting runs when `signal` aborts (the runs in flight are
 * cancelled with `RunHandle.cancel` and stay unsettled, for resume), when
 * more attempts than `max_errors` ended in an infrastructure error (the runs
 * in flight finish: status `error`), or once `deadline_ms` passed or the
 * finished runs cost `budget_usd` (the runs in flight finish; the attempts
 * not started are `skipped`, reason `deadline_reached` / `budget_exhausted`). Writes every report (batch-report.json,
 * junit.xml, summary.md, report.html and the `--junit`/`--summary` copies)
 * in every case, and returns the final report. Throws ConfigError when
 * another live process runs this batch.
 */
export async function runBatch(runner: BatchRunner, directory: BatchDirectory, signal: AbortSignal, progress?: BatchProgress): Promise<BatchReport> {
  const plan = directory.readPlan();
  // One abort listener per run in flight (each start, each follow).
  setMaxListeners(0, signal);
  const journal = new BatchJournal(directory);
  const lastProcess = journal.lines.findLast((line): line is ProcessLine => line.type === "batch.started" || line.type === "batch.resumed");
  const endedSince = lastProcess && journal.lines.slice(journal.lines.lastIndexOf(lastProcess)).some((line) => line.type === "batch.finished");
  if (lastProcess?.owner && !endedSince && isOwnerAlive(lastProcess.owner)) {
    journal.close();
    throw new ConfigError(`batch ${plan.batch_id} is still running (process ${lastProcess.pid}); stop it first (Ctrl-C or kill), then resume`);
  }
  journal.append({ type: journal.lines.length > 0 ? "batch.resumed" : "batch.started", at: now(), pid: process.pid, owner: currentOwner() });
  const { retries, max_errors: maxErrors, attempts } = plan.options;
  let stopReason: SkipReason | null = null;
  const slots = plan.tasks.flatMap((entry) => Array.from({ length: attempts }, (_, index) => ({ entry, attempt: index + 1 })));
  const finishedOf = (task: string, attempt: number) => journal.linesOf(task, attempt).filter((line): line is FinishedLine => line.type === "attempt.finished");
  const settled = (task: string, attempt: number) => attemptSettled(finishedOf(task, attempt), retries);
  /** Attempts that ended in an error of a run (what `--max-errors` stops on): errors known before a run started are left out. */
  const erroredAttempts = () =>
    slots.filter(({ entry, attempt }) => {
      const last = finishedOf(entry.id, attempt).at(-1);
      return last?.status === "error" && !isBeforeRunError(last) && settled(entry.id, attempt);
    }).length;
  const startedAt = Date.now();
  /** Why no more runs start: the deadline passed, or the runs so far cost the budget. */
  const budgetStop = (): SkipReason | null => {
    const { deadline_ms: deadline, budget_usd: budget } = plan.options;
    if (deadline != null && Date.now() - startedAt >= deadline) return "deadline_reached";
    if (budget != null) {
      const spent = journal.lines.reduce((sum, line) => sum + (line.type === "attempt.finished" ? (line.cost_usd ?? 0) : 0), 0);
      if (spent >= budget) return "budget_exhausted";
    }
    return null;
  };
  const report = (ended: boolean) =>
    buildBatchReport(plan, journal.lines, runner.home, { ended, interrupted: signal.aborted, skipReason: stopReason ?? "not_run" });

  const finish = (task: string, attempt: number, tryNumber: number, runId: string | null, outcome: Outcome, runReport: RunReport | null) => {
    journal.append({
      type: "attempt.finished",
      at: now(),
      task,
      attempt,
      try: tryNumber,
      run_id: runId,
      status: outcome.status,
      reason: outcome.reason,
      error: outcome.error,
      steps: runReport?.steps ?? null,
      tokens: runReport?.usage
        ? { prompt: runReport.usage.prompt_tokens ?? 0, completion: runReport.usage.completion_tokens ?? 0, cached: runReport.usage.cached_tokens ?? 0 }
        : null,
      cost_usd: costOf(runReport),
      duration_ms: runReport?.duration_ms ?? null,
      patch: runReport?.patch ?? null,
    });
    if (outcome.status === "error" && !isBeforeRunError(outcome) && settled(task, attempt) && erroredAttempts() > maxErrors)
      stopReason ??= "stopped_after_errors";
    progress?.finished(task, attempt, tryNumber, runId, outcome, {
      done: slots.filter((slot) => settled(slot.entry.id, slot.attempt)).length,
      total: slots.length,
    });
    directory.writeReport(report(false));
  };

  /** Follows a run to its outcome; false when the batch was interrupted meanwhile (the attempt stays unsettled, for resume). */
  const follow = async (task: string, attempt: number, tryNumber: number, handle: RunHandle): Promise<boolean> => {
    const cancel = () => void handle.cancel("the batch was interrupted");
    signal.addEventListener("abort", cancel, { once: true });
    if (signal.aborted) cancel();
    const runReport = await handle.result.finally(() => signal.removeEventListener("abort", cancel));
    const outcome = outcomeOfReport(runReport);
    if (outcome === null) {
      journal.append({ type: "attempt.interrupted", at: now(), task, attempt, try: tryNumber, run_id: handle.id });
      return false;
    }
    finish(task, attempt, tryNumber, handle.id, outcome, runReport);
    return true;
  };

  // One resume at a time: Runner.resume sweeps dead runs before it looks at one, so none looks before that sweep is done.
  const resumeLock = new Mutex();
  let openStarts!: () => void;
  const startsOpen = new Promise<void>((resolve) => (openStarts = resolve));

  /** Runs one attempt until it is settled: resumes its run in flight, retries infrastructure errors. */
  const runAttempt = async (entry: BatchPlan["tasks"][number], attempt: number) => {
    try {
      await attemptUntilSettled(entry, attempt);
    } finally {
      // Whatever happened to the first resume, nothing else waits on it.
      openStarts();
    }
  };

  const attemptUntilSettled = async (entry: BatchPlan["tasks"][number], attempt: number) => {
    const id = entry.id;
    while (!signal.aborted && !stopReason && !settled(id, attempt)) {
      const lines = journal.linesOf(id, attempt);
      const tryNumber = Math.max(0, ...lines.map((line) => line.try));
      const pending = pendingRun(lines, tryNumber);
      if (pending) {
        let handle: RunHandle;
        try {
          handle = await resumeLock.runExclusive(() => runner.resume(pending, { signal }));
        } catch (error) {
          if (signal.aborted) return;
          // Not resumable (ConfigError: e.g. it died before its first model call): a new try; Docker unusable: this try's outcome.
          if (error instanceof ConfigError)
            journal.append({ type: "attempt.abandoned", at: now(), task: id, attempt, try: tryNumber, run_id: pending, reason: errorMessage(error) });
          else finish(id, attempt, tryNumber, pending, outcomeOfStartFailure(error), null);
          continue;
        } finally {
          openStarts();
        }
        journal.append({ type: "attempt.resumed", at: now(), task: id, attempt, try: tryNumber, run_id: handle.id });
        progress?.started?.(id, attempt, tryNumber, handle.id, true);
        if (!(await follow(id, attempt, tryNumber, handle))) return;
        continue;
      }
      await startsOpen;
      stopReason ??= budgetStop();
      if (signal.aborted || stopReason) return;
      const next = tryNumber + 1;
      if (entry.task === null) {
        finish(id, attempt, next, null, invalidTask(entry.invalid), null);
        continue;
      }
      let handle: RunHandle;
      try {
        handle = await runner.startTask(entry.task, { signal }, { task: id, attempt });
      } catch (error) {
        if (signal.aborted) return;
        finish(id, attempt, next, null, outcomeOfStartFailure(error), null);
        continue;
      }
      journal.append({ type: "attempt.started", at: now(), task: id, attempt, try: next, run_id: handle.id });
      progress?.started?.(id, attempt, next, handle.id, false);
      if (!(await follow(id, attempt, next, handle))) return;
    }
  };

  const semaphore = new Semaphore(plan.options.jobs);
  try {
    // Tasks the loader refused: their outcome is known before any run starts, whatever stops the batch later.
    for (const { entry, attempt } of slots) {
      if (entry.task === null && !settled(entry.id, attempt)) finish(entry.id, attempt, 1, null, invalidTask(entry.invalid), null);
    }
    // Runs a killed batch left in flight that finished before it could write that down: their reports are their outcomes.
    for (const { entry, attempt } of slots) {
      const lines = journal.linesOf(entry.id, attempt);
      const tryNumber = Math.max(0, ...lines.map((line) => line.try));
      const pending = pendingRun(lines, tryNumber);
      const recorded = pending ? finishedReport(runner.home, pending) : null;
      if (pending && recorded) finish(entry.id, attempt, tryNumber, pending, recorded.outcome, recorded.report);
    }
    // The other runs in flight are resumed first: they hold work already paid for, and the first resume sweeps
    // the dead batch's leftovers (Runner.resume does, once), which must be done before any new run starts.
    const pendingFirst = [...slots].sort(
      (a, b) => Number(hasPendingRun(journal, b.entry.id, b.attempt)) - Number(hasPendingRun(journal, a.entry.id, a.attempt)),
    );
    if (!pendingFirst.some(({ entry, attempt }) => hasPendingRun(journal, entry.id, attempt))) openStarts();
    directory.writeReport(report(false));
    try {
      await Promise.all(pendingFirst.map(({ entry, attempt }) => semaphore.runExclusive(() => runAttempt(entry, attempt))));
    } catch (error) {
      // A fault of the batch itself: the reports still say where every task stands.
      writeBatchReports(directory, report(true));
      throw error;
    }
    if (signal.aborted) stopReason = "interrupted";
    const final = report(true);
    journal.append({ type: "batch.finished", at: now(), status: final.status as BatchStatus });
    writeBatchReports(directory, final);
    return final;
  } finally {
    journal.close();
  }
}

/** A run's cost (report.json `cost_usd`), null when it has none. */
function costOf(report: RunReport | null): number | null {
  const cost = (report as { cost_usd?: unknown } | null)?.cost_usd;
  return typeof cost === "number" && Number.isFinite(cost) ? cost : null;
}

function now(): string {
  return new Date().toISOString();
}

/** The run of the latest try when it was started (or resumed, or interrupted) but has neither an outcome nor was abandoned. */
function pendingRun(lines: AttemptLine[], tryNumber: number): string | null {
  const ofTry = lines.filter((line) => line.try === tryNumber);
  if (ofTry.some((line) => line.type === "attempt.finished" || line.type === "attempt.abandoned")) return null;
  const started = ofTry.find((line) => line.type === "attempt.started");
  return started && "run_id" in started && started.run_id ? started.run_id : null;
}

function hasPendingRun(journal: BatchJournal, task: string, attempt: number): boolean {
  const ofAttempt = journal.linesOf(task, attempt);
  return pendingRun(ofAttempt, Math.max(0, ...ofAttempt.map((line) => line.try))) !== null;
}

/**
 * report.json of a run that finished before its batch could journal it:
 * succeeded, failed, or an error other than `runner_died` (which the sweep
 * writes for a run whose runner was killed, and which resume continues).
 */
function finishedReport(home: string, runId: string): { report: RunReport; outcome: Outcome } | null {
  // A report cut short (or not JSON) is no report: the run is resumed or tried again.
  const report = new RunStore(join(home, "runs", runId)).readJson("report") as RunReport | null;
  if (!report) return null;
  if (report.status === "error" && report.reason === "runner_died") return null;
  const outcome = outcomeOfReport(report);
  return outcome ? { report, outcome } : null;
}
