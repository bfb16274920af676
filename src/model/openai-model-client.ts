import OpenAI from "openai";
import { CancelledError, ModelError } from "../errors.js";
import { abortableSleep } from "../process/abortable-sleep.js";
import type { ToolCall } from "./messages.js";
import type { ModelClient, ModelRequest, ModelResponse } from "./model-client.js";

/** Headers the scripted model server reads; harmless to other endpoints. */
export const CALL_INDEX_HEADER = "x-agent-runner-call-index";
export const AGENT_ID_HEADER = "x-agent-runner-agent-id";
/** A subagent's description, URI-encoded (headers are ASCII). */
export const DESCRIPTION_HEADER = "x-agent-runner-agent-description";
/** 0-based attempt number of this request within one `complete()` call (0 = first try, 1 = first retry, ...). */
export const ATTEMPT_HEADER = "x-agent-runner-attempt";
/** `turn` or `compaction` ({@link ModelRequest.purpose}). */
export const PURPOSE_HEADER = "x-agent-runner-purpose";

/** Retries after the first attempt unless the caller says otherwise (task.yaml `model.max_retries` has the same default). */
const DEFAULT_MAX_RETRIES = 4;
/** Per-attempt timeout unless the caller says otherwise: 300 s (task.yaml `model.request_timeout_sec` default). */
const DEFAULT_TIMEOUT_MS = 300_000;
/**
 * Backoff before retry n (0-based) when the server names no delay:
 * `random() * min(RETRY_MAX_DELAY_MS, RETRY_BASE_DELAY_MS * 2^n)` ("full jitter",
 * AWS Architecture Blog, "Exponential Backoff And Jitter", 2015). Base and cap
 * are openai-node's defaults (`initialRetryDelay = 0.5` s, `maxRetryDelay = 8.0` s
 * in `calculateDefaultRetryTimeoutMillis`, openai 6.x `client.ts`); openai-node
 * itself jitters only the top 25 %.
 */
const RETRY_BASE_DELAY_MS = 500;
const RETRY_MAX_DELAY_MS = 8_000;
/** Longest `retry-after` / `retry-after-ms` we honour, in ms (openai-node also stops trusting the header at 60 s). Longer asks are cut to this. */
export const RETRY_AFTER_CAP_MS = 60_000;

export interface OpenAIModelClientOptions {
  baseURL?: string;
  apiKey: string;
  model: string;
  temperature?: number;
  /**
   * Retries after the first attempt (attempts = 1 + maxRetries; default
   * {@link DEFAULT_MAX_RETRIES}). This client retries by itself, with the SDK's
   * own retries off, so one policy covers HTTP 408/409/429/5xx, connection
   * errors, timeouts and replies cut off mid-body or not parsable, which the
   * SDK would not retry. Backoff: {@link RETRY_BASE_DELAY_MS}, doubling, capped
   * at {@link RETRY_MAX_DELAY_MS}, full jitter; a `retry-after-ms` (ms) or
   * `retry-after` (seconds or HTTP date) header wins, up to {@link RETRY_AFTER_CAP_MS}.
   * Never retried: other 4xx (400, 401, 403, 404, 422, ...) and the scripted
   * model's `script_expectation_failed`.
   */
  maxRetries?: number;
  /**
   * Timeout of one attempt in ms, headers and body together (default
   * {@link DEFAULT_TIMEOUT_MS}); a timed-out attempt is retried.
   */
  timeoutMs?: number;
  /** Backoff sleep; must reject (any error) as soon as `signal` aborts. Default: a timer. Injected by tests. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Uniform [0, 1) source for the backoff jitter; default `Math.random`. */
  random?: () => number;
}

/** Why one attempt failed, and whether another attempt may help. */
interface AttemptFailure {
  reason: string;
  retryable: boolean;
  /** What went wrong, without the endpoint (the final message adds it). */
  detail: string;
  status?: number;
  /** Delay the server asked for, in ms, already capped. */
  retryAfterMs?: number;
  cause: unknown;
}

/** {@link ModelClient} over the official `openai` package, for any OpenAI-compatible endpoint. */
export class OpenAIModelClient implements ModelClient {
  private readonly client: OpenAI;
  private readonly maxRetries: number;
  private readonly timeoutMs: number;
  private readonly sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  private readonly random: () => number;

  constructor(private readonly options: OpenAIModelClientOptions) {
    this.maxRetries = Math.max(0, Math.floor(options.maxRetries ?? DEFAULT_MAX_RETRIES));
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.sleep = options.sleep ?? abortableSleep;
    this.random = options.random ?? Math.random;
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

  async complete(request: ModelRequest): Promise<ModelResponse> {
    const attempts = 1 + this.maxRetries;
    for (let attempt = 0; ; attempt += 1) {
      if (request.signal?.aborted) throw new CancelledError();
      const outcome = await this.attempt(request, attempt);
      if (!("failure" in outcome)) return outcome.response;
      const { failure } = outcome;
      if (!failure.retryable) {
        const where = attempt === 0 ? "" : ` (attempt ${attempt + 1} of ${attempts})`;
        throw new ModelError(`model endpoint ${this.endpoint} ${failure.detail}${where}`, failure.reason, { cause: failure.cause });
      }
      if (attempt + 1 >= attempts) {
        throw new ModelError(
          `model endpoint ${this.endpoint} ${failure.detail}; gave up after ${attempts} attempt${attempts === 1 ? "" : "s"}`,
          failure.reason,
          { cause: failure.cause },
        );
      }
      const delayMs = failure.retryAfterMs ?? backoffDelayMs(attempt, this.random);
      request.onRetry?.({ attempt: attempt + 1, delayMs, reason: failure.reason, ...(failure.status === undefined ? {} : { status: failure.status }) });
      try {
        await this.sleep(delayMs, request.signal);
      } catch (error) {
        if (request.signal?.aborted) throw new CancelledError();
        throw error;
      }
    }
  }

  /** One HTTP request; resolves with the parsed response or with why it failed (CancelledError when the caller aborted). */
  private async attempt(request: ModelRequest, attempt: number): Promise<{ response: ModelResponse } | { failure: AttemptFailure }> {
    // A controller per attempt: the SDK adds an abort listener to the signal it
    // gets and never removes it, and our timeout must also cover the body,
    // which the SDK's own timeout (cleared once headers arrive) does not.
    const controller = new AbortController();
    const forwardAbort = () => controller.abort();
    request.signal?.addEventListener("abort", forwardAbort, { once: true });
    if (request.signal?.aborted) controller.abort();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, this.timeoutMs);
    let completion: unknown;
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
          headers: {
            [CALL_INDEX_HEADER]: String(request.callIndex),
            [AGENT_ID_HEADER]: request.agentId,
            [ATTEMPT_HEADER]: String(attempt),
            [PURPOSE_HEADER]: request.purpose ?? "turn",
            ...(request.agentDescription === undefined ? {} : { [DESCRIPTION_HEADER]: encodeURIComponent(request.agentDescription) }),
          },
        },
      );
    } catch (error) {
      if (request.signal?.aborted) throw new CancelledError();
      return { failure: classify(error, timedOut, this.timeoutMs) };
    } finally {
      clearTimeout(timer);
      request.signal?.removeEventListener("abort", forwardAbort);
    }
    return parseCompletion(completion);
  }
}

/** Full-jitter backoff before retry `retryIndex` (0 = first retry), in ms. */
export function backoffDelayMs(retryIndex: number, random: () => number = Math.random): number {
  const ceiling = Math.min(RETRY_MAX_DELAY_MS, RETRY_BASE_DELAY_MS * 2 ** retryIndex);
  return Math.floor(random() * ceiling);
}

/**
 * The delay a response asks for, in ms, capped at {@link RETRY_AFTER_CAP_MS}:
 * `retry-after-ms` (milliseconds, non-standard, sent by OpenAI) first, then
 * `retry-after` (RFC 9110 §10.2.3: delay-seconds or an HTTP date). Undefined
 * when neither is present or parsable.
 */
export function retryAfterMs(headers: Headers | undefined, now: number = Date.now()): number | undefined {
  const milliseconds = Number.parseFloat(headers?.get("retry-after-ms") ?? "");
  if (Number.isFinite(milliseconds) && milliseconds >= 0) return Math.min(milliseconds, RETRY_AFTER_CAP_MS);
  const value = headers?.get("retry-after")?.trim();
  if (!value) return undefined;
  if (/^\d+(\.\d+)?$/.test(value)) return Math.min(Number.parseFloat(value) * 1000, RETRY_AFTER_CAP_MS);
  const date = Date.parse(value);
  if (Number.isNaN(date)) return undefined;
  return Math.min(Math.max(0, date - now), RETRY_AFTER_CAP_MS);
}

/** Checks the reply's shape; a reply without a usable first choice is a retryable failure. */
function parseCompletion(completion: unknown): { response: ModelResponse } | { failure: AttemptFailure } {
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
      },
    },
  };
}

/** HTTP statuses worth another attempt (openai-node's `shouldRetry` list, minus its `x-should-retry` override). */
function retryableStatus(status: number): boolean {
  return status === 408 || status === 409 || status === 429 || status >= 500;
}

function statusReason(status: number): string {
  if (status === 408) return "timeout";
  if (status === 409) return "conflict";
  if (status === 429) return "rate_limited";
  if (status === 401 || status === 403) return "unauthorized";
  if (status === 404) return "not_found";
  if (status >= 500) return "server_error";
  return "bad_request";
}

function classify(error: unknown, timedOut: boolean, timeoutMs: number): AttemptFailure {
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

/** `message: cause's message: ...`, the messages along an error's cause chain (undici hides the useful one two levels down). */
function causeChain(error: unknown): string {
  const parts: string[] = [];
  for (let current = error, depth = 0; current !== undefined && current !== null && depth < 5; depth += 1) {
    parts.push((current instanceof Error ? current.message : String(current)).replace(/\.$/, ""));
    current = current instanceof Error ? current.cause : undefined;
  }
  return parts.join(": ");
}
