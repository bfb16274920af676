/**
 * The agency's event bus (docs/agency.md "The bus"): one interface, two
 * backends — the embedded file backend (`bus: file`, the default) and NATS
 * JetStream (`bus: nats://…`). Both run the same conformance suite
 * (tests/helpers/event-bus-conformance.ts), as testcontainers runs one suite
 * over its container runtimes.
 *
 * The model is JetStream's, so the second backend maps one to one:
 * - an append-only **log** of events; every event gets a **sequence** number,
 *   0-based and dense (JetStream's stream sequence minus one);
 * - **replay**: anyone reads from any sequence, then follows live events;
 * - **durable consumers**: a named cursor per consumer with at-least-once
 *   delivery. A delivery is finished by `ack`; until then it is *pending*.
 *   The consumer's **ack floor** is the lowest sequence not yet acked; acks may
 *   come out of order (several invocations at once), and an event acked above
 *   the floor is never delivered to that consumer again. After a crash (or a
 *   new `consume` of the same name) every pending, unacked event is delivered
 *   again — so consumers must be idempotent: the orchestrator derives the
 *   invocation id from (agent, event id).
 * - **dedupe**: a publish whose event `id` is already in the log stores
 *   nothing and returns the earlier event's sequence (JetStream's
 *   `Nats-Msg-Id` publish dedupe; the file backend keeps every id).
 */

/** The largest `data` an event may carry, in bytes of its JSON (16 KiB; the founding design's rule). */
export const MAX_EVENT_DATA_BYTES = 16 * 1024;

/**
 * A CloudEvents 1.0 event in structured JSON mode, as the agency publishes it.
 * CloudEvents attribute names are lower-case letters and digits only
 * (CloudEvents 1.0, "Attribute Naming Convention"), hence `correlationid`,
 * `causationid` and `hops` rather than the founding design's `trace_id`/`max_hops`.
 */
export interface AgencyEvent {
  specversion: "1.0";
  /** Unique per event: a UUID, or a caller's id for an outside event (dedupe key). */
  id: string;
  /** `agent-runner://agencies/<agency-id>/agents/<name>`, or `…/orchestrator`, or an outside source. */
  source: string;
  /** The routing key, e.g. `coding.task.ready`. */
  type: string;
  subject?: string;
  /** RFC 3339. */
  time: string;
  datacontenttype: "application/json";
  /** Any JSON value; at most {@link MAX_EVENT_DATA_BYTES} bytes serialised. */
  data?: unknown;
  /** A reference to data too large for the event (a workspace path, a URL). */
  dataref?: string;
  /** W3C trace context: one trace id per agency, a span id per event. */
  traceparent: string;
  /** The agency run's id. */
  correlationid: string;
  /** The id of the event that caused this one (absent for start and outside events). */
  causationid?: string;
  /** Agent hand-offs that led here: 0 for start and outside events, the cause's + 1 for an agent's. */
  hops: number;
}

/** An event as the log holds it. */
export interface StoredEvent {
  /** 0-based, dense, in publish order. */
  sequence: number;
  event: AgencyEvent;
}

/** One delivery to a durable consumer; finish it with {@link EventBus.ack}. */
export interface Delivery extends StoredEvent {
  /** 1 for the first delivery to this consumer, more for a redelivery after a crash or a new consume. */
  deliveryCount: number;
}

/** A refused publish: the data is over {@link MAX_EVENT_DATA_BYTES} or the event is malformed. The message names the field and the fix. */
export class EventRejectedError extends Error {
  constructor(
    message: string,
    readonly reason: "too_large" | "invalid",
  ) {
    super(message);
    this.name = "EventRejectedError";
  }
}

export interface EventBus {
  /**
   * Appends `event` durably (on disk, or acknowledged by JetStream) and
   * resolves with its sequence. An `id` already in the log stores nothing
   * and resolves with the earlier sequence. Throws EventRejectedError for
   * data over 16 KiB or a malformed event; nothing is stored then.
   */
  publish(event: AgencyEvent): Promise<number>;

  /**
   * Every event from sequence `from` (default 0) in order: what is stored,
   * then live ones as they are published. Ends when `signal` aborts or the
   * bus closes; `follow: false` ends at the last stored event instead.
   */
  read(options?: { from?: number; follow?: boolean; signal?: AbortSignal }): AsyncIterable<StoredEvent>;

  /**
   * Deliveries for the durable consumer `name` (created on first use at
   * sequence 0): every event it has not acked, in sequence order — pending
   * ones from an earlier consume again (deliveryCount + 1), then new ones
   * live. One active consume per name at a time. Ends when `signal` aborts
   * or the bus closes.
   */
  consume(name: string, options?: { signal?: AbortSignal }): AsyncIterable<Delivery>;

  /** Marks `sequence` finished for consumer `name`, durably; acking twice is harmless. */
  ack(name: string, sequence: number): Promise<void>;

  /** The consumer's ack floor: the lowest sequence it has not acked (0 for a new consumer). */
  ackFloor(name: string): Promise<number>;

  /** The sequence the next publish gets (the number of events stored). */
  nextSequence(): Promise<number>;

  /** Ends every read and consume, releases files or connections. Idempotent. */
  close(): Promise<void>;
}
