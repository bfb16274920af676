import { randomBytes, randomUUID } from "node:crypto";
import { z } from "zod";
import { EventRejectedError, MAX_EVENT_DATA_BYTES, type AgencyEvent } from "./event-bus.js";

/** W3C Trace Context `traceparent`, version 00 (https://www.w3.org/TR/trace-context/#traceparent-header-field-values). */
const TRACEPARENT = /^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/;

/**
 * The envelope every publish is checked against: CloudEvents 1.0 required
 * attributes plus the agency's extensions; unknown attributes are refused so
 * a misspelt `causationId` fails loudly instead of vanishing.
 */
const agencyEventSchema = z.strictObject({
  specversion: z.literal("1.0"),
  id: z.string().min(1),
  source: z.string().min(1),
  type: z.string().min(1),
  subject: z.string().optional(),
  time: z.iso.datetime({ offset: true }),
  datacontenttype: z.literal("application/json"),
  data: z.unknown().optional(),
  dataref: z.string().min(1).optional(),
  traceparent: z.string().regex(TRACEPARENT, "a W3C traceparent: 00-<32 hex trace id>-<16 hex span id>-<2 hex flags>"),
  correlationid: z.string().min(1),
  causationid: z.string().min(1).optional(),
  hops: z.number().int().min(0),
});

/**
 * The serialised size of `data` in bytes of UTF-8 JSON (0 when absent).
 * Throws EventRejectedError ("invalid") for data JSON cannot hold (a BigInt, a cycle).
 */
function dataBytes(data: unknown): number {
  if (data === undefined) return 0;
  let json: string | undefined;
  try {
    json = JSON.stringify(data);
  } catch (error) {
    throw new EventRejectedError(
      `event data is not JSON (${(error as Error).message}): pass plain objects, arrays, strings, numbers, booleans and null`,
      "invalid",
    );
  }
  if (json === undefined)
    throw new EventRejectedError("event data is not JSON (a function or symbol): pass plain objects, arrays, strings, numbers, booleans and null", "invalid");
  return Buffer.byteLength(json);
}

/**
 * Checks `event` before it is stored: the envelope's attributes, then the
 * size of `data` ({@link MAX_EVENT_DATA_BYTES}, counted as UTF-8 bytes of its
 * JSON). Throws EventRejectedError whose message names the field and the fix;
 * both backends call it, so they refuse the same events. A caller that has
 * serialised the whole event passes its size in bytes: data that is part of
 * a whole under the cap is under it too, and is not serialised again.
 */
export function checkAgencyEvent(event: AgencyEvent, serialisedBytes?: number): void {
  const parsed = agencyEventSchema.safeParse(event);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join(".") || "(event)"}: ${issue.message}`);
    throw new EventRejectedError(`malformed event ${JSON.stringify((event as { id?: unknown } | null)?.id ?? null)}: ${problems.join("; ")}`, "invalid");
  }
  const dataIsJson = typeof event.data !== "function" && typeof event.data !== "symbol";
  if (dataIsJson && serialisedBytes !== undefined && serialisedBytes <= MAX_EVENT_DATA_BYTES) return;
  const bytes = dataBytes(event.data);
  if (bytes > MAX_EVENT_DATA_BYTES) {
    throw new EventRejectedError(
      `event ${event.type} (${event.id}): data is ${bytes} bytes of JSON, over the ${MAX_EVENT_DATA_BYTES}-byte limit; ` +
        "write large data to a file in the workspace and name it in the event's `dataref` (e.g. dataref: reports/analysis.md), keeping `data` to a short summary",
      "too_large",
    );
  }
}

/** What a caller says about a new event; {@link createAgencyEvent} fills in the rest. */
export interface AgencyEventInit {
  /** The routing key, e.g. `coding.task.ready`. */
  type: string;
  /** `agent-runner://agencies/<agency-id>/agents/<name>`, `…/orchestrator`, or an outside source. */
  source: string;
  /** The agency run's id. */
  correlationid: string;
  subject?: string;
  data?: unknown;
  dataref?: string;
  /** The event that caused this one: its id becomes `causationid`, its trace this event's trace, its `hops` + 1 this one's `hops`. */
  cause?: AgencyEvent;
  /** Overrides the hop count (default: the cause's + 1, or 0 without a cause; the orchestrator's own events keep the cause's). */
  hops?: number;
  /** The agency's trace id (32 lower-case hex digits, see {@link newTraceId}) for an event without a cause; a cause's trace wins. */
  traceId?: string;
  /**
   * The span id of the `traceparent` (16 lower-case hex digits): the span that
   * produced the event (CloudEvents distributed tracing: the producer's
   * context), e.g. the agent's tool call that emitted it; default a random one.
   */
  spanId?: string;
  /** The event id (default a random UUID); an outside system's own id makes its retries dedupe. */
  id?: string;
  /** Default: now. */
  time?: Date;
}

/** Random bytes drawn 4 KiB at a time: randomBytes per id costs a system call each, and agencies mint an id per event. */
const entropy = { pool: Buffer.alloc(0), used: 0 };

/** `bytes` random bytes as lower-case hex, never all zero (W3C Trace Context forbids an all-zero trace or span id). */
function randomHex(bytes: number): string {
  for (;;) {
    if (entropy.used + bytes > entropy.pool.length) {
      entropy.pool = randomBytes(4096);
      entropy.used = 0;
    }
    const hex = entropy.pool.toString("hex", entropy.used, (entropy.used += bytes));
    if (!/^0+$/.test(hex)) return hex;
  }
}

/** A new random W3C trace id: 32 lower-case hex digits, not all zero. */
export function newTraceId(): string {
  return randomHex(16);
}

/**
 * A complete {@link AgencyEvent} (CloudEvents 1.0, structured JSON) from
 * `init`: a UUID id, the RFC 3339 time, a `traceparent` with `init.spanId` (or
 * a fresh span id) in the cause's trace (or `init.traceId`, or a new trace), and
 * `causationid`/`hops` from the cause. It is not checked here: `publish`
 * checks it (EventRejectedError); call {@link checkAgencyEvent} to check early.
 */
export function createAgencyEvent(init: AgencyEventInit): AgencyEvent {
  const causeTrace = init.cause?.traceparent.split("-")[1];
  const event: AgencyEvent = {
    specversion: "1.0",
    id: init.id ?? randomUUID(),
    source: init.source,
    type: init.type,
    time: (init.time ?? new Date()).toISOString(),
    datacontenttype: "application/json",
    traceparent: `00-${causeTrace ?? init.traceId ?? newTraceId()}-${init.spanId ?? randomHex(8)}-01`,
    correlationid: init.correlationid,
    hops: init.hops ?? (init.cause ? init.cause.hops + 1 : 0),
  };
  if (init.subject !== undefined) event.subject = init.subject;
  if (init.data !== undefined) event.data = init.data;
  if (init.dataref !== undefined) event.dataref = init.dataref;
  if (init.cause) event.causationid = init.cause.id;
  return event;
}
