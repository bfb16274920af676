import {
  AckPolicy,
  DeliverPolicy,
  jetstream,
  jetstreamManager,
  RetentionPolicy,
  type Consumer,
  type JetStreamClient,
  type JetStreamManager,
} from "@nats-io/jetstream";
import { Kvm, type KV } from "@nats-io/kv";
import { Objm, type ObjectStore } from "@nats-io/obj";
import { nanos, type NatsConnection } from "@nats-io/transport-node";
import { isTransient, whileTransient } from "../bus/nats-event-bus.js";
import { ConfigError } from "../errors.js";
import { jobSchema, type Job } from "./task-job.js";

/**
 * How a pool's queue is laid out and how long things live. The first process
 * (worker or submitter) that finds a piece missing creates it with these
 * settings; a piece that exists is used as it is (its own `ack_wait` and
 * `max_deliver` govern, read back into {@link WorkQueue.settings}).
 */
export interface WorkQueueOptions {
  /** The pool: `[A-Za-z0-9_-]{1,32}`, default `default`. */
  pool?: string;
  /** Copies of every stream, bucket and store (JetStream R1/R3). Default 3 on a cluster (the server says it is in one), else 1. */
  replicas?: number;
  /** The consumer's `ack_wait`, ms: how soon a dead worker's task comes back. Default 60 000 (the 60–120 s). */
  ackWaitMs?: number;
  /** Deliveries of a task before it is dead-lettered (`max_deliver`). Default 3. */
  maxDeliver?: number;
  /** First delay before an infrastructure failure is redelivered (a `nak` with delay), ms; doubles per delivery, at most 5 min. Default 10 000. */
  redeliveryDelayMs?: number;
  /** Publish dedupe window of the tasks stream, and how long results, leases, events and objects are kept, ms. Default 24 h. */
  retentionMs?: number;
  /** How long a call keeps retrying while the cluster has no leader or no quorum, ms. Default 10 min. */
  waitForQuorumMs?: number;
  /** Told why a call waits (no leader, no quorum), once per wait. */
  onWait?: (reason: string) => void;
}

/** One delivery of a task, in the lease ({@link Lease}). */
export interface LeaseAttempt {
  /** JetStream's delivery count (1-based). */
  delivery: number;
  /** `host:pid` of the worker that took it. */
  worker: string;
  /** The worker's run id, once its run exists. */
  run_id: string | null;
  started_at: string;
  /** Why this delivery did not finish the task (an infrastructure failure, a refusal, the worker's silence); null while it runs or when it finished. */
  reason: string | null;
}

/** `lease.<key>` in the pool's key-value bucket: who runs the task (the last attempt), and every delivery so far. */
export interface Lease {
  key: string;
  name: string;
  attempts: LeaseAttempt[];
}

/** `result.<key>`: the task's final outcome, written once (compare-and-set); its objects are stored before it. */
export interface TaskResult {
  key: string;
  name: string;
  /** The run the outcome comes from (null when no run was made: a refused task, a dead letter). */
  run_id: string | null;
  worker: string | null;
  status: "succeeded" | "failed" | "error";
  reason: string;
  error: string | null;
  /** Every delivery, with its reason. */
  attempts: LeaseAttempt[];
  /**
   * Object names of the run's records: report.json, events.jsonl, patch.diff (null without one) and a git bundle
   * of its branch; for an agency's invocation also `emitted`, the events its agent emitted (JSON lines).
   */
  objects: { report: string; events: string; patch: string | null; branch: string; emitted?: string } | null;
}

/** A pool name as the flag takes it; ConfigError naming `--pool` otherwise. */
export function checkPoolName(pool: string): string {
  if (!/^[A-Za-z0-9_-]{1,32}$/.test(pool)) throw new ConfigError(`--pool: expected 1 to 32 letters, digits, - or _, got ${JSON.stringify(pool)}`);
  return pool;
}

/** The durable consumer every worker of a pool shares. */
const CONSUMER = "workers";

/**
 * A pool's work queue on JetStream (docs/scale-out.md "How the queue works"):
 *
 * - `RUNNER_TASKS_<pool>` (subject `runner.<pool>.tasks`): work-queue
 *   retention, publish dedupe on the task key (`Nats-Msg-Id`) over
 *   `retentionMs`; one durable pull consumer, `workers`, explicit acks,
 *   `ack_wait` and `max_deliver`.
 * - `RUNNER_DEAD_<pool>`: JetStream's max-deliveries advisories of that
 *   consumer, kept, so a task whose every delivery died is recorded even when
 *   no submitter listened at the time (`recordDeadLetters`).
 * - `RUNNER_EVENTS_<pool>` (subject `runner.<pool>.events.<run-id>`): each
 *   run's events, one envelope per message (≤ 16 KiB; a larger one by
 *   reference to the run's events.jsonl object).
 * - key-value bucket `runner_<pool>`: `lease.<key>` and `result.<key>`.
 * - object store `runner_<pool>`: `bundle/<commit>/<submitter>` (the submitters' base
 *   commits), `run/<run-id>/…` (the workers' records).
 */
export class WorkQueue {
  private constructor(
    readonly connection: NatsConnection,
    readonly manager: JetStreamManager,
    readonly client: JetStreamClient,
    readonly keyValue: KV,
    readonly objects: ObjectStore,
    readonly pool: string,
    readonly settings: Required<Pick<WorkQueueOptions, "ackWaitMs" | "maxDeliver" | "redeliveryDelayMs" | "retentionMs" | "waitForQuorumMs">> &
      Pick<WorkQueueOptions, "onWait">,
  ) {}

  get tasksStream(): string {
    return `RUNNER_TASKS_${this.pool}`;
  }

  get eventsStream(): string {
    return `RUNNER_EVENTS_${this.pool}`;
  }

  eventsSubject(runId: string): string {
    return `runner.${this.pool}.events.${runId}`;
  }

  /** Opens (creating what is missing) the pool's streams, consumer, bucket and store on `connection`; waits through elections. */
  static async open(connection: NatsConnection, options: WorkQueueOptions = {}): Promise<WorkQueue> {
    const pool = checkPoolName(options.pool ?? "default");
    const replicas = options.replicas ?? (connection.info?.cluster ? 3 : 1);
    const retentionMs = options.retentionMs ?? 24 * 60 * 60 * 1000;
    const settings = {
      ackWaitMs: options.ackWaitMs ?? 60_000,
      maxDeliver: options.maxDeliver ?? 3,
      redeliveryDelayMs: options.redeliveryDelayMs ?? 10_000,
      retentionMs,
      waitForQuorumMs: options.waitForQuorumMs ?? 10 * 60_000,
      ...(options.onWait ? { onWait: options.onWait } : {}),
    };
    const wait = { publishDeadlineMs: settings.waitForQuorumMs, ...(options.onWait ? { onWait: options.onWait } : {}) };
    return whileTransient(wait, `JetStream did not set up pool ${pool}`, async () => {
      const manager = await jetstreamManager(connection);
      const tasks = `RUNNER_TASKS_${pool}`;
      await ensureStream(manager, {
        name: tasks,
        subjects: [`runner.${pool}.tasks`],
        retention: RetentionPolicy.Workqueue,
        num_replicas: replicas,
        duplicate_window: nanos(retentionMs),
      });
      await ensureStream(manager, {
        name: `RUNNER_DEAD_${pool}`,
        subjects: [`$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.${tasks}.${CONSUMER}`],
        num_replicas: replicas,
      });
      await ensureStream(manager, {
        name: `RUNNER_EVENTS_${pool}`,
        subjects: [`runner.${pool}.events.>`],
        num_replicas: replicas,
        max_age: nanos(retentionMs),
      });
      const consumer = await manager.consumers.info(tasks, CONSUMER).catch(async (error: unknown) => {
        if (isTransient(error)) throw error;
        return manager.consumers.add(tasks, {
          durable_name: CONSUMER,
          ack_policy: AckPolicy.Explicit,
          deliver_policy: DeliverPolicy.All,
          ack_wait: nanos(settings.ackWaitMs),
          max_deliver: settings.maxDeliver,
          max_ack_pending: -1,
        });
      });
      const keyValue = await new Kvm(connection).create(`runner_${pool}`, { replicas, ttl: retentionMs, history: 1 });
      const objects = await new Objm(connection).create(`runner_${pool}`, { replicas, ttl: nanos(retentionMs) });
      return new WorkQueue(connection, manager, jetstream(connection), keyValue, objects, pool, {
        ...settings,
        ackWaitMs: consumer.config.ack_wait ? Math.round(consumer.config.ack_wait / 1_000_000) : settings.ackWaitMs,
        maxDeliver: consumer.config.max_deliver ?? settings.maxDeliver,
      });
    });
  }

  /** The pool's shared consumer. */
  consumer(): Promise<Consumer> {
    return this.retrying("JetStream did not hand out the pool's consumer", () => this.client.consumers.get(this.tasksStream, CONSUMER));
  }

  /** Publishes a job with its key as `Nats-Msg-Id`; true when JetStream stored it, false for a duplicate within the window. */
  async submit(job: Job): Promise<boolean> {
    const payload = JSON.stringify(jobSchema.parse(job));
    const ack = await this.retrying(`JetStream did not store task ${job.name}`, () =>
      this.client.publish(`runner.${this.pool}.tasks`, payload, { msgID: job.key }),
    );
    return !ack.duplicate;
  }

  async lease(key: string): Promise<{ lease: Lease; revision: number } | null> {
    const entry = await this.retrying("JetStream did not read a lease", () => this.keyValue.get(`lease.${key}`));
    return entry && entry.operation === "PUT" ? { lease: entry.json<Lease>(), revision: entry.revision } : null;
  }

  /** Writes the lease if it is still at `revision` (0: none yet); false when another process wrote it first. */
  async writeLease(lease: Lease, revision: number): Promise<boolean> {
    const value = JSON.stringify(lease);
    try {
      await this.retrying("JetStream did not write a lease", () =>
        revision === 0 ? this.keyValue.create(`lease.${lease.key}`, value) : this.keyValue.update(`lease.${lease.key}`, value, revision),
      );
      return true;
    } catch (error) {
      if (/wrong last sequence|key exists|already exists/i.test(String((error as Error).message))) return false;
      throw error;
    }
  }

  async result(key: string): Promise<TaskResult | null> {
    const entry = await this.retrying("JetStream did not read a result", () => this.keyValue.get(`result.${key}`));
    return entry && entry.operation === "PUT" ? entry.json<TaskResult>() : null;
  }

  /** Records the task's result unless one exists (compare-and-set); returns the one that stands. */
  async writeResult(result: TaskResult): Promise<TaskResult> {
    try {
      await this.retrying("JetStream did not store a result", () => this.keyValue.create(`result.${result.key}`, JSON.stringify(result)));
      return result;
    } catch (error) {
      if (!/wrong last sequence|key exists|already exists/i.test(String((error as Error).message))) throw error;
      return (await this.result(result.key)) ?? result;
    }
  }

  async putObject(name: string, data: Uint8Array): Promise<void> {
    await this.retrying(`JetStream did not store object ${name}`, () => this.objects.putBlob({ name }, data));
  }

  /** An object's bytes; null when there is none (expired, or never stored). */
  getObject(name: string): Promise<Uint8Array | null> {
    return this.retrying(`JetStream did not return object ${name}`, () => this.objects.getBlob(name));
  }

  /** An object's size in bytes (from its info, without reading it); null when there is none. */
  async objectSize(name: string): Promise<number | null> {
    const info = await this.retrying(`JetStream did not describe object ${name}`, () => this.objects.info(name));
    return info === null || info.deleted ? null : info.size;
  }

  async hasObject(name: string): Promise<boolean> {
    const info = await this.retrying(`JetStream did not describe object ${name}`, () => this.objects.info(name));
    return info !== null && !info.deleted;
  }

  /** Runs `work` again through leader elections and lost quorums, up to `waitForQuorumMs`, saying why through `onWait`. */
  retrying<T>(what: string, work: () => Promise<T>): Promise<T> {
    return whileTransient({ publishDeadlineMs: this.settings.waitForQuorumMs, ...(this.settings.onWait ? { onWait: this.settings.onWait } : {}) }, what, work);
  }

  /** Deletes every stream, bucket and store of the pool (tests, and `docs/scale-out.md` "Starting over"). */
  async destroy(): Promise<void> {
    for (const stream of [this.tasksStream, `RUNNER_DEAD_${this.pool}`, this.eventsStream]) await this.manager.streams.delete(stream).catch(() => false);
    await this.keyValue.destroy().catch(() => false);
    await this.objects.destroy().catch(() => false);
  }
}

/** Creates the stream unless one of that name exists (used as it is). */
async function ensureStream(manager: JetStreamManager, config: Parameters<JetStreamManager["streams"]["add"]>[0]): Promise<void> {
  const exists = await manager.streams.info(config.name).then(
    () => true,
    (error: unknown) => {
      if (isTransient(error)) throw error;
      return false;
    },
  );
  if (!exists) await manager.streams.add(config);
}
