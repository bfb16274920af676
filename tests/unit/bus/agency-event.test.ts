import { describe, expect, it } from "vitest";
import { checkAgencyEvent, createAgencyEvent, newTraceId } from "../../../src/bus/agency-event.ts";

const SOURCE = "agent-runner://agencies/a1/orchestrator";

describe("createAgencyEvent", () => {
  it("builds a start event that passes the publish check: no cause, hops 0, the agency's trace", () => {
    const traceId = newTraceId();
    const event = createAgencyEvent({ type: "coding.task.received", source: SOURCE, correlationid: "a1", subject: "task-1", data: { issue: "x" }, traceId });
    expect(() => checkAgencyEvent(event)).not.toThrow();
    expect(event).toMatchObject({ specversion: "1.0", datacontenttype: "application/json", hops: 0, subject: "task-1", correlationid: "a1" });
    expect(event).not.toHaveProperty("causationid");
    expect(event.traceparent).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`));
    expect(Date.parse(event.time)).not.toBeNaN();
  });

  it("continues the cause: its id as causationid, its hops + 1, its trace with a new span", () => {
    const cause = createAgencyEvent({ type: "coding.task.ready", source: SOURCE, correlationid: "a1", hops: 2 });
    const event = createAgencyEvent({ type: "coding.code.ready", source: `${SOURCE}/agents/coder`, correlationid: "a1", cause, dataref: "notes/plan.md" });
    expect(event).toMatchObject({ causationid: cause.id, hops: 3, dataref: "notes/plan.md" });
    const [, causeTrace, causeSpan] = cause.traceparent.split("-");
    const [, trace, span] = event.traceparent.split("-");
    expect(trace).toBe(causeTrace);
    expect(span).not.toBe(causeSpan);
    expect(event.id).not.toBe(cause.id);
  });

  it("makes trace ids of 32 lower-case hex digits", () => {
    expect(newTraceId()).toMatch(/^[0-9a-f]{32}$/);
    expect(newTraceId()).not.toBe(newTraceId());
  });

  it("refuses data JSON cannot hold", () => {
    const event = createAgencyEvent({ type: "t", source: SOURCE, correlationid: "a1", data: { big: 1n } });
    expect(() => checkAgencyEvent(event)).toThrow(/not JSON/);
    const functionData = createAgencyEvent({ type: "t", source: SOURCE, correlationid: "a1", data: () => 1 });
    expect(() => checkAgencyEvent(functionData, 200)).toThrow(/not JSON/);
  });
});
