import type { RunGate } from "../agent/run-gate.js";
import type { Tool } from "../tools/define-tool.js";

/**
 * How a front end that builds on runs (the agency, docs/agency.md) places one
 * run among its others: where its work starts and lands, which extra tools it
 * gets, whether it may write. Given to `Runner.start` and again to
 * `Runner.resume` (nothing of it is recorded: host tools are functions of the
 * caller's process). Every field is optional; an empty embedding is a plain run.
 */
export interface RunEmbedding {
  /**
   * A branch of the task's repository: the run's worktree starts at its head
   * instead of the repository's HEAD (the run branch `runner/<run-id>` is
   * still made). ConfigError before anything is created when it does not exist.
   */
  baseBranch?: string;
  /**
   * A branch the run's work is merged into when the run succeeds (verified,
   * when the task has `verify`), without a checkout: a fast-forward when the
   * branch has not moved since the run started, else a merge commit computed
   * with `git merge-tree`; the branch ref moves with a compare-and-swap, so
   * runs merging into it at once never lose each other's work. A conflict
   * merges nothing and keeps the run branch; report.json `merge` says so
   * (`merged: false`, `conflicts: [files]`). Not with `merge: true`.
   */
  mergeInto?: string;
  /**
   * Tools run by the runner's own process, offered to the main agent after
   * the workspace tools (the policy's tool allow-list applies to them as to
   * any tool). They must never run what the agent wrote on the host: they
   * publish to a bus, read the caller's state, and return text.
   */
  hostTools?: Tool[];
  /** Mount the workspace read-only in the agent's sandbox (verification still gets its own writable checkout). */
  readOnlyWorkspace?: boolean;
  /**
   * Asked by the main agent's loop before each tool call and each model call
   * and told each model call's usage (src/agent/run-gate.ts): the agency's
   * per-agent token buckets wait here. Subagents' calls do not pass it.
   */
  gate?: RunGate;
}
