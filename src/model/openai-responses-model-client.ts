import OpenAI from "openai";
import type { FunctionTool, Response, ResponseCreateParamsBase, ResponseErrorEvent, ResponseInputItem } from "openai/resources/responses/responses";
import { sizeCappedFetch, errorBodyKeepingFetch } from "./reply-size.js";
import { CancelledError } from "../errors.js";
import type { ChatMessage, ProviderReasoning, ToolCall, ToolDefinition } from "./messages.js";
import type { FinishReason, ModelClient, ModelRequest, ModelResponse } from "./model-client.js";
import { classifyOpenAIFailure } from "./openai-model-client.js";
import { runnerHeaders } from "./request-headers.js";
import { AttemptSignal, completeWithRetries, DEFAULT_TIMEOUT_MS, type AttemptFailure, type AttemptOutcome, type RetryOptions } from "./retry.js";

export interface OpenAIResponsesModelClientOptions extends RetryOptions {
  baseURL?: string;
  apiKey: string;
  model: string;
  temperature?: number;
  /**
   * Stream the reply (server-sent events; default true). Then
   * {@link RetryOptions.timeoutMs} is the longest silence between two events,
   * and `onText` sees the text as it arrives.
   */
  stream?: boolean;
}

/**
 * {@link ModelClient} over the `openai` package's Responses API
 * (`POST /v1/responses`, platform.openai.com/docs/api-reference/responses).
 *
 * Every request is stateless: `store: false`, the whole conversation in
 * `input`, and `include: ["reasoning.encrypted_content"]`, so a reasoning
 * model's `reasoning` items come back encrypted; they are returned as
 * {@link ModelResponse.reasoning} and sent back unchanged, ahead of that
 * turn's message and function calls, on every later request (the API refuses
 * a function call whose reasoning item is missing).
 *
 * The leading system message becomes `instructions` (the API's own slot for
 * it, first in the prompt, so it heads the cached prefix); a later system
 * message stays where it is as a `developer` message (the Responses name of
 * that role).
 */
export class OpenAIResponsesModelClient implements ModelClient {
  private readonly client: OpenAI;
  private readonly timeoutMs: number;
  private readonly stream: boolean;

  constructor(private readonly options: OpenAIResponsesModelClientOptions) {
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.stream = options.stream ?? true;
    this.client = new OpenAI({
      apiKey: options.apiKey,
      baseURL: options.baseURL,
      maxRetries: 0,
      timeout: this.timeoutMs,
      fetch: errorBodyKeepingFetch(sizeCappedFetch(options.maxReplyBytes)),
    });
  }

  /** The endpoint named in error messages. */
  get endpoint(): string {
    return this.client.baseURL;
  }

  complete(request: ModelRequest): Promise<ModelResponse> {
    return completeWithRetries(request, this.endpoint, this.options, (attempt, bounded) => this.attempt(bounded, attempt));
  }

  /** One HTTP request; resolves with the parsed response or with why it failed (CancelledError when the caller aborted). */
  private async attempt(request: ModelRequest, attempt: number): Promise<AttemptOutcome> {
    const watchdog = new AttemptSignal(request.signal, this.timeoutMs);
    const body = requestBody(request, this.options);
    const options = { signal: watchdog.signal, headers: runnerHeaders(request, attempt) };
    try {
      if (!this.stream) return parseResponse(await this.client.responses.create({ ...body, stream: false }, options));
      const events = await this.client.responses.create({ ...body, stream: true }, options);
      let final: Response | undefined;
      for await (const event of events) {
        watchdog.touch();
        if (event.type === "response.output_text.delta") request.onText?.(event.delta, attempt);
        else if (event.type === "response.completed" || event.type === "response.incomplete") final = event.response;
        else if (event.type === "response.failed") return parseResponse(event.response);
        else if (event.type === "error") return { failure: streamError(event) };
      }
      // The SDK ends the iteration quietly when the signal aborts.
      if (request.signal?.aborted) throw new CancelledError();
      if (watchdog.timedOut) return { failure: idleTimeout(this.timeoutMs, undefined) };
      if (final === undefined) {
        return { failure: { reason: "truncated_response", retryable: true, detail: "stream ended before response.completed", cause: undefined } };
      }
      return parseResponse(final);
    } catch (error) {
      if (request.signal?.aborted) throw new CancelledError();
      if (this.stream && watchdog.timedOut) return { failure: idleTimeout(this.timeoutMs, error) };
      return { failure: classifyOpenAIFailure(error, watchdog.timedOut, this.timeoutMs) };
    } finally {
      watchdog.dispose();
    }
  }
}

function idleTimeout(timeoutMs: number, cause: unknown): AttemptFailure {
  return { reason: "idle_timeout", retryable: true, detail: `sent nothing for ${timeoutMs} ms`, cause };
}

/** The request body of a turn (everything but `stream`). */
function requestBody(request: ModelRequest, options: OpenAIResponsesModelClientOptions): ResponseCreateParamsBase {
  const { instructions, input } = toInput(request.messages);
  return {
    model: options.model,
    ...(instructions === undefined ? {} : { instructions }),
    input,
    ...(request.tools.length ? { tools: request.tools.map(toFunctionTool), tool_choice: "auto" as const } : {}),
    store: false,
    include: ["reasoning.encrypted_content"],
    ...(options.temperature === undefined ? {} : { temperature: options.temperature }),
  };
}

/** A tool as a Responses function tool; `strict: false` because our schemas are not written for strict mode (every property required, no extra keys). */
function toFunctionTool(tool: ToolDefinition): FunctionTool {
  return { type: "function", name: tool.function.name, description: tool.function.description, parameters: tool.function.parameters, strict: false };
}

/**
 * Our conversation as Responses input items: leading system messages →
 * `instructions`; user → `message`; assistant → its reasoning items
 * (openai-responses only; another provider's are dropped), an output
 * `message` with its text, a `function_call` per tool call; tool → `function_call_output`.
 * Items carry no `id` but the reasoning items (sent as received): with
 * `store: false` nothing is kept server-side that an id could point to.
 */
function toInput(messages: readonly ChatMessage[]): { instructions?: string; input: ResponseInputItem[] } {
  let start = 0;
  const system: string[] = [];
  while (start < messages.length && messages[start]!.role === "system") system.push(messages[start++]!.content as string);
  const input: ResponseInputItem[] = [];
  for (const message of messages.slice(start)) {
    switch (message.role) {
      case "system":
        input.push({ type: "message", role: "developer", content: message.content });
        break;
      case "user":
        input.push({ type: "message", role: "user", content: message.content });
        break;
      case "assistant":
        if (message.reasoning?.provider === "openai-responses") input.push(...(message.reasoning.items as ResponseInputItem[]));
        if (message.content) {
          // The output message as the API reference has it, minus `id` and `annotations` (optional on input).
          input.push({
            type: "message",
            role: "assistant",
            status: "completed",
            content: [{ type: "output_text", text: message.content }],
          } as ResponseInputItem);
        }
        for (const call of message.tool_calls ?? []) {
          input.push({ type: "function_call", call_id: call.id, name: call.function.name, arguments: call.function.arguments });
        }
        break;
      case "tool":
        input.push({ type: "function_call_output", call_id: message.tool_call_id, output: message.content });
        break;
    }
  }
  return { ...(system.length ? { instructions: system.join("\n\n") } : {}), input };
}

/**
 * A Responses `response` object as our reply: text of the output messages,
 * function calls (id = `call_id`), reasoning items kept whole, usage
 * (`input_tokens` → prompt_tokens, `input_tokens_details.cached_tokens`,
 * `output_tokens`). Status `incomplete` maps to `length` (max_output_tokens)
 * or `refusal` (content_filter); a refusal part to `refusal`; `failed` to a
 * failure (retryable for `server_error` and `rate_limit_exceeded`). A body
 * that is not a response object is a retryable `invalid_response`.
 */
function parseResponse(body: unknown): AttemptOutcome {
  const response = body as Partial<Response> | null;
  if (typeof response !== "object" || response === null || !Array.isArray(response.output)) {
    const start = JSON.stringify(JSON.stringify(body)?.slice(0, 200) ?? String(body));
    return {
      failure: { reason: "invalid_response", retryable: true, detail: `replied with something other than a response object: ${start}`, cause: undefined },
    };
  }
  if (response.status === "failed") {
    const code = response.error?.code ?? null;
    return { failure: errorCodeFailure(code, `failed the response${code ? ` (${code})` : ""}: ${response.error?.message ?? "no message"}`) };
  }
  const text: string[] = [];
  const toolCalls: ToolCall[] = [];
  const reasoning: unknown[] = [];
  let refused = false;
  for (const item of response.output) {
    if (item.type === "reasoning") reasoning.push(item);
    else if (item.type === "function_call")
      toolCalls.push({ id: item.call_id, type: "function", function: { name: item.name, arguments: item.arguments ?? "" } });
    else if (item.type === "message") {
      for (const part of item.content) {
        if (part.type === "output_text") text.push(part.text);
        else if (part.type === "refusal") {
          refused = true;
          text.push(part.refusal);
        }
      }
    }
  }
  let finishReason: FinishReason = toolCalls.length ? "tool_calls" : "stop";
  if (refused) finishReason = "refusal";
  if (response.status === "incomplete") {
    const reason = response.incomplete_details?.reason;
    finishReason = reason === "max_output_tokens" ? "length" : reason === "content_filter" ? "refusal" : (reason ?? "incomplete");
  }
  const usage = response.usage;
  const providerReasoning: ProviderReasoning | undefined = reasoning.length ? { provider: "openai-responses", items: reasoning } : undefined;
  return {
    response: {
      content: text.length ? text.join("") : null,
      toolCalls,
      finishReason,
      usage: {
        prompt_tokens: usage?.input_tokens ?? 0,
        completion_tokens: usage?.output_tokens ?? 0,
        cached_tokens: usage?.input_tokens_details?.cached_tokens ?? 0,
        cache_write_tokens: usage?.input_tokens_details?.cache_write_tokens ?? 0,
      },
      ...(providerReasoning ? { reasoning: providerReasoning } : {}),
    },
  };
}

/** An `error` event in the stream (the reply is abandoned; retried unless its code says the request itself is wrong). */
function streamError(event: ResponseErrorEvent): AttemptFailure {
  return errorCodeFailure(event.code, `sent an error event${event.code ? ` (${event.code})` : ""}: ${event.message}`);
}

/**
 * A failure by the Responses error code (`ResponseError.code` of the API
 * reference): `server_error` (and no code at all), `rate_limit_exceeded`
 * and `vector_store_timeout` are transient; the others (`invalid_prompt`, the
 * image errors, ...) are the request's own fault and not retried.
 */
function errorCodeFailure(code: string | null, detail: string): AttemptFailure {
  if (code === null || code === "server_error") return { reason: "server_error", retryable: true, detail, cause: undefined };
  if (code === "rate_limit_exceeded") return { reason: "rate_limited", retryable: true, detail, cause: undefined };
  if (code === "vector_store_timeout") return { reason: "timeout", retryable: true, detail, cause: undefined };
  return { reason: "bad_request", retryable: false, detail, cause: undefined };
}
