import type { ChatMessage, ToolCall, ToolDefinition, Usage } from "./messages.js";

export interface ModelRequest {
  messages: ChatMessage[];
  tools: ToolDefinition[];
  /** Which agent is calling (`main`, a subagent id); sent to the scripted model. */
  agentId: string;
  /** 0-based index of this agent's model call; the scripted model answers turn `callIndex`. */
  callIndex: number;
  signal?: AbortSignal;
}

export interface ModelResponse {
  content: string | null;
  toolCalls: ToolCall[];
  usage: Usage;
  /** Provider's finish reason (`stop`, `tool_calls`, `length`, ...). */
  finishReason: string;
}

/**
 * One model call. Implementations retry transient failures themselves (429,
 * 5xx, resets, timeouts, honouring retry-after) and throw `ModelError` (exit 3)
 * with a reason such as `rate_limited` once retries are spent, or
 * `CancelledError` when the signal aborts.
 */
export interface ModelClient {
  complete(request: ModelRequest): Promise<ModelResponse>;
}
