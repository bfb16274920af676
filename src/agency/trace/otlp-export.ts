import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { SpanKind, SpanStatusCode, TraceFlags, type Attributes, type SpanContext } from "@opentelemetry/api";
import { ExportResultCode, hrTimeDuration, millisToHrTime } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import type { ReadableSpan, TimedEvent } from "@opentelemetry/sdk-trace";
import type { AgencyDirectory } from "../agency-directory.js";
import { otlpTracesEnabled } from "./otlp-enabled.js";
import { readEnvelopes } from "../../events/event-log-reader.js";
import { buildRunTrace, readAgencyTrace, type TraceNode } from "./agency-trace.js";

/** Whether message content goes into the spans: `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` (the GenAI instrumentations' variable). */
function captureMessageContent(environment: NodeJS.ProcessEnv): boolean {
  return environment.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT?.trim().toLowerCase() === "true";
}

/** The instrumentation scope of the spans (OpenTelemetry's name for who made them). */
const SCOPE = { name: "agent-runner.agency" };

/**
 * The spans of an agency's trace tree, per the OpenTelemetry GenAI semantic
 * conventions (Development status; docs gen-ai-agent-spans.md and
 * gen-ai-spans.md of open-telemetry/semantic-conventions): the agency is
 * `invoke_workflow {agency}`, each invocation `invoke_agent {agent}`, each
 * model call `chat {model}`, each tool call `execute_tool {tool}`, with their
 * `gen_ai.*` attributes; events and markers become span events of the span
 * that produced them (name: the event type). Span ids are the tree's (the
 * ones in events.jsonl and on the bus), the trace id the agency's. Content
 * (`gen_ai.output.messages`, `gen_ai.tool.call.arguments`,
 * `gen_ai.tool.call.result`) only where the tree carries it.
 *
 * The spans are built by hand, not with a Tracer: a Tracer draws its own ids
 * and takes "now" for times, and these spans are made after the fact from
 * the records with the ids the records already hold.
 */
function agencySpans(root: TraceNode, traceId: string): ReadableSpan[] {
  const resource = resourceFromAttributes({ "service.name": process.env.OTEL_SERVICE_NAME?.trim() || "agent-runner" });
  const spans: ReadableSpan[] = [];
  const context = (spanId: string): SpanContext => ({ traceId, spanId, traceFlags: TraceFlags.SAMPLED });
  const walk = (node: TraceNode, parent: TraceNode | null, invocation: TraceNode | null): void => {
    const events: TimedEvent[] = [];
    for (const child of node.children) {
      if (child.kind === "event" || child.kind === "marker") collectEvents(child, events);
    }
    const end = node.endMs ?? node.startMs;
    spans.push({
      name: spanName(node),
      kind: node.kind === "chat" ? SpanKind.CLIENT : SpanKind.INTERNAL,
      spanContext: () => context(node.spanId),
      ...(parent ? { parentSpanContext: context(parent.spanId) } : {}),
      startTime: millisToHrTime(node.startMs),
      endTime: millisToHrTime(end),
      duration: hrTimeDuration(millisToHrTime(node.startMs), millisToHrTime(end)),
      status: failed(node) ? { code: SpanStatusCode.ERROR, message: node.detail ?? node.status ?? "" } : { code: SpanStatusCode.UNSET },
      attributes: attributesOf(node, invocation),
      links: [],
      events,
      ended: true,
      resource,
      instrumentationScope: SCOPE,
      droppedAttributesCount: 0,
      droppedEventsCount: 0,
      droppedLinksCount: 0,
    });
    const nextInvocation = node.kind === "invocation" ? node : invocation;
    for (const child of node.children) {
      if (child.kind === "event" || child.kind === "marker") walkEventChildren(child, node, nextInvocation, walk);
      else walk(child, node, nextInvocation);
    }
  };
  walk(root, null, null);
  return spans;
}

/** An event node and the events below it (a marker under its cause) as span events of the span above them. */
function collectEvents(node: TraceNode, into: TimedEvent[]): void {
  into.push({
    name: node.name,
    time: millisToHrTime(node.startMs),
    attributes: {
      ...node.attributes,
      ...(node.kind === "marker" ? { "agent_runner.marker": true, ...(node.detail ? { "agent_runner.marker.data": node.detail } : {}) } : {}),
    },
  });
  for (const child of node.children) if (child.kind === "event" || child.kind === "marker") collectEvents(child, into);
}

/** The spans under an event node (the invocations it triggered) are children of the span the event was in. */
function walkEventChildren(
  event: TraceNode,
  span: TraceNode,
  invocation: TraceNode | null,
  walk: (node: TraceNode, parent: TraceNode | null, invocation: TraceNode | null) => void,
): void {
  for (const child of event.children) {
    if (child.kind === "event" || child.kind === "marker") walkEventChildren(child, span, invocation, walk);
    else walk(child, span, invocation);
  }
}

function failed(node: TraceNode): boolean {
  if (node.kind === "invocation") return node.status !== null && node.status !== "succeeded" && node.status !== "running";
  return node.kind === "tool" && node.status !== null && node.status !== "running";
}

/** `{gen_ai.operation.name} {name}` (the conventions' span names). */
function spanName(node: TraceNode): string {
  const operation = { workflow: "invoke_workflow", invocation: "invoke_agent", chat: "chat", tool: "execute_tool" }[node.kind as "workflow"];
  return `${operation} ${node.name}`;
}

/** The GenAI provider name of a runner provider (`gen_ai.provider.name`'s well-known values where one fits, else ours). */
function providerName(provider: unknown): string {
  return provider === "openai" || provider === "anthropic" ? provider : String(provider ?? "_OTHER");
}

function attributesOf(node: TraceNode, invocation: TraceNode | null): Attributes {
  const facts = node.attributes;
  switch (node.kind) {
    case "workflow":
      return {
        "gen_ai.operation.name": "invoke_workflow",
        "gen_ai.workflow.name": node.name,
        "agent_runner.agency.id": String(facts["agency.id"]),
        ...(node.costUsd === null ? {} : { "agent_runner.cost_usd": node.costUsd }),
      };
    case "invocation":
      return {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": node.name,
        ...(facts["invocation.id"] === undefined ? {} : { "gen_ai.agent.id": String(facts["invocation.id"]) }),
        "gen_ai.conversation.id": String(facts["run.id"]),
        "gen_ai.provider.name": providerName(facts["model.provider"]),
        ...(facts["model.name"] === undefined ? {} : { "gen_ai.request.model": String(facts["model.name"]) }),
        "agent_runner.run.id": String(facts["run.id"]),
        ...(facts["event.id"] === undefined
          ? {}
          : { "agent_runner.event.id": String(facts["event.id"]), "agent_runner.event.type": String(facts["event.type"]) }),
        ...(node.status === null ? {} : { "agent_runner.status": node.status }),
        ...(node.detail === null ? {} : { "agent_runner.reason": node.detail }),
        ...(failed(node) ? { "error.type": node.detail ?? node.status ?? "_OTHER" } : {}),
        ...(node.costUsd === null ? {} : { "agent_runner.cost_usd": node.costUsd }),
      };
    case "chat":
      return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": providerName(invocation?.attributes["model.provider"]),
        ...(invocation?.attributes["model.name"] === undefined ? {} : { "gen_ai.request.model": String(invocation.attributes["model.name"]) }),
        ...(invocation ? { "gen_ai.agent.name": invocation.name, "gen_ai.conversation.id": String(invocation.attributes["run.id"]) } : {}),
        ...(facts["usage.input_tokens"] === undefined ? {} : { "gen_ai.usage.input_tokens": facts["usage.input_tokens"] }),
        ...(facts["usage.output_tokens"] === undefined ? {} : { "gen_ai.usage.output_tokens": facts["usage.output_tokens"] }),
        "agent_runner.step": facts.step!,
        "agent_runner.agent.id": String(facts["agent.id"]),
        ...(node.costUsd === null ? {} : { "agent_runner.cost_usd": node.costUsd }),
        ...(node.content?.output === undefined
          ? {}
          : { "gen_ai.output.messages": JSON.stringify([{ role: "assistant", parts: [{ type: "text", content: node.content.output }] }]) }),
      };
    default:
      return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": node.name,
        "gen_ai.tool.call.id": String(facts["tool_call.id"]),
        "gen_ai.tool.type": "function",
        ...(invocation ? { "gen_ai.agent.name": invocation.name } : {}),
        ...(failed(node) ? { "error.type": node.status! } : {}),
        ...(node.content?.arguments === undefined ? {} : { "gen_ai.tool.call.arguments": node.content.arguments }),
        ...(node.content?.result === undefined ? {} : { "gen_ai.tool.call.result": node.content.result }),
      };
  }
}

/**
 * Sends `spans` with the OTLP/HTTP exporter (JSON over HTTP; endpoint, headers
 * and timeout from the standard variables: OTEL_EXPORTER_OTLP_ENDPOINT +
 * `/v1/traces`, or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is;
 * OTEL_EXPORTER_OTLP_HEADERS / _TRACES_HEADERS; OTEL_EXPORTER_OTLP_TIMEOUT)
 * and shuts the exporter down, so everything is sent when it resolves.
 * Never throws: a collector that is down or refuses gets a message back
 * (null when the export succeeded), since a trace must not fail the work.
 */
async function exportSpans(spans: ReadableSpan[]): Promise<string | null> {
  if (spans.length === 0) return null;
  const exporter = new OTLPTraceExporter();
  try {
    const result = await new Promise<{ code: ExportResultCode; error?: Error }>((resolve) => exporter.export(spans, resolve));
    return result.code === ExportResultCode.SUCCESS ? null : `the OTLP export of ${spans.length} spans failed: ${result.error?.message ?? "unknown error"}`;
  } catch (error) {
    return `the OTLP export of ${spans.length} spans failed: ${(error as Error).message}`;
  } finally {
    await exporter.shutdown().catch(() => undefined);
  }
}

/**
 * When the standard variables of this process ask for it (otlp-enabled.ts), sends
 * the whole trace of the agency in `directory` (read from its records, see
 * readAgencyTrace) and resolves once it is sent; content only with
 * {@link captureMessageContent}. Resolves with null when nothing was asked
 * or all was sent, else the failure's message (never throws).
 */
export async function exportAgencyTrace(directory: AgencyDirectory, runnerHome: string): Promise<string | null> {
  if (!otlpTracesEnabled(process.env)) return null;
  try {
    const tree = await readAgencyTrace(directory, runnerHome, { includeContent: captureMessageContent(process.env) });
    return await exportSpans(agencySpans(tree, directory.readRecord().trace_id));
  } catch (error) {
    return `the agency's trace could not be read for the OTLP export: ${(error as Error).message}`;
  }
}

/**
 * `runner exec` / `runner resume` with the variables set: sends the run's
 * trace (`invoke_agent {task}` with its `chat` and `execute_tool` spans, from
 * its events.jsonl) and resolves once it is sent; null when nothing was
 * asked or all was sent, else the failure's message (never throws).
 */
export async function exportRunTrace(run: {
  directory: string;
  report: { run_id: string; trace_id: string; task: string; status: string; reason: string | null; cost_usd: number | null };
  model: { provider: string; name?: string | undefined };
}): Promise<string | null> {
  if (!otlpTracesEnabled(process.env)) return null;
  try {
    const { report } = run;
    const lock = JSON.parse(await readFile(join(run.directory, "run.json"), "utf8").catch(() => "{}")) as { parent_span_id?: unknown };
    const tree = buildRunTrace({
      runId: report.run_id,
      task: report.task,
      parentSpanId: typeof lock.parent_span_id === "string" ? lock.parent_span_id : null,
      status: report.status,
      reason: report.reason,
      costUsd: report.cost_usd,
      model: run.model,
      envelopes: readEnvelopes(join(run.directory, "events.jsonl")),
      includeContent: captureMessageContent(process.env),
    });
    return await exportSpans(agencySpans(tree, report.trace_id));
  } catch (error) {
    return `the run's trace could not be read for the OTLP export: ${(error as Error).message}`;
  }
}
