/**
 * Token buckets (src/agency/guards/token-bucket.ts) and the agency's rate
 * limits (rate-limits.ts) over a FakeClock: capacity = the per-minute rate,
 * continuous refill, waits in turn across concurrent callers, model tokens
 * accounted after each call, published events, a wait cut short gives its
 * token back, and the buckets live in rate-limits.json.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { AgentDefinition } from "../../../src/agency/load-agency.js";
import { RateLimits, type RateLimitWait } from "../../../src/agency/guards/rate-limits.js";
import { take } from "../../../src/agency/guards/token-bucket.js";
import { emptyUsage } from "../../../src/model/messages.js";
import { FakeClock } from "../../helpers/fake-clock.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";

const T0 = Date.parse("2026-12-02T00:00:00.000Z");

describe("take", () => {
  it("starts full at the per-minute rate, refills continuously up to it, and says how long a take past empty waits", () => {
    let state = take(undefined, 30, 30, T0);
    expect(state).toEqual({ state: { tokens: 0, updated_at: T0 }, wait_ms: 0 });
    state = take(state.state, 30, 1, T0);
    expect(state.wait_ms).toBe(2000);
    // Half a minute later 15 tokens came back, less the one reserved.
    expect(take(state.state, 30, 0, T0 + 30_000).state.tokens).toBe(14);
    // Never above capacity.
    expect(take(state.state, 30, 0, T0 + 3_600_000).state.tokens).toBe(30);
  });
});

function reader(limits: NonNullable<AgentDefinition["policies"]["rate_limit"]>): AgentDefinition {
  return { name: "reader", policies: { max_concurrency: 4, timeout_seconds: 600, rate_limit: limits } } as AgentDefinition;
}

describe("RateLimits", () => {
  it("queues concurrent tool calls past the bucket in turn, announcing each wait once", async () => {
    await using directory = temporaryDirectory();
    const clock = new FakeClock(T0);
    const waits: RateLimitWait[] = [];
    const limits = new RateLimits(join(directory.path, "rate-limits.json"), clock, async (wait) => void waits.push(wait));
    const agent = reader({ tool_calls_per_minute: 30 });
    const gateA = limits.gateFor(agent, "inv-a")!;
    const gateB = limits.gateFor(agent, "inv-b")!;
    const signal = new AbortController().signal;
    for (let index = 0; index < 30; index += 1) await (index % 2 ? gateA : gateB).beforeToolCall({ name: "read_file", toolCallId: `c${index}` }, signal);
    expect(waits).toEqual([]);
    const done: string[] = [];
    const a = gateA.beforeToolCall({ name: "read_file", toolCallId: "c30" }, signal).then(() => done.push("a"));
    const b = gateB.beforeToolCall({ name: "grep", toolCallId: "c31" }, signal).then(() => done.push("b"));
    await new Promise((resolve) => setImmediate(resolve));
    expect(waits).toEqual([
      { agent: "reader", invocation_id: "inv-a", limit: "tool_calls_per_minute", per_minute: 30, wait_ms: 2000, tool: "read_file" },
      { agent: "reader", invocation_id: "inv-b", limit: "tool_calls_per_minute", per_minute: 30, wait_ms: 4000, tool: "grep" },
    ]);
    clock.advance(2000);
    await a;
    expect(done).toEqual(["a"]);
    clock.advance(2000);
    await b;
    expect(done).toEqual(["a", "b"]);
  });

  it("takes model tokens after each call and holds the next call until the balance is back at 0; counts emit_event calls", async () => {
    await using directory = temporaryDirectory();
    const clock = new FakeClock(T0);
    const waits: RateLimitWait[] = [];
    const limits = new RateLimits(join(directory.path, "rate-limits.json"), clock, async (wait) => void waits.push(wait));
    const agent = reader({ tokens_per_minute: 60_000, events_per_minute: 1 });
    const gate = limits.gateFor(agent, "inv")!;
    const signal = new AbortController().signal;
    await gate.beforeModelCall(signal);
    gate.afterModelCall({ ...emptyUsage(), prompt_tokens: 80_000, completion_tokens: 10_000 });
    let called = false;
    const next = gate.beforeModelCall(signal).then(() => (called = true));
    await new Promise((resolve) => setImmediate(resolve));
    expect(waits.at(-1)).toMatchObject({ limit: "tokens_per_minute", wait_ms: 30_000, tool: null });
    clock.advance(29_999);
    await new Promise((resolve) => setImmediate(resolve));
    expect(called).toBe(false);
    clock.advance(1);
    await next;
    await limits.beforeEmit(agent, "inv", signal);
    const emitted = limits.beforeEmit(agent, "inv", signal);
    await new Promise((resolve) => setImmediate(resolve));
    expect(waits.at(-1)).toMatchObject({ limit: "events_per_minute", wait_ms: 60_000, tool: "emit_event" });
    clock.advance(60_000);
    await emitted;
  });

  it("gives a wait's token back when the invocation's signal aborts (its timeout, a cancel), and keeps the buckets in rate-limits.json", async () => {
    await using directory = temporaryDirectory();
    const file = join(directory.path, "rate-limits.json");
    const clock = new FakeClock(T0);
    const limits = new RateLimits(file, clock, async () => undefined);
    const agent = reader({ tool_calls_per_minute: 1 });
    const gate = limits.gateFor(agent, "inv")!;
    await gate.beforeToolCall({ name: "read_file", toolCallId: "c0" }, new AbortController().signal);
    const timeout = new AbortController();
    const waiting = gate.beforeToolCall({ name: "read_file", toolCallId: "c1" }, timeout.signal);
    timeout.abort(new Error("timed out"));
    await expect(waiting).rejects.toThrow("timed out");
    limits.flush();
    expect(JSON.parse(readFileSync(file, "utf8"))).toEqual({ version: 1, agents: { reader: { tool_calls_per_minute: { tokens: 0, updated_at: T0 } } } });
    // Another process (a resume) starts from the file: the bucket is empty there too.
    const waits: RateLimitWait[] = [];
    const resumed = new RateLimits(file, clock, async (wait) => void waits.push(wait));
    const next = resumed.gateFor(agent, "inv-2")!.beforeToolCall({ name: "read_file", toolCallId: "c2" }, new AbortController().signal);
    await new Promise((resolve) => setImmediate(resolve));
    expect(waits).toMatchObject([{ wait_ms: 60_000 }]);
    clock.advance(60_000);
    await next;
  });

  it("gives no gate to an agent without tool or token limits", () => {
    const limits = new RateLimits("/nonexistent/rate-limits.json", new FakeClock(T0), async () => undefined);
    expect(limits.gateFor({ name: "free", policies: { max_concurrency: 1, timeout_seconds: 600 } } as AgentDefinition, "inv")).toBeUndefined();
    expect(limits.gateFor(reader({ events_per_minute: 5 }), "inv")).toBeUndefined();
  });
});
