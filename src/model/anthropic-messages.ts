import type Anthropic from "@anthropic-ai/sdk";
import type { ChatMessage, ToolDefinition } from "./messages.js";

type MessageParam = Anthropic.Messages.MessageParam;
type ContentBlockParam = Anthropic.Messages.ContentBlockParam;
type TextBlockParam = Anthropic.Messages.TextBlockParam;
type Tool = Anthropic.Messages.Tool;

/** A request's prompt in the Messages API's shape: the system prompt apart, tools, and alternating user/assistant turns. */
export interface AnthropicPrompt {
  system: TextBlockParam[];
  tools: Tool[];
  messages: MessageParam[];
}

/** The cache marker of a breakpoint: the default 5-minute TTL (docs.anthropic.com "Prompt caching"). */
const EPHEMERAL = { type: "ephemeral" } as const;

/**
 * Text sent for a message whose text is empty: the API refuses empty text
 * blocks ("text content blocks must be non-empty") and assistant turns with no content.
 */
const EMPTY_TEXT = "(empty)";

/**
 * Our conversation in the Messages API's shape:
 * - every `system` message becomes part of the top-level `system` (text blocks);
 * - an assistant message becomes one assistant turn: its Anthropic reasoning
 *   (thinking / redacted_thinking blocks, unchanged, in the order received)
 *   first, then its text, then one `tool_use` block per tool call; reasoning
 *   of another provider is dropped;
 * - consecutive `tool` messages, and user text after them, become ONE user
 *   turn: the `tool_result` blocks first (parallel tool use answers in one
 *   turn, results before any text), then the text. The API wants user and
 *   assistant turns to alternate, so consecutive user messages merge too.
 * Tool-call arguments that are not a JSON object (a model's malformed JSON)
 * are sent as the input `{}`: the request stays valid, and the call's tool
 * result already tells the model its arguments did not parse. Without
 * `tools` the API refuses `tool_use` and `tool_result` blocks, so calls and
 * results are then sent as text (`[tool call NAME ARGUMENTS]`, `[tool result
 * for ID]`).
 */
export function toAnthropicPrompt(messages: readonly ChatMessage[], tools: readonly ToolDefinition[]): AnthropicPrompt {
  const system: TextBlockParam[] = [];
  const turns: MessageParam[] = [];
  const userTurn = (): ContentBlockParam[] => {
    const last = turns.at(-1);
    if (last?.role === "user" && Array.isArray(last.content)) return last.content;
    const content: ContentBlockParam[] = [];
    turns.push({ role: "user", content });
    return content;
  };
  for (const message of messages) {
    switch (message.role) {
      case "system":
        system.push({ type: "text", text: message.content || EMPTY_TEXT });
        break;
      case "user":
        userTurn().push({ type: "text", text: message.content || EMPTY_TEXT });
        break;
      case "tool": {
        const content = userTurn();
        if (!tools.length) {
          content.push({ type: "text", text: `[tool result for ${message.tool_call_id}]\n${message.content}` });
          break;
        }
        // Results go before any text of the turn (the API wants tool_result blocks first).
        const firstText = content.findIndex((block) => block.type !== "tool_result");
        const result: ContentBlockParam = { type: "tool_result", tool_use_id: message.tool_call_id, content: message.content };
        if (firstText === -1) content.push(result);
        else content.splice(firstText, 0, result);
        break;
      }
      case "assistant": {
        const content: ContentBlockParam[] = [];
        if (message.reasoning?.provider === "anthropic") content.push(...(message.reasoning.items as ContentBlockParam[]));
        if (message.content) content.push({ type: "text", text: message.content });
        for (const call of message.tool_calls ?? []) {
          content.push(
            tools.length
              ? { type: "tool_use", id: call.id, name: call.function.name, input: inputObject(call.function.arguments) }
              : { type: "text", text: `[tool call ${call.function.name} ${call.function.arguments}] (id ${call.id})` },
          );
        }
        if (!content.some((block) => block.type !== "thinking" && block.type !== "redacted_thinking")) content.push({ type: "text", text: EMPTY_TEXT });
        turns.push({ role: "assistant", content });
        break;
      }
    }
  }
  return {
    system,
    tools: tools.map((tool) => ({
      name: tool.function.name,
      description: tool.function.description,
      input_schema: { ...tool.function.parameters, type: "object" } as Tool["input_schema"],
    })),
    messages: turns,
  };
}

function inputObject(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value === "object" && value !== null && !Array.isArray(value)) return value as Record<string, unknown>;
  } catch {
    // malformed JSON: see toAnthropicPrompt
  }
  return {};
}

/**
 * The prompt with `cache_control` breakpoints (at most 4, the API's limit,
 * docs.anthropic.com "Prompt caching"), computed afresh for each request so
 * they stay valid whatever clearing or compaction did to the conversation:
 * 1. the last tool (tools come first in the cached prefix);
 * 2. the last system block;
 * 3. the last block of the last message: this request writes the whole
 *    conversation, so the next request (which extends it) reads it;
 * 4. the last block of the previous turn's last message (the user turn
 *    before the last assistant turn): where the previous request wrote, so
 *    this request reads it even when the turn since added more blocks than
 *    the API's 20-block lookback.
 * Thinking blocks cannot carry `cache_control`, so a message ending in one is
 * not marked. Returns a copy; the input is not changed.
 */
export function withCacheBreakpoints(prompt: AnthropicPrompt): AnthropicPrompt {
  const tools = prompt.tools.map((tool, index) => (index === prompt.tools.length - 1 ? { ...tool, cache_control: EPHEMERAL } : tool));
  const system = prompt.system.map((block, index) => (index === prompt.system.length - 1 ? { ...block, cache_control: EPHEMERAL } : block));
  const marked = new Set<number>();
  const last = prompt.messages.length - 1;
  if (last >= 0) marked.add(last);
  const lastAssistant = prompt.messages.findLastIndex((message, index) => index < last && message.role === "assistant");
  if (lastAssistant > 0) marked.add(lastAssistant - 1);
  const messages = prompt.messages.map((message, index) => (marked.has(index) ? markLastBlock(message) : message));
  return { system, tools, messages };
}

function markLastBlock(message: MessageParam): MessageParam {
  const content: ContentBlockParam[] = typeof message.content === "string" ? [{ type: "text", text: message.content }] : [...message.content];
  const lastBlock = content.at(-1);
  if (!lastBlock || lastBlock.type === "thinking" || lastBlock.type === "redacted_thinking") return message;
  content[content.length - 1] = { ...lastBlock, cache_control: EPHEMERAL } as ContentBlockParam;
  return { ...message, content } as MessageParam;
}
