import { createHash, randomBytes, randomUUID } from "node:crypto";
import type { AgencyEvent } from "../bus/event-bus.js";
import { ORCHESTRATOR_EVENT_PREFIX } from "./agency-schema.js";

/** Who publishes an event of the agency: the orchestrator, an agent, or someone outside (CLI, library). */
export type Publisher = { kind: "orchestrator" } | { kind: "agent"; name: string } | { kind: "outside"; source?: string };

/** The CloudEvents `source` of a publisher (docs/agency.md "The event envelope"). */
export function sourceOf(agencyId: string, publisher: Publisher): string {
  const base = `agent-runner://agencies/${agencyId}`;
  if (publisher.kind === "orchestrator") return `${base}/orchestrator`;
  if (publisher.kind === "agent") return `${base}/agents/${publisher.name}`;
  return publisher.source ?? `${base}/outside`;
}

/**
 * A new event of agency `agencyId`: a W3C traceparent in the agency's trace
 * (`traceId`, 32 hex) with a fresh span, `correlationid` = the agency id,
 * `causationid` and `hops` from `cause` (an agent's event is one hop more than
 * its cause; the orchestrator's own and outside events keep the cause's count
 * or start at 0). `id` defaults to a random UUID; give a derived one where a
 * repeat must dedupe (a resumed step publishing again).
 */
export function agencyEvent(
  context: { agencyId: string; traceId: string },
  publisher: Publisher,
  fields: { type: string; subject?: string; data?: unknown; dataref?: string; id?: string; cause?: AgencyEvent | null; time?: Date },
): AgencyEvent {
  const cause = fields.cause ?? null;
  const hops = cause === null ? 0 : cause.hops + (publisher.kind === "agent" ? 1 : 0);
  return {
    specversion: "1.0",
    id: fields.id ?? randomUUID(),
    source: sourceOf(context.agencyId, publisher),
    type: fields.type,
    ...(fields.subject === undefined ? {} : { subject: fields.subject }),
    time: (fields.time ?? new Date()).toISOString(),
    datacontenttype: "application/json",
    ...(fields.data === undefined ? {} : { data: fields.data }),
    ...(fields.dataref === undefined ? {} : { dataref: fields.dataref }),
    traceparent: `00-${context.traceId}-${randomBytes(8).toString("hex")}-01`,
    correlationid: context.agencyId,
    ...(cause === null ? {} : { causationid: cause.id }),
    hops,
  };
}

/** A trace id for a new agency: 32 lower-case hex digits (W3C trace context). */
export function newAgencyTraceId(): string {
  return randomBytes(16).toString("hex");
}

/**
 * Whether trigger `pattern` matches event `type`: equal, a `prefix.*` that
 * `type` starts with (`coding.*` matches `coding.task.ready`, not `coding`),
 * or `*`. The orchestrator's own `agency.*` events match only a pattern that
 * names that prefix (`agency.invocation.finished`, `agency.*`): a `*` agent
 * is not woken by every lifecycle change, which would wake it again.
 */
export function triggerMatches(pattern: string, type: string): boolean {
  if (type.startsWith(ORCHESTRATOR_EVENT_PREFIX) && !pattern.startsWith(ORCHESTRATOR_EVENT_PREFIX)) return false;
  if (pattern === "*") return true;
  if (pattern.endsWith(".*")) return type.startsWith(pattern.slice(0, -1));
  return pattern === type;
}

/**
 * The invocation id of agent `agent` for event `eventId`: derived, so a
 * redelivered event finds the invocation it already started (the agency's
 * idempotence rule). `<agent>-<12 hex of sha256(agent NUL event id)>`.
 */
export function invocationId(agent: string, eventId: string): string {
  return `${agent}-${createHash("sha256").update(`${agent}\0${eventId}`).digest("hex").slice(0, 12)}`;
}
