import type { ChatMessage, Usage } from "./messages.js";
import { sendEvents, sendJson, sendTruncatedJson, WireRequestError, type ChatQuirks, type ScriptedWire } from "./scripted-wire.js";

interface ChatBody {
  model?: unknown;
  messages?: unknown;
  tools?: unknown[];
  stream?: unknown;
  stream_options?: { include_usage?: unknown } | null;
}

/** Characters of content (and of tool-call arguments) per streamed delta: small, so even short answers stream in several pieces. */
const STREAM_PIECE_CHARACTERS = 8;

/**
 * OpenAI chat completions (`POST /v1/chat/completions`) on the scripted model:
 * replies in the `chat.completion` shape of the API reference
 * (platform.openai.com/docs/api-reference/chat/object), or, when the request
 * has `stream: true`, as server-sent `chat.completion.chunk` events
 * (platform.openai.com/docs/api-reference/chat-streaming): a role chunk,
 * reasoning and content pieces, each tool call's index/id/name then its
 * argument pieces, a chunk with the finish reason, with
 * `stream_options.include_usage` a last chunk with no choices and the usage,
 * then `data: [DONE]`. Cached tokens go in
 * `usage.prompt_tokens_details.cached_tokens` (automatic prefix caching).
 * The script's `quirks` make it depart from that as some compatible servers do.
 */
export const openAIChatWire: ScriptedWire = {
  name: "openai-chat",
  cacheMode: "automatic",
  route: (path) => /\/chat\/completions$/.test(path),
  readRequest(raw) {
    const body = raw as ChatBody;
    if (typeof body !== "object" || body === null || !Array.isArray(body.messages)) throw new WireRequestError("messages: expected an array");
    const messages = body.messages as ChatMessage[];
    return {
      model: typeof body.model === "string" ? body.model : "",
      messages,
      // Tools come first in the prompt a provider caches, then each message.
      blocks: [{ text: JSON.stringify(body.tools ?? []) }, ...messages.map((message) => ({ text: JSON.stringify(message) }))],
      stream: body.stream === true,
      streamUsage: body.stream_options?.include_usage === true,
    };
  },
  async sendAnswer(response, answer, request, usage, { truncate, stall, quirks }) {
    const id = `chatcmpl-scripted-${answer.id}`;
    const finishReason = answer.finishReason ?? (answer.toolCalls.length ? "tool_calls" : "stop");
    if (request.stream) {
      const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => ({
        data: { id, object: "chat.completion.chunk", created: 0, model: "scripted", choices, ...extra },
      });
      const delta = (fields: Record<string, unknown>, finish: string | null = null) =>
        chunk([{ index: 0, delta: fields, logprobs: null, finish_reason: finish }]);
      const events = [delta({ role: "assistant", content: "" })];
      for (const piece of pieces(answer.reasoning ?? "")) events.push(delta({ reasoning_content: piece }));
      for (const piece of pieces(answer.content ?? "")) events.push(delta({ content: piece }));
      answer.toolCalls.forEach((call, index) => {
        const head = { index, ...(quirks.omit_tool_call_ids ? {} : { id: call.id }), type: "function" };
        if (quirks.arguments_as_object) {
          // Servers that send arguments as an object send the whole call in one delta.
          events.push(delta({ tool_calls: [{ ...head, function: { name: call.name, arguments: argumentsValue(call.arguments, quirks) } }] }));
          return;
        }
        events.push(delta({ tool_calls: [{ ...head, function: { name: call.name, arguments: "" } }] }));
        for (const piece of pieces(call.arguments)) events.push(delta({ tool_calls: [{ index, function: { arguments: piece } }] }));
      });
      events.push(delta({}, finishReason));
      if (request.streamUsage && !quirks.omit_stream_usage) events.push(chunk([], { usage: usageBody(usage) }));
      await sendEvents(response, events, { truncate, ...(stall ? { stall } : {}), done: true });
      return;
    }
    const toolCalls = answer.toolCalls.map((call) => ({
      ...(quirks.omit_tool_call_ids ? {} : { id: call.id }),
      type: "function" as const,
      function: { name: call.name, arguments: argumentsValue(call.arguments, quirks) },
    }));
    const body = {
      id,
      object: "chat.completion",
      created: 0,
      model: "scripted",
      choices: [
        {
          index: 0,
          message: {
            role: "assistant",
            content: answer.content,
            ...(answer.reasoning === undefined ? {} : { reasoning_content: answer.reasoning }),
            ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
          },
          finish_reason: finishReason,
        },
      ],
      usage: usageBody(usage),
    };
    if (truncate) sendTruncatedJson(response, body);
    else if (stall) {
      response.writeHead(200, { "content-type": "application/json" });
      response.flushHeaders();
      await stall();
      if (!response.destroyed && !response.writableEnded) response.end(JSON.stringify(body));
    } else sendJson(response, 200, body);
  },
  sendError(response, status, error, headers = {}) {
    sendJson(response, status, { error }, headers);
  },
};

function usageBody(usage: Usage) {
  return {
    prompt_tokens: usage.prompt_tokens,
    completion_tokens: usage.completion_tokens,
    total_tokens: usage.prompt_tokens + usage.completion_tokens,
    prompt_tokens_details: { cached_tokens: usage.cached_tokens },
  };
}

/** The arguments as sent: their text, or with `arguments_as_object` the object it parses to (the text when it does not parse). */
function argumentsValue(text: string, quirks: ChatQuirks): unknown {
  if (!quirks.arguments_as_object) return text;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}

/** `text` in pieces of {@link STREAM_PIECE_CHARACTERS} (none for the empty string). */
function pieces(text: string): string[] {
  const result: string[] = [];
  for (let start = 0; start < text.length; start += STREAM_PIECE_CHARACTERS) result.push(text.slice(start, start + STREAM_PIECE_CHARACTERS));
  return result;
}
