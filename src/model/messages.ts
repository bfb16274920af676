/**
 * Chat messages in the OpenAI chat-completions shape, the lingua franca of
 * OpenAI-compatible endpoints. Kept as our own types so the loop does not
 * depend on the SDK.
 */
export interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

export type ChatMessage =
  | { role: "system"; content: string }
  | { role: "user"; content: string }
  | { role: "assistant"; content: string | null; tool_calls?: ToolCall[] }
  | { role: "tool"; tool_call_id: string; content: string };

/** A tool as the model sees it: name, description, JSON Schema of the arguments. */
export interface ToolDefinition {
  type: "function";
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  /** Prompt tokens the provider served from its cache, when it reports them. */
  cached_tokens: number;
}

export function emptyUsage(): Usage {
  return { prompt_tokens: 0, completion_tokens: 0, cached_tokens: 0 };
}

export function addUsage(total: Usage, more: Usage): Usage {
  return {
    prompt_tokens: total.prompt_tokens + more.prompt_tokens,
    completion_tokens: total.completion_tokens + more.completion_tokens,
    cached_tokens: total.cached_tokens + more.cached_tokens,
  };
}
