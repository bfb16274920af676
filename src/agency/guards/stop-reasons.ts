/**
 * Why a chain of an agency stopped, in a few named classes a person can act
 * on (issue 22 item 9; docs/agency.md "Why a chain stopped"). A chain is the
 * events one start (or outside) event caused, agent to agent. It stops when
 * an event is not delivered or an invocation's work does not land; the
 * orchestrator then publishes `agency.chain.stopped` with a {@link ChainStop}
 * and lists it in agency-report.json `stops`. The agency's own outcome, when
 * it is not `succeeded`, carries one class too (`stop` in the report), so the
 * CLI summary and `runner agency show` say what to fix.
 *
 * `reason` is the precise cause (`max_hops`, `budget_exhausted`, a run's
 * `verify_failed`); the class groups the causes that share a fix. Every guard
 * maps its stops onto these classes; a new class needs a row in
 * {@link STOP_CLASSES} and in the docs.
 */
export type StopClass =
  /** `max_hops`: an event would have been one hand-off too many (the review → fix ping-pong). */
  | "hops_exhausted"
  /** An agent's circuit breaker is open and it has no fallback agent. */
  | "breaker_open"
  /** An agent's final answer did not match its `output_schema`, after its correction turn. */
  | "output_invalid"
  /** The agency's `budget.max_cost_usd` (or an invocation's share of it) is spent. */
  | "budget_exhausted"
  /** A call needed a person's approval (`confirm`) and got none, or was refused. */
  | "needs_approval"
  /** An invocation failed on its own account (verify failed, step or time limit, refusal). */
  | "agent_failed"
  /** An invocation's change conflicted with one merged meanwhile: its run branch keeps it. */
  | "merge_conflict"
  /** Docker, git, the model's endpoint or the bus failed: not the agent's doing. */
  | "infrastructure"
  /** The agency went quiet without its goal and no guard fired: the last events woke no agent, or their agents published nothing. */
  | "dead_end"
  /** Someone cancelled the agency (Ctrl-C, `cancel()`): `runner agency resume` continues it. */
  | "cancelled";

/** What each class means and what a person does about it (the CLI prints `fix`). */
export const STOP_CLASSES: Readonly<Record<StopClass, { means: string; fix: string }>> = {
  hops_exhausted: {
    means: "the chain reached max_hops: an event would have been one hand-off too many",
    fix: "read the last events (the agents keep sending work back and forth); settle it by hand, or raise max_hops in agency.yaml",
  },
  breaker_open: {
    means: "the agent's circuit breaker is open and it has no fallback",
    fix: "look at the agent's failed invocations; give it policies.circuit_breaker.fallback, or resume after the cooldown",
  },
  output_invalid: {
    means: "the agent's final answer did not match its output_schema, even after one correction turn",
    fix: "read the invocation's final answer against the schema; fix the agent's instructions or the schema",
  },
  budget_exhausted: {
    means: "the agency's budget (budget.max_cost_usd) is spent",
    fix: "check the invocations' cost_usd; the work so far is on the agency branch (or the run branches named)",
  },
  needs_approval: {
    means: "a call needed a person's approval (confirm) and did not get it",
    fix: "run the agency where someone can answer (a terminal, or a program with an approval broker), or drop the tool from confirm",
  },
  agent_failed: {
    means: "an invocation failed on its own account (verification, step or time limit, refusal)",
    fix: "runner show <run-id> for the invocation's run; fix the agent's instructions, verify or limits",
  },
  merge_conflict: {
    means: "the invocation's change conflicted with another merged meanwhile; its run branch keeps the work",
    fix: "merge the run branch named in agency.merge.conflict by hand, or let the agents work on separate files",
  },
  infrastructure: {
    means: "Docker, git, a model endpoint or the bus failed: not the agents' doing",
    fix: "fix the failure named in the reason, then runner agency resume <id>",
  },
  dead_end: {
    means: "the agency went quiet without its goal: the last events woke no agent, or their agents published nothing",
    fix: "read the timeline's last events; check the agents' triggers and emits",
  },
  cancelled: {
    means: "the agency was cancelled",
    fix: "runner agency resume <id> continues it",
  },
};

/** One stopped chain: the data of `agency.chain.stopped` and an entry of agency-report.json `stops`. */
export interface ChainStop {
  class: StopClass;
  /** The precise cause: `max_hops`, `budget_exhausted`, or the invocation's run reason (`verify_failed`, `output_invalid`, ...). */
  reason: string;
  /** The chain's hop count where it stopped: the `hops` of {@link last_event}. */
  hops: number;
  /** The last event of the chain that was delivered (for `max_hops`, the one whose invocation emitted the event refused). */
  last_event: { id: string; type: string; hops: number };
  /** The agent whose event or invocation stopped the chain; null when none did (a budget spent before any start). */
  agent: string | null;
  /** The invocation and its run, when one is involved. */
  invocation_id: string | null;
  run_id: string | null;
  /** One sentence for a person: what happened (the class's `fix` says what to do). */
  detail: string;
}

/**
 * The class of an invocation whose work did not land (its events were
 * discarded), from its run's status and reason and its merge: `error` is
 * infrastructure; a merge that found conflicts is `merge_conflict`; the run
 * reasons `budget_exceeded` and `output_invalid` map to their classes; a
 * failure of an invocation some of whose `confirm` calls nobody approved is
 * `needs_approval` (`unapprovedCalls` > 0); any other failure is the agent's
 * own (`agent_failed`). Null when the work landed (succeeded, and merged
 * when it wrote) or the run was cancelled (a resume goes on with it).
 */
export function stopClassOfInvocation(outcome: { status: string; reason: string | null; merged: boolean | null; unapprovedCalls?: number }): StopClass | null {
  if (outcome.status === "cancelled") return null;
  if (outcome.status === "succeeded") return outcome.merged === false ? "merge_conflict" : null;
  if (outcome.status === "error") return "infrastructure";
  if (outcome.reason === "budget_exceeded") return "budget_exhausted";
  if (outcome.reason === "output_invalid") return "output_invalid";
  return (outcome.unapprovedCalls ?? 0) > 0 ? "needs_approval" : "agent_failed";
}
