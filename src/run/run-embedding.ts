import type { RunGate } from "../agent/run-gate.js";
import type { Tool } from "../tools/define-tool.js";

/**
 * How a front end that builds on runs (the agency, docs/agency.md) places one
 * run among its others: where its work starts and lands, which extra tools it
 * gets, whether it may write, which trace it joins. Given to `Runner.start`
 * and again to `Runner.resume` (nothing of it is recorded but `trace`: host
 * tools are functions of the caller's process). Every field is optional; an
 * empty embedding is a plain run.
 */
export interface RunEmbedding {
  /**
   * A branch of the task's repository: the run's worktree starts at its head
   * instead of the repository's HEAD (the run branch `runner/<task-name>-<short-id>` is
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
   * A check of the main agent's final answer (the agency's `output_schema`,
   * docs/agency.md "Structured output"): given the answer's text after the
   * run's redaction, it returns the problems (one line each, for the model),
   * or null when the answer is acceptable. A first rejected answer gets
   * exactly one correction turn (a user message naming the problems, recorded
   * in the session journal, so a resumed run gets no second one); a second
   * rejection ends the agent with reason `output_invalid` (the run ends
   * `failed` / `output_invalid`). Must not throw; it runs in the runner's
   * process, so it only judges text.
   */
  checkFinalAnswer?: (answer: string) => string[] | null;
  /**
   * The W3C trace the run joins instead of starting its own: `traceId` (32
   * lower-case hex digits) becomes report.json `trace_id` and every event's
   * `traceparent` trace; `parentSpanId` (16 hex digits) is the run's span
   * (the agency's invocation), under which each model call and tool call has
   * a span of its own (src/events/trace-context.ts). Recorded in run.json,
   * so a resume keeps it even when the caller gives none.
   */
  trace?: { traceId: string; parentSpanId: string };
  /**
   * Asked by the main agent's loop before each tool call and each model call
   * and told each model call's usage (src/agent/run-gate.ts): the agency's
   * per-agent token buckets wait here. Subagents' calls do not pass it.
   */
  gate?: RunGate;
}
