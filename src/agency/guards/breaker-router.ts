import type { AgencyEvent } from "../../bus/event-bus.js";
import { invocationId, triggerMatches } from "../agency-event.js";
import type { AgentDefinition } from "../load-agency.js";
import { CircuitBreaker, type BreakerTransition } from "./circuit-breaker.js";
import type { AgencyClock } from "./clock.js";

/** The fields of an orchestrator event the router publishes (agency-event.ts `agencyEvent`). */
export interface RouterEventFields {
  type: string;
  subject: string;
  id: string;
  data: Record<string, unknown>;
  cause: AgencyEvent;
  time: Date;
}

/** Which agent runs an event: the agent whose triggers matched it, or its fallback (`fallbackFor` names the agent it stands in for). */
export interface BreakerRoute {
  agent: AgentDefinition;
  fallbackFor: string | null;
}

/**
 * The orchestrator's side of the circuit breakers (docs/agency.md "Circuit
 * breakers"): one {@link CircuitBreaker} per agent with
 * `policies.circuit_breaker`, fed every `agency.invocation.finished` and
 * `agency.breaker.half_open` event (the log's on start or resume, then each
 * as it is published), publishing `agency.breaker.opened | closed` for the
 * transitions and `half_open` for each probe, with ids derived from their
 * cause so a resume that folds the log again publishes none twice.
 *
 * Routing an event the agent's triggers matched: an invocation already
 * started for it (the agent's or its fallback's, ids derived from the event)
 * goes on whatever the breaker says now, so a redelivery starts nothing
 * twice. Otherwise a closed breaker runs it on the agent; after the cooldown
 * it runs as the probe; while open (or while the probe runs) it goes to the
 * fallback when the fallback's own breaker is closed, else it waits — in the
 * log, unacknowledged — until the cooldown ends or a finished invocation
 * changes a breaker. A fallback stands by: an event its primary's triggers
 * match reaches it only through the primary's breaker.
 */
export class BreakerRouter {
  private readonly breakers = new Map<string, CircuitBreaker>();
  private readonly byName: Map<string, AgentDefinition>;
  private readonly primaries = new Map<string, AgentDefinition[]>();
  private readonly waiters = new Set<() => void>();

  constructor(
    agents: readonly AgentDefinition[],
    private readonly clock: AgencyClock,
    private readonly publish: (fields: RouterEventFields) => Promise<AgencyEvent>,
  ) {
    this.byName = new Map(agents.map((agent) => [agent.name, agent]));
    for (const agent of agents) {
      const policy = agent.policies.circuit_breaker;
      if (!policy) continue;
      this.breakers.set(agent.name, new CircuitBreaker(agent.name, policy));
      if (policy.fallback !== undefined) this.primaries.set(policy.fallback, [...(this.primaries.get(policy.fallback) ?? []), agent]);
    }
  }

  /** True when some agent has a breaker (else nothing needs folding). */
  get active(): boolean {
    return this.breakers.size > 0;
  }

  /** Folds in one event of the log (any type) and publishes the transition it caused, if any (deduped by id on a second fold). */
  async observe(event: AgencyEvent): Promise<void> {
    if (event.type !== "agency.invocation.finished" && event.type !== "agency.breaker.half_open") return;
    const breaker = this.breakers.get(String((event.data as { agent?: unknown } | undefined)?.agent));
    const transition = breaker?.observe(event) ?? null;
    if (breaker && transition) await this.publish(this.transitionEvent(breaker, transition, event));
    for (const wake of [...this.waiters]) wake();
  }

  /** True when `agent` is a fallback whose primary's triggers match `type`: the primary's consumer routes that event. */
  standsBy(agent: string, type: string): boolean {
    return this.primaries.get(agent)?.some((primary) => primary.triggers.some((pattern) => triggerMatches(pattern, type))) ?? false;
  }

  /**
   * Where `event`, which `agent`'s triggers matched, runs ({@link BreakerRouter});
   * `started(invocationId)` says whether an invocation exists for an id.
   * Waits while neither the agent nor its fallback may take it; rejects with
   * `signal.reason` when `signal` aborts meanwhile.
   */
  async route(agent: AgentDefinition, event: AgencyEvent, started: (invocationId: string) => boolean, signal: AbortSignal): Promise<BreakerRoute> {
    const breaker = this.breakers.get(agent.name);
    const own = { agent, fallbackFor: null };
    if (!breaker || started(invocationId(agent.name, event.id))) return own;
    const fallback = breaker.policy.fallback === undefined ? null : this.byName.get(breaker.policy.fallback)!;
    const toFallback = fallback ? { agent: fallback, fallbackFor: agent.name } : null;
    if (toFallback && started(invocationId(toFallback.agent.name, event.id))) return toFallback;
    for (;;) {
      const now = this.clock.now();
      const decision = breaker.decide(now);
      // The probe's own event again (its invocation never started: the agency stopped in between) runs as the probe.
      if (decision.state === "closed" || (decision.state === "probing" && decision.probe === invocationId(agent.name, event.id))) return own;
      if (decision.state === "probe") {
        const probe = invocationId(agent.name, event.id);
        const published = await this.publish({
          type: "agency.breaker.half_open",
          subject: agent.name,
          id: `breaker-${agent.name}-half-open-${probe}`,
          cause: event,
          time: new Date(now),
          data: { agent: agent.name, invocation_id: probe, event_id: event.id },
        });
        await this.observe(published);
        return own;
      }
      if (toFallback && (this.breakers.get(toFallback.agent.name)?.decide(now).state ?? "closed") === "closed") return toFallback;
      await this.change(decision.state === "open" ? decision.until : null, signal);
    }
  }

  /** Resolves at `until` (ms since the epoch; never when null) or at the next folded event, whichever comes first. */
  private change(until: number | null, signal: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      const timer = new AbortController();
      const done = (error?: unknown) => {
        this.waiters.delete(wake);
        signal.removeEventListener("abort", onAbort);
        timer.abort();
        if (error === undefined) resolve();
        else reject(error as Error);
      };
      const wake = () => done();
      const onAbort = () => done(signal.reason);
      if (signal.aborted) return done(signal.reason);
      this.waiters.add(wake);
      signal.addEventListener("abort", onAbort, { once: true });
      if (until !== null) this.clock.sleepUntil(until, timer.signal).then(wake, () => undefined);
    });
  }

  private transitionEvent(breaker: CircuitBreaker, transition: BreakerTransition, cause: AgencyEvent): RouterEventFields {
    const agent = breaker.agent;
    if (transition.kind === "closed") {
      return {
        type: "agency.breaker.closed",
        subject: agent,
        id: `breaker-${agent}-closed-${transition.cause_event_id}`,
        cause,
        time: new Date(transition.closed_at),
        data: { agent, probe_invocation_id: transition.probe_invocation_id },
      };
    }
    const { policy } = breaker;
    return {
      type: "agency.breaker.opened",
      subject: agent,
      id: `breaker-${agent}-opened-${transition.cause_event_id}`,
      cause,
      time: new Date(transition.opened_at),
      data: {
        agent,
        reason: transition.reason,
        invocations: transition.invocations,
        failures: transition.failures,
        infrastructure_errors: transition.infrastructure_errors,
        window_seconds: policy.window_seconds,
        min_invocations: policy.min_invocations,
        failure_rate: policy.failure_rate,
        cooldown_seconds: policy.cooldown_seconds,
        until: new Date(transition.until).toISOString(),
        fallback: policy.fallback ?? null,
      },
    };
  }
}
