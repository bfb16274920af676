import type { BatchReport } from "../batch/batch-report.js";
import type { Outcome } from "../batch/outcomes.js";
import type { BatchProgress } from "../batch/run-batch.js";
import { oneLine, terminalSafe } from "../terminal-text.js";

/**
 * How often the one-line status is printed while runs go on, ms: often
 * enough that a CI log never looks stuck, rarely enough that the lines of
 * starts and outcomes stay readable (a real model's run takes minutes).
 */
export const STATUS_INTERVAL_MS = 30_000;

/** Runs listed by name in a status line; the rest are counted. */
const RUNNING_SHOWN = 5;

interface Running {
  task: string;
  which: string;
  since: number;
}

/**
 * What `runner batch run`/`resume` prints while the batch goes on (docs/batch.md):
 * a line when a run starts (`start <task> run <id>`, `resume ...` for a run
 * of a killed batch continued), a line per outcome (`[done/total] <task>:
 * <status> (<reason>) run <id>`), and every `intervalMs` while runs are in
 * flight one status line: `status 2m30s: 3/10 settled (2 succeeded, 1
 * failed), 2 running: a (1m12s), b (40s)`. Every line is made terminal-safe
 * (task ids are the user's text). `now` is injectable for tests.
 */
export class BatchProgressView implements BatchProgress {
  private readonly running = new Map<string, Running>();
  private readonly counts = new Map<string, number>();
  private settled = { done: 0, total: 0 };
  private timer: NodeJS.Timeout | null = null;
  private readonly startedAt: number;

  constructor(
    private readonly write: (line: string) => void,
    private readonly now: () => number = Date.now,
  ) {
    this.startedAt = now();
  }

  /** Starts the periodic status line (a timer that does not keep the process alive). */
  start(total: number, intervalMs = STATUS_INTERVAL_MS): void {
    this.settled = { done: 0, total };
    this.timer = setInterval(() => {
      if (this.running.size > 0) this.write(this.statusLine());
    }, intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  started(task: string, attempt: number, tryNumber: number, runId: string, resumed: boolean): void {
    const which = attemptText(attempt, tryNumber);
    this.running.set(runId, { task, which, since: this.now() });
    this.write(terminalSafe(`${resumed ? "resume" : "start"} ${task}${which} run ${runId}`));
  }

  finished(task: string, attempt: number, tryNumber: number, runId: string | null, outcome: Outcome, settled: { done: number; total: number }): void {
    if (runId) this.running.delete(runId);
    this.counts.set(outcome.status, (this.counts.get(outcome.status) ?? 0) + 1);
    this.settled = settled;
    this.write(
      terminalSafe(
        `[${settled.done}/${settled.total}] ${task}${attemptText(attempt, tryNumber)}: ${outcome.status} (${outcome.reason})${runId ? ` run ${runId}` : ""}` +
          (outcome.status === "error" && outcome.error ? `: ${oneLine(outcome.error, ERROR_GIST_CHARACTERS)}` : ""),
      ),
    );
  }

  /** The one-line status: time since the batch (this process) started, attempts settled and their outcomes, the runs in flight with their ages. */
  statusLine(): string {
    const now = this.now();
    const outcomes = ["succeeded", "failed", "error"]
      .filter((status) => this.counts.has(status))
      .map((status) => `${this.counts.get(status)} ${status}`)
      .join(", ");
    const running = [...this.running.values()].sort((a, b) => a.since - b.since);
    const shown = running.slice(0, RUNNING_SHOWN).map((run) => `${run.task}${run.which} (${duration(now - run.since)})`);
    const more = running.length > RUNNING_SHOWN ? `, ${running.length - RUNNING_SHOWN} more` : "";
    return terminalSafe(
      `status ${duration(now - this.startedAt)}: ${this.settled.done}/${this.settled.total} settled${outcomes ? ` (${outcomes})` : ""}, ` +
        `${running.length} running${shown.length ? `: ${shown.join(", ")}${more}` : ""}`,
    );
  }
}

/** The line that tells how to go on with a batch that can be resumed (interrupted, or stopped after errors), or null. */
export function resumeHint(report: Pick<BatchReport, "batch_id" | "status" | "tasks">): string | null {
  const unfinished = report.tasks.filter((task) => task.status === "skipped").length;
  if (report.status !== "interrupted" && !(report.status === "error" && unfinished > 0)) return null;
  return `${unfinished} task(s) did not finish; continue with: runner batch resume ${report.batch_id}`;
}

function attemptText(attempt: number, tryNumber: number): string {
  return attempt > 1 || tryNumber > 1 ? ` (attempt ${attempt}, try ${tryNumber})` : "";
}

/** `45s`, `2m05s`, `1h02m`. */
function duration(ms: number): string {
  const seconds = Math.max(0, Math.floor(ms / 1000));
  if (seconds < 60) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes}m${String(seconds % 60).padStart(2, "0")}s`;
  return `${Math.floor(minutes / 60)}h${String(minutes % 60).padStart(2, "0")}m`;
}

/** How much of an error message a progress line shows (on one line; the reports keep it whole). */
const ERROR_GIST_CHARACTERS = 200;
