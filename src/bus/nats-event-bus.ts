import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager, type JsMsg } from "@nats-io/jetstream";
import { nanos, type NatsConnection } from "@nats-io/transport-node";
import { checkAgencyEvent } from "./agency-event.js";
import { checkConsumerName } from "./file-event-bus.js";
import { connectNats, parseNatsServers } from "./nats-connection.js";
import type { AgencyEvent, Delivery, EventBus, StoredEvent } from "./event-bus.js";

/** How {@link NatsEventBus.open} reaches JetStream and lays out the agency's stream. */
export interface NatsEventBusOptions {
  /** `nats://host:port`, several comma-separated or as a list (a cluster's seeds). */
  servers: string | string[];
  /** The agency id: the stream is `AGENCY_<id>`, its subject `agency.<id>.events` (characters outside [A-Za-z0-9_-] become `_`). */
  agencyId: string;
  /** Copies of the stream when this open creates it (JetStream R1 or R3). Default 3 when the server is in a cluster, else 1. */
  replicas?: number;
  /** False: a stream that does not exist is an error rather than created (a reader of an agency another process started). Default true. */
  create?: boolean;
  /**
   * How long a delivery may go unacked before JetStream redelivers it, in ms
   * (the consumer's `ack_wait`). The active consume keeps its deliveries
   * alive with `working()` every third of it, so a long invocation is never
   * redelivered while its process lives; a dead process's deliveries come
   * again after this. Default 60 000.
   */
  ackWaitMs?: number;
  /** The stream's publish-dedupe window (`duplicate_window`), ms. Default 24 h. */
  duplicateWindowMs?: number;
  /** How long a publish keeps retrying while JetStream has no leader or no quorum, ms. Default 120 000. */
  publishDeadlineMs?: number;
  /** Where the credentials and TLS settings come from: the `RUNNER_NATS_*` variables (src/bus/nats-connection.ts). Default `process.env`. */
  environment?: NodeJS.ProcessEnv;
  /** Told why a publish is waiting (no quorum, leader election), once per wait. */
  onWait?: (reason: string) => void;
}

/**
 * The agency bus on NATS JetStream (`bus: nats://…` in agency.yaml): the
 * {@link EventBus} contract on a stream with limits retention, one per agency.
 *
 * - publish: a JetStream publish with `Nats-Msg-Id` = the event id, so a
 *   duplicate within the stream's `duplicate_window` stores nothing and its
 *   PubAck carries the first copy's sequence. Past the window JetStream stores
 *   a duplicate (the file backend never does); the orchestrator's invocation
 *   ids still keep one invocation per (agent, event id). While the stream has
 *   no leader (an election, a lost quorum) a publish retries with the same id
 *   until `publishDeadlineMs`, saying why through `onWait`.
 * - read: an ordered consumer from `from + 1` (stream sequences are 1-based,
 *   the bus's 0-based).
 * - consume/ack: a durable pull consumer with explicit acks; the ack floor is
 *   the consumer's `ack_floor.stream_seq`. Unlike the file backend, the
 *   deliveries a dead process left pending come again only once their
 *   `ack_wait` has run out (JetStream's redelivery), not at once — unless
 *   the bus's new owner calls {@link NatsEventBus.redeliverAbandoned}; and
 *   `ack` can finish only deliveries this object's consumes received (a
 *   JetStream ack answers the delivery's reply subject), also after their
 *   consume ended, until the next consume of that name or `close`.
 */
export class NatsEventBus implements EventBus {
  private readonly stops = new Set<() => void>();
  /** Deliveries not yet acked, per consumer name: of its active consume, or left by one that ended (handed back with a nak at the next one or at close). */
  private readonly pending = new Map<string, Map<number, JsMsg>>();
  private readonly ackedSequences = new Map<string, Set<number>>();
  /** Consumer names with an active consume. */
  private readonly consuming = new Set<string>();
  private heartbeat: ReturnType<typeof setInterval> | null = null;
  private closed = false;

  private constructor(
    private readonly connection: NatsConnection,
    private readonly manager: JetStreamManager,
    private readonly client: JetStreamClient,
    private readonly stream: string,
    private readonly subject: string,
    private readonly options: NatsEventBusOptions,
  ) {}

  /**
   * Connects with the environment's credentials ({@link connectNats}), and
   * creates the agency's stream if it does not exist (an existing one is used
   * as it is). Rejects with "cannot reach NATS at <urls>" when no server
   * answers (nats.js's connect timeout bounds the wait), ConfigError for bad
   * URLs or credentials settings, and an Error when the account has no
   * JetStream or (`create: false`) the stream is missing.
   */
  static async open(options: NatsEventBusOptions): Promise<NatsEventBus> {
    const servers = parseNatsServers(Array.isArray(options.servers) ? options.servers.join(",") : options.servers, "bus");
    const connection = await connectNats({ servers, name: `agent-runner agency ${options.agencyId}`, environment: options.environment ?? process.env });
    try {
      const id = options.agencyId.replace(/[^A-Za-z0-9_-]/g, "_");
      const stream = `AGENCY_${id}`;
      const subject = `agency.${id}.events`;
      const manager = await whileTransient(options, "JetStream is not ready", async () => {
        const manager = await jetstreamManager(connection);
        const exists = await manager.streams.info(stream).then(
          () => true,
          (error: unknown) => {
            if (isTransient(error)) throw error;
            return false;
          },
        );
        if (!exists && options.create === false)
          throw new Error(`JetStream has no stream ${stream} (the agency's bus): was it deleted, or is this another cluster?`);
        if (!exists) {
          await manager.streams.add({
            name: stream,
            subjects: [subject],
            num_replicas: options.replicas ?? (connection.info?.cluster ? 3 : 1),
            duplicate_window: nanos(options.duplicateWindowMs ?? 24 * 60 * 60 * 1000),
          });
        }
        return manager;
      });
      return new NatsEventBus(connection, manager, jetstream(connection), stream, subject, options);
    } catch (error) {
      await connection.close();
      throw error;
    }
  }

  async publish(event: AgencyEvent): Promise<number> {
    if (this.closed) throw new Error(`the bus is closed: event ${event.id} was not published`);
    checkAgencyEvent(event);
    const payload = JSON.stringify(event);
    // Same Nats-Msg-Id on every retry: a try that was stored before its answer was lost dedupes.
    const ack = await whileTransient(
      this.options,
      `JetStream did not store event ${event.id}`,
      () => this.client.publish(this.subject, payload, { msgID: event.id }),
      () => this.closed,
    );
    return ack.seq - 1;
  }

  async *read(options: { from?: number; follow?: boolean; signal?: AbortSignal } = {}): AsyncIterable<StoredEvent> {
    const from = options.from ?? 0;
    const messages = await this.unlessClosed(async () => {
      const last = options.follow === false ? await this.nextSequence() : Infinity;
      if (from >= last) return null;
      const consumer = await whileTransient(this.options, "JetStream did not start a reader", () =>
        this.client.consumers.get(this.stream, { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: from + 1 }),
      );
      return { last, iterator: await consumer.consume() };
    });
    if (!messages) return;
    const stop = () => void messages.iterator.close();
    if (options.signal?.aborted) return stop();
    options.signal?.addEventListener("abort", stop, { once: true });
    this.stops.add(stop);
    try {
      for await (const message of messages.iterator) {
        yield { sequence: message.seq - 1, event: message.json<AgencyEvent>() };
        if (message.seq >= messages.last) break;
      }
    } finally {
      options.signal?.removeEventListener("abort", stop);
      this.stops.delete(stop);
      stop();
    }
  }

  async *consume(name: string, options: { signal?: AbortSignal } = {}): AsyncIterable<Delivery> {
    checkConsumerName(name);
    if (this.consuming.has(name)) throw new Error(`consumer ${name} is already being consumed by this bus; one consume per name at a time`);
    this.consuming.add(name);
    // What an earlier consume of this name left unacked goes back at once (a nak), as the file backend delivers it
    // again to the next consume; only a process that dies leaves its deliveries to ack_wait (or redeliverAbandoned).
    const left = this.pending.get(name);
    if (left) for (const message of left.values()) message.nak();
    const pending = new Map<number, JsMsg>();
    this.pending.set(name, pending);
    const stopped = new AbortController();
    const stop = () => stopped.abort();
    options.signal?.addEventListener("abort", stop, { once: true });
    this.stops.add(stop);
    this.heartbeat ??= this.startHeartbeat();
    try {
      const consumer = await this.unlessClosed(async () => {
        // An existing consumer is taken as it is: one redeliverAbandoned made starts past its old floor.
        const exists = await this.manager.consumers.info(this.stream, durableName(name)).then(
          () => true,
          (error: unknown) => {
            if (/consumer not found/i.test((error as Error).message)) return false;
            throw error;
          },
        );
        if (!exists) await this.addConsumer(name, 0);
        return this.client.consumers.get(this.stream, durableName(name));
      });
      const aborted = new Promise<null>((resolve) => stopped.signal.addEventListener("abort", () => resolve(null), { once: true }));
      // One message per pull, not consume()'s prefetched batches: a delivery is handed over (and so acked or handed
      // back) as soon as the server sends it, and none waits in a buffer to be redelivered only after ack_wait.
      while (consumer && !stopped.signal.aborted && !options.signal?.aborted) {
        const pull = consumer.next({ expires: 5_000 });
        const message = await Promise.race([pull.catch((error: unknown) => (this.closed ? null : Promise.reject(error))), aborted]);
        if (stopped.signal.aborted) {
          void pull.then(
            (late) => late?.nak(),
            () => undefined,
          );
          break;
        }
        if (!message) continue;
        pending.set(message.seq - 1, message);
        yield { sequence: message.seq - 1, event: message.json<AgencyEvent>(), deliveryCount: message.info.deliveryCount };
      }
    } finally {
      options.signal?.removeEventListener("abort", stop);
      this.stops.delete(stop);
      // Its deliveries stay acknowledgeable (kept alive by the heartbeat) after the consume ends, as on the file
      // backend: an invocation still running when the orchestrator stops taking events acks when it finishes.
      this.consuming.delete(name);
    }
  }

  /** Keeps every unacked delivery alive with `working()` every third of `ack_wait`, so one is never redelivered while this process lives. */
  private startHeartbeat(): ReturnType<typeof setInterval> {
    const ackWaitMs = this.options.ackWaitMs ?? 60_000;
    const heartbeat = setInterval(
      () => {
        for (const pending of this.pending.values()) for (const message of pending.values()) message.working();
      },
      Math.max(100, ackWaitMs / 3),
    );
    heartbeat.unref();
    return heartbeat;
  }

  async ack(name: string, sequence: number): Promise<void> {
    checkConsumerName(name);
    if (!Number.isInteger(sequence) || sequence < 0 || sequence >= (await this.nextSequence())) {
      throw new Error(`consumer ${name}: sequence ${sequence} is not stored (the log holds 0 to ${(await this.nextSequence()) - 1})`);
    }
    const message = this.pending.get(name)?.get(sequence);
    if (message) {
      await message.ackAck();
      this.pending.get(name)?.delete(sequence);
      this.acked(name).add(sequence);
      return;
    }
    if (this.acked(name).has(sequence) || sequence < (await this.ackFloor(name))) return;
    throw new Error(`consumer ${name}: sequence ${sequence} is not a delivery of this bus's active consume (JetStream acks only what it delivered here)`);
  }

  /** Creates durable consumer `name` delivering from bus sequence `from` (0-based) on. */
  private async addConsumer(name: string, from: number): Promise<void> {
    await this.manager.consumers.add(this.stream, {
      durable_name: durableName(name),
      ack_policy: AckPolicy.Explicit,
      ...(from === 0 ? { deliver_policy: DeliverPolicy.All } : { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: from + 1 }),
      ack_wait: nanos(this.options.ackWaitMs ?? 60_000),
      max_ack_pending: 10_000,
    });
  }

  /**
   * For the bus's owner after a crash (the agency's lock says no other
   * process consumes): every durable consumer with deliveries still pending
   * — a dead process's — gets them again at once, as the file backend's next
   * consume does, rather than after their `ack_wait`. JetStream 2.9 cannot
   * hand back another connection's deliveries, so such a consumer is
   * recreated at its ack floor: the events it acked above the floor come
   * again too (consumers are idempotent: the orchestrator only acks an event
   * whose invocation is finished) and delivery counts start at 1. Resolves
   * with the names of the consumers it reset.
   */
  async redeliverAbandoned(): Promise<string[]> {
    const reset: string[] = [];
    for await (const info of this.manager.consumers.list(this.stream)) {
      const name = info.config.durable_name;
      if (!name || info.num_ack_pending === 0) continue;
      await this.manager.consumers.delete(this.stream, name);
      await this.addConsumer(name, info.ack_floor.stream_seq);
      reset.push(name);
    }
    return reset;
  }

  /** Sequences this object acked for consumer `name` (so acking one twice is harmless). */
  private acked(name: string): Set<number> {
    let acked = this.ackedSequences.get(name);
    if (!acked) this.ackedSequences.set(name, (acked = new Set()));
    return acked;
  }

  async ackFloor(name: string): Promise<number> {
    checkConsumerName(name);
    const info = await this.manager.consumers.info(this.stream, durableName(name)).catch(() => null);
    return info ? info.ack_floor.stream_seq : 0;
  }

  async nextSequence(): Promise<number> {
    return (await whileTransient(this.options, "JetStream did not describe the stream", () => this.manager.streams.info(this.stream))).state.last_seq;
  }

  /** Deletes the agency's stream and its consumers (every event is gone). */
  async deleteStream(): Promise<void> {
    await this.manager.streams.delete(this.stream);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const stop of this.stops) stop();
    this.stops.clear();
    if (this.heartbeat) clearInterval(this.heartbeat);
    for (const pending of this.pending.values()) {
      for (const message of pending.values()) message.nak();
      pending.clear();
    }
    // Drain: the naks and acks above reach the server before the connection closes.
    await this.connection.drain().catch(() => this.connection.close());
  }

  /** Runs `work`; a failure because the bus closed meanwhile is null (the read or consume just ends). */
  private async unlessClosed<T>(work: () => Promise<T>): Promise<T | null> {
    try {
      return await work();
    } catch (error) {
      if (this.closed) return null;
      throw error;
    }
  }
}

/** A durable consumer's name may not hold `.`, `*`, `>` or white space (NATS subject tokens). */
function durableName(name: string): string {
  return name.replace(/[^A-Za-z0-9_-]/g, "_");
}

/**
 * Runs `work` again while it fails transiently (no leader, no quorum, a reconnect), with backoff up to 2 s, until
 * `publishDeadlineMs` (default 120 s); says why once through `onWait`. Rethrows anything else, and the last failure.
 */
export async function whileTransient<T>(
  options: Pick<NatsEventBusOptions, "publishDeadlineMs" | "onWait">,
  what: string,
  work: () => Promise<T>,
  stopped: () => boolean = () => false,
): Promise<T> {
  const deadline = Date.now() + (options.publishDeadlineMs ?? 120_000);
  let told = false;
  for (let attempt = 0; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      if (stopped() || Date.now() >= deadline || !isTransient(error)) throw error;
      if (!told) options.onWait?.(`${what} (${(error as Error).message}); waiting for a JetStream leader (a quorum of the cluster's servers)`);
      told = true;
      await new Promise((resolve) => setTimeout(resolve, Math.min(2_000, 100 * 2 ** attempt)));
    }
  }
}

/** Failures that end once the cluster has a leader again: timeouts, no responders (a stream without a leader yet reads as "jetstream is not enabled"), JetStream unavailable (503). */
export function isTransient(error: unknown): boolean {
  const text = `${(error as { name?: string }).name ?? ""} ${(error as Error).message ?? ""} ${String((error as { code?: unknown }).code ?? "")}`;
  return /timeout|no responders|not enabled|503|unavailable|not available|leader|disconnect|reconnect/i.test(text);
}
