import { join } from "node:path";
import type { BatchOptions, BatchPlan, BatchStatus, JournalLine, Tokens } from "./batch-state.js";
import { ConfigError } from "../errors.js";
import { roundUsd } from "../model/pricing.js";
import { isBeforeRunError, type BatchTaskStatus } from "./outcomes.js";

/** One run of a task (an attempt's try), as batch-report.json lists it. */
export interface BatchAttempt {
  /** 1-based: which of the `--attempts` independent attempts. */
  attempt: number;
  /** 1-based: retries of an infrastructure error and restarts after a batch crash count on. */
  try: number;
  run_id: string | null;
  /** `$RUNNER_HOME/runs/<run-id>/`, or null when no run was made. */
  run_dir: string | null;
  status: BatchTaskStatus;
  reason: string;
  error: string | null;
  steps: number | null;
  tokens: Tokens | null;
  /** What the run's model calls cost, USD (report.json `cost_usd`); null when not priced or not run. */
  cost_usd: number | null;
  duration_ms: number | null;
  /** Absolute path of the run's patch.diff, when it has one. */
  patch: string | null;
}

export interface BatchTaskReport {
  /** The task id (docs/batch.md "Task discovery"). */
  name: string;
  task_file: string;
  status: BatchTaskStatus;
  reason: string;
  error: string | null;
  /** With `--attempts` > 1: some attempts succeeded and others failed. */
  flaky: boolean;
  attempts: BatchAttempt[];
}

/** batch-report.json (docs/batch.md "The batch directory"). */
export interface BatchReport {
  batch_id: string;
  /** `running` while the batch goes on, else its end state. */
  status: BatchStatus | "running";
  /** The exit code `runner batch run` ends with for this status; null while running. */
  exit_code: number | null;
  created_at: string;
  updated_at: string;
  input: BatchPlan["input"];
  options: BatchOptions;
  tasks: BatchTaskReport[];
  totals: BatchTotals;
  gate: { min_pass_rate: number; max_errors: number; passed: boolean; detail: string };
  /** Ids of flaky tasks. */
  flaky: string[];
  /** For a report made by `runner batch merge`: the batch ids of the shard reports. */
  merged_from?: string[];
}

export interface BatchTotals {
  tasks: number;
  succeeded: number;
  failed: number;
  error: number;
  skipped: number;
  /** succeeded / tasks; null for no tasks. With `--attempts k` this is pass@k. */
  pass_rate: number | null;
  /** succeeded / (tasks − error): the agent's pass rate, errors (infrastructure, or a task that could not start) left out; null when every task is an error. */
  pass_rate_without_errors: number | null;
  /** Runs made (every try of every attempt that got a run, finished or not: an interrupted run counts; a refused start does not). */
  runs: number;
  /** Attempts whose last try ended in an error: an infrastructure error, or a task that could not start (task_invalid, image_unavailable); what `--max-errors` counts. */
  errored_attempts: number;
  /** Tries after an infrastructure error (`--retries`). */
  retries: number;
  /** Sum over every run, incl. the provider's cached prompt tokens. */
  tokens: Tokens & { total: number };
  /** Sum of every run's `cost_usd`, USD; null when a run that was made is not priced (a partial sum would read as the whole). */
  cost_usd: number | null;
  /** Run durations (ms): nearest-rank p50 and p90, and the longest; null without finished runs. */
  duration_ms: { p50: number; p90: number; max: number } | null;
  /** Wall time of the batch so far, ms: from its first to its last journal line (resumes included, the time between them not). */
  wall_ms: number;
}

/** Where a batch is: running, or ended (interrupted or not); `skipReason` says why tasks that did not settle are `skipped`. */
export interface BatchState {
  ended: boolean;
  interrupted: boolean;
  skipReason: SkipReason;
}

/** Why a task that did not finish is `skipped`. */
export type SkipReason = "interrupted" | "stopped_after_errors" | "budget_exhausted" | "deadline_reached" | "not_run";

/** Runs made for a task (its attempts that got a run id, finished or not), as the tables' `runs` column and `totals.runs` count them. */
export function runCount(task: Pick<BatchTaskReport, "attempts">): number {
  return task.attempts.filter((attempt) => attempt.run_id !== null).length;
}

/**
 * Whether an attempt is settled, given its finished tries in order: the last
 * succeeded or failed, or ended in an error known before the run (never
 * retried), or in an error with no retry left.
 */
export function attemptSettled(finished: Pick<BatchAttempt, "status" | "reason">[], retries: number): boolean {
  const last = finished.at(-1);
  if (!last) return false;
  if (last.status !== "error" || isBeforeRunError(last)) return true;
  return finished.filter((attempt) => attempt.status === "error").length > retries;
}

/**
 * The report of a batch from its plan and journal alone (so an interrupted,
 * killed and resumed batch reports as an uninterrupted one does): each
 * task's runs in order; its status from its attempts (pass@k: `succeeded`
 * when any attempt succeeded, else `failed` when any failed, else `error`;
 * `skipped` when an attempt is unsettled, with `skipReason`); totals; and the
 * gate (`--max-errors`, then `--min-pass-rate` over tasks without an
 * infrastructure error).
 */
export function buildBatchReport(plan: BatchPlan, journal: JournalLine[], home: string, state: BatchState): BatchReport {
  const runsDirectory = join(home, "runs");
  const byTask = new Map<string, Map<number, BatchAttempt[]>>();
  const triesOf = (task: string, attempt: number) => {
    const attempts = byTask.get(task) ?? new Map<number, BatchAttempt[]>();
    byTask.set(task, attempts);
    const tries = attempts.get(attempt) ?? [];
    attempts.set(attempt, tries);
    return tries;
  };
  for (const line of journal) {
    if (line.type === "attempt.finished") {
      const tries = triesOf(line.task, line.attempt);
      const index = tries.findIndex((entry) => entry.try === line.try);
      const entry: BatchAttempt = {
        attempt: line.attempt,
        try: line.try,
        run_id: line.run_id,
        run_dir: line.run_id ? join(runsDirectory, line.run_id) : null,
        status: line.status,
        reason: line.reason,
        error: line.error,
        steps: line.steps,
        tokens: line.tokens,
        cost_usd: line.cost_usd ?? null,
        duration_ms: line.duration_ms,
        patch: line.patch && line.run_id ? join(runsDirectory, line.run_id, line.patch) : null,
      };
      if (index >= 0) tries[index] = entry;
      else tries.push(entry);
    } else if (line.type === "attempt.started" || line.type === "attempt.abandoned") {
      const tries = triesOf(line.task, line.attempt);
      if (tries.some((entry) => entry.try === line.try)) {
        const entry = tries.find((candidate) => candidate.try === line.try)!;
        if (line.type === "attempt.abandoned" && entry.status === "skipped") Object.assign(entry, { reason: "abandoned", error: line.reason });
        continue;
      }
      tries.push({
        attempt: line.attempt,
        try: line.try,
        run_id: line.run_id,
        run_dir: join(runsDirectory, line.run_id),
        status: "skipped",
        reason: line.type === "attempt.abandoned" ? "abandoned" : state.ended ? state.skipReason : "running",
        error: line.type === "attempt.abandoned" ? line.reason : null,
        steps: null,
        tokens: null,
        cost_usd: null,
        duration_ms: null,
        patch: null,
      });
    }
  }

  const k = plan.options.attempts;
  let erroredAttempts = 0;
  const tasks: BatchTaskReport[] = plan.tasks.map(({ id, task_file }) => {
    const attempts = byTask.get(id) ?? new Map<number, BatchAttempt[]>();
    const finals: BatchAttempt[] = [];
    for (let attempt = 1; attempt <= k; attempt += 1) {
      const finished = (attempts.get(attempt) ?? []).filter((entry) => entry.status !== "skipped").sort((a, b) => a.try - b.try);
      const last = finished.at(-1);
      // While the batch runs, an error with a retry left is not the attempt's outcome yet; once it has ended, it is.
      if (last && (state.ended || attemptSettled(finished, plan.options.retries))) finals.push(last);
    }
    erroredAttempts += finals.filter((entry) => entry.status === "error").length;
    const all = [...attempts.values()].flat().sort((a, b) => a.attempt - b.attempt || a.try - b.try);
    const outcome = finals.length === k ? taskOutcome(finals) : { status: "skipped" as const, reason: state.skipReason, error: null };
    const flaky = finals.some((entry) => entry.status === "succeeded") && finals.some((entry) => entry.status === "failed");
    return { name: id, task_file, status: outcome.status, reason: outcome.reason, error: outcome.error, flaky, attempts: all };
  });

  return reportOf(
    { batch_id: plan.batch_id, created_at: plan.created_at, input: plan.input, options: plan.options },
    tasks,
    totalsOf(tasks, erroredAttempts, wallTime(journal)),
    state.ended ? { interrupted: state.interrupted } : null,
  );
}

/** The report around tasks and totals: the gate, and the status (null `ended`: running). */
function reportOf(
  header: Pick<BatchReport, "batch_id" | "created_at" | "input" | "options"> & { merged_from?: string[] },
  tasks: BatchTaskReport[],
  totals: BatchTotals,
  ended: { interrupted: boolean } | null,
): BatchReport {
  const gate = gateOf(totals, tasks, header.options);
  const status = ended ? finalStatus(totals, header.options, gate.passed, ended.interrupted) : "running";
  return {
    ...header,
    status,
    exit_code: status === "running" ? null : exitCodeOf(status),
    updated_at: new Date().toISOString(),
    tasks,
    totals,
    gate,
    flaky: tasks.filter((task) => task.flaky).map((task) => task.name),
  };
}

/** The options a merge requires to be equal across shard reports: they decide outcomes and the gate. */
const MERGE_KEYS = ["attempts", "retries", "min_pass_rate", "max_errors", "filter", "limit"] as const;

/**
 * One report from the reports of a batch's shards (`runner batch merge`):
 * their tasks (each exactly once, in id order), totals recomputed over all
 * of them and the gate, so the result equals the report of the same batch
 * run unsharded, except ids, times (`wall_ms` is the longest shard's: they
 * run side by side) and `options.shard`. Status `interrupted` when any shard
 * was. Throws ConfigError when a report is still running, the shards'
 * outcome options differ, or a task is in two of them.
 */
export function mergeBatchReports(reports: { file: string; report: BatchReport }[], batchId: string): BatchReport {
  const [first] = reports;
  if (!first) throw new ConfigError("batch merge: give at least one batch-report.json");
  const seen = new Map<string, string>();
  for (const { file, report } of reports) {
    if (report.status === "running")
      throw new ConfigError(`${file}: batch ${report.batch_id} is still running (or was killed: \`runner batch resume ${report.batch_id}\` first)`);
    for (const key of MERGE_KEYS) {
      if (report.options[key] !== first.report.options[key]) {
        throw new ConfigError(
          `${file}: options.${key} is ${JSON.stringify(report.options[key])} but ${first.file} has ${JSON.stringify(first.report.options[key])}; merge only shards of one batch`,
        );
      }
    }
    for (const task of report.tasks) {
      const earlier = seen.get(task.name);
      if (earlier) throw new ConfigError(`task ${task.name} is in both ${earlier} and ${file}; merge each shard once`);
      seen.set(task.name, file);
    }
  }
  const tasks = reports.flatMap(({ report }) => report.tasks).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const erroredAttempts = reports.reduce((sum, { report }) => sum + report.totals.errored_attempts, 0);
  const wallMs = Math.max(...reports.map(({ report }) => report.totals.wall_ms));
  return reportOf(
    {
      batch_id: batchId,
      created_at: reports.map(({ report }) => report.created_at).sort()[0]!,
      input: first.report.input,
      options: { ...first.report.options, shard: null, junit: null, summary: null },
      merged_from: reports.map(({ report }) => report.batch_id),
    },
    tasks,
    totalsOf(tasks, erroredAttempts, wallMs),
    { interrupted: reports.some(({ report }) => report.status === "interrupted") },
  );
}

function taskOutcome(finals: BatchAttempt[]): { status: BatchTaskStatus; reason: string; error: string | null } {
  const pick = (status: BatchTaskStatus, last = false) => {
    const matching = finals.filter((entry) => entry.status === status);
    return last ? matching.at(-1) : matching[0];
  };
  const decisive = pick("succeeded") ?? pick("failed") ?? pick("error", true);
  if (!decisive) return { status: "skipped", reason: "not_run", error: null };
  return { status: decisive.status, reason: decisive.reason, error: decisive.error };
}

function totalsOf(tasks: BatchTaskReport[], erroredAttempts: number, wallMs: number): BatchTotals {
  const count = (status: BatchTaskStatus) => tasks.filter((task) => task.status === status).length;
  const runs = tasks.flatMap((task) => task.attempts);
  const finished = runs.filter((run) => run.status !== "skipped");
  const tokens = { prompt: 0, completion: 0, cached: 0, total: 0 };
  for (const run of finished) {
    if (!run.tokens) continue;
    tokens.prompt += run.tokens.prompt;
    tokens.completion += run.tokens.completion;
    tokens.cached += run.tokens.cached;
  }
  tokens.total = tokens.prompt + tokens.completion;
  // Attempts refused before a run (task_invalid, image_unavailable) cost nothing and are not "unpriced".
  const costs = finished.filter((run) => run.run_id !== null).map((run) => run.cost_usd);
  const cost = costs.every((value): value is number => typeof value === "number") ? roundUsd(costs.reduce((sum, value) => sum + value, 0)) : null;
  const durations = finished.map((run) => run.duration_ms).filter((value): value is number => typeof value === "number");
  const succeeded = count("succeeded");
  const error = count("error");
  return {
    tasks: tasks.length,
    succeeded,
    failed: count("failed"),
    error,
    skipped: count("skipped"),
    pass_rate: tasks.length ? succeeded / tasks.length : null,
    pass_rate_without_errors: tasks.length - error > 0 ? succeeded / (tasks.length - error) : null,
    runs: tasks.reduce((sum, task) => sum + runCount(task), 0),
    errored_attempts: erroredAttempts,
    retries: countRetries(tasks),
    tokens,
    cost_usd: cost,
    duration_ms: durations.length ? { p50: nearestRank(durations, 0.5), p90: nearestRank(durations, 0.9), max: Math.max(...durations) } : null,
    wall_ms: wallMs,
  };
}

/** Tries that followed an infrastructure error of the same attempt. */
function countRetries(tasks: BatchTaskReport[]): number {
  let retries = 0;
  for (const task of tasks) {
    const runs = task.attempts.filter((run) => run.status !== "skipped");
    for (const [index, run] of runs.entries()) {
      const previous = runs[index - 1];
      if (previous && previous.attempt === run.attempt && previous.status === "error") retries += 1;
    }
  }
  return retries;
}

/** Time the batch ran: each process's span from its `batch.started`/`batch.resumed` line to its last line. */
function wallTime(journal: JournalLine[]): number {
  const times = journal.map((line) => Date.parse(line.at));
  let total = 0;
  let start: number | null = null;
  let last: number | null = null;
  for (const [index, line] of journal.entries()) {
    const time = times[index]!;
    if (Number.isNaN(time)) continue;
    if (line.type === "batch.started" || line.type === "batch.resumed") {
      if (start !== null && last !== null) total += last - start;
      start = time;
    }
    last = time;
  }
  if (start !== null && last !== null) total += last - start;
  return total;
}

/** The nearest-rank percentile (the smallest value with at least q of the samples at or below it; NIST/Hyndman-Fan definition 1). */
export function nearestRank(samples: number[], q: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)]!;
}

function gateOf(totals: BatchTotals, tasks: BatchTaskReport[], options: BatchOptions): BatchReport["gate"] {
  const base = { min_pass_rate: options.min_pass_rate, max_errors: options.max_errors };
  if (totals.errored_attempts > options.max_errors) {
    const beforeRun = tasks.filter((task) => isBeforeRunError(task)).length;
    const why =
      beforeRun === 0
        ? "an infrastructure error"
        : beforeRun === totals.errored_attempts
          ? "an error before its run (a refused task file or an image not to be had)"
          : `an error (${beforeRun} before its run: a refused task file or an image not to be had)`;
    return {
      ...base,
      passed: false,
      detail: `${totals.errored_attempts} attempt${totals.errored_attempts === 1 ? "" : "s"} ended in ${why}; --max-errors allows ${options.max_errors}`,
    };
  }
  const rate = totals.pass_rate_without_errors;
  if (rate === null) {
    return totals.tasks === 0
      ? { ...base, passed: true, detail: "no tasks in this batch (an empty shard)" }
      : { ...base, passed: false, detail: "every task ended in an error" };
  }
  const passed = rate >= options.min_pass_rate;
  return {
    ...base,
    passed,
    detail: `pass rate ${formatRate(rate)} (tasks without errors) ${passed ? ">=" : "<"} --min-pass-rate ${options.min_pass_rate}`,
  };
}

export function formatRate(rate: number | null): string {
  return rate === null ? "-" : `${(rate * 100).toFixed(1)}%`;
}

/** The batch status once it has ended: interrupted, else the infrastructure stop, else the gate. */
function finalStatus(totals: BatchTotals, options: BatchOptions, gatePassed: boolean, interrupted: boolean): BatchStatus {
  if (interrupted) return "interrupted";
  if (totals.errored_attempts > options.max_errors) return "error";
  if (totals.tasks > 0 && totals.pass_rate_without_errors === null) return "error";
  return gatePassed ? "passed" : "failed";
}

/** Exit code of `runner batch run`/`resume` (docs/batch.md "Exit codes"). */
function exitCodeOf(status: BatchStatus): number {
  switch (status) {
    case "passed":
      return 0;
    case "failed":
      return 1;
    case "error":
      return 3;
    case "interrupted":
      return 130;
  }
}
