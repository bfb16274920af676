import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager, type JetStreamClient, type JetStreamManager, type JsMsg } from "@nats-io/jetstream";
import { connect, nanos, type NatsConnection } from "@nats-io/transport-node";
import { checkAgencyEvent } from "./agency-event.js";
import type { AgencyEvent, Delivery, EventBus, StoredEvent } from "./event-bus.js";

/** How {@link NatsEventBus.open} reaches JetStream and lays out the agency's stream. */
export interface NatsEventBusOptions {
  /** `nats://host:port`, several comma-separated or as a list (a cluster's seeds). */
  servers: string | string[];
  /** The agency id: the stream is `AGENCY_<id>`, its subject `agency.<id>.events` (characters outside [A-Za-z0-9_-] become `_`). */
  agencyId: string;
  /** Copies of the stream in a cluster (JetStream R1 or R3). Default 1. */
  replicas?: number;
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
  /** Credentials (NATS user/password or token), when the server asks for them. */
  user?: string;
  pass?: string;
  token?: string;
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
 *   deliveries a dead consume left pending come again only once their
 *   `ack_wait` has run out (JetStream's redelivery), not at once; and `ack`
 *   can finish only deliveries of this object's own active consume (a
 *   JetStream ack answers the delivery's reply subject).
 */
export class NatsEventBus implements EventBus {
  private readonly stops = new Set<() => void>();
  /** Deliveries of the active consumes not yet acked, per consumer name. */
  private readonly pending = new Map<string, Map<number, JsMsg>>();
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
   * Connects, and creates the agency's stream if it does not exist (an
   * existing one is used as it is). Rejects when no server answers or the
   * account has no JetStream.
   */
  static async open(options: NatsEventBusOptions): Promise<NatsEventBus> {
    const servers = (Array.isArray(options.servers) ? options.servers : options.servers.split(",")).map((server) => server.trim()).filter(Boolean);
    const connection = await connect({
      servers,
      name: `agent-runner agency ${options.agencyId}`,
      maxReconnectAttempts: -1,
      ...(options.user !== undefined ? { user: options.user, pass: options.pass } : {}),
      ...(options.token !== undefined ? { token: options.token } : {}),
    });
    try {
      const manager = await jetstreamManager(connection);
      const id = options.agencyId.replace(/[^A-Za-z0-9_-]/g, "_");
      const stream = `AGENCY_${id}`;
      const subject = `agency.${id}.events`;
      const exists = await manager.streams.info(stream).then(
        () => true,
        () => false,
      );
      if (!exists) {
        await manager.streams.add({
          name: stream,
          subjects: [subject],
          num_replicas: options.replicas ?? 1,
          duplicate_window: nanos(options.duplicateWindowMs ?? 24 * 60 * 60 * 1000),
        });
      }
      return new NatsEventBus(connection, manager, jetstream(connection), stream, subject, options);
    } catch (error) {
      await connection.close();
      throw error;
    }
  }

  async publish(event: AgencyEvent): Promise<number> {
    checkAgencyEvent(event);
    const payload = JSON.stringify(event);
    const deadline = Date.now() + (this.options.publishDeadlineMs ?? 120_000);
    let told = false;
    for (let attempt = 0; ; attempt++) {
      try {
        const ack = await this.client.publish(this.subject, payload, { msgID: event.id });
        return ack.seq - 1;
      } catch (error) {
        if (this.closed || Date.now() >= deadline || !isTransient(error)) throw error;
        if (!told) this.options.onWait?.(`JetStream did not store event ${event.id} (${(error as Error).message}); retrying until a leader answers`);
        told = true;
        // Same Nats-Msg-Id on every retry: a try that was stored before its answer was lost dedupes.
        await new Promise((resolve) => setTimeout(resolve, Math.min(2_000, 100 * 2 ** attempt)));
      }
    }
  }

  async *read(options: { from?: number; follow?: boolean; signal?: AbortSignal } = {}): AsyncIterable<StoredEvent> {
    const from = options.from ?? 0;
    const last = options.follow === false ? await this.nextSequence() : Infinity;
    if (from >= last) return;
    const consumer = await this.client.consumers.get(this.stream, { deliver_policy: DeliverPolicy.StartSequence, opt_start_seq: from + 1 });
    const messages = await consumer.consume();
    const stop = () => void messages.close();
    yield* this.follow(messages, stop, options.signal, (message) => {
      const stored = { sequence: message.seq - 1, event: message.json<AgencyEvent>() };
      if (stored.sequence + 1 >= last) stop();
      return stored;
    });
  }

  async *consume(name: string, options: { signal?: AbortSignal } = {}): AsyncIterable<Delivery> {
    const durable = durableName(name);
    const ackWaitMs = this.options.ackWaitMs ?? 60_000;
    await this.manager.consumers.add(this.stream, {
      durable_name: durable,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      ack_wait: nanos(ackWaitMs),
      max_ack_pending: 10_000,
    });
    const consumer = await this.client.consumers.get(this.stream, durable);
    const messages = await consumer.consume();
    const pending = new Map<number, JsMsg>();
    this.pending.set(name, pending);
    // Keeps every unacked delivery alive while this process works on it.
    const heartbeat = setInterval(() => pending.forEach((message) => message.working()), Math.max(100, ackWaitMs / 3));
    heartbeat.unref();
    const stop = () => {
      clearInterval(heartbeat);
      void messages.close();
    };
    try {
      yield* this.follow(messages, stop, options.signal, (message) => {
        pending.set(message.seq - 1, message);
        return { sequence: message.seq - 1, event: message.json<AgencyEvent>(), deliveryCount: message.info.deliveryCount };
      });
    } finally {
      stop();
      if (this.pending.get(name) === pending) this.pending.delete(name);
    }
  }

  async ack(name: string, sequence: number): Promise<void> {
    const message = this.pending.get(name)?.get(sequence);
    if (message) {
      await message.ackAck();
      this.pending.get(name)?.delete(sequence);
      return;
    }
    if (sequence < (await this.ackFloor(name))) return;
    throw new Error(`consumer ${name}: sequence ${sequence} is not a delivery of this bus's active consume (JetStream acks only what it delivered here)`);
  }

  async ackFloor(name: string): Promise<number> {
    const info = await this.manager.consumers.info(this.stream, durableName(name)).catch(() => null);
    return info ? info.ack_floor.stream_seq : 0;
  }

  async nextSequence(): Promise<number> {
    return (await this.manager.streams.info(this.stream)).state.last_seq;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const stop of this.stops) stop();
    this.stops.clear();
    await this.connection.close();
  }

  /** Yields `map(message)` for each message until `signal` aborts, `stop` is called, or the bus closes. */
  private async *follow<T>(messages: AsyncIterable<JsMsg>, stop: () => void, signal: AbortSignal | undefined, map: (message: JsMsg) => T): AsyncIterable<T> {
    if (signal?.aborted || this.closed) return stop();
    signal?.addEventListener("abort", stop, { once: true });
    this.stops.add(stop);
    try {
      for await (const message of messages) yield map(message);
    } finally {
      signal?.removeEventListener("abort", stop);
      this.stops.delete(stop);
      stop();
    }
  }
}

/** A durable consumer's name may not hold `.`, `*`, `>` or white space (NATS subject tokens). */
function durableName(name: string): string {
  return name.replace(/[^A-Za-z0-9_-]/g, "_");
}

/** Failures that end once the cluster has a leader again: timeouts, no responders, JetStream unavailable (503). */
function isTransient(error: unknown): boolean {
  const text = `${(error as { name?: string }).name ?? ""} ${(error as Error).message ?? ""} ${String((error as { code?: unknown }).code ?? "")}`;
  return /timeout|no responders|503|unavailable|not available|leader|disconnect|reconnect/i.test(text);
}
