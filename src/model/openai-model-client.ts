import OpenAI from "openai";
import { CancelledError } from "../errors.js";
import type { ChatMessage, ToolCall } from "./messages.js";
import type { ModelClient, ModelRequest, ModelResponse } from "./model-client.js";
import { runnerHeaders } from "./request-headers.js";
import {
  AttemptSignal,
  causeChain,
  completeWithRetries,
  DEFAULT_TIMEOUT_MS,
  retryableStatus,
  retryAfterMs,
  statusReason,
  type AttemptFailure,
  type AttemptOutcome,
  type RetryOptions,
} from "./retry.js";

export interface OpenAIModelClientOptions extends RetryOptions {
  baseURL?: string;
  apiKey: string;
  model: string;
  temperature?: number;
  /** Sent as `max_completion_tokens` (the chat API's current name for the reply's token limit) when set; the server's default otherwise. */
  maxOutputTokens?: number;
}

/** {@link ModelClient} over the official `openai` package, for any OpenAI-compatible endpoint. */
export class OpenAIModelClient implements ModelClient {
  private readonly client: OpenAI;
  private readonly timeoutMs: number;

  constructor(private readonly options: OpenAIModelClientOptions) {
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.client = new OpenAI({
      apiKey: options.apiKey,
      baseURL: options.baseURL,
      maxRetries: 0,
      timeout: this.timeoutMs,
    });
  }

  /** The endpoint named in error messages. */
  get endpoint(): string {
    return this.client.baseURL;
  }

  complete(request: ModelRequest): Promise<ModelResponse> {
    return completeWithRetries(request, this.endpoint, this.options, (attempt) => this.attempt(request, attempt));
  }

  /** One HTTP request; resolves with the parsed response or with why it failed (CancelledError when the caller aborted). */
  private async attempt(request: ModelRequest, attempt: number): Promise<AttemptOutcome> {
    const watchdog = new AttemptSignal(request.signal, this.timeoutMs);
    let completion: unknown;
    try {
      completion = await this.client.chat.completions.create(
        {
          model: this.options.model,
          messages: request.messages.map(toChatParam),
          ...(request.tools.length ? { tools: request.tools, tool_choice: "auto" as const } : {}),
          ...(this.options.temperature === undefined ? {} : { temperature: this.options.temperature }),
          ...(this.options.maxOutputTokens === undefined ? {} : { max_completion_tokens: this.options.maxOutputTokens }),
        },
        { signal: watchdog.signal, headers: runnerHeaders(request, attempt) },
      );
    } catch (error) {
      if (request.signal?.aborted) throw new CancelledError();
      return { failure: classifyOpenAIFailure(error, watchdog.timedOut, this.timeoutMs) };
    } finally {
      watchdog.dispose();
    }
    return parseCompletion(completion);
  }
}

/** Our message as the chat API takes it: another provider's reasoning is not sent. */
function toChatParam(message: ChatMessage): OpenAI.Chat.Completions.ChatCompletionMessageParam {
  if (message.role !== "assistant" || message.reasoning === undefined) return message as OpenAI.Chat.Completions.ChatCompletionMessageParam;
  const { reasoning: _reasoning, ...rest } = message;
  return rest as OpenAI.Chat.Completions.ChatCompletionMessageParam;
}

/** Checks the reply's shape; a reply without a usable first choice is a retryable failure. */
function parseCompletion(completion: unknown): AttemptOutcome {
  if (typeof completion !== "object" || completion === null) {
    const start = JSON.stringify(String(completion).slice(0, 200));
    return { failure: { reason: "invalid_response", retryable: true, detail: `replied with something other than a JSON object: ${start}`, cause: undefined } };
  }
  const body = completion as Partial<OpenAI.Chat.Completions.ChatCompletion>;
  const choice = Array.isArray(body.choices) ? body.choices[0] : undefined;
  if (!choice || typeof choice.message !== "object" || choice.message === null) {
    return { failure: { reason: "empty_response", retryable: true, detail: "replied without choices", cause: undefined } };
  }
  const toolCalls: ToolCall[] = (Array.isArray(choice.message.tool_calls) ? choice.message.tool_calls : [])
    .filter((call) => call.type === "function")
    .map((call) => ({ id: call.id, type: "function", function: { name: call.function.name, arguments: call.function.arguments ?? "" } }));
  return {
    response: {
      content: choice.message.content ?? null,
      toolCalls,
      finishReason: choice.finish_reason ?? "stop",
      usage: {
        prompt_tokens: body.usage?.prompt_tokens ?? 0,
        completion_tokens: body.usage?.completion_tokens ?? 0,
        cached_tokens: body.usage?.prompt_tokens_details?.cached_tokens ?? 0,
        cache_write_tokens: 0,
      },
    },
  };
}

/**
 * Why a call through the `openai` package failed (shared by the chat and the
 * Responses clients): timeouts, connection errors, HTTP statuses (retryable
 * per {@link retryableStatus}, `retry-after` honoured), bodies that are not
 * JSON or were cut off. `timedOut` says the attempt's own watchdog aborted it.
 */
export function classifyOpenAIFailure(error: unknown, timedOut: boolean, timeoutMs: number): AttemptFailure {
  if (timedOut || error instanceof OpenAI.APIConnectionTimeoutError) {
    return { reason: "timeout", retryable: true, detail: `did not answer within ${timeoutMs} ms`, cause: error };
  }
  if (error instanceof OpenAI.APIConnectionError) {
    return { reason: "connection_error", retryable: true, detail: `could not be reached: ${causeChain(error)}`, cause: error };
  }
  if (error instanceof OpenAI.APIError) {
    const status = error.status ?? 0;
    const message = error.message.replace(/^\d{3} /, "");
    if (error.code === "script_expectation_failed") {
      return { reason: "script_expectation_failed", retryable: false, detail: `answered ${status}: ${message}`, status, cause: error };
    }
    const retryAfter = retryAfterMs(error.headers);
    return {
      reason: statusReason(status),
      retryable: retryableStatus(status),
      detail: `answered ${status}: ${message}`,
      status,
      ...(retryAfter === undefined ? {} : { retryAfterMs: retryAfter }),
      cause: error,
    };
  }
  // The rest come from reading the body after a 2xx status line: the JSON
  // did not parse, or undici's fetch failed the body stream with a TypeError
  // ("terminated", cause "other side closed") when the connection ended
  // before Content-Length bytes arrived.
  if (error instanceof SyntaxError) {
    return { reason: "invalid_response", retryable: true, detail: `replied with a body that is not valid JSON: ${error.message}`, cause: error };
  }
  if (error instanceof TypeError) {
    return { reason: "truncated_response", retryable: true, detail: `reply was cut off mid-body: ${causeChain(error)}`, cause: error };
  }
  return { reason: "unknown", retryable: false, detail: `call failed: ${causeChain(error)}`, cause: error };
}
