import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ConfigError } from "../errors.js";
import { AppendOnlyFile } from "../events/append-only-file.js";
import { writeAtomically } from "../run/run-store.js";
import type { BatchTask } from "./discover-tasks.js";
import type { BatchTaskStatus } from "./outcomes.js";

/** What `runner batch run` was asked for; `batch.json`, written once when the batch is made, read by `batch resume`. */
export interface BatchPlan {
  batch_id: string;
  created_at: string;
  /** The input as given, its kind and the root task ids are relative to. */
  input: { path: string; kind: string; root: string };
  options: BatchOptions;
  /**
   * The selected tasks, validated (the task as the batch runs it, also when
   * the file changes later); a task the loader refused has `task` null and
   * `invalid` (its outcome: `error`, reason `task_invalid`).
   */
  tasks: BatchTask[];
  /** How many tasks the input held before `--filter`, `--shard` and `--limit`. */
  discovered: number;
}

export interface BatchOptions {
  /** `-j`: runs at once, in this process. */
  jobs: number;
  /** `--attempts`: independent attempts per task (pass@k). */
  attempts: number;
  /** `--retries`: new tries of an attempt that ended in an infrastructure error. */
  retries: number;
  /** `--min-pass-rate`: the least share of passed tasks among those without an infrastructure error, 0..1. */
  min_pass_rate: number;
  /** `--max-errors`: attempts that may end in an infrastructure error (after their retries) before the batch stops. */
  max_errors: number;
  filter: string | null;
  shard: string | null;
  limit: number | null;
  /** `--junit`, `--summary`: absolute paths of the copies written there too. */
  junit: string | null;
  summary: string | null;
  /** `--budget-usd`: no run starts once the batch's runs cost this much (USD, summed over report.json `cost_usd`); absent in older plans. */
  budget_usd?: number | null;
  /**
   * `--nats`, `--pool` (docs/scale-out.md): the tasks run on the pool's workers; `ack_wait_ms` and
   * `max_deliver` as given (null: the pool's own). Absent or null: a local batch.
   */
  nats?: { servers: string[]; pool: string; ack_wait_ms: number | null; max_deliver: number | null } | null;
  /** `--deadline`: no run starts this long (ms) after this process started the batch (or resumed it); absent in older plans. */
  deadline_ms?: number | null;
}

/** Token counts of a run (report.json `usage`). */
export interface Tokens {
  prompt: number;
  completion: number;
  cached: number;
}

/**
 * One line of `batch.jsonl`. Every line names the task (`task`: its id), the
 * attempt (1-based, `--attempts`) and the try (1-based, counting retries and
 * restarts) it is about.
 * - `attempt.started`: the run exists (`run_id`); a kill after this line is
 *   resumed from the run's journal.
 * - `attempt.resumed`: `batch resume` continues that run.
 * - `attempt.finished`: the outcome; `run_id` null when the start was refused.
 * - `attempt.interrupted`: the batch was interrupted (SIGINT) while it ran;
 *   resume continues it.
 * - `attempt.abandoned`: the run of a killed batch could not be resumed
 *   (`reason`); the attempt starts again as a new try.
 * - `batch.started`, `batch.resumed` (the process: `pid`, and `owner`, which
 *   survives pid reuse: src/process/process-owner.ts), `batch.finished` (with `status`).
 */
export type JournalLine =
  | { type: "batch.started" | "batch.resumed"; at: string; pid: number; owner?: string }
  | { type: "batch.finished"; at: string; status: BatchStatus }
  | { type: "attempt.started" | "attempt.resumed" | "attempt.interrupted"; at: string; task: string; attempt: number; try: number; run_id: string }
  | { type: "attempt.abandoned"; at: string; task: string; attempt: number; try: number; run_id: string; reason: string }
  | {
      type: "attempt.finished";
      at: string;
      task: string;
      attempt: number;
      try: number;
      run_id: string | null;
      status: Exclude<BatchTaskStatus, "skipped">;
      reason: string;
      error: string | null;
      steps: number | null;
      tokens: Tokens | null;
      /** The run's report.json `cost_usd` (null when unknown; absent in older journals). */
      cost_usd?: number | null;
      duration_ms: number | null;
      patch: string | null;
    };

/** A journal line about one attempt of one task. */
export type AttemptLine = Extract<JournalLine, { task: string }>;

/** A batch process's start line. */
export type ProcessLine = Extract<JournalLine, { type: "batch.started" | "batch.resumed" }>;

/** A finished try. */
export type FinishedLine = Extract<JournalLine, { type: "attempt.finished" }>;

function attemptKey(task: string, attempt: number): string {
  return `${attempt}\u0000${task}`;
}

/** The batch's end state: `passed` (exit 0), `failed` (1), `error` (3: infrastructure stop), `interrupted` (130). */
export type BatchStatus = "passed" | "failed" | "error" | "interrupted";

/** `$RUNNER_HOME/batches/<batch-id>/` and the files in it. */
export class BatchDirectory {
  constructor(readonly path: string) {}

  static of(home: string, batchId: string): BatchDirectory {
    return new BatchDirectory(join(home, "batches", batchId));
  }

  file(name: "batch.json" | "batch.jsonl" | "batch-report.json" | "junit.xml" | "summary.md" | "report.html" | "batch-verify.json"): string {
    return join(this.path, name);
  }

  /** Makes the directory (mode 0700); a merged batch has only that and its reports. */
  make(): void {
    mkdirSync(this.path, { recursive: true, mode: 0o700 });
  }

  create(plan: BatchPlan): void {
    this.make();
    writeAtomically(this.file("batch.json"), `${JSON.stringify(plan, null, 2)}\n`);
  }

  /** Writes batch-report.json through a temporary file and a rename: a reader never sees half a report. */
  writeReport(report: unknown): void {
    writeAtomically(this.file("batch-report.json"), `${JSON.stringify(report, null, 2)}\n`);
  }

  /** Reads batch.json; ConfigError naming the batch when there is none. */
  readPlan(): BatchPlan {
    const file = this.file("batch.json");
    if (!existsSync(file)) throw new ConfigError(`batch ${this.path}: no such batch (no batch.json); \`ls $RUNNER_HOME/batches\` lists them`);
    return JSON.parse(readFileSync(file, "utf8")) as BatchPlan;
  }

  /** The lines of batch.jsonl so far; a last line cut short by a crash is left out. */
  readJournal(): JournalLine[] {
    const file = this.file("batch.jsonl");
    if (!existsSync(file)) return [];
    const lines: JournalLine[] = [];
    for (const text of readFileSync(file, "utf8").split("\n")) {
      if (!text.trim()) continue;
      try {
        lines.push(JSON.parse(text) as JournalLine);
      } catch {
        // only the last line can be partial: each line is one write(2)
      }
    }
    return lines;
  }
}

/** batch.jsonl, appended one whole line per write and fsynced per line: a crash loses at most the line being written. */
export class BatchJournal {
  private readonly file: AppendOnlyFile;
  readonly lines: JournalLine[] = [];
  private readonly byAttempt = new Map<string, AttemptLine[]>();

  constructor(directory: BatchDirectory) {
    for (const line of directory.readJournal()) this.index(line);
    this.file = new AppendOnlyFile(directory.file("batch.jsonl"));
  }

  append(line: JournalLine): void {
    this.file.appendLine(JSON.stringify(line));
    this.file.sync();
    this.index(line);
  }

  /** The lines about one attempt of one task, in order. */
  linesOf(task: string, attempt: number): AttemptLine[] {
    return this.byAttempt.get(attemptKey(task, attempt)) ?? [];
  }

  private index(line: JournalLine): void {
    this.lines.push(line);
    if (!("task" in line)) return;
    const key = attemptKey(line.task, line.attempt);
    const lines = this.byAttempt.get(key) ?? [];
    lines.push(line);
    this.byAttempt.set(key, lines);
  }

  close(): void {
    this.file.close();
  }
}
