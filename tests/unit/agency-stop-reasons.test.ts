/**
 * The named classes of a stopped chain (issue 22 item 9): how an
 * invocation's outcome is classed, when a failed invocation does not stop
 * its chain, and the class of an agency's outcome.
 */
import { describe, expect, it } from "vitest";
import { ChainStops, invocationStop } from "../../src/agency/guards/chain-stops.js";
import { STOP_CLASSES, stopClassOfInvocation, type ChainStop } from "../../src/agency/guards/stop-reasons.js";
import type { AgencyEvent } from "../../src/bus/event-bus.js";

const served = { id: "e1", type: "code.ready", hops: 3 } as AgencyEvent;

function stoppedEvent(id: string, stop: Partial<ChainStop>): AgencyEvent {
  return { id, type: "agency.chain.stopped", data: stop } as AgencyEvent;
}

describe("stop classes", () => {
  it("class an invocation whose work did not land by its run's outcome; work that landed or a cancelled run stops nothing", () => {
    const classOf = (status: string, reason: string | null, merged: boolean | null = null, unapprovedCalls = 0) =>
      stopClassOfInvocation({ status, reason, merged, unapprovedCalls });
    expect(classOf("succeeded", "verified", true)).toBeNull();
    expect(classOf("succeeded", "unverified")).toBeNull();
    expect(classOf("cancelled", "cancelled")).toBeNull();
    expect(classOf("succeeded", "verified", false)).toBe("merge_conflict");
    expect(classOf("error", "sandbox_failed")).toBe("infrastructure");
    expect(classOf("failed", "budget_exceeded")).toBe("budget_exhausted");
    expect(classOf("failed", "output_invalid")).toBe("output_invalid");
    expect(classOf("failed", "verify_failed")).toBe("agent_failed");
    expect(classOf("failed", "max_steps", null, 1)).toBe("needs_approval");
    // Infrastructure stays infrastructure even when a call went unapproved.
    expect(classOf("error", "sandbox_failed", null, 1)).toBe("infrastructure");
  });

  it("a failed invocation stops its chain unless an agent takes its agency.invocation.finished", () => {
    const outcome = { status: "failed", reason: "verify_failed", merged: null, run_id: "run-1", branch: "runner/run-1" };
    const stop = invocationStop({ agent: "coder", invocationId: "coder-1", served, outcome, unapprovedCalls: 0, continues: false });
    expect(stop).toEqual({
      class: "agent_failed",
      reason: "verify_failed",
      hops: 3,
      last_event: { id: "e1", type: "code.ready", hops: 3 },
      agent: "coder",
      invocation_id: "coder-1",
      run_id: "run-1",
      detail: "coder's invocation for code.ready ended failed (verify_failed): its events were not published; its run branch runner/run-1 keeps its work",
    });
    expect(invocationStop({ agent: "coder", invocationId: "coder-1", served, outcome, unapprovedCalls: 0, continues: true })).toBeNull();
    const conflict = invocationStop({
      agent: "coder",
      invocationId: "coder-1",
      served,
      outcome: { ...outcome, status: "succeeded", reason: "verified", merged: false },
      unapprovedCalls: 0,
      continues: false,
    });
    expect(conflict).toMatchObject({ class: "merge_conflict", reason: "merge_conflict" });
  });

  it("an agency's outcome: the class of the stop its reason names, else the first, else dead_end; cancelled and error by status", () => {
    const stops = new ChainStops();
    expect(stops.quiescentOutcome()).toEqual({ status: "failed", reason: "quiescent" });
    expect(stops.outcome("failed", "quiescent")).toEqual({ class: "dead_end", reason: "quiescent", ...STOP_CLASSES.dead_end });
    stops.observe(stoppedEvent("s1", { class: "agent_failed", reason: "verify_failed" }));
    stops.observe(stoppedEvent("s2", { class: "hops_exhausted", reason: "max_hops" }));
    // The same event read again (published, then read back from the log) counts once; other events are no stops.
    stops.observe(stoppedEvent("s1", { class: "agent_failed", reason: "verify_failed" }));
    stops.observe({ id: "x", type: "agency.invocation.finished", data: {} } as AgencyEvent);
    expect(stops.all.map((stop) => stop.class)).toEqual(["agent_failed", "hops_exhausted"]);
    expect(stops.quiescentOutcome()).toEqual({ status: "failed", reason: "verify_failed" });
    expect(stops.outcome("failed", "max_hops")?.class).toBe("hops_exhausted");
    expect(stops.outcome("failed", "something_else")?.class).toBe("agent_failed");
    expect(stops.outcome("cancelled", "cancelled")?.class).toBe("cancelled");
    expect(stops.outcome("error", "the bus: disk full")?.class).toBe("infrastructure");
    expect(stops.outcome("succeeded", "goal_reached")).toBeNull();
    const spent = new ChainStops();
    spent.observe(stoppedEvent("s3", { class: "budget_exhausted", reason: "budget_exceeded" }));
    expect(spent.quiescentOutcome()).toEqual({ status: "failed", reason: "budget_exhausted" });
    const broken = new ChainStops();
    broken.observe(stoppedEvent("s4", { class: "infrastructure", reason: "sandbox_failed" }));
    // An invocation's infrastructure failure is not the agents' doing: the agency ends error (exit 3).
    expect(broken.quiescentOutcome()).toEqual({ status: "error", reason: "sandbox_failed" });
    expect(broken.outcome("error", "sandbox_failed")?.class).toBe("infrastructure");
  });

  it("every class says what it means and what to do", () => {
    for (const [name, text] of Object.entries(STOP_CLASSES)) {
      expect(text.means.length, name).toBeGreaterThan(10);
      expect(text.fix.length, name).toBeGreaterThan(10);
    }
  });
});
