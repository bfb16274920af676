import type { ChatMessage } from "./messages.js";
import { sendJson, sendTruncatedJson, WireRequestError, type ScriptedWire } from "./scripted-wire.js";

interface ChatBody {
  model?: unknown;
  messages?: unknown;
  tools?: unknown[];
  stream?: unknown;
}

/**
 * OpenAI chat completions (`POST /v1/chat/completions`) on the scripted model:
 * replies in the `chat.completion` shape of the API reference
 * (platform.openai.com/docs/api-reference/chat/object), cached tokens in
 * `usage.prompt_tokens_details.cached_tokens` (automatic prefix caching).
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
    };
  },
  sendAnswer(response, answer, _request, usage, { truncate }) {
    const toolCalls = answer.toolCalls.map((call) => ({ id: call.id, type: "function" as const, function: { name: call.name, arguments: call.arguments } }));
    const body = {
      id: `chatcmpl-scripted-${answer.id}`,
      object: "chat.completion",
      created: 0,
      model: "scripted",
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: answer.content, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) },
          finish_reason: toolCalls.length ? "tool_calls" : "stop",
        },
      ],
      usage: {
        prompt_tokens: usage.prompt_tokens,
        completion_tokens: usage.completion_tokens,
        total_tokens: usage.prompt_tokens + usage.completion_tokens,
        prompt_tokens_details: { cached_tokens: usage.cached_tokens },
      },
    };
    if (truncate) sendTruncatedJson(response, body);
    else sendJson(response, 200, body);
  },
  sendError(response, status, error, headers = {}) {
    sendJson(response, status, { error }, headers);
  },
};
