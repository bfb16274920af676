import { join } from "node:path";
import type { StoredEvent } from "../../bus/event-bus.js";
import { AgencyBus } from "../agency-bus.js";
import { readEvent, type RunEnvelope } from "../../events/event-catalogue.js";
import { readEnvelopes } from "../../events/event-log-reader.js";
import { modelCallSpanId, parseTraceparent, runSpanId, toolCallSpanId } from "../../events/trace-context.js";
import type { AgencyDirectory, AgencyRecord, InvocationRecord } from "../agency-directory.js";
import { invocationSpanId, workflowSpanId } from "../agency-event.js";

/**
 * What one line of the trace is: the agency as a whole (`workflow`), an
 * event of its bus (`event`), an `agency.*` event that says something
 * happened to the chain (`marker`: a guard fired, a merge conflicted), an
 * agent's invocation, and its run's model calls (`chat`) and tool calls
 * (`tool`). Workflow, invocation, chat and tool are spans; events and markers
 * happen at an instant inside the span that produced them.
 */
export type TraceNodeKind = "workflow" | "event" | "marker" | "invocation" | "chat" | "tool";

/** One node of an agency's trace tree ({@link buildAgencyTrace}). */
export interface TraceNode {
  kind: TraceNodeKind;
  /** The agency's name, the event's type, the agent's name, the model's id, or the tool's name. */
  name: string;
  /**
   * Span nodes: their span id. Events and markers: the span id of their
   * `traceparent` (the span that produced them: a tool call, an invocation,
   * the workflow).
   */
  spanId: string;
  /** Epoch ms. */
  startMs: number;
  /** Epoch ms; null while a span has not ended (a running invocation, a model call cut by a crash). */
  endMs: number | null;
  /** USD: a model call's cost, an invocation's run's, the agency's sum; null when unknown or free of model calls. */
  costUsd: number | null;
  /** An invocation's `succeeded`/`failed`/..., a tool call's `error`, an unfinished span's `running`; else null. */
  status: string | null;
  /** One short line: an invocation's reason, an event's subject, a marker's data, a model call's tokens. */
  detail: string | null;
  /** The facts a span exporter needs (ids, tokens, the step), as flat JSON values; no message content. */
  attributes: Record<string, string | number | boolean>;
  /**
   * Message content, only when asked for ({@link AgencyTraceInput.includeContent}):
   * a model call's answer, a tool call's arguments and result, as events.jsonl
   * holds them (redacted by the run's redactor).
   */
  content?: { arguments?: string; result?: string; output?: string };
  children: TraceNode[];
}

/** The records a trace is drawn from (see {@link readAgencyTrace}). */
export interface AgencyTraceInput {
  record: AgencyRecord;
  /** The bus log, in sequence order. */
  events: StoredEvent[];
  invocations: InvocationRecord[];
  /** The envelopes of run `runId`'s events.jsonl ([] when it has none). */
  runEnvelopes(runId: string): RunEnvelope[];
  /** Copy model and tool call content into the nodes (default false: no content). */
  includeContent?: boolean;
}

/**
 * Lifecycle noise the trace leaves out: every agent's state changes, and
 * each invocation's end (its node says how it ended). Every other `agency.*`
 * event is drawn as a marker, whoever publishes it: guards (`agency.chain.stopped`,
 * `agency.breaker.*`, `agency.rate_limited`, `agency.needs_human`,
 * `agency.approval.*`) and merge conflicts show up without code of their own here.
 */
const LIFECYCLE_EVENTS = new Set(["agency.agent.state", "agency.invocation.finished"]);

/**
 * The tree of one agency's trace: event → the invocations it triggered → their
 * runs' model and tool calls → the events a tool call emitted → their
 * invocations, and so on. Placement follows the records: an invocation hangs
 * under its triggering event (`event_id`); an event under the span its
 * `traceparent` names when that span is in the tree (an agent's event under
 * the `emit_event` call that emitted it, an orchestrator's event about an
 * invocation under it), else under its cause (`causationid`), else under the
 * workflow. Children are in time order. Pure: the same records give the same tree.
 */
export function buildAgencyTrace(input: AgencyTraceInput): TraceNode {
  const { record } = input;
  const started = Date.parse(record.created_at);
  const root = node("workflow", record.definition.name, workflowSpanId(record.agency_id), started, {
    "agency.id": record.agency_id,
    "agency.goal": record.definition.goal,
  });
  const spans = new Map<string, TraceNode>([[root.spanId, root]]);
  const events = new Map<string, TraceNode>();
  const placed: { child: TraceNode; parentEvent: string | null }[] = [];

  for (const invocation of input.invocations) {
    const built = invocationNode(input, invocation, spans);
    placed.push({ child: built, parentEvent: invocation.event_id });
  }
  for (const stored of input.events) {
    const event = stored.event;
    if (LIFECYCLE_EVENTS.has(event.type)) continue;
    const marker = event.type.startsWith("agency.");
    const producer = parseTraceparent(event.traceparent)?.spanId ?? root.spanId;
    const data = event.data === undefined ? null : JSON.stringify(event.data);
    const built = node(marker ? "marker" : "event", event.type, producer, Date.parse(event.time), {
      "event.id": event.id,
      "event.sequence": stored.sequence,
      "event.source": event.source,
      "event.hops": event.hops,
      ...(event.subject === undefined ? {} : { "event.subject": event.subject }),
    });
    built.endMs = built.startMs;
    built.detail = marker ? (data === null ? null : data.slice(0, 160)) : (event.subject ?? null);
    events.set(event.id, built);
    const producerNode = producer === root.spanId ? undefined : spans.get(producer);
    if (producerNode) producerNode.children.push(built);
    else placed.push({ child: built, parentEvent: event.causationid ?? null });
  }
  for (const { child, parentEvent } of placed) (events.get(parentEvent ?? "") ?? root).children.push(child);

  let end = started;
  let cost: number | null = null;
  const visit = (current: TraceNode): void => {
    current.children.sort((a, b) => a.startMs - b.startMs);
    end = Math.max(end, current.endMs ?? current.startMs);
    if (current.kind === "invocation" && current.costUsd !== null) cost = (cost ?? 0) + current.costUsd;
    for (const child of current.children) visit(child);
  };
  visit(root);
  root.endMs = end;
  root.costUsd = cost;
  return root;
}

/** An invocation's node with its run's model and tool calls, each registered in `spans`. */
function invocationNode(input: AgencyTraceInput, invocation: InvocationRecord, spans: Map<string, TraceNode>): TraceNode {
  const span = invocationSpanId(invocation.invocation_id);
  const agent = input.record.definition.agents.find((candidate) => candidate.name === invocation.agent);
  const built = node("invocation", invocation.agent, span, Number.NaN, {
    "invocation.id": invocation.invocation_id,
    "run.id": invocation.run_id,
    "event.id": invocation.event_id,
    "event.type": invocation.event_type,
    ...(agent ? { "model.provider": agent.model.provider, ...(agent.model.name ? { "model.name": agent.model.name } : {}) } : {}),
  });
  spans.set(span, built);
  built.status = invocation.status;
  built.detail = invocation.reason;
  built.costUsd = invocation.cost_usd;
  const { first, last, runCost } = addRunSteps(built, input.runEnvelopes(invocation.run_id), spans, input.includeContent ?? false);
  if (built.costUsd === null) built.costUsd = runCost;
  const trigger = input.events.find((stored) => stored.event.id === invocation.event_id);
  built.startMs = Number.isFinite(first) ? first : trigger ? Date.parse(trigger.event.time) : Date.parse(input.record.created_at);
  built.endMs = invocation.status === "running" ? null : Number.isFinite(last) ? last : built.startMs;
  return built;
}

/**
 * Adds the model and tool calls of a run's events (`envelopes`) under `built`
 * (the run's span), registering each in `spans`; returns the first and last
 * event time (epoch ms, ±Infinity when none) and the summed model call cost
 * (USD, null when no call was priced).
 */
function addRunSteps(
  built: TraceNode,
  envelopes: RunEnvelope[],
  spans: Map<string, TraceNode>,
  includeContent: boolean,
): { first: number; last: number; runCost: number | null } {
  let first = Number.POSITIVE_INFINITY;
  let last = Number.NEGATIVE_INFINITY;
  let runCost: number | null = null;
  for (const envelope of envelopes) {
    const time = Date.parse(envelope.time ?? "");
    if (Number.isNaN(time)) continue;
    first = Math.min(first, time);
    last = Math.max(last, time);
    const read = readEvent(envelope);
    if (read.kind !== "event") continue;
    const event = read.event;
    if (event.type.startsWith("model_call.") && "step" in event.data) {
      const { agent_id, step } = event.data as { agent_id: string; step: number };
      const call = callNode(spans, built, modelCallSpanId(built.spanId, agent_id, step), "chat", time, { "agent.id": agent_id, step });
      if (event.type === "model_call.finished") {
        const data = event.data;
        call.endMs = time;
        call.status = null;
        call.costUsd = data.cost_usd ?? null;
        if (typeof data.cost_usd === "number") runCost = (runCost ?? 0) + data.cost_usd;
        Object.assign(call.attributes, { "usage.input_tokens": data.usage.prompt_tokens, "usage.output_tokens": data.usage.completion_tokens });
        call.detail = `${data.usage.prompt_tokens}→${data.usage.completion_tokens} tokens${data.tool_calls ? `, ${data.tool_calls} tool call${data.tool_calls === 1 ? "" : "s"}` : ""}`;
        if (includeContent && data.content !== null) call.content = { ...call.content, output: data.content };
      }
    } else if (event.type.startsWith("tool_call.")) {
      const data = event.data as { agent_id: string; tool_call_id: string; name: string };
      const call = callNode(spans, built, toolCallSpanId(built.spanId, data.tool_call_id), "tool", time, {
        "agent.id": data.agent_id,
        "tool_call.id": data.tool_call_id,
      });
      call.name = data.name;
      if (event.type === "tool_call.started" && includeContent) call.content = { ...call.content, arguments: event.data.arguments };
      if (event.type === "tool_call.finished") {
        call.endMs = time;
        call.status = event.data.is_error ? "error" : null;
        if (event.data.is_error) call.detail = event.data.result_preview.slice(0, 160);
        if (includeContent) call.content = { ...call.content, result: event.data.result_preview };
      } else if (event.type !== "tool_call.started") {
        // denied, interrupted, replayed: the call ends here, and says how.
        call.endMs = time;
        call.status = event.type.slice("tool_call.".length);
      }
    }
  }
  return { first, last, runCost };
}

/** The model or tool call node of `spanId` under `invocation`, made at `time` when new. */
function callNode(
  spans: Map<string, TraceNode>,
  invocation: TraceNode,
  spanId: string,
  kind: "chat" | "tool",
  time: number,
  attributes: TraceNode["attributes"],
): TraceNode {
  let call = spans.get(spanId);
  if (!call) {
    const model = invocation.attributes["model.name"] ?? invocation.attributes["model.provider"] ?? "model";
    call = node(kind, kind === "chat" ? String(model) : "tool", spanId, time, attributes);
    call.status = "running";
    spans.set(spanId, call);
    invocation.children.push(call);
  }
  return call;
}

function node(kind: TraceNodeKind, name: string, spanId: string, startMs: number, attributes: TraceNode["attributes"]): TraceNode {
  return { kind, name, spanId, startMs, endMs: null, costUsd: null, status: null, detail: null, attributes, children: [] };
}

/**
 * The trace of one plain run (`runner exec`): its span (`invoke_agent {task}`,
 * the span id its events.jsonl uses: run.json's `parent_span_id`, else the
 * run's own) with its model and tool calls below, from its events.jsonl.
 */
export function buildRunTrace(run: {
  runId: string;
  task: string;
  parentSpanId: string | null;
  status: string;
  reason: string | null;
  costUsd: number | null;
  model: { provider: string; name?: string | undefined };
  envelopes: RunEnvelope[];
  includeContent?: boolean;
}): TraceNode {
  const built = node("invocation", run.task, runSpanId(run.runId, run.parentSpanId), Number.NaN, {
    "run.id": run.runId,
    "model.provider": run.model.provider,
    ...(run.model.name ? { "model.name": run.model.name } : {}),
  });
  built.status = run.status;
  built.detail = run.reason;
  const { first, last, runCost } = addRunSteps(built, run.envelopes, new Map([[built.spanId, built]]), run.includeContent ?? false);
  built.costUsd = run.costUsd ?? runCost;
  built.startMs = Number.isFinite(first) ? first : Date.now();
  built.endMs = Number.isFinite(last) ? last : built.startMs;
  for (const child of built.children) if (child.endMs === null) child.endMs = built.endMs;
  built.children.sort((a, b) => a.startMs - b.startMs);
  return built;
}

/** {@link buildAgencyTrace} over an agency's records: its bus log, invocations.jsonl and each invocation's run's events.jsonl under `runnerHome`. */
export async function readAgencyTrace(directory: AgencyDirectory, runnerHome: string, options: { includeContent?: boolean } = {}): Promise<TraceNode> {
  const events: StoredEvent[] = [];
  const record = directory.readRecord();
  for await (const stored of AgencyBus.of(directory, record).read()) events.push(stored);
  return buildAgencyTrace({
    record,
    events,
    invocations: [...directory.readInvocations().values()],
    runEnvelopes: (runId) => readEnvelopes(join(runnerHome, "runs", runId, "events.jsonl")),
    ...(options.includeContent ? { includeContent: true } : {}),
  });
}
