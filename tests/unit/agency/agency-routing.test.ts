/** Routing, lifecycle and invocation ids: pure functions the orchestrator decides with (a replay decides the same). */
import { describe, expect, it } from "vitest";
import { agencyEvent, invocationId, triggerMatches } from "../../../src/agency/agency-event.js";
import { lifecycleTransitions } from "../../../src/agency/agent-lifecycle.js";

describe("routing by type", () => {
  it("exact types, a trailing .* wildcard, and *", () => {
    expect(triggerMatches("coding.task.ready", "coding.task.ready")).toBe(true);
    expect(triggerMatches("coding.task.ready", "coding.task.readied")).toBe(false);
    expect(triggerMatches("coding.review.*", "coding.review.approved")).toBe(true);
    expect(triggerMatches("coding.review.*", "coding.review")).toBe(false);
    expect(triggerMatches("coding.*", "coding.review.changes_requested")).toBe(true);
    expect(triggerMatches("coding.*", "codingx.task")).toBe(false);
    expect(triggerMatches("*", "anything.at.all")).toBe(true);
  });

  it("the orchestrator's agency.* events reach only triggers that name that prefix", () => {
    expect(triggerMatches("*", "agency.agent.state")).toBe(false);
    expect(triggerMatches("agency.*", "agency.invocation.finished")).toBe(true);
    expect(triggerMatches("agency.invocation.finished", "agency.invocation.finished")).toBe(true);
  });
});

describe("invocation ids", () => {
  it("are derived from (agent, event id): the same pair gives the same id, another pair another", () => {
    expect(invocationId("coder", "event-1")).toBe(invocationId("coder", "event-1"));
    expect(invocationId("coder", "event-1")).toMatch(/^coder-[0-9a-f]{12}$/);
    expect(invocationId("coder", "event-2")).not.toBe(invocationId("coder", "event-1"));
    expect(invocationId("tester", "event-1")).not.toBe(invocationId("coder", "event-1"));
  });
});

describe("the event envelope", () => {
  it("an agent's event is one hop more than its cause, in the agency's trace; the orchestrator's keeps the count", () => {
    const context = { agencyId: "a1", traceId: "0af7651916cd43dd8448eb211c80319c" };
    const start = agencyEvent(context, { kind: "orchestrator" }, { type: "task.received" });
    expect(start).toMatchObject({ specversion: "1.0", source: "agent-runner://agencies/a1/orchestrator", correlationid: "a1", hops: 0 });
    expect(start.traceparent).toMatch(/^00-0af7651916cd43dd8448eb211c80319c-[0-9a-f]{16}-01$/);
    const emitted = agencyEvent(context, { kind: "agent", name: "coder" }, { type: "code.ready", cause: start });
    expect(emitted).toMatchObject({ source: "agent-runner://agencies/a1/agents/coder", causationid: start.id, hops: 1 });
    const finished = agencyEvent(context, { kind: "orchestrator" }, { type: "agency.invocation.finished", cause: emitted });
    expect(finished.hops).toBe(1);
  });
});

describe("the agent lifecycle", () => {
  it("spawn → ready → busy → idle; a crash → error, and back to ready on the next success", () => {
    expect(lifecycleTransitions("spawn", { kind: "started" })).toEqual(["ready"]);
    expect(lifecycleTransitions("ready", { kind: "invocation_started" })).toEqual(["busy"]);
    expect(lifecycleTransitions("busy", { kind: "invocation_started" })).toEqual([]);
    expect(lifecycleTransitions("busy", { kind: "invocation_ended", crashed: false, running: 1 })).toEqual([]);
    expect(lifecycleTransitions("busy", { kind: "invocation_ended", crashed: false, running: 0 })).toEqual(["idle"]);
    expect(lifecycleTransitions("busy", { kind: "invocation_ended", crashed: true, running: 0 })).toEqual(["error"]);
    expect(lifecycleTransitions("error", { kind: "invocation_started" })).toEqual([]);
    expect(lifecycleTransitions("error", { kind: "invocation_ended", crashed: false, running: 0 })).toEqual(["ready", "idle"]);
    expect(lifecycleTransitions("idle", { kind: "stopped" })).toEqual(["shutdown"]);
  });
});
