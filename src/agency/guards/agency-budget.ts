import type { AgencyEvent } from "../../bus/event-bus.js";
import { formatUsd } from "../../model/pricing.js";
import type { RunHandle } from "../../runner/runner.js";
import type { ChainStop } from "./stop-reasons.js";

/** The run events whose `cost_usd` a run's spending sums (as report.json `cost_usd` does): model calls and compactions. */
const COSTED_EVENTS = /^dev\.agent-runner\.(model_call\.finished|context\.summary_usage)\.v\d+$/;

/**
 * The agency's `budget.max_cost_usd` (docs/agency.md "Hops, mode and
 * budget"): what its invocations have spent, in USD, and whether another may
 * start. Spent is the sum of the finished invocations' `cost_usd` (from
 * invocations.jsonl, so it survives a resume) plus, for each running one,
 * what its run's model calls have cost so far (followed from the run's
 * events). A finished invocation without a cost counts 0: the agency's
 * loader refuses a budget over an unpriced model, so that is a run that made
 * no model call. Without a budget every question answers "go on".
 *
 * Limits: invocations that start together each get the whole remaining
 * budget as their own cap (`model.max_cost_usd`), so together they may spend
 * up to that many times more before the next start is refused; a model call
 * already in flight when a cap is reached is paid for.
 */
export class AgencyBudget {
  private readonly running = new Map<string, number>();

  /**
   * @param maxCostUsd the budget, USD; null for none.
   * @param finishedCosts the `cost_usd` of every finished invocation (null when unpriced), read at each question.
   */
  constructor(
    readonly maxCostUsd: number | null,
    private readonly finishedCosts: () => Iterable<number | null>,
  ) {}

  /** USD spent so far: finished invocations, then what the running ones have cost until now. */
  spent(): number {
    let total = 0;
    for (const cost of this.finishedCosts()) total += cost ?? 0;
    for (const cost of this.running.values()) total += cost;
    return total;
  }

  /** True once the spending has reached the budget: no invocation starts. Always false without a budget. */
  exhausted(): boolean {
    return this.maxCostUsd !== null && this.spent() >= this.maxCostUsd;
  }

  /**
   * The cap of the next run, USD (its task's `model.max_cost_usd`): what is left of the budget, or the
   * agent's own cap when that is lower; `undefined` leaves the agent's own (absent without either).
   */
  capFor(agentCap: number | undefined): number | undefined {
    if (this.maxCostUsd === null) return agentCap;
    const left = Math.max(this.maxCostUsd - this.spent(), 0);
    return agentCap === undefined ? left : Math.min(agentCap, left);
  }

  /**
   * Counts what invocation `invocationId`'s run costs while it runs: its model calls' `cost_usd`, earlier
   * attempts' included for a resumed run (they are spent, and not yet in its recorded cost). Call
   * {@link finished} when its cost is recorded. Does nothing without a budget.
   */
  follow(invocationId: string, handle: Pick<RunHandle, "events">): void {
    if (this.maxCostUsd === null) return;
    this.running.set(invocationId, 0);
    void (async () => {
      for await (const envelope of handle.events({ from: 0 })) {
        if (!COSTED_EVENTS.test(envelope.type) || !this.running.has(invocationId)) continue;
        const cost = (envelope.data as { cost_usd?: unknown } | undefined)?.cost_usd;
        if (typeof cost === "number") this.running.set(invocationId, this.running.get(invocationId)! + cost);
      }
    })().catch(() => undefined);
  }

  /** The invocation's cost is now among the finished ones: stop counting it as running. */
  finished(invocationId: string): void {
    this.running.delete(invocationId);
  }

  /** The stop of the chain whose next invocation (of `agent`, for `served`) did not start: the budget is spent. */
  stop(agent: string, invocationId: string, served: AgencyEvent): ChainStop {
    return {
      class: "budget_exhausted",
      reason: "budget_exhausted",
      hops: served.hops,
      last_event: { id: served.id, type: served.type, hops: served.hops },
      agent,
      invocation_id: invocationId,
      run_id: null,
      detail: `the invocations spent ${formatUsd(this.spent())} of budget.max_cost_usd ${formatUsd(this.maxCostUsd ?? 0)}: ${agent} was not started for ${served.type}`,
    };
  }
}
