import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import type { RunGate } from "../../agent/run-gate.js";
import type { AgentDefinition } from "../load-agency.js";
import type { AgencyClock } from "./clock.js";
import { take, type BucketState } from "./token-bucket.js";

/** An agent's buckets, named by the knob of `policies.rate_limit` that sets each. */
export type RateLimitKnob = "tool_calls_per_minute" | "tokens_per_minute" | "events_per_minute";

/** One wait of an invocation on an empty bucket: the data of `agency.rate_limited`. */
export interface RateLimitWait {
  agent: string;
  invocation_id: string;
  limit: RateLimitKnob;
  /** The knob's value, per minute. */
  per_minute: number;
  /** How long the call waits, ms. */
  wait_ms: number;
  /** The tool whose call waits (`tool_calls_per_minute`, `events_per_minute`), or null for a model call. */
  tool: string | null;
}

/** rate-limits.json: every agent's buckets, `{ version: 1, agents: { <agent>: { <knob>: { tokens, updated_at } } } }`. */
interface RateLimitsFile {
  version: 1;
  agents: Record<string, Partial<Record<RateLimitKnob, BucketState>>>;
}

/**
 * The token buckets of every agent with `policies.rate_limit`
 * (docs/agency.md "Rate limits"), shared by all of an agent's invocations,
 * the concurrent ones too: tool calls (1 a call), model tokens (a model call
 * waits until the balance is back at 0; its prompt + completion tokens are
 * taken after it) and published events (1 an `emit_event` call). A call
 * finding its bucket empty waits its turn — `onWait` publishes
 * `agency.rate_limited` once per wait — and fails only when the invocation's
 * signal aborts meanwhile (its timeout, a cancel); the tokens of a wait cut
 * short are given back.
 *
 * The state is kept in `file` (the agency's rate-limits.json), rewritten
 * whole (temporary file + rename) after the changes of one tick, so a resume
 * or a new process starts from the buckets as they were; a kill -9 loses at
 * most the takes of the last tick.
 */
export class RateLimits {
  private readonly state: RateLimitsFile;
  private writing = false;

  constructor(
    private readonly file: string,
    private readonly clock: AgencyClock,
    private readonly onWait: (wait: RateLimitWait) => Promise<void>,
  ) {
    this.state = existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as RateLimitsFile) : { version: 1, agents: {} };
  }

  /** The gate of one invocation of `agent` (RunEmbedding `gate`), or undefined when the agent has no tool or token limit. */
  gateFor(agent: AgentDefinition, invocationId: string): RunGate | undefined {
    const limits = agent.policies.rate_limit;
    if (limits?.tool_calls_per_minute === undefined && limits?.tokens_per_minute === undefined) return undefined;
    return {
      beforeToolCall: (call, signal) => this.acquire(agent, invocationId, "tool_calls_per_minute", 1, call.name, signal),
      beforeModelCall: (signal) => this.acquire(agent, invocationId, "tokens_per_minute", 0, null, signal),
      afterModelCall: (usage) => {
        const perMinute = agent.policies.rate_limit?.tokens_per_minute;
        if (perMinute !== undefined) this.take(agent.name, "tokens_per_minute", perMinute, usage.prompt_tokens + usage.completion_tokens);
      },
    };
  }

  /** Before `agent`'s `emit_event` queues an event: waits its turn in the events bucket. */
  beforeEmit(agent: AgentDefinition, invocationId: string, signal: AbortSignal): Promise<void> {
    return this.acquire(agent, invocationId, "events_per_minute", 1, "emit_event", signal);
  }

  /** Writes rate-limits.json now if a change waits to be written. */
  flush(): void {
    if (!this.writing) return;
    this.writing = false;
    writeFileSync(`${this.file}.tmp`, `${JSON.stringify(this.state)}\n`, { mode: 0o600 });
    renameSync(`${this.file}.tmp`, this.file);
  }

  private async acquire(
    agent: AgentDefinition,
    invocationId: string,
    knob: RateLimitKnob,
    amount: number,
    tool: string | null,
    signal: AbortSignal,
  ): Promise<void> {
    const perMinute = agent.policies.rate_limit?.[knob];
    if (perMinute === undefined) return;
    const now = this.clock.now();
    const waitMs = this.take(agent.name, knob, perMinute, amount, now);
    if (waitMs === 0) return;
    try {
      await this.onWait({ agent: agent.name, invocation_id: invocationId, limit: knob, per_minute: perMinute, wait_ms: waitMs, tool });
      await this.clock.sleepUntil(now + waitMs, signal);
    } catch (error) {
      // The call does not run: its reservation goes back to the bucket.
      this.take(agent.name, knob, perMinute, -amount);
      throw error;
    }
  }

  private take(agent: string, knob: RateLimitKnob, perMinute: number, amount: number, now: number = this.clock.now()): number {
    const buckets = (this.state.agents[agent] ??= {});
    const taken = take(buckets[knob], perMinute, amount, now);
    buckets[knob] = taken.state;
    if (!this.writing) {
      this.writing = true;
      setImmediate(() => {
        try {
          this.flush();
        } catch {
          // Written again by the next change or the agency's final flush, which reports the error.
          this.writing = true;
        }
      });
    }
    return taken.wait_ms;
  }
}
