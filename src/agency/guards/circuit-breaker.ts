import type { AgencyEvent } from "../../bus/event-bus.js";
import { triggerMatches } from "../agency-event.js";
import type { AgentDefinition } from "../load-agency.js";

/** An agent's `policies.circuit_breaker` with its defaults (agency-schema.ts). Seconds; `failure_rate` a share in (0, 1]. */
export type BreakerPolicy = NonNullable<AgentDefinition["policies"]["circuit_breaker"]>;

/**
 * How a finished invocation counts: `success` (status succeeded), `failure`
 * (failed: the agent's own doing — verification failed, timed out, step limit,
 * refusal) or `infrastructure` (error: Docker, git, the model endpoint).
 * Infrastructure errors are counted and reported but never open a breaker:
 * another agent would meet the same broken infrastructure, and the agent did
 * nothing wrong. A cancelled run publishes no `agency.invocation.finished`.
 */
export type BreakerOutcome = "success" | "failure" | "infrastructure";

function outcomeOfStatus(status: string): BreakerOutcome | null {
  if (status === "succeeded") return "success";
  if (status === "failed") return "failure";
  if (status === "error") return "infrastructure";
  return null;
}

/** A change of a breaker's state, to publish as `agency.breaker.opened` / `agency.breaker.closed`. */
export type BreakerTransition =
  | {
      kind: "opened";
      /** `failure_rate`: the window's rate reached the threshold; `probe_failed`: the half-open probe failed. */
      reason: "failure_rate" | "probe_failed";
      /** The `agency.invocation.finished` event that opened it (its id makes the published event's id). */
      cause_event_id: string;
      /** ms since the epoch. */
      opened_at: number;
      /** When the cooldown ends, ms since the epoch. */
      until: number;
      /** Invocations (successes and failures) in the window, its failures, and its infrastructure errors (not in the rate). */
      invocations: number;
      failures: number;
      infrastructure_errors: number;
    }
  | { kind: "closed"; cause_event_id: string; probe_invocation_id: string; closed_at: number };

/**
 * What to do with the agent's next event at a time: run it (`closed`), run
 * it as the half-open probe (`probe`: publish `agency.breaker.half_open` with
 * its invocation id first), or not run it on this agent (`open` until the
 * cooldown ends; `probing` while the probe runs).
 */
export type BreakerDecision = { state: "closed" } | { state: "probe" } | { state: "open"; until: number } | { state: "probing"; probe: string };

/**
 * One agent's circuit breaker as a fold over the agency's events
 * (docs/agency.md "Circuit breakers"): its `agency.invocation.finished`
 * events (each at its event `time`) and its `agency.breaker.half_open`
 * events (which invocation is the probe). Every process that reads the bus
 * folds the same events to the same state, so the state survives a crash
 * and a resume without a file of its own.
 *
 * Closed: the outcomes of the last `window_seconds` (before the latest
 * finished event) are kept; once they hold at least `min_invocations` and
 * failures / invocations ≥ `failure_rate`, the breaker opens for
 * `cooldown_seconds`. Open: finished events of invocations that started
 * before it opened change nothing. After the cooldown it is half-open: the
 * next event runs as the one probe; the probe's success closes it (a fresh
 * window), its failure opens it again, an infrastructure error of the probe
 * leaves it half-open for another probe. (Martin Fowler's CircuitBreaker,
 * with the count over a time window as in resilience4j's time-based window.)
 *
 * Each method is O(1) amortised; `decide` reads three fields.
 */
export class CircuitBreaker {
  private readonly outcomes: { time: number; failure: boolean }[] = [];
  private failures = 0;
  private readonly infrastructure: number[] = [];
  private openedAt: number | null = null;
  private until = 0;
  private probe: string | null = null;
  private readonly folded = new Set<string>();

  constructor(
    readonly agent: string,
    readonly policy: BreakerPolicy,
  ) {}

  /**
   * Folds in one event of the bus (any type; others are ignored). Folding
   * an event id twice changes nothing. Returns the transition it caused.
   */
  observe(event: AgencyEvent): BreakerTransition | null {
    const data = event.data as { agent?: unknown; status?: unknown; invocation_id?: unknown } | undefined;
    if (data?.agent !== this.agent || typeof data.invocation_id !== "string") return null;
    if (event.type === "agency.invocation.finished") {
      const outcome = outcomeOfStatus(String(data.status));
      if (outcome === null || this.folded.has(event.id)) return null;
      this.folded.add(event.id);
      return this.finished(event.id, Date.parse(event.time), data.invocation_id, outcome);
    }
    if (event.type === "agency.breaker.half_open" && this.openedAt !== null) this.probe = data.invocation_id;
    return null;
  }

  /** The decision for an event of the agent at `now` (ms since the epoch). */
  decide(now: number): BreakerDecision {
    if (this.openedAt === null) return { state: "closed" };
    if (now < this.until) return { state: "open", until: this.until };
    return this.probe === null ? { state: "probe" } : { state: "probing", probe: this.probe };
  }

  /** The window's counts at the latest finished event: invocations (successes + failures), failures, infrastructure errors. */
  counts(): { invocations: number; failures: number; infrastructure_errors: number } {
    return { invocations: this.outcomes.length, failures: this.failures, infrastructure_errors: this.infrastructure.length };
  }

  private finished(eventId: string, time: number, invocationId: string, outcome: BreakerOutcome): BreakerTransition | null {
    if (this.openedAt !== null) {
      // Only the probe's outcome moves an open breaker; stragglers started before it opened do not.
      if (invocationId !== this.probe) return null;
      this.probe = null;
      if (outcome === "infrastructure") return null;
      if (outcome === "success") {
        this.openedAt = null;
        return { kind: "closed", cause_event_id: eventId, probe_invocation_id: invocationId, closed_at: time };
      }
      return this.open("probe_failed", eventId, time);
    }
    const start = time - this.policy.window_seconds * 1000;
    if (outcome === "infrastructure") {
      this.infrastructure.push(time);
    } else {
      this.outcomes.push({ time, failure: outcome === "failure" });
      if (outcome === "failure") this.failures += 1;
    }
    while (this.outcomes.length && this.outcomes[0]!.time <= start) if (this.outcomes.shift()!.failure) this.failures -= 1;
    while (this.infrastructure.length && this.infrastructure[0]! <= start) this.infrastructure.shift();
    const invocations = this.outcomes.length;
    if (outcome === "failure" && invocations >= this.policy.min_invocations && this.failures / invocations >= this.policy.failure_rate) {
      return this.open("failure_rate", eventId, time);
    }
    return null;
  }

  private open(reason: "failure_rate" | "probe_failed", eventId: string, time: number): BreakerTransition {
    const counts = this.counts();
    this.openedAt = time;
    this.until = time + this.policy.cooldown_seconds * 1000;
    this.probe = null;
    // A closed breaker starts from a fresh window: the failures that opened it are spent.
    this.outcomes.length = 0;
    this.failures = 0;
    this.infrastructure.length = 0;
    return { kind: "opened", reason, cause_event_id: eventId, opened_at: time, until: this.until, ...counts };
  }
}

/**
 * Whether trigger `covering` matches every event type trigger `pattern`
 * matches (`coding.*` covers `coding.task.ready` and `coding.review.*`; `*`
 * covers everything but `agency.*` patterns).
 */
function triggerCovers(covering: string, pattern: string): boolean {
  if (pattern === "*") return covering === "*";
  if (pattern.endsWith(".*")) {
    if (covering === pattern) return true;
    if (covering === "*") return !pattern.startsWith("agency.");
    return covering.endsWith(".*") && pattern.startsWith(covering.slice(0, -1));
  }
  return triggerMatches(covering, pattern);
}

/**
 * The problems of the agents' `policies.circuit_breaker.fallback` (checked
 * when the agency loads, exit 2): the fallback must be another agent of the
 * agency, and its triggers must cover every trigger of the agent it stands
 * in for, so every event the breaker sends it is one it would take.
 */
export function fallbackProblems(agents: readonly AgentDefinition[]): { agent: AgentDefinition; message: string }[] {
  const problems: { agent: AgentDefinition; message: string }[] = [];
  const byName = new Map(agents.map((agent) => [agent.name, agent]));
  for (const agent of agents) {
    const name = agent.policies.circuit_breaker?.fallback;
    if (name === undefined) continue;
    const fallback = byName.get(name);
    if (name === agent.name) {
      problems.push({ agent, message: `${agent.name} cannot be its own fallback; name another agent, or leave fallback out (its events then wait)` });
    } else if (!fallback) {
      problems.push({
        agent,
        message: `no agent named "${name}" in this agency (its agents: ${[...byName.keys()].join(", ")}); add agents/${name}.yaml or name one of these`,
      });
    } else {
      const uncovered = agent.triggers.filter((pattern) => !fallback.triggers.some((covering) => triggerCovers(covering, pattern)));
      if (uncovered.length)
        problems.push({
          agent,
          message: `the fallback ${name} must take every event ${agent.name} takes, but its triggers (${fallback.triggers.join(", ")}) do not match ${uncovered.join(", ")}; add them to ${name}'s triggers`,
        });
    }
  }
  return problems;
}
