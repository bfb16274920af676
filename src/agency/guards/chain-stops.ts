import type { AgencyEvent } from "../../bus/event-bus.js";
import type { AgencyStatus } from "../agency-directory.js";
import { STOP_CLASSES, stopClassOfInvocation, type ChainStop, type StopClass } from "./stop-reasons.js";

/** The orchestrator's event for a stopped chain; its data is a {@link ChainStop}. */
export const CHAIN_STOPPED = "agency.chain.stopped";

/** agency-report.json `stop`: the class of an outcome other than `succeeded`, what it means and what to do. */
export interface AgencyStop {
  class: StopClass;
  /** The outcome's reason (`max_hops`, `budget_exhausted`, `quiescent`, a run's reason, ...). */
  reason: string;
  means: string;
  fix: string;
}

/**
 * The stopped chains of an agency, as a fold over its `agency.chain.stopped`
 * events (the orchestrator's log reader feeds it every event, so a resumed
 * agency knows the stops of its earlier attempts; the orchestrator also
 * feeds the events it publishes, which the reader sees again: an event id
 * counts once).
 */
export class ChainStops {
  private readonly byEvent = new Map<string, ChainStop>();

  /** Takes the stop of an `agency.chain.stopped` event; any other event is ignored. */
  observe(event: AgencyEvent): void {
    if (event.type !== CHAIN_STOPPED || this.byEvent.has(event.id)) return;
    this.byEvent.set(event.id, event.data as ChainStop);
  }

  /** Every stop so far, in log order. */
  get all(): ChainStop[] {
    return [...this.byEvent.values()];
  }

  /**
   * The outcome of an agency that went quiet without its goal: `failed` with its first stopped
   * chain's reason (`budget_exhausted` for any stop of that class, a run's `budget_exceeded`
   * included), or `error` (exit 3) when that stop was the infrastructure's (an invocation's run
   * ended `error`: not the agents' doing); `failed`/`quiescent` when no chain was stopped (a dead end).
   */
  quiescentOutcome(): { status: "failed" | "error"; reason: string } {
    const first = this.all[0];
    if (first === undefined) return { status: "failed", reason: "quiescent" };
    if (first.class === "infrastructure") return { status: "error", reason: first.reason };
    return { status: "failed", reason: first.class === "budget_exhausted" ? "budget_exhausted" : first.reason };
  }

  /**
   * The class of an agency's outcome (agency-report.json `stop`), null when
   * it succeeded: `cancelled` and `infrastructure` (status `error`) by their
   * status; a failure by the stopped chain whose reason it carries (else the
   * first one), or `dead_end` when no chain was stopped.
   */
  outcome(status: AgencyStatus, reason: string): AgencyStop | null {
    if (status === "succeeded") return null;
    const stops = this.all;
    const stopClass: StopClass =
      status === "cancelled"
        ? "cancelled"
        : status === "error"
          ? "infrastructure"
          : ((stops.find((stop) => stop.reason === reason) ?? stops[0])?.class ?? "dead_end");
    return { class: stopClass, reason, ...STOP_CLASSES[stopClass] };
  }
}

/**
 * The stop of a chain whose invocation's work did not land (its events
 * discarded), classed by {@link stopClassOfInvocation}; null when it landed,
 * was cancelled, or `continues` (an agent's triggers take its
 * `agency.invocation.finished`, so the chain goes on through it).
 */
export function invocationStop(options: {
  agent: string;
  invocationId: string;
  served: AgencyEvent;
  outcome: { status: string; reason: string | null; merged: boolean | null; run_id: string; branch: string | null };
  unapprovedCalls: number;
  continues: boolean;
}): ChainStop | null {
  const { agent, served, outcome } = options;
  const stopClass = stopClassOfInvocation({ ...outcome, unapprovedCalls: options.unapprovedCalls });
  if (stopClass === null || options.continues) return null;
  const kept = outcome.branch ? `; its run branch ${outcome.branch} keeps its work` : "";
  return {
    class: stopClass,
    reason: outcome.merged === false && outcome.status === "succeeded" ? "merge_conflict" : (outcome.reason ?? outcome.status),
    hops: served.hops,
    last_event: { id: served.id, type: served.type, hops: served.hops },
    agent,
    invocation_id: options.invocationId,
    run_id: outcome.run_id,
    detail: `${agent}'s invocation for ${served.type} ended ${outcome.status} (${outcome.reason ?? "no reason"})${options.unapprovedCalls ? ` after ${options.unapprovedCalls} call(s) nobody approved` : ""}: its events were not published${kept}`,
  };
}
