import type { AgencyEvent } from "../../bus/event-bus.js";
import type { ChainStop } from "./stop-reasons.js";

/**
 * `max_hops` (issue 22 item 1; docs/agency.md "Hops, mode and budget"): an
 * agent's event carries `hops` = its cause's + 1 (src/agency/agency-event.ts);
 * one whose `hops` would pass `maxHops` is not delivered. Splits the events
 * an invocation emitted into those to publish and those refused, keeping order.
 */
export function withinHops(events: AgencyEvent[], maxHops: number): { deliver: AgencyEvent[]; refused: AgencyEvent[] } {
  return { deliver: events.filter((event) => event.hops <= maxHops), refused: events.filter((event) => event.hops > maxHops) };
}

/** The stop of a chain whose next events `refused` passed `maxHops`: the chain ends at `served`, the event the invocation served. */
export function hopsExhausted(options: {
  agent: string;
  invocationId: string;
  runId: string;
  served: AgencyEvent;
  refused: AgencyEvent[];
  maxHops: number;
}): ChainStop {
  const { agent, served, refused, maxHops } = options;
  return {
    class: "hops_exhausted",
    reason: "max_hops",
    hops: served.hops,
    last_event: { id: served.id, type: served.type, hops: served.hops },
    agent,
    invocation_id: options.invocationId,
    run_id: options.runId,
    detail: `${agent} published ${refused.map((event) => event.type).join(", ")} at hop ${refused[0]!.hops}, past max_hops ${maxHops}: not delivered, the chain stops after ${served.type}`,
  };
}
