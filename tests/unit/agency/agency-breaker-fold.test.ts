/**
 * The circuit breaker as a pure fold (src/agency/guards/circuit-breaker.ts)
 * and its router (breaker-router.ts) over hand-made events and a FakeClock:
 * the window, min_invocations, infrastructure errors kept apart, the
 * cooldown, the one half-open probe, stragglers, refolding; the fallback's
 * load-time checks (exit 2 naming the field).
 */
import { describe, expect, it } from "vitest";
import { invocationId } from "../../../src/agency/agency-event.js";
import type { AgentDefinition } from "../../../src/agency/load-agency.js";
import { loadAgency } from "../../../src/agency/load-agency.js";
import { BreakerRouter, type RouterEventFields } from "../../../src/agency/guards/breaker-router.js";
import { CircuitBreaker, type BreakerPolicy } from "../../../src/agency/guards/circuit-breaker.js";
import { createAgencyEvent } from "../../../src/bus/agency-event.js";
import type { AgencyEvent } from "../../../src/bus/event-bus.js";
import { writeAgency } from "../../helpers/agency-fixture.js";
import { FakeClock } from "../../helpers/fake-clock.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";

const POLICY: BreakerPolicy = { window_seconds: 300, min_invocations: 4, failure_rate: 0.5, cooldown_seconds: 120 };
const T0 = Date.parse("2026-12-02T00:00:00.000Z");
let counter = 0;

function finished(agent: string, status: string, time: number, invocation = `${agent}-inv-${(counter += 1)}`): AgencyEvent {
  return createAgencyEvent({
    type: "agency.invocation.finished",
    source: "agent-runner://agencies/test/orchestrator",
    correlationid: "test",
    id: `${invocation}-finished`,
    time: new Date(time),
    data: { agent, invocation_id: invocation, status },
  });
}

function halfOpen(agent: string, invocation: string, time: number): AgencyEvent {
  return createAgencyEvent({
    type: "agency.breaker.half_open",
    source: "agent-runner://agencies/test/orchestrator",
    correlationid: "test",
    time: new Date(time),
    data: { agent, invocation_id: invocation },
  });
}

describe("CircuitBreaker", () => {
  it("opens once the window holds min_invocations with a failure rate at or above failure_rate, and not before", () => {
    const breaker = new CircuitBreaker("coder", POLICY);
    expect(breaker.observe(finished("coder", "failed", T0))).toBeNull();
    expect(breaker.observe(finished("coder", "succeeded", T0 + 1))).toBeNull();
    expect(breaker.observe(finished("coder", "failed", T0 + 2))).toBeNull();
    expect(breaker.decide(T0 + 3)).toEqual({ state: "closed" });
    // 2 of 4 = 0.5 ≥ 0.5
    const opened = breaker.observe(finished("coder", "failed", T0 + 3));
    expect(opened).toMatchObject({ kind: "opened", reason: "failure_rate", invocations: 4, failures: 3, until: T0 + 3 + 120_000 });
    expect(breaker.decide(T0 + 4)).toEqual({ state: "open", until: T0 + 3 + 120_000 });
  });

  it("forgets outcomes older than window_seconds, and stays closed below failure_rate", () => {
    const breaker = new CircuitBreaker("coder", POLICY);
    for (let index = 0; index < 3; index += 1) breaker.observe(finished("coder", "failed", T0 + index));
    // The three failures leave the 300 s window before the fourth.
    expect(breaker.observe(finished("coder", "failed", T0 + 301_000))).toBeNull();
    expect(breaker.counts()).toEqual({ invocations: 1, failures: 1, infrastructure_errors: 0 });
    const healthy = new CircuitBreaker("coder", POLICY);
    for (const status of ["succeeded", "succeeded", "succeeded", "failed", "succeeded"]) expect(healthy.observe(finished("coder", status, T0))).toBeNull();
  });

  it("counts infrastructure errors apart: reported, never in the rate, never opening it", () => {
    const breaker = new CircuitBreaker("coder", POLICY);
    for (let index = 0; index < 6; index += 1) expect(breaker.observe(finished("coder", "error", T0 + index))).toBeNull();
    for (let index = 0; index < 3; index += 1) breaker.observe(finished("coder", "failed", T0 + 10 + index));
    expect(breaker.decide(T0 + 20)).toEqual({ state: "closed" });
    expect(breaker.observe(finished("coder", "failed", T0 + 20))).toMatchObject({ invocations: 4, failures: 4, infrastructure_errors: 6 });
  });

  it("after the cooldown admits one probe: stragglers change nothing, the probe's failure reopens it, an infrastructure error asks for another probe, its success closes it", () => {
    const breaker = new CircuitBreaker("coder", POLICY);
    for (let index = 0; index < 4; index += 1) breaker.observe(finished("coder", "failed", T0));
    expect(breaker.decide(T0 + 119_999).state).toBe("open");
    expect(breaker.decide(T0 + 120_000)).toEqual({ state: "probe" });
    breaker.observe(halfOpen("coder", "probe-1", T0 + 120_000));
    expect(breaker.decide(T0 + 120_001)).toEqual({ state: "probing", probe: "probe-1" });
    // An invocation that started before the breaker opened finishes now: not the probe.
    expect(breaker.observe(finished("coder", "succeeded", T0 + 120_002, "straggler"))).toBeNull();
    expect(breaker.decide(T0 + 120_003).state).toBe("probing");
    expect(breaker.observe(finished("coder", "failed", T0 + 130_000, "probe-1"))).toMatchObject({
      kind: "opened",
      reason: "probe_failed",
      until: T0 + 250_000,
    });
    expect(breaker.decide(T0 + 249_999).state).toBe("open");
    breaker.observe(halfOpen("coder", "probe-2", T0 + 250_000));
    expect(breaker.observe(finished("coder", "error", T0 + 251_000, "probe-2"))).toBeNull();
    expect(breaker.decide(T0 + 251_001)).toEqual({ state: "probe" });
    breaker.observe(halfOpen("coder", "probe-3", T0 + 252_000));
    const probe = finished("coder", "succeeded", T0 + 253_000, "probe-3");
    expect(breaker.observe(probe)).toEqual({ kind: "closed", cause_event_id: probe.id, probe_invocation_id: "probe-3", closed_at: T0 + 253_000 });
    expect(breaker.decide(T0 + 253_001)).toEqual({ state: "closed" });
    // A fresh window: three failures do not reopen it.
    for (let index = 0; index < 3; index += 1) expect(breaker.observe(finished("coder", "failed", T0 + 254_000))).toBeNull();
  });

  it("is a fold: the same events give the same state, an event folded twice counts once, other agents' events count not at all", () => {
    const events = [0, 1, 2, 3].map((index) => finished("coder", "failed", T0 + index));
    const once = new CircuitBreaker("coder", POLICY);
    const twice = new CircuitBreaker("coder", POLICY);
    for (const event of events.slice(0, 3)) {
      once.observe(event);
      twice.observe(event);
      twice.observe(event);
      twice.observe(finished("tester", "failed", T0));
    }
    expect(twice.decide(T0 + 10)).toEqual(once.decide(T0 + 10));
    expect(twice.counts()).toEqual({ invocations: 3, failures: 3, infrastructure_errors: 0 });
    expect(once.observe(events[3]!)?.kind).toBe("opened");
    expect(twice.observe(events[3]!)?.kind).toBe("opened");
  });
});

function agent(name: string, triggers: string[], breaker?: Partial<BreakerPolicy>): AgentDefinition {
  return {
    name,
    triggers,
    policies: { max_concurrency: 1, timeout_seconds: 600, ...(breaker ? { circuit_breaker: { ...POLICY, ...breaker } } : {}) },
  } as AgentDefinition;
}

describe("BreakerRouter", () => {
  const task = createAgencyEvent({ type: "task.ready", source: "agent-runner://agencies/test/outside", correlationid: "test", id: "task-1" });

  function router(agents: AgentDefinition[], clock: FakeClock) {
    const published: RouterEventFields[] = [];
    const breakers = new BreakerRouter(agents, clock, async (fields) => {
      published.push(fields);
      return createAgencyEvent({
        type: fields.type,
        source: "agent-runner://agencies/test/orchestrator",
        correlationid: "test",
        id: fields.id,
        data: fields.data,
      });
    });
    return { breakers, published };
  }

  it("sends an open breaker's events to the fallback, which stands by for them otherwise; a started invocation keeps its agent", async () => {
    const clock = new FakeClock(T0);
    const coder = agent("coder", ["task.ready"], { fallback: "backup" });
    const backup = agent("backup", ["task.*"]);
    const { breakers, published } = router([coder, backup], clock);
    const signal = new AbortController().signal;
    expect(breakers.standsBy("backup", "task.ready")).toBe(true);
    expect(breakers.standsBy("backup", "task.other")).toBe(false);
    expect((await breakers.route(coder, task, () => false, signal)).agent.name).toBe("coder");
    for (let index = 0; index < 4; index += 1) await breakers.observe(finished("coder", "failed", T0));
    expect(published.map((event) => event.type)).toEqual(["agency.breaker.opened"]);
    expect(published[0]!.data).toMatchObject({ agent: "coder", fallback: "backup", failures: 4 });
    expect(await breakers.route(coder, task, () => false, signal)).toEqual({ agent: backup, fallbackFor: "coder" });
    // A redelivery of an event whose invocation started on the coder stays there, and one on the fallback stays there.
    expect((await breakers.route(coder, task, (id) => id === invocationId("coder", task.id), signal)).agent.name).toBe("coder");
    clock.advance(120_000);
    expect((await breakers.route(coder, task, (id) => id === invocationId("backup", task.id), signal)).agent.name).toBe("backup");
    // The breaker's own probe: half_open names the invocation.
    expect((await breakers.route(coder, task, () => false, signal)).agent.name).toBe("coder");
    expect(published.at(-1)).toMatchObject({ type: "agency.breaker.half_open", data: { agent: "coder", invocation_id: invocationId("coder", task.id) } });
  });

  it("without a fallback, holds the event until the cooldown ends, then runs it as the probe", async () => {
    const clock = new FakeClock(T0);
    const coder = agent("coder", ["task.ready"], {});
    const { breakers, published } = router([coder], clock);
    for (let index = 0; index < 4; index += 1) await breakers.observe(finished("coder", "failed", T0));
    let routed = false;
    const route = breakers
      .route(coder, task, () => false, new AbortController().signal)
      .then((result) => {
        routed = true;
        return result;
      });
    await new Promise((resolve) => setImmediate(resolve));
    expect(routed).toBe(false);
    clock.advance(120_000);
    expect((await route).agent.name).toBe("coder");
    expect(published.map((event) => event.type)).toEqual(["agency.breaker.opened", "agency.breaker.half_open"]);
  });

  it("runs the probe's own event again as the probe when its invocation never started (the agency stopped in between)", async () => {
    const clock = new FakeClock(T0);
    const coder = agent("coder", ["task.ready"], {});
    const { breakers } = router([coder], clock);
    for (let index = 0; index < 4; index += 1) await breakers.observe(finished("coder", "failed", T0));
    clock.advance(120_000);
    await breakers.observe(halfOpen("coder", invocationId("coder", task.id), T0 + 120_000));
    expect((await breakers.route(coder, task, () => false, new AbortController().signal)).agent.name).toBe("coder");
  });

  it("a held event gives up when the agency stops taking events", async () => {
    const clock = new FakeClock(T0);
    const coder = agent("coder", ["task.ready"], {});
    const { breakers } = router([coder], clock);
    for (let index = 0; index < 4; index += 1) await breakers.observe(finished("coder", "failed", T0));
    const stop = new AbortController();
    const route = breakers.route(coder, task, () => false, stop.signal);
    stop.abort(new Error("the agency ended"));
    await expect(route).rejects.toThrow("the agency ended");
  });
});

describe("policies.circuit_breaker.fallback", () => {
  it("must name another agent of the agency whose triggers cover the agent's (exit 2 naming the field)", async () => {
    await using directory = temporaryDirectory();
    const breaker = (fallback: string) => ({ circuit_breaker: { fallback } });
    const { agencyFile } = writeAgency(directory.path, {
      agents: {
        coder: { triggers: ["task.ready", "review.*"], policies: breaker("narrow"), turns: [] },
        narrow: { triggers: ["task.*"], turns: [] },
        selfish: { triggers: ["task.ready"], policies: breaker("selfish"), turns: [] },
        lost: { triggers: ["task.ready"], policies: breaker("nobody"), turns: [] },
        fine: { triggers: ["task.ready"], policies: breaker("wide"), turns: [] },
        wide: { triggers: ["*"], turns: [] },
      },
    });
    const error = (await loadAgency(agencyFile).catch((caught: unknown) => caught)) as {
      exitCode: number;
      problems: { file: string; field: string; message: string }[];
    };
    expect(error.exitCode).toBe(2);
    expect(error.problems.map((problem) => [problem.file.split("/").pop(), problem.field])).toEqual([
      ["coder.yaml", "agent.policies.circuit_breaker.fallback"],
      ["lost.yaml", "agent.policies.circuit_breaker.fallback"],
      ["selfish.yaml", "agent.policies.circuit_breaker.fallback"],
    ]);
    expect(error.problems[0]!.message).toContain("do not match review.*");
    expect(error.problems[1]!.message).toContain('no agent named "nobody"');
    expect(error.problems[2]!.message).toContain("cannot be its own fallback");
  });
});
