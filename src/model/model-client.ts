import type { ChatMessage, ProviderReasoning, ToolCall, ToolDefinition, Usage } from "./messages.js";

/**
 * Why a model call is made: `turn` is an agent step (the scripted model answers
 * it from `turns`), `compaction` a request to summarise the conversation (the
 * scripted model answers it from `compactions`). Sent as `x-agent-runner-purpose`.
 */
export type ModelCallPurpose = "turn" | "compaction";

/** One retry about to happen, reported through {@link ModelRequest.onRetry} before the backoff sleep. */
export interface ModelRetryInfo {
  /**
   * 0-based number of the attempt that follows the sleep (the first retry is
   * attempt 1); the same number that attempt sends in `x-agent-runner-attempt`.
   */
  attempt: number;
  /** How long the client sleeps before that attempt, in milliseconds (retry-after, or jittered backoff). */
  delayMs: number;
  /** Why the previous attempt failed: `rate_limited`, `overloaded`, `server_error`, `timeout`, `idle_timeout`, `connection_error`, `truncated_response`, ... */
  reason: string;
  /** HTTP status of the failed attempt, when it got one. */
  status?: number;
}

export interface ModelRequest {
  messages: ChatMessage[];
  tools: ToolDefinition[];
  /** Which agent is calling (`main`, a subagent id); sent to the scripted model. */
  agentId: string;
  /** A subagent's description (its `agent` call's); the scripted model picks the subagent's turns by it. */
  agentDescription?: string;
  /**
   * 0-based index of this agent's model call; the scripted model answers turn
   * `callIndex`. For `purpose: "compaction"` it is the 0-based number of the
   * compaction instead (the scripted model answers `compactions[callIndex]`).
   */
  callIndex: number;
  /** What the call is for; default `turn`. */
  purpose?: ModelCallPurpose;
  signal?: AbortSignal;
  /** Called once per retry, before the client sleeps (e.g. to emit a `model_call.retry` event). */
  onRetry?: (info: ModelRetryInfo) => void;
  /**
   * Called with each piece of the reply's text as it streams in, for display
   * only: an attempt that fails after some text was shown is retried, and
   * {@link ModelClient.complete} returns the retried attempt's whole reply,
   * never a mix. `attempt` is the 0-based attempt the text belongs to.
   */
  onText?: (delta: string, attempt: number) => void;
}

/**
 * Why the model stopped, the same words for every provider:
 * - `tool_calls`: it asked for tools (OpenAI `tool_calls`, Anthropic `tool_use`, Responses function calls);
 * - `stop`: it finished its reply (OpenAI `stop`, Anthropic `end_turn` / `stop_sequence`);
 * - `length`: it hit the output-token limit mid-reply (OpenAI `length`, Anthropic `max_tokens`, Responses `incomplete: max_output_tokens`);
 * - `refusal`: the provider refused to answer (Anthropic `refusal`, OpenAI `content_filter`);
 * - anything else a provider sends, passed through as it is.
 */
export type FinishReason = "tool_calls" | "stop" | "length" | "refusal" | (string & {});

export interface ModelResponse {
  content: string | null;
  toolCalls: ToolCall[];
  usage: Usage;
  finishReason: FinishReason;
  /** The provider's reasoning to send back with this reply on later requests (see {@link ProviderReasoning}). */
  reasoning?: ProviderReasoning;
}

/**
 * One model call. Implementations retry transient failures themselves (408,
 * 409, 429, 5xx, Anthropic's 529 overloaded, connection errors, timeouts,
 * streams that go idle or end early, unparsable replies, honouring
 * retry-after) and throw `ModelError` (exit 3) with a reason such as
 * `rate_limited` once retries are spent, or `CancelledError` when the signal
 * aborts (also during a backoff sleep). A response is returned only when a
 * whole reply was received and parsed: nothing of a failed attempt leaks out.
 */
export interface ModelClient {
  complete(request: ModelRequest): Promise<ModelResponse>;
}
