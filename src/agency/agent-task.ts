import { createHash } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { stringify } from "yaml";
import { z } from "zod";
import { checkAgencyEvent } from "../bus/agency-event.js";
import { EventRejectedError, MAX_EVENT_DATA_BYTES, type AgencyEvent } from "../bus/event-bus.js";
import { loadPolicy } from "../policy/load-policy.js";
import { toolCallSpanId } from "../events/trace-context.js";
import { defineTool, toolError, type Tool } from "../tools/define-tool.js";
import { agencyEvent, invocationSpanId } from "./agency-event.js";
import { ORCHESTRATOR_EVENT_PREFIX, WRITE_CAPABILITIES } from "./agency-schema.js";
import { CONSERVATIVE_DENIED_TOOLS, capabilitiesInMode } from "./guards/conservative-mode.js";
import type { AgencyDefinition, AgentDefinition } from "./load-agency.js";

/** True when the agent may change the workspace in the agency's mode; otherwise its invocations run on a read-only mount and merge nothing. */
export function writesWorkspace(agent: AgentDefinition, mode: AgencyDefinition["mode"]): boolean {
  return capabilitiesInMode(agent, mode).some((tool) => WRITE_CAPABILITIES.includes(tool));
}

/**
 * Writes the policy of `agent`'s invocations to `file` (outside the
 * repository, in the agency's records) and returns it: the shipped `worker`
 * policy's command and path rules, its tool allow-list replaced by exactly
 * the capabilities (plus `read_context`, `emit_event` when the agent has
 * `emits`, and the background-task tools with `agent`), the agent's
 * `permissions` added (allowed paths for read and write, denied paths
 * denied for both: deny wins), the agency's and the agent's `confirm` tools
 * under `tools.confirm`, and `confirmations: prompt`: a question goes to the
 * agency's approval broker, and without one it is refused, saying nobody
 * could be asked (guards/agency-approvals.ts). In `mode: conservative` the
 * writing tools and the shell are denied whatever the capabilities say, and
 * the policy is named `agency-<agent>-conservative` so a refusal says why.
 */
export function writeAgentPolicy(agent: AgentDefinition, file: string, agency: Pick<AgencyDefinition, "mode" | "confirm">): string {
  const worker = loadPolicy("worker").policy;
  const capabilities = capabilitiesInMode(agent, agency.mode);
  const allow = [...capabilities, "read_context", ...(agent.emits.length ? ["emit_event"] : []), ...(capabilities.includes("agent") ? ["task_*"] : [])];
  const conservative = agency.mode === "conservative";
  const denied = agent.permissions.denied_paths.map((glob) => ({ glob, reason: `the agent ${agent.name}'s permissions deny ${glob}` }));
  const policy = {
    ...worker,
    name: `agency-${agent.name}${conservative ? "-conservative" : ""}`,
    description: `The agency agent ${agent.name}: only its capabilities (${capabilities.join(", ") || "none"}) and its permissions${conservative ? "; the agency runs in conservative mode: nothing is written, no shell command runs" : ""}.`,
    tools: { allow, deny: conservative ? [...CONSERVATIVE_DENIED_TOOLS] : [], confirm: [...new Set([...agency.confirm, ...agent.confirm])] },
    paths: {
      read: { allow: agent.permissions.allowed_paths, deny: denied },
      write: { allow: agent.permissions.allowed_paths, deny: [...worker.paths.write.deny, ...denied] },
    },
    confirmations: "prompt",
  };
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, stringify(policy));
  return file;
}

/**
 * The task of one invocation of `agent` for `event` (task.yaml's schema): the
 * role's instructions, the event (type, subject, id, data) and the agency's
 * context in the instruction, and its `output_schema` when it has one; the agent's model, verify, sandbox, step and
 * time limits; the policy file from {@link writeAgentPolicy}. A scripted
 * agent with several scripts follows the `invocationNumber`-th (0-based; the last repeats).
 * `maxCostUsd` (USD) replaces the model's `max_cost_usd`: the agency budget's share (guards/agency-budget.ts).
 */
export function invocationTask(
  agency: AgencyDefinition,
  agent: AgentDefinition,
  event: AgencyEvent,
  policyFile: string,
  invocationNumber: number,
  maxCostUsd?: number,
): Record<string, unknown> {
  const publishing = agent.emits.length
    ? `Publish your result with the tool emit_event; the types you may publish: ${agent.emits.join(", ")}. Publish exactly one when your work is done, with the data the next agent needs.`
    : "You publish no events: your final answer and your changes are your result.";
  const instruction = [
    `You are the agent "${agent.name}" of the agency "${agency.name}": ${agent.description}`,
    agent.instructions,
    "## The event you were invoked for",
    `type: ${event.type}${event.subject ? `\nsubject: ${event.subject}` : ""}\nid: ${event.id}`,
    ...(event.data === undefined ? [] : ["data:", "```json", JSON.stringify(event.data, null, 2), "```"]),
    ...(event.dataref ? [`dataref: ${event.dataref}`] : []),
    "## The agency's context (also from the tool read_context)",
    "```json",
    JSON.stringify(agency.context, null, 2),
    "```",
    "## Publishing",
    publishing,
    ...(agent.output_schema
      ? [
          "## Your final answer",
          "Your final answer must be one JSON object that satisfies this JSON Schema: the whole answer, or one ```json fenced block in it. It is checked, and the next agents route on it.",
          "```json",
          JSON.stringify(agent.output_schema, null, 2),
          "```",
        ]
      : []),
    ...(agency.mode === "conservative"
      ? [
          "## Conservative mode",
          `The agency runs in conservative mode: you only read. ${CONSERVATIVE_DENIED_TOOLS.join(", ")} are refused whatever your role says.`,
        ]
      : []),
  ].join("\n\n");
  const model = agent.scripts.length ? { ...agent.model, script: agent.scripts[Math.min(invocationNumber, agent.scripts.length - 1)] } : agent.model;
  return {
    name: `${agency.name}-${agent.name}`.slice(0, 60).replace(/-+$/, ""),
    instruction,
    workspace: agency.workspacePath,
    model: maxCostUsd === undefined ? model : { ...model, max_cost_usd: maxCostUsd },
    ...(agent.sandbox ? { sandbox: agent.sandbox } : {}),
    ...(agent.verify ? { verify: agent.verify } : {}),
    max_steps: agent.max_steps,
    timeout_sec: agent.policies.timeout_seconds,
    policy: policyFile,
  };
}

/**
 * The host-side tools of one invocation: `read_context` (the agency's
 * context, or one key of it) and, for an agent with `emits`, `emit_event`,
 * which accepts only those types and hands each event, checked as the bus
 * will check it, to `emit` (the invocation's outbox: the orchestrator
 * publishes it once the invocation's work has landed). A refused type, a
 * payload over 16 KiB or a malformed event is an `Error:` result the model
 * sees. `eventIdFor(toolCallId)` gives each call's event a stable id, so a
 * resumed invocation that repeats a call queues nothing twice.
 */
function agencyTools(options: {
  agent: Pick<AgentDefinition, "name" | "emits">;
  context: Record<string, unknown>;
  /** Builds the event (envelope, cause, hops) from what the agent gave, in the trace of the tool call `toolCallId`. */
  build: (fields: { type: string; subject?: string; data?: unknown; dataref?: string; id: string }, toolCallId: string) => AgencyEvent;
  /** Queues the event durably; resolves with how many events the invocation has queued. */
  emit: (event: AgencyEvent) => Promise<number>;
  eventIdFor: (toolCallId: string) => string;
  /** Waits the agent's turn to publish (its `events_per_minute` bucket) before an accepted event is queued. */
  beforeEmit?: (signal: AbortSignal) => Promise<void>;
}): Tool[] {
  const { agent } = options;
  const readContext = defineTool({
    name: "read_context",
    description: "Reads the agency's project context (the requirement, files, constraints the team shares). Give key for one entry, or nothing for all.",
    input: z.object({ key: z.string().optional() }),
    readOnly: true,
    async execute(input) {
      if (input.key === undefined) return { content: JSON.stringify(options.context, null, 2) };
      if (!(input.key in options.context))
        return toolError(`the context has no key ${JSON.stringify(input.key)}; its keys: ${Object.keys(options.context).join(", ") || "(none)"}`);
      return { content: JSON.stringify(options.context[input.key], null, 2) };
    },
  });
  if (!agent.emits.length) return [readContext];
  const emitEvent = defineTool({
    name: "emit_event",
    description: `Publishes an event for the next agents once your work has landed (your change committed, verified and merged). Allowed types: ${agent.emits.join(", ")}. data: any JSON, at most ${MAX_EVENT_DATA_BYTES} bytes (name a workspace file in dataref for more).`,
    input: z.object({
      type: z.string().describe(`one of ${agent.emits.join(", ")}`),
      subject: z.string().optional(),
      data: z.unknown().optional(),
      dataref: z.string().optional().describe("a workspace path holding data too large for the event"),
    }),
    // It changes nothing in the sandbox; calls of one turn may run alongside each other.
    readOnly: true,
    async execute(input, context) {
      if (!agent.emits.includes(input.type)) {
        return toolError(`${agent.name} may not publish ${JSON.stringify(input.type)}; the types it may publish (emits): ${agent.emits.join(", ")}`);
      }
      await options.beforeEmit?.(context.signal);
      try {
        const event = options.build(
          {
            type: input.type,
            ...(input.subject === undefined ? {} : { subject: input.subject }),
            ...(input.data === undefined ? {} : { data: input.data }),
            ...(input.dataref === undefined ? {} : { dataref: input.dataref }),
            id: options.eventIdFor(context.toolCallId),
          },
          context.toolCallId,
        );
        checkAgencyEvent(event);
        const queued = await options.emit(event);
        return {
          content: `queued ${input.type}: it is published when this invocation ends with its work landed (${queued} queued so far)`,
          details: { type: input.type, id: event.id },
        };
      } catch (error) {
        if (error instanceof EventRejectedError) return toolError(error.message);
        throw error;
      }
    },
  });
  return [emitEvent, readContext];
}

/** Between the invocation id and 16 hex digits in the id of an event its agent emitted ({@link invocationTools}). */
const EMIT_ID_INFIX = "-emit-";

/**
 * Most events one invocation's result may carry (one `emit_event` call each). An agent hands off with one event
 * ("Publish exactly one", the task's instruction); the bound keeps a worker's result from making the orchestrator
 * publish without limit. A choice of this project, not a rule of CloudEvents or NATS.
 */
export const MAX_EMITTED_EVENTS = 100;

/**
 * What is wrong with `event` as an event invocation `invocationId`'s agent emitted, or null when nothing is: the
 * orchestrator's check of the events a `runner worker` returns (docs/scale-out.md "What the submitter checks of a
 * worker's result"), which must be what {@link invocationTools} on that worker would have built: the envelope and
 * data size as the bus checks them (checkAgencyEvent), a type of the agent's `emits` and not an orchestrator
 * `agency.*` type, the agent's `source`, this agency's `correlationid`, the served event's id as `causationid`,
 * `hops` one more than the served event's, its trace, and an id `<invocation id>-emit-<16 hex>`.
 */
export function emittedEventProblem(
  event: unknown,
  expected: { agencyId: string; traceId: string; invocationId: string; agent: Pick<AgentDefinition, "name" | "emits">; cause: AgencyEvent },
): string | null {
  try {
    checkAgencyEvent(event as AgencyEvent);
  } catch (error) {
    if (error instanceof EventRejectedError) return error.message;
    throw error;
  }
  const emitted = event as AgencyEvent;
  const { agent } = expected;
  if (emitted.type.startsWith(ORCHESTRATOR_EVENT_PREFIX)) return `type ${JSON.stringify(emitted.type)} is the orchestrator's (${ORCHESTRATOR_EVENT_PREFIX}*)`;
  if (!agent.emits.includes(emitted.type))
    return `type ${JSON.stringify(emitted.type)} is not one ${agent.name} may publish (emits: ${agent.emits.join(", ") || "none"})`;
  const built = agencyEvent(
    { agencyId: expected.agencyId, traceId: expected.traceId },
    { kind: "agent", name: agent.name },
    { type: emitted.type, cause: expected.cause },
  );
  for (const field of ["source", "correlationid", "causationid", "hops"] as const) {
    if (emitted[field] !== built[field]) return `${field} is ${JSON.stringify(emitted[field] ?? null)}, not ${JSON.stringify(built[field] ?? null)}`;
  }
  // The span is the tool call's, which only the worker knows; the trace is the served event's.
  const trace = (traceparent: string) => traceparent.split("-")[1];
  if (trace(emitted.traceparent) !== trace(built.traceparent)) return `traceparent ${emitted.traceparent} is not in the trace ${trace(built.traceparent)}`;
  const suffix = emitted.id.startsWith(`${expected.invocationId}${EMIT_ID_INFIX}`) ? emitted.id.slice(expected.invocationId.length + EMIT_ID_INFIX.length) : "";
  if (!/^[0-9a-f]{16}$/.test(suffix)) return `id ${JSON.stringify(emitted.id)} is not ${expected.invocationId}${EMIT_ID_INFIX}<16 hex>`;
  return null;
}

/**
 * The host tools of invocation `invocationId` ({@link agencyTools}) with the
 * orchestrator's rules for the events its agent emits: published by the agent,
 * caused by the served event (one hop more), in the trace under the tool
 * call's span, with an id derived from the tool call. The orchestrator's
 * process and a `runner worker` running the invocation build them alike, so
 * an event is the same wherever its run ran.
 */
export function invocationTools(options: {
  agencyId: string;
  traceId: string;
  invocationId: string;
  agent: Pick<AgentDefinition, "name" | "emits">;
  context: Record<string, unknown>;
  /** The event the invocation serves. */
  cause: AgencyEvent;
  /** Queues an accepted event (the invocation's outbox); resolves with how many are queued. */
  emit: (event: AgencyEvent) => Promise<number>;
  beforeEmit?: (signal: AbortSignal) => Promise<void>;
}): Tool[] {
  const { agencyId, traceId, invocationId, agent, cause } = options;
  const parentSpanId = invocationSpanId(invocationId);
  return agencyTools({
    agent,
    context: options.context,
    build: (fields, toolCallId) =>
      agencyEvent({ agencyId, traceId }, { kind: "agent", name: agent.name }, { ...fields, cause, spanId: toolCallSpanId(parentSpanId, toolCallId) }),
    emit: options.emit,
    // The model picks tool call ids: hashed under a prefix of their own, an agent's event id never equals the
    // orchestrator's `<id>-finished` / `<id>-conflict` (which publish dedupe would then drop).
    eventIdFor: (toolCallId) => `${invocationId}${EMIT_ID_INFIX}${createHash("sha256").update(toolCallId).digest("hex").slice(0, 16)}`,
    ...(options.beforeEmit ? { beforeEmit: options.beforeEmit } : {}),
  });
}
