/**
 * An agent's lifecycle in an agency (docs/agency.md "Agent lifecycle"):
 * `spawn → ready → busy → idle → error → shutdown`. `busy` while at least one
 * of its invocations runs, `idle` when none does after it worked, `error`
 * after an invocation ended `error` (a crash, not a failed verification)
 * until the next one ends well (`ready`, then `busy` or `idle`; invocations
 * still start meanwhile), `shutdown` when the agency stops.
 */
export type AgentState = "spawn" | "ready" | "busy" | "idle" | "error" | "shutdown";

/** What happened to the agent. `running`: its invocations still running afterwards. */
export type LifecycleChange =
  { kind: "started" } | { kind: "invocation_started" } | { kind: "invocation_ended"; crashed: boolean; running: number } | { kind: "stopped" };

/**
 * The states an agent passes through on `change` from `current`, in order
 * (empty: no change). Pure, so a replay of the events gives the same states.
 */
export function lifecycleTransitions(current: AgentState, change: LifecycleChange): AgentState[] {
  const path: AgentState[] = [];
  let state = current;
  const go = (next: AgentState) => {
    if (next === state) return;
    path.push(next);
    state = next;
  };
  switch (change.kind) {
    case "started":
      go("ready");
      break;
    case "invocation_started":
      // An agent in error stays there while it works again: only a success takes it back to ready.
      if (state !== "error") go("busy");
      break;
    case "invocation_ended":
      if (change.crashed) go("error");
      else {
        if (state === "error") go("ready");
        go(change.running === 0 ? "idle" : "busy");
      }
      break;
    case "stopped":
      go("shutdown");
      break;
  }
  return path;
}
