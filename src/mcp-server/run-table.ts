import { join } from "node:path";
import type { Task } from "../config/load-task.js";
import { recordedRunRefusal } from "../runner/untrusted-task.js";
import { ConfigError } from "../errors.js";
import type { RunReport } from "../run/run-report.js";
import { RunStore } from "../run/run-store.js";
import type { ApprovalInbox, PendingApproval } from "../runner/approval-inbox.js";
import { findRunId, isRunAlive } from "../runner/run-records.js";
import type { Runner, RunHandle } from "../runner/runner.js";
import { RunEventLog, type EventPage } from "./run-event-log.js";

/**
 * How often a wait for new events looks at a run of another process (one
 * stat and read of a local file; `runner logs -f` polls at the same rate for
 * the same reason: inotify misses writes on some filesystems). Runs of this
 * process wake a waiter as soon as an event is written.
 */
const POLL_INTERVAL_MS = 100;

/** A run this process started or resumed, while it is followed. */
interface OwnRun {
  handle: RunHandle;
  ended: boolean;
  /** Called on each new event and when the run ends. */
  wake: Set<() => void>;
}

/** What `run_status` says about a run. */
export interface RunState {
  runId: string;
  task: string;
  /** `running` while a runner works on it, then report.json's status; `unfinished` when its runner died without a report. */
  status: string;
  /** report.json's reason once there is one. */
  reason: string | null;
  /** The main agent's model calls so far (the terminal's `step N`). */
  step: number;
  /** USD so far; null when a model call had no price. */
  costUsd: number | null;
  /** Questions waiting in this process's inbox (a run of another process asks there). */
  pendingApprovals: PendingApproval[];
  /** Whether this process runs it (and so can cancel it and answer its approvals). */
  ownedHere: boolean;
  /** Events in the log so far. */
  events: number;
  ended: boolean;
}

/**
 * The runs an MCP server can see: those it started or resumed (their
 * {@link RunHandle}s, answered through its {@link ApprovalInbox}) and every
 * other run in RUNNER_HOME, read from its records (events.jsonl, report.json,
 * run.json), so a second client or server process sees the first one's runs.
 * Stands on the Runner seam only (never src/run/phases).
 */
export class RunTable {
  private readonly own = new Map<string, OwnRun>();
  private readonly logs = new Map<string, RunEventLog>();

  constructor(
    readonly runner: Runner,
    readonly approvals: ApprovalInbox,
    /** The server's `--workspace-root` directories: a run is visible only if a caller could have started it (see {@link visible}). */
    private readonly roots: readonly string[],
  ) {}

  /**
   * Whether the server's callers may see and act on run `runId`: one this process started or resumed, or one whose
   * recorded task they could have started themselves ({@link recordedRunRefusal}). The user's own runs elsewhere
   * in RUNNER_HOME are not theirs to read, resume or merge.
   */
  visible(runId: string): boolean {
    return this.own.has(runId) || recordedRunRefusal(this.directory(runId), { roots: this.roots }) === null;
  }

  /** Starts `task` (validated and trust-checked by the caller); resolves once the run exists. */
  async start(task: Task): Promise<RunHandle> {
    return this.adopt(await this.runner.startTask(task, { approvals: this.approvals }));
  }

  /** `runner resume`: see {@link Runner.resume}; ConfigError when the run cannot be resumed, saying why. */
  async resume(runId: string, limits: { maxSteps?: number; maxCostUsd?: number; timeoutSec?: number }): Promise<RunHandle> {
    const id = this.resolve(runId);
    if (this.own.has(id) && !this.own.get(id)!.ended)
      throw new ConfigError(`run_id: run ${id} is still running here; wait for it to end (run_events) or cancel it first`);
    return this.adopt(await this.runner.resume(id, { ...limits, approvals: this.approvals }));
  }

  /** The run id `idOrPrefix` names (a unique prefix will do). Throws ConfigError naming `run_id` when none or several match. */
  resolve(idOrPrefix: string): string {
    if (this.own.has(idOrPrefix)) return idOrPrefix;
    let id: string;
    try {
      id = findRunId(this.runner.home, idOrPrefix);
    } catch (error) {
      if (error instanceof ConfigError) throw new ConfigError(`run_id: ${error.message.replace("`runner runs`", "runs_list")}`);
      throw error;
    }
    const refusal = recordedRunRefusal(this.directory(id), { roots: this.roots });
    if (refusal && !this.own.has(id)) throw new ConfigError(`run_id: run ${id} is not one this server's callers may use: ${refusal} (--workspace-root)`);
    return id;
  }

  /** The run's directory. */
  directory(runId: string): string {
    return join(this.runner.home, "runs", runId);
  }

  /** Whether this process runs `runId` now (started or resumed here, not ended). */
  runningHere(runId: string): boolean {
    const own = this.own.get(runId);
    return own !== undefined && !own.ended;
  }

  /** Whether the run has ended for good: its own handle settled, or (another process's run) a report with `run.finished` last, or no runner alive. */
  ended(runId: string): boolean {
    const own = this.own.get(runId);
    if (own) return own.ended;
    const store = new RunStore(this.directory(runId));
    if (store.has("report")) return this.log(runId).endsWithRunFinished || !isRunAlive(store.directory);
    // A run directory whose runner died before the report (resumable) is as ended as it gets here.
    return store.has("lock") && !isRunAlive(store.directory);
  }

  /** The run's event log, read up to what the file holds now. */
  log(runId: string): RunEventLog {
    let log = this.logs.get(runId);
    if (!log) {
      log = new RunEventLog(new RunStore(this.directory(runId)).path("events"));
      this.logs.set(runId, log);
    }
    log.refresh();
    return log;
  }

  /** report.json, or null before the run has one. */
  report(runId: string): RunReport | null {
    return new RunStore(this.directory(runId)).readJson("report") as RunReport | null;
  }

  /** task.json (the validated task, absolute paths), or null. */
  task(runId: string): Task | null {
    return new RunStore(this.directory(runId)).readJson("task") as Task | null;
  }

  state(runId: string): RunState {
    const ended = this.ended(runId);
    const log = this.log(runId);
    const report = this.report(runId);
    // A report from an attempt a resume is now continuing is not the run's status.
    const current = ended ? report : null;
    const alive = !ended;
    return {
      runId,
      task: current?.task ?? report?.task ?? this.task(runId)?.name ?? "?",
      status: current?.status ?? (alive ? "running" : "unfinished"),
      reason: current?.reason ?? null,
      step: current ? Math.max(current.steps, log.step) : log.step,
      costUsd: current ? current.cost_usd : log.costUsd,
      pendingApprovals: this.approvals.pending(runId),
      ownedHere: this.own.has(runId),
      events: log.length,
      ended,
    };
  }

  /**
   * A page of events from `cursor` (see {@link RunEventLog.page}); when there
   * is none yet and the run goes on, waits up to `waitMs` for one (calling
   * `onWait` with the ms waited, about every `tickMs`). `done` once the run
   * has ended and the page reaches the end of its events.
   */
  async events(
    runId: string,
    request: { cursor: number; maxEvents: number; maxBytes: number; waitMs: number },
    options: { signal?: AbortSignal; onWait?: (waitedMs: number) => void; tickMs?: number } = {},
  ): Promise<EventPage & { done: boolean }> {
    const started = Date.now();
    let lastTick = started;
    for (;;) {
      // Ended first, then read: every event of an ended run is in the file by then.
      const ended = this.ended(runId);
      const log = this.log(runId);
      const waited = Date.now() - started;
      if (log.length > request.cursor || ended || waited >= request.waitMs || options.signal?.aborted) {
        const page = log.page(request.cursor, request.maxEvents, request.maxBytes);
        return { ...page, done: ended && page.remaining === 0 };
      }
      if (options.onWait && Date.now() - lastTick >= (options.tickMs ?? 5000)) {
        lastTick = Date.now();
        options.onWait(waited);
      }
      await this.changed(runId, Math.min(POLL_INTERVAL_MS, request.waitMs - waited), options.signal);
    }
  }

  /** Cancels a run of this process (as Ctrl-C); resolves once it has ended. ConfigError for a run another process runs. */
  async cancel(runId: string, reason: string): Promise<void> {
    const own = this.own.get(runId);
    if (!own) {
      if (this.ended(runId)) return;
      throw new ConfigError(
        `run_id: run ${runId} runs in another process (run.json names its owner); cancel it there (Ctrl-C of its runner exec, or that server's run_cancel)`,
      );
    }
    await own.handle.cancel(reason);
  }

  /** Cancels every run of this process and waits until each has ended (Runner.close), then closes the logs. */
  async close(): Promise<void> {
    await this.runner.close();
    for (const log of this.logs.values()) log.close();
    this.logs.clear();
  }

  private adopt(handle: RunHandle): RunHandle {
    const own: OwnRun = { handle, ended: false, wake: new Set() };
    this.own.set(handle.id, own);
    const wake = () => {
      for (const waiter of [...own.wake]) waiter();
    };
    void (async () => {
      try {
        for await (const _envelope of handle.events({ from: handle.resumed?.earlierEvents ?? 0 })) wake();
      } finally {
        await handle.result.catch(() => undefined);
        own.ended = true;
        wake();
      }
    })();
    return handle;
  }

  /** Resolves after `ms`, or sooner when a run of this process writes an event or ends, or `signal` aborts. */
  private changed(runId: string, ms: number, signal: AbortSignal | undefined): Promise<void> {
    const own = this.own.get(runId);
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        own?.wake.delete(done);
        signal?.removeEventListener("abort", done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(1, ms));
      own?.wake.add(done);
      signal?.addEventListener("abort", done, { once: true });
    });
  }
}
