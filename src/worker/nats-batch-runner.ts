import { randomUUID } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join, relative } from "node:path";
import type { Task } from "../config/load-task.js";
import { CancelledError, ConfigError, errorMessage, RunnerError } from "../errors.js";
import type { BatchRunner } from "../batch/run-batch.js";
import type { RunEnvelope } from "../events/event-catalogue.js";
import { isRunId } from "../run/run-id.js";
import { RUN_FILES, writeAtomically } from "../run/run-store.js";
import type { RunReport } from "../run/run-report.js";
import type { RunHandle, StartOptions } from "../runner/runner.js";
import { resolveRepository } from "../workspace/run-worktree.js";
import { runPaths } from "../workspace/run-disk.js";
import { writeRunLock } from "../run/run-lock.js";
import { currentOwner } from "../process/process-owner.js";
import { recordDeadLetters } from "./dead-letters.js";
import { followRunSubject } from "./pool-run-events.js";
import { bundleCommit, landBranch } from "./git-bundles.js";
import { runBranchCandidates, taskSlug } from "../workspace/run-branch-name.js";
import { taskKey, wireTask, type Job, type TaskJob } from "./task-job.js";
import type { Lease, TaskResult, WorkQueue } from "./work-queue.js";

/** What the submitter knows of a task's key: its lease and its result, as the bucket last said. */
interface KeyState {
  lease: Lease | null;
  result: TaskResult | null;
}

/**
 * The submitting side of `runner batch run DIR --nats URL` (docs/scale-out.md
 * "Submitting a batch"): a {@link BatchRunner} whose `startTask` publishes
 * the task to the pool's queue and whose runs happen on workers, so the local
 * batch machinery (journal, resume, reports) is the same as for a local batch.
 *
 * - `startTask` packs the task ({@link wireTask}: ConfigError for what a remote
 *   worker cannot have), stores the base commit's bundle once per commit,
 *   publishes the job under its key, and resolves once a worker has a run for
 *   it (the lease names it) or its result exists. A task that ended without a
 *   run (refused by every worker) rejects: ConfigError for `task_invalid`,
 *   else a RunnerError with the result's reason.
 * - The handle's `result` resolves with the run's report once `result.<key>`
 *   exists, after the run's records are copied into `$RUNNER_HOME/runs/<run-id>/`
 *   (report.json with `deliveries`, events.jsonl, patch.diff) and its branch
 *   (`runner/<task-name>-<short-id>`, or more of the run id when that name is
 *   taken here: report.json says which) is made in your repository from the worker's commits:
 *   only the submitter writes your repository. What a worker (or anyone with the pool's
 *   credentials) wrote is checked first: a run id that is not one, a branch name that is
 *   not one of the run's, or a base commit that is not the job's, is the run's `error` /
 *   `worker_result_invalid`, naming the worker,
 *   and writes nothing of the kind (docs/scale-out.md "What the submitter checks of a worker's result").
 *   `id` is the run of the latest delivery (a redelivered task's run id changes).
 * - `cancel` (the batch interrupted) stops waiting; the remote run goes on,
 *   and `runner batch resume` finds it again under the same key.
 * - `resume` of a remote run is refused (ConfigError): the batch then submits
 *   the task again, which finds the same job by its key.
 */
export class NatsBatchRunner implements BatchRunner {
  private readonly states = new Map<string, KeyState>();
  private readonly waiters = new Map<string, Set<() => void>>();
  private readonly bundles = new Map<string, Promise<void>>();
  private readonly stopped = new AbortController();
  private readonly background: Promise<unknown>[] = [];
  private readonly instance = randomUUID();

  private constructor(
    private readonly queue: WorkQueue,
    readonly home: string,
    private readonly log: (line: string) => void,
  ) {}

  /** Starts following the pool's leases, results and dead letters. */
  static async open(queue: WorkQueue, home: string, log: (line: string) => void = () => undefined): Promise<NatsBatchRunner> {
    const runner = new NatsBatchRunner(queue, home, log);
    const watcher = await queue.retrying("JetStream did not start watching results", () => queue.keyValue.watch({ key: ">" }));
    runner.stopped.signal.addEventListener("abort", () => watcher.stop(), { once: true });
    runner.background.push(
      (async () => {
        for await (const entry of watcher) {
          const [kind, key] = [entry.key.slice(0, entry.key.indexOf(".")), entry.key.slice(entry.key.indexOf(".") + 1)];
          if (entry.operation !== "PUT" || (kind !== "lease" && kind !== "result")) continue;
          runner.update(key, kind === "lease" ? { lease: entry.json<Lease>() } : { result: entry.json<TaskResult>() });
        }
      })().catch((error: unknown) => log(`stopped watching results: ${errorMessage(error)}`)),
      recordDeadLetters(queue, runner.stopped.signal, log).catch((error: unknown) => log(`dead letters: ${errorMessage(error)}`)),
    );
    return runner;
  }

  async startTask(task: Task, options: StartOptions = {}, slot?: { task: string; attempt: number }): Promise<RunHandle> {
    const { policy: _shipped, ...wire } = wireTask(task);
    const repository = await resolveRepository(task.workspacePath);
    const bundle = await this.storeBundle(repository.root, repository.head);
    const key = taskKey({ ...wire, base_commit: repository.head }, slot?.attempt ?? 1);
    const job: TaskJob = {
      kind: "task",
      version: 1,
      key,
      name: task.name,
      ...wire,
      base_commit: repository.head,
      bundle,
      submitter: this.submitter,
    };
    return this.submit(job, task, repository.root, options.signal);
  }

  /** `host:pid` of this process, as jobs name their submitter. */
  get submitter(): string {
    return `${hostname()}:${process.pid}`;
  }

  /**
   * Publishes `job` (its base commit's bundle already stored, {@link storeBundle}) and follows it as
   * {@link startTask} does: resolves once a worker has a run for it or its result exists. `worker` is the
   * worker of the latest delivery's run. `task` is the job's task as this host sees it (its workspace is your repository).
   */
  async submit(job: Job, task: Task, repositoryRoot: string, signal?: AbortSignal): Promise<RunHandle & { readonly worker: string | null }> {
    const key = job.key;
    if (!(await this.queue.submit(job))) this.log(`${task.name}: already submitted (key ${key}); following that job`);
    const started = await this.until(key, (state) => (state.result || state.lease?.attempts.some((attempt) => attempt.run_id) ? state : null), signal);
    const firstAttempt = started.lease?.attempts.findLast((attempt) => attempt.run_id) ?? null;
    const firstRun = firstAttempt?.run_id ?? started.result?.run_id ?? null;
    if (firstRun === null) {
      const result = started.result!;
      if (result.reason === "task_invalid") throw new ConfigError(result.error ?? "the worker refused the task");
      throw new RunnerError(result.error ?? result.reason, 3, { reason: result.reason });
    }
    let worker = firstAttempt?.worker ?? started.result?.worker ?? null;
    if (!isRunId(firstRun)) throw refusedRunId(firstRun, worker);
    let runId: string = firstRun;
    const cancelled = new AbortController();
    const finished = this.until(key, (state) => state.result, cancelled.signal).then(
      async (result) => {
        // The worker's run id is a path here: one that is not a run id is refused before anything is written.
        if (result.run_id !== null && !isRunId(result.run_id)) return refusedResultReport(runId, task.name, refusedRunId(result.run_id, result.worker));
        runId = result.run_id ?? runId;
        worker = result.worker ?? worker;
        return this.materialize(result, runId, repositoryRoot, task, job.base_commit);
      },
      (error: unknown) => {
        if (error instanceof CancelledError) return cancelledReport(runId, task.name, error.message);
        throw error;
      },
    );
    const home = this.home;
    return {
      get id() {
        return runId;
      },
      get directory() {
        return join(home, "runs", runId);
      },
      get worker() {
        return worker;
      },
      task,
      result: finished,
      resumed: null,
      events: (subscription = {}) => this.followEvents(runId, subscription.from ?? 0),
      async cancel(reason = "cancelled") {
        cancelled.abort(new CancelledError(reason));
        await finished.catch(() => undefined);
      },
    };
  }

  resume(runId: string): Promise<RunHandle> {
    return Promise.reject(new ConfigError(`run ${runId} ran on a NATS worker; the batch submits its task again, which finds the same job by its key`));
  }

  /**
   * A remote run's CloudEvents from the pool's events stream, from sequence
   * `from`, live, ending with `run.finished`; an event too large for a
   * message (over 16 KiB) is left out here (its run's events.jsonl, copied
   * when the run ends, has it; `runner logs` fetches it: src/cli/remote-logs.ts).
   */
  private async *followEvents(runId: string, from: number): AsyncIterable<RunEnvelope> {
    const reading = await this.queue.retrying("JetStream did not start a reader of the run's events", () =>
      followRunSubject(this.queue.client, this.queue.eventsStream, this.queue.eventsSubject(runId), this.stopped.signal),
    );
    for await (const message of reading) if (message.sequence >= from && message.kind === "event") yield message.envelope;
  }

  /** Stops following the bucket and the dead letters. */
  async close(): Promise<void> {
    this.stopped.abort();
    await Promise.allSettled(this.background);
  }

  /**
   * Stores a bundle of `commit` (a commit of the repository at `root`, with its history) once per commit and
   * returns its object name. One name per submitter process: an object is never overwritten while a worker may
   * read it (a reader of a replaced object's purged chunks would wait forever), and a duplicate job keeps the
   * first submitter's bundle.
   */
  async storeBundle(root: string, commit: string): Promise<string> {
    const name = `bundle/${commit}/${this.instance}`;
    let stored = this.bundles.get(name);
    if (!stored) {
      stored = (async () => {
        if (await this.queue.hasObject(name)) return;
        mkdirSync(join(this.home, "tmp"), { recursive: true, mode: 0o700 });
        await this.queue.putObject(name, await bundleCommit(root, commit, join(this.home, "tmp")));
      })();
      this.bundles.set(name, stored);
      stored.catch(() => this.bundles.delete(name));
    }
    await stored;
    return name;
  }

  private update(key: string, change: Partial<KeyState>): void {
    const state = this.states.get(key) ?? { lease: null, result: null };
    this.states.set(key, { ...state, ...change });
    for (const wake of this.waiters.get(key) ?? []) wake();
  }

  /**
   * Resolves with `pick(state)` once it is not null; the watcher's updates
   * wake it, and a read every 5 s covers a watcher that lost its way in an
   * election. Rejects with CancelledError when `signal` aborts.
   */
  private until<T>(key: string, pick: (state: KeyState) => T | null, signal?: AbortSignal): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const waiters = this.waiters.get(key) ?? new Set<() => void>();
      this.waiters.set(key, waiters);
      let timer: NodeJS.Timeout | undefined;
      const done = () => {
        waiters.delete(check);
        clearInterval(timer);
        signal?.removeEventListener("abort", abort);
      };
      const check = () => {
        const value = pick(this.states.get(key) ?? { lease: null, result: null });
        if (value === null) return;
        done();
        resolve(value);
      };
      const abort = () => {
        done();
        reject(signal?.reason instanceof CancelledError ? signal.reason : new CancelledError("the batch stopped waiting"));
      };
      if (signal?.aborted) return abort();
      signal?.addEventListener("abort", abort, { once: true });
      waiters.add(check);
      timer = setInterval(() => {
        void Promise.all([this.queue.lease(key), this.queue.result(key)]).then(
          ([lease, result]) => this.update(key, { ...(lease ? { lease: lease.lease } : {}), ...(result ? { result } : {}) }),
          () => undefined,
        );
      }, 5_000);
      timer.unref();
      check();
    });
  }

  /**
   * The run's records in `$RUNNER_HOME/runs/<run-id>/` (report.json last: a
   * directory with one is complete) and its branch in your repository; the
   * report. A result without records (a dead letter) gets a report.json of
   * its outcome. Never rejects for the worker's data: a branch that cannot be
   * made is the run's `error` (`branch_not_landed`), which the batch reports.
   */
  private async materialize(result: TaskResult, runId: string, repositoryRoot: string, task: Task, baseCommit: string): Promise<RunReport> {
    const directory = runDirectory(this.home, runId);
    mkdirSync(directory, { recursive: true, mode: 0o700 });
    // The task as this host sees it (its workspace is your repository): `runner batch verify` regrades from it.
    writeAtomically(join(directory, RUN_FILES.task), `${JSON.stringify(task, null, 2)}\n`);
    const deliveries = result.attempts;
    if (!result.objects) {
      const report = { ...cancelledReport(runId, result.name, result.error ?? ""), status: result.status, reason: result.reason, deliveries } as RunReport;
      writeAtomically(join(directory, RUN_FILES.report), `${JSON.stringify(report, null, 2)}\n`);
      return report;
    }
    const bytes = async (name: string) => (await this.queue.getObject(name)) ?? new Uint8Array();
    const workerReport = JSON.parse(Buffer.from(await bytes(result.objects.report)).toString("utf8")) as RunReport;
    // The run id the submitter checked, not the one the worker's report.json says (the orchestrator rewrites report.json by it).
    let report: RunReport = { ...workerReport, run_id: runId, deliveries } as RunReport;
    if (!existsSync(join(directory, RUN_FILES.events))) writeFileSync(join(directory, RUN_FILES.events), await bytes(result.objects.events), { mode: 0o600 });
    if (result.objects.patch) writeFileSync(join(directory, RUN_FILES.patch), await bytes(result.objects.patch), { mode: 0o600 });
    let landed: string | null = null;
    const candidates = runBranchCandidates(taskSlug(task), runId);
    // Not a name this run could have had, or not the commit the job started from (without commits of its own the
    // branch would be made there: any commit of your repository): the worker's report is refused, no branch is made.
    const refusal =
      workerReport.branch && !candidates.includes(workerReport.branch)
        ? `named the run's branch ${JSON.stringify(workerReport.branch)}, which is not one of run ${runId}'s names (${candidates[0]} …)`
        : workerReport.base_commit && workerReport.base_commit !== baseCommit
          ? `named the run's base commit ${JSON.stringify(workerReport.base_commit)}, not the job's ${baseCommit}`
          : null;
    if (refusal !== null) {
      report = {
        ...report,
        branch: null,
        status: "error",
        reason: "worker_result_invalid",
        error: `worker ${result.worker ?? "(unnamed)"} ${refusal}: no branch is made`,
      };
    } else if (workerReport.branch && workerReport.base_commit) {
      const branch = await bytes(result.objects.branch);
      try {
        // The worker named the branch in its own clone; here another run of the task may hold that name already.
        landed = await landBranch(
          repositoryRoot,
          workerReport.branch,
          candidates,
          workerReport.base_commit,
          branch.length > 0 ? branch : null,
          join(this.home, "tmp"),
          recordedBranch(directory),
        );
        report = { ...report, branch: landed };
      } catch (error) {
        report = {
          ...report,
          status: "error",
          reason: "branch_not_landed",
          error: `the run's branch ${workerReport.branch} could not be made in ${repositoryRoot}: ${errorMessage(error)}`,
        };
      }
    }
    writeAtomically(join(directory, RUN_FILES.report), `${JSON.stringify(report, null, 2)}\n`);
    if (report.status !== "error" && landed !== null) {
      // Where the run's branch is on this host, for `runner batch verify` (regrading here, in a fresh checkout of the commit).
      writeRunLock(directory, {
        run_id: runId,
        owner: currentOwner(),
        repository: repositoryRoot,
        worktree: runPaths(directory).worktree,
        branch: landed,
        ...(workerReport.base_commit ? { base_commit: workerReport.base_commit } : {}),
      });
    }
    return report;
  }
}

/** The branch a run's report.json in `directory` names (an earlier landing of the same result), or null. */
function recordedBranch(directory: string): string | null {
  try {
    const branch = (JSON.parse(readFileSync(join(directory, RUN_FILES.report), "utf8")) as { branch?: unknown }).branch;
    return typeof branch === "string" ? branch : null;
  } catch {
    return null;
  }
}

/**
 * `$RUNNER_HOME/runs/<run-id>/` of a run id from a worker, which must be a run id ({@link isRunId}) and so stays inside
 * `runs/`; throws RunnerError (`worker_result_invalid`) otherwise, before anything is written.
 */
export function runDirectory(home: string, runId: string): string {
  const runs = join(home, "runs");
  const directory = join(runs, runId);
  const inside = relative(runs, directory);
  if (!isRunId(runId) || inside !== runId) throw refusedRunId(runId, null);
  return directory;
}

/**
 * The error for a run id from NATS that is not a run id (docs/scale-out.md "What the submitter checks of a worker's
 * result"): status `error` (whoever holds the pool's credentials forged or broke it: infrastructure, not the agent),
 * naming the worker.
 */
function refusedRunId(runId: unknown, worker: string | null): RunnerError {
  return new RunnerError(
    `worker ${worker ?? "(unnamed)"} named its run ${JSON.stringify(runId)}, which is not a run id (YYYYMMDD-HHMMSS-xxxx): its result is refused and nothing of it is recorded`,
    3,
    { reason: "worker_result_invalid" },
  );
}

/** The outcome of a result refused before anything of it was written: an infrastructure error saying why. */
function refusedResultReport(runId: string, task: string, error: RunnerError): RunReport {
  return { ...cancelledReport(runId, task, error.message), status: "error", reason: error.reason } as RunReport;
}

/** A report for a run this process no longer waits for (or that left no records): the fields a batch reads. */
function cancelledReport(runId: string, task: string, error: string): RunReport {
  return {
    run_id: runId,
    task,
    status: "cancelled",
    reason: "interrupted",
    error,
    steps: 0,
    patch: null,
    usage: {},
    duration_ms: null,
  } as unknown as RunReport;
}
