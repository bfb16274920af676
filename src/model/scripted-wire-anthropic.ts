import { createHash } from "node:crypto";
import type { ChatMessage, ToolCall } from "./messages.js";
import type { PromptBlock } from "./scripted-prompt-cache.js";
import { sendEvents, sendJson, sendTruncatedJson, WireRequestError, type ScriptedWire } from "./scripted-wire.js";

/** Most `cache_control` breakpoints one request may carry (docs.anthropic.com "Prompt caching": "up to 4 cache breakpoints"). */
export const MAX_CACHE_BREAKPOINTS = 4;

/**
 * The signature the scripted model gives a thinking block: derived from its
 * text, so a block sent back changed (or with another block's signature)
 * fails the check the real API makes.
 */
export function scriptedThinkingSignature(thinking: string): string {
  return createHash("sha256").update("scripted-thinking\u0000").update(thinking).digest("base64");
}

/** The `error.type` Anthropic sends with each status (docs.anthropic.com "Errors", "HTTP errors"). */
const ERROR_TYPES: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  500: "api_error",
  529: "overloaded_error",
};

interface AnthropicBlock {
  type?: unknown;
  text?: unknown;
  id?: unknown;
  name?: unknown;
  input?: unknown;
  tool_use_id?: unknown;
  content?: unknown;
  thinking?: unknown;
  signature?: unknown;
  data?: unknown;
  cache_control?: unknown;
}

interface AnthropicBody {
  model?: unknown;
  max_tokens?: unknown;
  system?: unknown;
  messages?: unknown;
  tools?: unknown;
  stream?: unknown;
}

/**
 * Anthropic's Messages API (`POST /v1/messages`) on the scripted model, in
 * the shapes of docs.anthropic.com "Messages" and "Streaming Messages" (the
 * event sequence `message_start`, `ping`, per content block
 * `content_block_start` / `content_block_delta`… / `content_block_stop`,
 * `message_delta` with `stop_reason` and usage, `message_stop`). It checks
 * what the real API refuses with 400 and a test should notice: no
 * `max_tokens`; `tool_use` / `tool_result` blocks without `tools`; more than {@link MAX_CACHE_BREAKPOINTS} `cache_control`
 * breakpoints; a `tool_use` not answered by a `tool_result` at the start of
 * the next (user) message; a thinking block whose signature does not match
 * its text. Cache usage comes in Anthropic's split (`input_tokens` uncached,
 * `cache_read_input_tokens`, `cache_creation_input_tokens`), measured on the
 * request's own breakpoints.
 */
export const anthropicWire: ScriptedWire = {
  name: "anthropic",
  cacheMode: "breakpoints",
  route: (path) => /\/v1\/messages$/.test(path),
  readRequest(raw) {
    const body = raw as AnthropicBody;
    if (typeof body !== "object" || body === null || !Array.isArray(body.messages)) throw new WireRequestError("messages: Field required");
    if (typeof body.max_tokens !== "number") throw new WireRequestError("max_tokens: Field required");
    const blocks: PromptBlock[] = [];
    let breakpoints = 0;
    const add = (where: string, block: unknown) => {
      const { cache_control: cacheControl, ...rest } = block as AnthropicBlock;
      // The breakpoint itself is not part of the prefix: moving it does not change what is cached.
      if (cacheControl !== undefined) breakpoints += 1;
      blocks.push({ text: JSON.stringify([where, rest]), ...(cacheControl === undefined ? {} : { breakpoint: true }) });
    };
    for (const tool of Array.isArray(body.tools) ? body.tools : []) add("tool", tool);
    const system = typeof body.system === "string" ? [{ type: "text", text: body.system }] : Array.isArray(body.system) ? (body.system as unknown[]) : [];
    for (const block of system) add("system", block);
    const messages: ChatMessage[] = system.length
      ? [{ role: "system", content: system.map((block) => String((block as AnthropicBlock).text ?? "")).join("\n") }]
      : [];
    let pendingToolUses: string[] = [];
    for (const [index, entry] of (body.messages as { role?: unknown; content?: unknown }[]).entries()) {
      const content: AnthropicBlock[] =
        typeof entry.content === "string" ? [{ type: "text", text: entry.content }] : Array.isArray(entry.content) ? entry.content : [];
      for (const block of content) add(String(entry.role), block);
      if (pendingToolUses.length) {
        const answered = content.filter((block) => block.type === "tool_result").map((block) => String(block.tool_use_id));
        const leading = content.findIndex((block) => block.type !== "tool_result");
        const missing = pendingToolUses.filter((id) => !answered.includes(id));
        if (entry.role !== "user" || missing.length) {
          throw new WireRequestError(
            `messages.${index}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${missing.join(", ")}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`,
          );
        }
        if (leading !== -1 && content.slice(leading).some((block) => block.type === "tool_result")) {
          throw new WireRequestError(`messages.${index}: tool_result blocks must come first in the user message's content, before any text`);
        }
      }
      pendingToolUses = [];
      if (entry.role === "assistant") {
        const toolCalls: ToolCall[] = [];
        const text: string[] = [];
        const reasoning: unknown[] = [];
        for (const [blockIndex, block] of content.entries()) {
          if (block.type === "text") text.push(String(block.text));
          else if (block.type === "tool_use") {
            toolCalls.push({ id: String(block.id), type: "function", function: { name: String(block.name), arguments: JSON.stringify(block.input ?? {}) } });
            pendingToolUses.push(String(block.id));
          } else if (block.type === "thinking" || block.type === "redacted_thinking") {
            if (block.type === "thinking" && block.signature !== scriptedThinkingSignature(String(block.thinking))) {
              throw new WireRequestError(`messages.${index}.content.${blockIndex}: Invalid \`signature\` in \`thinking\` block`);
            }
            reasoning.push(block);
          }
        }
        messages.push({
          role: "assistant",
          content: text.length ? text.join("") : null,
          ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
          ...(reasoning.length ? { reasoning: { provider: "anthropic" as const, items: reasoning } } : {}),
        });
      } else {
        const text: string[] = [];
        for (const block of content) {
          if (block.type === "tool_result") messages.push({ role: "tool", tool_call_id: String(block.tool_use_id), content: resultText(block.content) });
          else if (block.type === "text") text.push(String(block.text));
        }
        if (text.length) messages.push({ role: "user", content: text.join("\n") });
      }
    }
    const toolBlocks = (body.messages as { content?: unknown }[]).some(
      (entry) => Array.isArray(entry.content) && (entry.content as AnthropicBlock[]).some((block) => block.type === "tool_use" || block.type === "tool_result"),
    );
    if (toolBlocks && !(Array.isArray(body.tools) && body.tools.length)) {
      throw new WireRequestError("Requests which include `tool_use` or `tool_result` blocks must define tools.");
    }
    if (breakpoints > MAX_CACHE_BREAKPOINTS) {
      throw new WireRequestError(`A maximum of ${MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. Found ${breakpoints}.`);
    }
    return { model: typeof body.model === "string" ? body.model : "", messages, blocks, stream: body.stream === true };
  },
  async sendAnswer(response, answer, request, usage, { truncate, stall }) {
    const continuing = request.messages.at(-1)?.role === "assistant";
    // pause_turn: the first request gets the text only; the client sends the turn back and the continuation gets the rest.
    const paused = answer.stop === "pause_turn" && !continuing;
    const content: Record<string, unknown>[] = [];
    if (answer.thinking !== undefined && !(answer.stop === "pause_turn" && continuing)) {
      content.push({ type: "thinking", thinking: answer.thinking, signature: scriptedThinkingSignature(answer.thinking) });
    }
    if (answer.content !== null && !(answer.stop === "pause_turn" && continuing)) content.push({ type: "text", text: answer.content });
    if (!paused) for (const call of answer.toolCalls) content.push({ type: "tool_use", id: call.id, name: call.name, input: call.arguments });
    const stopReason = paused
      ? "pause_turn"
      : answer.stop === "max_tokens" || answer.stop === "refusal"
        ? answer.stop
        : answer.toolCalls.length
          ? "tool_use"
          : "end_turn";
    const usageBody = {
      input_tokens: usage.prompt_tokens - usage.cached_tokens - usage.cache_write_tokens,
      cache_creation_input_tokens: usage.cache_write_tokens,
      cache_read_input_tokens: usage.cached_tokens,
      output_tokens: usage.completion_tokens,
    };
    const message = { id: `msg_scripted_${answer.id}`, type: "message", role: "assistant", model: request.model || "scripted" };
    if (!request.stream) {
      const body = {
        ...message,
        content: content.map((block) => (block.type === "tool_use" ? { ...block, input: parsedInput(String(block.input)) } : block)),
        stop_reason: stopReason,
        stop_sequence: null,
        usage: usageBody,
      };
      if (truncate) sendTruncatedJson(response, body);
      else sendJson(response, 200, body);
      return;
    }
    const events: [string, unknown][] = [
      [
        "message_start",
        { type: "message_start", message: { ...message, content: [], stop_reason: null, stop_sequence: null, usage: { ...usageBody, output_tokens: 1 } } },
      ],
      ["ping", { type: "ping" }],
    ];
    for (const [index, block] of content.entries()) {
      const delta = (payload: Record<string, unknown>) => events.push(["content_block_delta", { type: "content_block_delta", index, delta: payload }]);
      if (block.type === "thinking") {
        events.push(["content_block_start", { type: "content_block_start", index, content_block: { type: "thinking", thinking: "", signature: "" } }]);
        for (const piece of pieces(String(block.thinking))) delta({ type: "thinking_delta", thinking: piece });
        delta({ type: "signature_delta", signature: block.signature });
      } else if (block.type === "text") {
        events.push(["content_block_start", { type: "content_block_start", index, content_block: { type: "text", text: "" } }]);
        for (const piece of pieces(String(block.text))) delta({ type: "text_delta", text: piece });
      } else {
        events.push([
          "content_block_start",
          { type: "content_block_start", index, content_block: { type: "tool_use", id: block.id, name: block.name, input: {} } },
        ]);
        for (const piece of pieces(String(block.input))) delta({ type: "input_json_delta", partial_json: piece });
      }
      events.push(["content_block_stop", { type: "content_block_stop", index }]);
    }
    events.push(["message_delta", { type: "message_delta", delta: { stop_reason: stopReason, stop_sequence: null }, usage: usageBody }]);
    events.push(["message_stop", { type: "message_stop" }]);
    await sendEvents(
      response,
      events.map(([event, data]) => ({ event, data })),
      { truncate, ...(stall ? { stall } : {}) },
    );
  },
  sendError(response, status, error, headers = {}) {
    const type = error.code ?? ERROR_TYPES[status] ?? (status >= 500 ? "api_error" : error.type);
    sendJson(response, status, { type: "error", error: { type, message: error.message } }, headers);
  },
};

/** A tool_result's content as text: a string, or its text blocks joined. */
function resultText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return (content as AnthropicBlock[]).flatMap((block) => (block.type === "text" ? [String(block.text)] : [])).join("\n");
}

/** A tool call's arguments as the `input` object of a whole (non-streamed) reply; text that is no JSON object becomes `{}`. */
function parsedInput(text: string): unknown {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value) ? value : {};
  } catch {
    return {};
  }
}

/** A text in three pieces (at least one, possibly empty), so clients must join deltas. */
function pieces(text: string): string[] {
  if (text.length < 3) return [text];
  const third = Math.ceil(text.length / 3);
  return [text.slice(0, third), text.slice(third, 2 * third), text.slice(2 * third)];
}
