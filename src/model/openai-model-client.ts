import OpenAI from "openai";
import { CancelledError, ModelError } from "../errors.js";
import type { ToolCall } from "./messages.js";
import type { ModelClient, ModelRequest, ModelResponse } from "./model-client.js";

/** Headers the scripted model server reads; harmless to other endpoints. */
export const CALL_INDEX_HEADER = "x-agent-runner-call-index";
export const AGENT_ID_HEADER = "x-agent-runner-agent-id";

export interface OpenAIModelClientOptions {
  baseURL?: string;
  apiKey: string;
  model: string;
  temperature?: number;
  /**
   * Retries of a failed request. The openai SDK retries 408/409/429/5xx and
   * connection errors with exponential backoff (0.5 s doubling, capped at 8 s,
   * with jitter) and honours `retry-after`/`retry-after-ms` (openai-node README, "Retries").
   */
  maxRetries?: number;
  /** Per-request timeout in ms (SDK default 10 min). */
  timeoutMs?: number;
}

/** {@link ModelClient} over the official `openai` package, for any OpenAI-compatible endpoint. */
export class OpenAIModelClient implements ModelClient {
  private readonly client: OpenAI;

  constructor(private readonly options: OpenAIModelClientOptions) {
    this.client = new OpenAI({
      apiKey: options.apiKey,
      baseURL: options.baseURL,
      maxRetries: options.maxRetries ?? 4,
      timeout: options.timeoutMs ?? 300_000,
    });
  }

  async complete(request: ModelRequest): Promise<ModelResponse> {
    // The SDK adds an abort listener to the signal it gets on every request and
    // never removes it; a per-call controller keeps the run's signal clean.
    const controller = new AbortController();
    const forwardAbort = () => controller.abort();
    request.signal?.addEventListener("abort", forwardAbort, { once: true });
    if (request.signal?.aborted) controller.abort();
    let completion: OpenAI.Chat.Completions.ChatCompletion;
    try {
      completion = await this.client.chat.completions.create(
        {
          model: this.options.model,
          messages: request.messages as OpenAI.Chat.Completions.ChatCompletionMessageParam[],
          ...(request.tools.length ? { tools: request.tools, tool_choice: "auto" as const } : {}),
          ...(this.options.temperature === undefined ? {} : { temperature: this.options.temperature }),
        },
        {
          signal: controller.signal,
          headers: { [CALL_INDEX_HEADER]: String(request.callIndex), [AGENT_ID_HEADER]: request.agentId },
        },
      );
    } catch (error) {
      throw translateError(error, request.signal, `${this.client.baseURL} after ${this.client.maxRetries} retries`);
    } finally {
      request.signal?.removeEventListener("abort", forwardAbort);
    }
    const choice = completion.choices?.[0];
    if (!choice) throw new ModelError("the model returned no choices", "empty_response");
    const toolCalls: ToolCall[] = (choice.message.tool_calls ?? [])
      .filter((call) => call.type === "function")
      .map((call) => ({ id: call.id, type: "function", function: { name: call.function.name, arguments: call.function.arguments ?? "" } }));
    return {
      content: choice.message.content ?? null,
      toolCalls,
      finishReason: choice.finish_reason ?? "stop",
      usage: {
        prompt_tokens: completion.usage?.prompt_tokens ?? 0,
        completion_tokens: completion.usage?.completion_tokens ?? 0,
        cached_tokens: completion.usage?.prompt_tokens_details?.cached_tokens ?? 0,
      },
    };
  }
}

function translateError(error: unknown, signal: AbortSignal | undefined, where: string): Error {
  if (signal?.aborted || error instanceof OpenAI.APIUserAbortError) return new CancelledError();
  if (error instanceof OpenAI.APIConnectionTimeoutError) {
    return new ModelError(`model request to ${where} timed out: ${error.message}`, "timeout", { cause: error });
  }
  if (error instanceof OpenAI.APIConnectionError) {
    return new ModelError(`cannot reach the model endpoint ${where}: ${error.message}`, "connection_error", { cause: error });
  }
  if (error instanceof OpenAI.APIError) {
    const status = error.status ?? 0;
    const reason =
      error.code === "script_expectation_failed" ? "script_expectation_failed"
      : status === 429 ? "rate_limited"
      : status === 401 || status === 403 ? "unauthorized"
      : status >= 500 ? "server_error"
      : "bad_request";
    return new ModelError(`model endpoint answered ${status}: ${error.message.replace(/^\d{3} /, "")}`, reason, { cause: error });
  }
  return new ModelError(`model call failed: ${(error as Error)?.message ?? String(error)}`, "unknown", { cause: error });
}
