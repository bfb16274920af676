import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import type { JsMsg } from "@nats-io/jetstream";
import { validateTask } from "../config/load-task.js";
import { ConfigError, errorMessage, RunnerError } from "../errors.js";
import { outcomeOfReport } from "../batch/outcomes.js";
import { RUN_FILES } from "../run/run-store.js";
import type { RunReport } from "../run/run-report.js";
import type { RunHandle, Runner } from "../runner/runner.js";
import { bundleBranch, checkoutBundle } from "./git-bundles.js";
import type { AgencyEvent } from "../bus/event-bus.js";
import { invocationEmbedding } from "./invocation-job.js";
import { jobSchema, type Job } from "./task-job.js";
import type { Lease, LeaseAttempt, TaskResult, WorkQueue } from "./work-queue.js";

/** The most one event message may hold (bytes); a larger envelope goes by reference to the run's events.jsonl object. */
const MAX_EVENT_MESSAGE_BYTES = 16 * 1024;

/** What a {@link TaskWorker} runs on. */
export interface TaskWorkerOptions {
  queue: WorkQueue;
  /** Runs the tasks: `createRunner` (Docker), or a fake-tier Runner in tests. */
  runner: Pick<Runner, "home" | "startTask" | "sweepLeftovers">;
  /** Tasks at once (`-j`). */
  jobs: number;
  /** The worker's environment: where `sandbox.secret_env` and `pass_env` values come from. */
  environment: NodeJS.ProcessEnv;
  /** How this worker is named in leases and results. Default `<host>:<pid>`. */
  name?: string;
  /** One line per thing the operator should know (took, finished, handed back, waiting for a quorum). */
  log?: (line: string) => void;
}

/**
 * `runner worker` (docs/scale-out.md "Workers"): pulls its pool's tasks one
 * at a time while it has a free slot, and runs each as `runner exec` would,
 * on its own Runner:
 *
 * 1. A task whose result exists is acked and nothing runs (a resubmitted or
 *    redelivered task that already finished).
 * 2. The lease `lease.<key>` is taken with compare-and-set: this delivery is
 *    appended to its attempts (an earlier attempt without a reason gets "its
 *    worker stopped answering"). Losing the race hands the delivery back.
 * 3. A `secret_env` or `pass_env` variable missing from this worker's
 *    environment refuses the task, naming it (redelivered: another worker
 *    may have it; after `max_deliver`, the refusals are its outcome).
 * 4. The base commit comes from the bundle object; the run's events go to
 *    `runner.<pool>.events.<run-id>` as they happen; while the run goes on,
 *    `working()` every third of `ack_wait` keeps the delivery from coming back.
 * 5. The outcome: success and every agent-caused end (`failed`) are final:
 *    the records are stored as objects, then `result.<key>`, then the ack.
 *    An infrastructure error (status `error` of the infrastructure's reasons,
 *    src/batch/outcomes.ts) is redelivered after a delay (a `nak`), unless this
 *    was the last delivery: then it is the result, with every attempt's reason.
 *
 * `run(drain)` returns once `drain` aborted and every task it took finished.
 */
export class TaskWorker {
  private readonly name: string;
  private readonly log: (line: string) => void;

  constructor(private readonly options: TaskWorkerOptions) {
    this.name = options.name ?? `${hostname()}:${process.pid}`;
    this.log = options.log ?? (() => undefined);
  }

  /** Pulls and runs tasks until `drain` aborts; then stops pulling, finishes what it runs, and resolves. */
  async run(drain: AbortSignal): Promise<void> {
    await this.options.runner.sweepLeftovers();
    const queue = this.options.queue;
    const consumer = await queue.consumer();
    const running = new Set<Promise<void>>();
    const drained = new Promise<void>((resolve) => (drain.aborted ? resolve() : drain.addEventListener("abort", () => resolve(), { once: true })));
    let waiting: string | null = null;
    while (!drain.aborted) {
      if (running.size >= this.options.jobs) {
        await Promise.race([...running, drained]);
        continue;
      }
      const pull = consumer.next({ expires: 5_000 });
      const message = await Promise.race([
        pull.then(
          (value) => value,
          (error: unknown) => {
            const reason = errorMessage(error);
            if (waiting !== reason) this.log(`waiting: cannot pull a task (${reason}); retrying until the cluster answers`);
            waiting = reason;
            return new Promise<null>((resolve) => setTimeout(() => resolve(null), 1_000).unref());
          },
        ),
        drained.then(() => null),
      ]);
      if (drain.aborted) {
        // A task that arrived as the drain began goes straight back.
        void pull.then(
          (late) => late?.nak(),
          () => undefined,
        );
        if (message) message.nak();
        break;
      }
      if (!message) continue;
      waiting = null;
      const task = this.handle(message).catch((error: unknown) => this.log(`task of delivery ${message.seq}: ${errorMessage(error)}`));
      running.add(task);
      void task.finally(() => running.delete(task));
    }
    if (running.size > 0) this.log(`draining: finishing ${running.size} task(s)`);
    await Promise.all(running);
  }

  private async handle(message: JsMsg): Promise<void> {
    const queue = this.options.queue;
    const heartbeat = setInterval(() => message.working(), Math.max(200, queue.settings.ackWaitMs / 3));
    heartbeat.unref();
    try {
      let raw: unknown;
      try {
        raw = message.json();
      } catch {
        raw = null;
      }
      const parsed = jobSchema.safeParse(raw);
      if (!parsed.success) {
        const kind = (raw as { kind?: unknown } | null)?.kind;
        message.term(`not a job this worker runs (kind ${JSON.stringify(kind)}): ${parsed.error.issues[0]?.message ?? "invalid"}`);
        this.log(`refused delivery ${message.seq}: kind ${JSON.stringify(kind)} is not a job this worker knows`);
        return;
      }
      const job = parsed.data;
      if (await queue.result(job.key)) {
        await message.ackAck();
        return;
      }
      const delivery = message.info.deliveryCount;
      const lease = await this.takeLease(job, delivery);
      if (!lease) {
        message.nak(1_000);
        return;
      }
      this.log(`took ${job.name} (delivery ${delivery} of ${queue.settings.maxDeliver})`);
      const missing = [
        ...((job.task.sandbox as { secret_env?: string[] })?.secret_env ?? []),
        ...((job.task.sandbox as { pass_env?: string[] })?.pass_env ?? []),
      ].filter((name) => this.options.environment[name] === undefined);
      if (missing.length > 0) {
        await this.failDelivery(
          message,
          job,
          delivery,
          `worker ${this.name} refused the task: ${missing.join(", ")} not set in its environment (sandbox.secret_env / pass_env come from each worker's own environment)`,
          null,
        );
        return;
      }
      await this.runJob(message, job, delivery);
    } finally {
      clearInterval(heartbeat);
    }
  }

  /** Appends this delivery to the lease (compare-and-set); null when another process wrote it meanwhile. */
  private async takeLease(job: Job, delivery: number): Promise<Lease | null> {
    const queue = this.options.queue;
    const current = await queue.lease(job.key);
    const silent = `its worker stopped answering (no ack within ack_wait, ${Math.round(queue.settings.ackWaitMs / 1000)} s)`;
    const attempts: LeaseAttempt[] = (current?.lease.attempts ?? []).map((attempt) => ({
      ...attempt,
      reason: attempt.reason ?? `${attempt.worker}: ${silent}`,
    }));
    attempts.push({ delivery, worker: this.name, run_id: null, started_at: new Date().toISOString(), reason: null });
    const lease: Lease = { key: job.key, name: job.name, attempts };
    return (await queue.writeLease(lease, current?.revision ?? 0)) ? lease : null;
  }

  /** Changes this delivery's attempt in the lease (re-read and compare-and-set until it lands). */
  private async updateAttempt(job: Job, delivery: number, change: Partial<LeaseAttempt>): Promise<LeaseAttempt[]> {
    const queue = this.options.queue;
    for (;;) {
      const current = await queue.lease(job.key);
      const attempts = (current?.lease.attempts ?? []).map((attempt) =>
        attempt.delivery === delivery && attempt.worker === this.name ? { ...attempt, ...change } : attempt,
      );
      if (await queue.writeLease({ key: job.key, name: job.name, attempts }, current?.revision ?? 0)) return attempts;
    }
  }

  private async runJob(message: JsMsg, job: Job, delivery: number): Promise<void> {
    const queue = this.options.queue;
    const home = this.options.runner.home;
    const scratch = join(home, "worker", "jobs", `${job.key}-${delivery}-${process.pid}`);
    mkdirSync(scratch, { recursive: true, mode: 0o700 });
    // What an invocation's agent emits (emit_event): returned with the result, published by the orchestrator.
    const emitted: AgencyEvent[] = [];
    let handle: RunHandle;
    try {
      const bundle = await withDeadline(
        queue.getObject(job.bundle),
        BUNDLE_DEADLINE_MS,
        `fetching the bundle ${job.bundle} took over ${BUNDLE_DEADLINE_MS / 1000} s`,
      );
      if (!bundle) {
        await this.failDelivery(
          message,
          job,
          delivery,
          `worker ${this.name}: the base commit's bundle ${job.bundle} is not in the object store (expired?)`,
          null,
        );
        return;
      }
      const repository = await checkoutBundle(bundle, job.base_commit, join(home, "worker", "repositories"));
      const document: Record<string, unknown> = { ...job.task, workspace: repository };
      if (job.script !== null) {
        writeFileSync(join(scratch, "script.yaml"), job.script);
        document.model = { ...(job.task.model as Record<string, unknown>), script: join(scratch, "script.yaml") };
      }
      if (job.kind === "invocation") {
        writeFileSync(join(scratch, "policy.yaml"), job.policy);
        document.policy = join(scratch, "policy.yaml");
      }
      const task = validateTask(document, null, scratch);
      handle = await this.options.runner.startTask(task, job.kind === "invocation" ? { embedding: invocationEmbedding(job, emitted) } : {});
    } catch (error) {
      rmSync(scratch, { recursive: true, force: true });
      if (error instanceof ConfigError) {
        // The task as the worker sees it is bad (e.g. its verify program is not in the image): its outcome, not a retry.
        await this.finish(message, job, delivery, null, { status: "error", reason: "task_invalid", error: errorMessage(error) }, null);
        return;
      }
      const reason = error instanceof RunnerError ? error.reason : "internal_error";
      await this.failDelivery(message, job, delivery, `worker ${this.name}: ${reason}: ${errorMessage(error)}`, null);
      return;
    }
    await this.updateAttempt(job, delivery, { run_id: handle.id });
    const published = this.publishEvents(handle);
    const report = await handle.result;
    await published;
    rmSync(scratch, { recursive: true, force: true });
    const outcome = outcomeOfReport(report);
    if (outcome === null) {
      // Cancelled on this worker (the runner closed): another worker takes it over.
      await this.updateAttempt(job, delivery, { reason: `worker ${this.name}: its run ${handle.id} was cancelled (the worker stopped)` });
      message.nak();
      return;
    }
    if (outcome.status === "error" && outcome.reason !== "task_invalid") {
      await this.failDelivery(message, job, delivery, `worker ${this.name}, run ${handle.id}: ${outcome.reason}${outcome.error ? `: ${outcome.error}` : ""}`, {
        handle,
        report,
        emitted,
      });
      return;
    }
    await this.finish(message, job, delivery, { handle, report, emitted }, outcome, null);
  }

  /**
   * An infrastructure failure of this delivery: its reason goes into the
   * lease; redelivered after a delay growing per delivery, or, on the last
   * delivery, the task's result (`error`, `deliveries_exhausted`, every attempt's reason).
   */
  private async failDelivery(message: JsMsg, job: Job, delivery: number, reason: string, run: RunDone | null): Promise<void> {
    const queue = this.options.queue;
    const attempts = await this.updateAttempt(job, delivery, { reason });
    if (delivery < queue.settings.maxDeliver) {
      const delay = Math.min(300_000, queue.settings.redeliveryDelayMs * 2 ** (delivery - 1));
      this.log(`handed back ${job.name}: ${reason} (again in ${Math.round(delay / 1000)} s)`);
      message.nak(delay);
      return;
    }
    await this.finish(message, job, delivery, run, deadLetterOutcome(attempts, queue.settings.maxDeliver), attempts);
  }

  /** Stores the run's records and the result (once), then acks. */
  private async finish(
    message: JsMsg,
    job: Job,
    delivery: number,
    run: RunDone | null,
    outcome: { status: TaskResult["status"]; reason: string; error: string | null },
    attempts: LeaseAttempt[] | null,
  ): Promise<void> {
    const queue = this.options.queue;
    const objects = run ? await this.storeRecords(run, job.kind === "invocation") : null;
    const finalAttempts = attempts ?? (await this.updateAttempt(job, delivery, {}));
    const result = await queue.writeResult({
      key: job.key,
      name: job.name,
      run_id: run?.handle.id ?? null,
      worker: this.name,
      ...outcome,
      attempts: finalAttempts,
      objects,
    });
    await message.ackAck();
    this.log(`finished ${job.name}: ${result.status} (${result.reason})${run ? ` run ${run.handle.id}` : ""}`);
  }

  /**
   * report.json, events.jsonl, patch.diff and the run branch's commits (a bundle), as objects under
   * `run/<run-id>/`; for an invocation also emitted.jsonl, the events its agent emitted.
   */
  private async storeRecords({ handle, report, emitted }: RunDone, invocation: boolean): Promise<NonNullable<TaskResult["objects"]>> {
    const queue = this.options.queue;
    const prefix = `run/${handle.id}`;
    const read = (file: string) => {
      try {
        return readFileSync(join(handle.directory, file));
      } catch {
        return null;
      }
    };
    await queue.putObject(`${prefix}/report.json`, Buffer.from(JSON.stringify(report, null, 2)));
    await queue.putObject(`${prefix}/events.jsonl`, read(RUN_FILES.events) ?? Buffer.alloc(0));
    const patch = report.patch ? read(report.patch) : null;
    if (patch) await queue.putObject(`${prefix}/patch.diff`, patch);
    const branch =
      report.branch && report.base_commit
        ? await bundleBranch(handle.task.workspacePath, report.branch, report.base_commit, join(this.options.runner.home, "worker", "scratch"))
        : null;
    await queue.putObject(`${prefix}/branch.bundle`, branch ?? Buffer.alloc(0));
    if (invocation) await queue.putObject(`${prefix}/emitted.jsonl`, Buffer.from(emitted.map((event) => `${JSON.stringify(event)}\n`).join("")));
    return {
      report: `${prefix}/report.json`,
      events: `${prefix}/events.jsonl`,
      patch: patch ? `${prefix}/patch.diff` : null,
      branch: `${prefix}/branch.bundle`,
      ...(invocation ? { emitted: `${prefix}/emitted.jsonl` } : {}),
    };
  }

  /** Each event of the run as one message on its subject, as it happens; one over 16 KiB goes as a reference. Failures are logged, never the run's. */
  private async publishEvents(handle: RunHandle): Promise<void> {
    const queue = this.options.queue;
    const subject = queue.eventsSubject(handle.id);
    // Each publish is observed at once (a rejection while the run goes on is counted, never left unhandled).
    const pending: Promise<boolean>[] = [];
    let sequence = 0;
    for await (const envelope of handle.events()) {
      let payload = JSON.stringify(envelope);
      if (Buffer.byteLength(payload) > MAX_EVENT_MESSAGE_BYTES) {
        payload = JSON.stringify({ reference: `run/${handle.id}/events.jsonl`, sequence, id: envelope.id, type: envelope.type });
      }
      pending.push(
        queue.client.publish(subject, payload, { msgID: `${handle.id}-${sequence}` }).then(
          () => true,
          () => false,
        ),
      );
      sequence += 1;
    }
    const failed = (await Promise.all(pending)).filter((stored) => !stored).length;
    if (failed > 0) this.log(`run ${handle.id}: ${failed} event message(s) were not stored (the run's events.jsonl object has them all)`);
  }
}

/** A run this worker finished: its handle, its report, and what its agent emitted (an invocation's; empty for a task). */
interface RunDone {
  handle: RunHandle;
  report: RunReport;
  emitted: AgencyEvent[];
}

/** How long fetching a base commit's bundle may take before the delivery counts as an infrastructure failure, ms. */
const BUNDLE_DEADLINE_MS = 300_000;

/** `work`, or a rejection with `message` once `ms` passed (the work itself goes on unobserved). */
function withDeadline<T>(work: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_resolve, reject) => (timer = setTimeout(() => reject(new Error(message)), ms)));
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/** The result of a task whose every delivery failed: `error`, `deliveries_exhausted`, and each attempt's reason. */
export function deadLetterOutcome(attempts: LeaseAttempt[], maxDeliver: number): { status: "error"; reason: string; error: string } {
  const lines = attempts.map(
    (attempt) =>
      `delivery ${attempt.delivery} (${attempt.worker}${attempt.run_id ? `, run ${attempt.run_id}` : ""}): ${attempt.reason ?? "no reason recorded"}`,
  );
  return {
    status: "error",
    reason: "deliveries_exhausted",
    error: `every delivery failed (max_deliver ${maxDeliver}):\n${lines.join("\n")}`,
  };
}
