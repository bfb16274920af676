import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { stringify } from "yaml";
import { z } from "zod";
import { checkAgencyEvent } from "../bus/agency-event.js";
import { EventRejectedError, MAX_EVENT_DATA_BYTES, type AgencyEvent } from "../bus/event-bus.js";
import { loadPolicy } from "../policy/load-policy.js";
import { defineTool, toolError, type Tool } from "../tools/define-tool.js";
import { WRITE_CAPABILITIES } from "./agency-schema.js";
import type { AgencyDefinition, AgentDefinition } from "./load-agency.js";

/** True when the agent may change the workspace; otherwise its invocations run on a read-only mount. */
export function writesWorkspace(agent: AgentDefinition): boolean {
  return agent.capabilities.some((tool) => WRITE_CAPABILITIES.includes(tool));
}

/**
 * Writes the policy of `agent`'s invocations to `file` (outside the
 * repository, in the agency's records) and returns it: the shipped `worker`
 * policy's command and path rules, its tool allow-list replaced by exactly
 * the capabilities (plus `read_context`, `emit_event` when the agent has
 * `emits`, and the background-task tools with `agent`), the agent's
 * `permissions` added (allowed paths for read and write, denied paths
 * denied for both: deny wins), and `confirmations: deny` because nobody sits
 * at an agency's terminal to answer.
 */
export function writeAgentPolicy(agent: AgentDefinition, file: string): string {
  const worker = loadPolicy("worker").policy;
  const allow = [
    ...agent.capabilities,
    "read_context",
    ...(agent.emits.length ? ["emit_event"] : []),
    ...(agent.capabilities.includes("agent") ? ["task_*"] : []),
  ];
  const denied = agent.permissions.denied_paths.map((glob) => ({ glob, reason: `the agent ${agent.name}'s permissions deny ${glob}` }));
  const policy = {
    ...worker,
    name: `agency-${agent.name}`,
    description: `The agency agent ${agent.name}: only its capabilities (${agent.capabilities.join(", ") || "none"}) and its permissions.`,
    tools: { allow, deny: [] },
    paths: {
      read: { allow: agent.permissions.allowed_paths, deny: denied },
      write: { allow: agent.permissions.allowed_paths, deny: [...worker.paths.write.deny, ...denied] },
    },
    confirmations: "deny",
  };
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, stringify(policy));
  return file;
}

/**
 * The task of one invocation of `agent` for `event` (task.yaml's schema): the
 * role's instructions, the event (type, subject, id, data) and the agency's
 * context in the instruction; the agent's model, verify, sandbox, step and
 * time limits; the policy file from {@link writeAgentPolicy}. A scripted
 * agent with several scripts follows the `invocationNumber`-th (0-based; the last repeats).
 */
export function invocationTask(
  agency: AgencyDefinition,
  agent: AgentDefinition,
  event: AgencyEvent,
  policyFile: string,
  invocationNumber: number,
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
  ].join("\n\n");
  return {
    name: `${agency.name}-${agent.name}`.slice(0, 60).replace(/-+$/, ""),
    instruction,
    workspace: agency.workspacePath,
    model: agent.scripts.length ? { ...agent.model, script: agent.scripts[Math.min(invocationNumber, agent.scripts.length - 1)] } : agent.model,
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
export function agencyTools(options: {
  agent: AgentDefinition;
  context: Record<string, unknown>;
  /** Builds the event (envelope, cause, hops) from what the agent gave. */
  build: (fields: { type: string; subject?: string; data?: unknown; dataref?: string; id: string }) => AgencyEvent;
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
        const event = options.build({
          type: input.type,
          ...(input.subject === undefined ? {} : { subject: input.subject }),
          ...(input.data === undefined ? {} : { data: input.data }),
          ...(input.dataref === undefined ? {} : { dataref: input.dataref }),
          id: options.eventIdFor(context.toolCallId),
        });
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
