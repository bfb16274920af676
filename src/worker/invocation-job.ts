import { createHash } from "node:crypto";
import { z } from "zod";
import { invocationTools } from "../agency/agent-task.js";
import { StructuredOutput } from "../agency/guards/structured-output.js";
import type { AgencyEvent } from "../bus/event-bus.js";
import type { RunEmbedding } from "../runner/runner.js";

/**
 * An agency's invocation as it travels to a `runner worker` (`bus: nats://…`,
 * docs/scale-out.md "Agencies on workers"): the fields of a task job (the task
 * document without paths, the scripted model's script, the base commit = the
 * agency branch's head as a bundle) plus the agent's generated policy as text
 * and, as plain data, what the orchestrator's process gives a local run as
 * functions: the agency's context (`read_context`), the agent's `emits` and the
 * served event (`emit_event`: the worker collects the events and returns them
 * with the result; the orchestrator queues them in the outbox as for a local
 * run), the output schema (the same final-answer check) and the trace.
 */
export const invocationJobSchema = z.object({
  kind: z.literal("invocation"),
  version: z.literal(1),
  /** {@link invocationKey}: the JetStream message id, the lease's and the result's key. */
  key: z.string().regex(/^[a-f0-9]{32}$/),
  /** The run's task name (`<agency>-<agent>`), for logs and the lease. */
  name: z.string(),
  task: z.record(z.string(), z.unknown()),
  script: z.string().nullable(),
  /** The agent's policy file (YAML text, agent-task.ts `writeAgentPolicy`); the worker writes it beside the task. */
  policy: z.string(),
  base_commit: z.string().regex(/^[a-f0-9]{40,64}$/),
  bundle: z.string(),
  submitter: z.string(),
  invocation: z.object({
    agency_id: z.string(),
    /** The agency's trace (its events' envelopes). */
    trace_id: z.string(),
    invocation_id: z.string(),
    agent: z.object({ name: z.string(), emits: z.array(z.string()) }),
    context: z.record(z.string(), z.unknown()),
    /** The event the invocation serves (an AgencyEvent). */
    cause: z.record(z.string(), z.unknown()),
    read_only: z.boolean(),
    output_schema: z.record(z.string(), z.unknown()).nullable(),
    /** The trace the run joins (RunEmbedding.trace). */
    trace: z.object({ trace_id: z.string(), parent_span_id: z.string() }).nullable(),
  }),
});

export type InvocationJob = z.infer<typeof invocationJobSchema>;

/**
 * The job key of invocation `invocationId` of agency `agencyId`: 32 hex of
 * sha256. The invocation is the job: a restarted orchestrator submits the
 * same key (publish dedupe drops it, and a worker finds its result), so an
 * invocation runs once however often it is submitted.
 */
export function invocationKey(agencyId: string, invocationId: string): string {
  return createHash("sha256").update(`invocation\0${agencyId}\0${invocationId}`).digest("hex").slice(0, 32);
}

/**
 * How a worker places the invocation's run: the host tools built as the
 * orchestrator builds them (`invocationTools`), whose accepted events are
 * appended to `emitted`; a read-only mount for a read-only agent; the output
 * schema's check; the agency's trace. No merge: the orchestrator merges the
 * returned commits into the agency branch.
 */
export function invocationEmbedding(job: InvocationJob, emitted: AgencyEvent[]): RunEmbedding {
  const { invocation } = job;
  const hostTools = invocationTools({
    agencyId: invocation.agency_id,
    traceId: invocation.trace_id,
    invocationId: invocation.invocation_id,
    agent: invocation.agent,
    context: invocation.context,
    cause: invocation.cause as unknown as AgencyEvent,
    emit: async (event) => {
      // A repeated tool call (same id) queues nothing twice, as the orchestrator's outbox does.
      if (!emitted.some((earlier) => earlier.id === event.id)) emitted.push(event);
      return emitted.length;
    },
  });
  const checkFinalAnswer = invocation.output_schema ? new StructuredOutput(invocation.output_schema).checkFinalAnswer : undefined;
  return {
    hostTools,
    readOnlyWorkspace: invocation.read_only,
    ...(invocation.trace ? { trace: { traceId: invocation.trace.trace_id, parentSpanId: invocation.trace.parent_span_id } } : {}),
    ...(checkFinalAnswer ? { checkFinalAnswer } : {}),
  };
}
