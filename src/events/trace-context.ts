import { createHash } from "node:crypto";
import type { RunEvent } from "./event-catalogue.js";

/**
 * W3C Trace Context span ids of runs and agencies
 * (https://www.w3.org/TR/trace-context/#parent-id: 16 lower-case hex digits,
 * not all zero). They are derived from names, not drawn at random, so a
 * resumed run or agency, and anyone reading its records later (`runner
 * agency show`, the OpenTelemetry export), computes the same ids: the span of
 * step 3's model call is the same whether it is named when the call is made
 * or when the trace is drawn a week later.
 */
export function spanIdFor(...parts: string[]): string {
  const hex = createHash("sha256").update(parts.join("\0")).digest("hex");
  // 2^-64: an all-zero prefix never comes, but the rule forbids it, so the next digits stand in.
  return /^0{16}$/.test(hex.slice(0, 16)) ? hex.slice(16, 32) : hex.slice(0, 16);
}

/** `00-<trace id>-<span id>-01` (version 00, sampled). */
export function traceparentOf(traceId: string, spanId: string): string {
  return `00-${traceId}-${spanId}-01`;
}

/** The trace and span id of a version-00 `traceparent`, or null for anything else. */
export function parseTraceparent(value: unknown): { traceId: string; spanId: string } | null {
  if (typeof value !== "string") return null;
  const match = /^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/.exec(value);
  return match ? { traceId: match[1]!, spanId: match[2]! } : null;
}

/**
 * The span of a run as a whole: the span a front end gave it
 * (`RunEmbedding.trace.parentSpanId`: an agency's invocation), else one of
 * its own derived from the run id.
 */
export function runSpanId(runId: string, parentSpanId: string | null): string {
  return parentSpanId ?? spanIdFor("run", runId);
}

/** The span of one model call: agent `agentId`'s step `step` in the run whose span is `runSpan`. */
export function modelCallSpanId(runSpan: string, agentId: string, step: number): string {
  return spanIdFor(runSpan, "chat", agentId, String(step));
}

/**
 * The span of one tool call in the run whose span is `runSpan`. Keyed by the
 * call id alone (hook events name no agent): ids are the provider's, unique
 * within a conversation.
 */
export function toolCallSpanId(runSpan: string, toolCallId: string): string {
  return spanIdFor(runSpan, "tool", toolCallId);
}

/**
 * The span a run event belongs to (its `traceparent`'s span id in
 * events.jsonl): a model call's events (`model_call.*`) the call's span,
 * a tool call's (`tool_call.*`, `approval.*`, `hook.*`) the call's span,
 * every other event the run's span.
 */
export function spanIdOfRunEvent(runSpan: string, event: RunEvent): string {
  const data = event.data as { agent_id?: unknown; step?: unknown; tool_call_id?: unknown };
  if (event.type.startsWith("model_call.") && typeof data.agent_id === "string" && typeof data.step === "number") {
    return modelCallSpanId(runSpan, data.agent_id, data.step);
  }
  if (typeof data.tool_call_id === "string") return toolCallSpanId(runSpan, data.tool_call_id);
  return runSpan;
}
