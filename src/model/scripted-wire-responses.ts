import { createHmac, timingSafeEqual } from "node:crypto";
import type { ChatMessage, ToolCall, Usage } from "./messages.js";
import { sendEvents, sendJson, sendTruncatedJson, WireRequestError, type ScriptedAnswer, type ScriptedWire, type WireRequest } from "./scripted-wire.js";

interface ResponsesBody {
  model?: unknown;
  instructions?: unknown;
  input?: unknown;
  tools?: unknown[];
  stream?: unknown;
}

type InputItem = Record<string, unknown>;
type AssistantMessage = Extract<ChatMessage, { role: "assistant" }>;

/** What {@link openAIResponsesWire} reads: the engine hands this same object back to `sendAnswer`, which echoes `instructions` as the API does. */
interface ResponsesWireRequest extends WireRequest {
  instructions: string | null;
}

/**
 * Key of the scripted model's "encrypted" reasoning: not a secret (the
 * content is an HMAC-signed list of the answer's call ids, readable by
 * anyone), only so an altered item is told apart. Fixed, not per server, so a
 * resumed run's journaled reasoning still verifies on a new server.
 */
const REASONING_KEY = "agent-runner scripted model reasoning";

/** What a scripted reasoning item vouches for: its own id and the function calls of the same output. */
interface ReasoningPayload {
  id: string;
  calls: string[];
}

/** `base64url(JSON payload).base64url(HMAC-SHA256)`: the scripted stand-in for `encrypted_content`. */
function sealReasoning(payload: ReasoningPayload): string {
  const body = Buffer.from(JSON.stringify(payload), "utf8").toString("base64url");
  return `${body}.${createHmac("sha256", REASONING_KEY).update(body).digest("base64url")}`;
}

/** The payload of a sealed `encrypted_content`, or null when it was altered or is not one. */
function openReasoning(sealed: unknown): ReasoningPayload | null {
  if (typeof sealed !== "string") return null;
  const [body, signature, ...rest] = sealed.split(".");
  if (body === undefined || signature === undefined || rest.length) return null;
  const expected = Buffer.from(createHmac("sha256", REASONING_KEY).update(body).digest("base64url"));
  const given = Buffer.from(signature);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null;
  try {
    const payload = JSON.parse(Buffer.from(body, "base64url").toString("utf8")) as ReasoningPayload;
    return typeof payload.id === "string" && Array.isArray(payload.calls) ? payload : null;
  } catch {
    return null;
  }
}

/** Text of a message item's `content`: a string, or the `text` of its input_text / output_text parts. */
function messageText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) throw new WireRequestError("message content: expected a string or an array of parts");
  return content.map((part) => (typeof part === "object" && part !== null && typeof part.text === "string" ? part.text : "")).join("");
}

/**
 * Reads `input` back into our conversation and checks it the way the API
 * does under `store: false`: every `function_call` must come after the
 * reasoning item of the output that made it, unchanged (the real API answers
 * 400 otherwise). Throws {@link WireRequestError} naming the item.
 */
function readInput(instructions: unknown, input: unknown): ChatMessage[] {
  const messages: ChatMessage[] = typeof instructions === "string" ? [{ role: "system", content: instructions }] : [];
  if (typeof input === "string") return [...messages, { role: "user", content: input }];
  if (!Array.isArray(input)) throw new WireRequestError("input: expected a string or an array of items");
  let assistant: AssistantMessage | null = null;
  /** Call ids the latest reasoning item vouches for; reset by anything that starts a new output. */
  let vouched = new Set<string>();
  const startAssistant = (): AssistantMessage => {
    const message: AssistantMessage = { role: "assistant", content: null };
    messages.push(message);
    return message;
  };
  for (const [index, raw] of input.entries()) {
    if (typeof raw !== "object" || raw === null) throw new WireRequestError(`input[${index}]: expected an object`);
    const item = raw as InputItem;
    const type = item.type ?? "message";
    if (type === "reasoning") {
      const payload = openReasoning(item.encrypted_content);
      if (payload === null || payload.id !== item.id) {
        throw new WireRequestError(
          `input[${index}]: the encrypted content of reasoning item ${JSON.stringify(item.id)} could not be verified (altered or not ours)`,
        );
      }
      if (assistant === null || assistant.content !== null || assistant.tool_calls) assistant = startAssistant();
      assistant.reasoning = { provider: "openai-responses", items: [...(assistant.reasoning?.items ?? []), item] };
      vouched = new Set(payload.calls);
    } else if (type === "message" && item.role === "assistant") {
      if (assistant === null || assistant.tool_calls) assistant = startAssistant();
      assistant.content = (assistant.content ?? "") + messageText(item.content);
    } else if (type === "message") {
      const content = messageText(item.content);
      if (item.role === "user") messages.push({ role: "user", content });
      else if (item.role === "developer" || item.role === "system") messages.push({ role: "system", content });
      else throw new WireRequestError(`input[${index}].role: expected user, assistant, developer or system`);
      assistant = null;
      vouched = new Set();
    } else if (type === "function_call") {
      const callId = String(item.call_id);
      if (!vouched.has(callId)) {
        throw new WireRequestError(
          `input[${index}]: function_call ${JSON.stringify(callId)} was provided without its required reasoning item (the one that preceded it in the output that made the call)`,
        );
      }
      assistant ??= startAssistant();
      const call: ToolCall = { id: callId, type: "function", function: { name: String(item.name), arguments: String(item.arguments ?? "") } };
      assistant.tool_calls = [...(assistant.tool_calls ?? []), call];
    } else if (type === "function_call_output") {
      messages.push({ role: "tool", tool_call_id: String(item.call_id), content: typeof item.output === "string" ? item.output : messageText(item.output) });
      assistant = null;
      vouched = new Set();
    } else {
      throw new WireRequestError(`input[${index}].type: the scripted model does not read ${JSON.stringify(type)} items`);
    }
  }
  return messages;
}

/** The output items of an answer: a reasoning item (always, with `encrypted_content`), the message, the function calls. */
function outputItems(answer: ScriptedAnswer): Record<string, unknown>[] {
  const reasoningId = `rs_scripted_${answer.id}`;
  const items: Record<string, unknown>[] = [
    { id: reasoningId, type: "reasoning", summary: [], encrypted_content: sealReasoning({ id: reasoningId, calls: answer.toolCalls.map((call) => call.id) }) },
  ];
  if (answer.content !== null) {
    items.push({
      id: `msg_scripted_${answer.id}`,
      type: "message",
      status: "completed",
      role: "assistant",
      content: [{ type: "output_text", text: answer.content, annotations: [], logprobs: [] }],
    });
  }
  for (const [index, call] of answer.toolCalls.entries()) {
    items.push({
      id: `fc_scripted_${answer.id}_${index}`,
      type: "function_call",
      status: "completed",
      call_id: call.id,
      name: call.name,
      arguments: call.arguments,
    });
  }
  return items;
}

/** A `response` object as the API reference gives it (platform.openai.com/docs/api-reference/responses/object). */
function responseObject(answer: ScriptedAnswer, instructions: string | null, status: "in_progress" | "completed", output: unknown[], usage: Usage | null) {
  return {
    id: `resp_scripted_${answer.id}`,
    object: "response",
    created_at: 0,
    status,
    background: false,
    error: null,
    incomplete_details: null,
    instructions,
    max_output_tokens: null,
    model: "scripted",
    output,
    parallel_tool_calls: true,
    previous_response_id: null,
    reasoning: { effort: "medium", summary: null },
    store: false,
    temperature: 1,
    text: { format: { type: "text" } },
    tool_choice: "auto",
    tools: [],
    top_p: 1,
    truncation: "disabled",
    usage:
      usage === null
        ? null
        : {
            input_tokens: usage.prompt_tokens,
            input_tokens_details: { cached_tokens: usage.cached_tokens },
            output_tokens: usage.completion_tokens,
            output_tokens_details: { reasoning_tokens: 0 },
            total_tokens: usage.prompt_tokens + usage.completion_tokens,
          },
    user: null,
    metadata: {},
  };
}

/** Text cut into word-sized deltas, as a model streams it. */
function deltas(text: string): string[] {
  return text.match(/\s*\S+\s*/g) ?? (text ? [text] : []);
}

/**
 * The event sequence of a streamed response (API reference, "Streaming
 * events"): `response.created`, `response.in_progress`; per output item
 * `response.output_item.added`, for a message `response.content_part.added`,
 * `response.output_text.delta`..., `response.output_text.done`,
 * `response.content_part.done`, for a function call
 * `response.function_call_arguments.delta`..., `.done`; then
 * `response.output_item.done`; last `response.completed`. Every event has its
 * `sequence_number`; there is no `[DONE]`.
 */
function streamEvents(answer: ScriptedAnswer, instructions: string | null, usage: Usage): Record<string, unknown>[] {
  const events: Record<string, unknown>[] = [];
  const add = (type: string, fields: Record<string, unknown>) => events.push({ type, sequence_number: events.length, ...fields });
  add("response.created", { response: responseObject(answer, instructions, "in_progress", [], null) });
  add("response.in_progress", { response: responseObject(answer, instructions, "in_progress", [], null) });
  const output = outputItems(answer);
  for (const [outputIndex, item] of output.entries()) {
    const itemId = item.id;
    if (item.type === "message") {
      const part = (item.content as { text: string }[])[0]!;
      add("response.output_item.added", { output_index: outputIndex, item: { ...item, status: "in_progress", content: [] } });
      add("response.content_part.added", { item_id: itemId, output_index: outputIndex, content_index: 0, part: { ...part, text: "" } });
      for (const delta of deltas(part.text))
        add("response.output_text.delta", { item_id: itemId, output_index: outputIndex, content_index: 0, delta, logprobs: [] });
      add("response.output_text.done", { item_id: itemId, output_index: outputIndex, content_index: 0, text: part.text, logprobs: [] });
      add("response.content_part.done", { item_id: itemId, output_index: outputIndex, content_index: 0, part });
    } else if (item.type === "function_call") {
      add("response.output_item.added", { output_index: outputIndex, item: { ...item, status: "in_progress", arguments: "" } });
      const text = String(item.arguments);
      for (let at = 0; at < text.length; at += 16) {
        add("response.function_call_arguments.delta", { item_id: itemId, output_index: outputIndex, delta: text.slice(at, at + 16) });
      }
      add("response.function_call_arguments.done", { item_id: itemId, output_index: outputIndex, name: item.name, arguments: text });
    } else {
      add("response.output_item.added", { output_index: outputIndex, item: { id: itemId, type: "reasoning", summary: [] } });
    }
    add("response.output_item.done", { output_index: outputIndex, item });
  }
  add("response.completed", { response: responseObject(answer, instructions, "completed", output, usage) });
  return events;
}

/**
 * OpenAI Responses (`POST /v1/responses`) on the scripted model: answers in
 * the `response` object shape, or streamed as the API's server-sent events
 * ({@link streamEvents}); cached tokens in
 * `usage.input_tokens_details.cached_tokens` (automatic prefix caching over
 * tools, instructions and the input items). Every answer carries a reasoning
 * item with `encrypted_content`, and a later request whose function calls
 * come without it (or with it altered) is refused with 400, as the real API
 * does under `store: false`; so a client that drops reasoning fails here.
 */
export const openAIResponsesWire: ScriptedWire = {
  name: "openai-responses",
  cacheMode: "automatic",
  route: (path) => /\/responses$/.test(path),
  readRequest(raw): ResponsesWireRequest {
    if (typeof raw !== "object" || raw === null) throw new WireRequestError("expected a JSON object");
    const body = raw as ResponsesBody;
    const messages = readInput(body.instructions, body.input);
    const items = typeof body.input === "string" ? [body.input] : (body.input as unknown[]);
    return {
      model: typeof body.model === "string" ? body.model : "",
      messages,
      instructions: typeof body.instructions === "string" ? body.instructions : null,
      // Tools, then the instructions, then each input item: the order the prompt is cached in.
      blocks: [
        { text: JSON.stringify(body.tools ?? []) },
        ...(typeof body.instructions === "string" ? [{ text: body.instructions }] : []),
        ...items.map((item) => ({ text: JSON.stringify(item) })),
      ],
      stream: body.stream === true,
    };
  },
  async sendAnswer(response, answer, request, usage, { truncate, stall }) {
    const { instructions } = request as ResponsesWireRequest;
    if (!request.stream) {
      const body = responseObject(answer, instructions, "completed", outputItems(answer), usage);
      if (truncate) sendTruncatedJson(response, body);
      else sendJson(response, 200, body);
      return;
    }
    const events = streamEvents(answer, instructions, usage).map((event) => ({ event: String(event.type), data: event }));
    await sendEvents(response, events, { truncate, ...(stall ? { stall } : {}) });
  },
  sendError(response, status, error, headers = {}) {
    sendJson(response, status, { error: { message: error.message, type: error.type, param: null, code: error.code } }, headers);
  },
};
