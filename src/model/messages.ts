/**
 * Chat messages in the OpenAI chat-completions shape, the lingua franca of
 * OpenAI-compatible endpoints. Kept as our own types so the loop does not
 * depend on the SDK; each provider's client translates them to its own wire
 * format (Anthropic Messages, OpenAI Responses) and back.
 */
export interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/**
 * What a provider needs back, unchanged, on the next request to continue its
 * own reasoning: Anthropic's `thinking` / `redacted_thinking` blocks with their
 * signatures, OpenAI Responses' `reasoning` items (with `encrypted_content`
 * under `store: false`), or an OpenAI-compatible server's `reasoning_content`
 * text (DeepSeek, vLLM; provider `openai`, items `[{ reasoning_content }]`). Opaque to the loop; journaled with the message so a
 * resumed session sends it too; dropped by clients of another provider.
 */
export interface ProviderReasoning {
  provider: "anthropic" | "openai-responses" | "openai";
  /** The provider's own items, in the order it sent them. */
  items: unknown[];
}

export type ChatMessage =
  | { role: "system"; content: string }
  | { role: "user"; content: string }
  | { role: "assistant"; content: string | null; tool_calls?: ToolCall[]; reasoning?: ProviderReasoning }
  | { role: "tool"; tool_call_id: string; content: string };

/** A tool as the model sees it: name, description, JSON Schema of the arguments. */
export interface ToolDefinition {
  type: "function";
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

/**
 * Tokens of one call (or summed over calls), one split for every provider:
 * `prompt_tokens` is every input token, cached or not, so
 * `prompt_tokens - cached_tokens - cache_write_tokens` were read at the full
 * input price. Anthropic reports the three parts apart (`input_tokens`,
 * `cache_read_input_tokens`, `cache_creation_input_tokens`); its client adds them up.
 */
export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  /** Prompt tokens the provider served from its cache (cache reads), when it reports them. */
  cached_tokens: number;
  /** Prompt tokens written to the provider's cache by this call (Anthropic bills them above the input price); 0 where not reported. */
  cache_write_tokens: number;
}

export function emptyUsage(): Usage {
  return { prompt_tokens: 0, completion_tokens: 0, cached_tokens: 0, cache_write_tokens: 0 };
}

/** A usage as logs of older runners hold it: without `cache_write_tokens`. */
export type RecordedUsage = Omit<Usage, "cache_write_tokens"> & { cache_write_tokens?: number };

export function addUsage(total: RecordedUsage, more: RecordedUsage): Usage {
  return {
    prompt_tokens: total.prompt_tokens + more.prompt_tokens,
    completion_tokens: total.completion_tokens + more.completion_tokens,
    cached_tokens: total.cached_tokens + more.cached_tokens,
    cache_write_tokens: (total.cache_write_tokens ?? 0) + (more.cache_write_tokens ?? 0),
  };
}
