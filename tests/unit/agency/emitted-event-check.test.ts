/**
 * The orchestrator's check of the events a `runner worker` says an
 * invocation's agent emitted (src/agency/agent-task.ts emittedEventProblem,
 * docs/scale-out.md "What the submitter checks of a worker's result"): the
 * event the real `emit_event` tool builds passes; each field a worker could
 * forge is refused, naming it.
 */
import { describe, expect, it } from "vitest";
import { agencyEvent } from "../../../src/agency/agency-event.js";
import { emittedEventProblem, invocationTools } from "../../../src/agency/agent-task.js";
import type { AgencyEvent } from "../../../src/bus/event-bus.js";
import type { Sandbox } from "../../../src/sandbox/sandbox.js";

const agencyId = "20261202-061500-abcd";
const traceId = "0123456789abcdef0123456789abcdef";
const invocationId = "coder-0123456789ab";
const agent = { name: "coder", emits: ["code.done"] };
const cause = agencyEvent({ agencyId, traceId }, { kind: "agent", name: "planner" }, { type: "plan.ready", id: "planner-event", cause: null });
const expected = { agencyId, traceId, invocationId, agent, cause };

/** The event the worker's own `emit_event` tool queues for a call `toolCallId` of `type`. */
async function genuine(type = "code.done", toolCallId = "call-1"): Promise<AgencyEvent> {
  const queued: AgencyEvent[] = [];
  const tool = invocationTools({
    agencyId,
    traceId,
    invocationId,
    agent,
    context: {},
    cause,
    emit: async (event) => queued.push(event),
  }).find((candidate) => candidate.name === "emit_event")!;
  const context = { sandbox: {} as Sandbox, signal: new AbortController().signal, toolCallId, defaultTimeoutMs: 1_000 };
  const result = await tool.execute({ type, data: { files: ["a.ts"] } }, context);
  expect(result.isError).toBeUndefined();
  return queued[0]!;
}

describe("emittedEventProblem", () => {
  it("passes what emit_event built (hops one more than the served event's)", async () => {
    const event = await genuine();
    expect(event.hops).toBe(cause.hops + 1);
    expect(emittedEventProblem(event, expected)).toBeNull();
  });

  it.each<[string, (event: AgencyEvent) => unknown, RegExp]>([
    ["a type outside emits", (event) => ({ ...event, type: "deploy.now" }), /type "deploy.now" is not one coder may publish/],
    ["an orchestrator type", (event) => ({ ...event, type: "agency.invocation.finished" }), /orchestrator's/],
    ["hops 0 (defeats max_hops)", (event) => ({ ...event, hops: 0 }), /hops is 0, not 1/],
    ["another agent's source", (event) => ({ ...event, source: `agent-runner://agencies/${agencyId}/agents/reviewer` }), /source is/],
    ["the orchestrator's source", (event) => ({ ...event, source: `agent-runner://agencies/${agencyId}/orchestrator` }), /source is/],
    ["another agency's correlationid", (event) => ({ ...event, correlationid: "20261202-000000-ffff" }), /correlationid is/],
    ["a forged causationid", (event) => ({ ...event, causationid: "someone-else" }), /causationid is "someone-else", not "planner-event"/],
    ["no causationid", ({ causationid: _dropped, ...event }) => event, /causationid is null/],
    ["another trace", (event) => ({ ...event, traceparent: `00-${"f".repeat(32)}-${"1".repeat(16)}-01` }), /not in the trace/],
    ["an id not of the invocation's emit form", (event) => ({ ...event, id: `${invocationId}-finished` }), /id .* is not coder-0123456789ab-emit-<16 hex>/],
    ["another invocation's emit id", (event) => ({ ...event, id: event.id.replace(invocationId, "coder-ffffffffffff") }), /is not coder-0123456789ab-emit-/],
    ["data over 16 KiB", (event) => ({ ...event, data: "x".repeat(17 * 1024) }), /over the 16384-byte limit/],
    ["a malformed envelope", (event) => ({ ...event, extra: 1 }), /malformed event/],
    ["not an object", () => "code.done", /malformed event/],
  ])("refuses %s", async (_name, forge, problem) => {
    expect(emittedEventProblem(forge(await genuine()), expected)).toMatch(problem);
  });
});
