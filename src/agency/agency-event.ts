import { createHash } from "node:crypto";
import { createAgencyEvent } from "../bus/agency-event.js";
import type { AgencyEvent } from "../bus/event-bus.js";
import { spanIdFor } from "../events/trace-context.js";
import { ORCHESTRATOR_EVENT_PREFIX } from "./agency-schema.js";

/** Who publishes an event of the agency: the orchestrator, an agent, or someone outside (CLI, library). */
export type Publisher = { kind: "orchestrator" } | { kind: "agent"; name: string } | { kind: "outside"; source?: string };

/** The CloudEvents `source` of a publisher (docs/agency.md "The envelope"). */
function sourceOf(agencyId: string, publisher: Publisher): string {
  const base = `agent-runner://agencies/${agencyId}`;
  if (publisher.kind === "orchestrator") return `${base}/orchestrator`;
  if (publisher.kind === "agent") return `${base}/agents/${publisher.name}`;
  return publisher.source ?? `${base}/outside`;
}

/**
 * A new event of agency `agencyId` (createAgencyEvent of the bus): in the
 * agency's trace (`traceId`) unless its cause carries one, `correlationid` =
 * the agency id, `causationid` from `cause`, and `hops`: an agent's event is
 * one hop more than its cause, the orchestrator's own keep the cause's count,
 * events without a cause start at 0. `id` defaults to a random UUID; give a
 * derived one where a repeat must dedupe (a resumed step publishing again).
 * `spanId` is the span that produced the event (the agent's tool call, the
 * invocation the orchestrator reports on); default the agency's own span
 * ({@link workflowSpanId}).
 */
export function agencyEvent(
  context: { agencyId: string; traceId: string },
  publisher: Publisher,
  fields: {
    type: string;
    subject?: string;
    data?: unknown;
    dataref?: string;
    id?: string;
    cause?: AgencyEvent | null;
    time?: Date;
    spanId?: string;
  },
): AgencyEvent {
  const cause = fields.cause ?? undefined;
  return createAgencyEvent({
    type: fields.type,
    source: sourceOf(context.agencyId, publisher),
    correlationid: context.agencyId,
    traceId: context.traceId,
    spanId: fields.spanId ?? workflowSpanId(context.agencyId),
    hops: cause === undefined ? 0 : cause.hops + (publisher.kind === "agent" ? 1 : 0),
    ...(cause === undefined ? {} : { cause }),
    ...(fields.subject === undefined ? {} : { subject: fields.subject }),
    ...(fields.data === undefined ? {} : { data: fields.data }),
    ...(fields.dataref === undefined ? {} : { dataref: fields.dataref }),
    ...(fields.id === undefined ? {} : { id: fields.id }),
    ...(fields.time === undefined ? {} : { time: fields.time }),
  });
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

/** The span of agency `agencyId` as a whole (the `invoke_workflow` span): derived, so every process and resume agrees. */
export function workflowSpanId(agencyId: string): string {
  return spanIdFor("agency", agencyId);
}

/** The span of one invocation (`invoke_agent`): its run's events hang under it (RunEmbedding.trace.parentSpanId). */
export function invocationSpanId(invocationId: string): string {
  return spanIdFor("invocation", invocationId);
}
