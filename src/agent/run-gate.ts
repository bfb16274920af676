import type { Usage } from "../model/messages.js";

/**
 * A gate a front end puts in a run's main-agent loop (RunEmbedding `gate`):
 * the agency's token buckets per agent (docs/agency.md "Rate limits") wait
 * here. Each `before…` resolves when the call may go on — at once, or after
 * a wait — and rejects only with `signal.reason` when the run's signal aborts
 * (cancelled, or its `timeout_sec` passed: the run then ends `failed/timed_out`).
 */
export interface RunGate {
  /** Before each tool call the model made runs (not before one replayed from the record on resume). */
  beforeToolCall(call: { name: string; toolCallId: string }, signal: AbortSignal): Promise<void>;
  /** Before each model call of a turn. */
  beforeModelCall(signal: AbortSignal): Promise<void>;
  /** After each model call (turns and compactions), with the tokens it used. */
  afterModelCall(usage: Usage): void;
}
