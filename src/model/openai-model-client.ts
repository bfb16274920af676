import OpenAI from "openai";
import { sizeCappedFetch, errorBodyKeepingFetch } from "./reply-size.js";
import { CancelledError } from "../errors.js";
import type { ChatMessage, ProviderReasoning, ToolCall, ToolDefinition, Usage } from "./messages.js";
import type { FinishReason, ModelClient, ModelRequest, ModelResponse } from "./model-client.js";
import { runnerHeaders } from "./request-headers.js";
import {
  AttemptSignal,
  bodyReadFailure,
  causeChain,
  completeWithRetries,
  DEFAULT_TIMEOUT_MS,
  retryableStatus,
  retryAfterMs,
  statusReason,
  htmlPageTitle,
  htmlReplyFailure,
  OPENAI_BASE_URL_HINT,
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
  /**
   * Stream replies (`stream: true`, server-sent events; default true, task.yaml
   * `model.stream`): `timeoutMs` is then the longest silence before the
   * attempt is given up, and {@link ModelRequest.onText} gets the text as it
   * arrives. False: one JSON reply, `timeoutMs` its whole time.
   */
  stream?: boolean;
}

/**
 * Request parameters we send but can do without, dropped for the client's
 * life once the server answers 400 naming one (`Unrecognized request
 * argument supplied: stream_options` and the like): older vLLM, llama.cpp
 * and proxies refuse `stream_options`. `parallel_tool_calls` is never sent:
 * parallel calls are already the API's default and the loop runs them all,
 * so sending it could only earn a 400 from servers that do not know it.
 */
const OPTIONAL_PARAMETERS = ["stream_options"] as const;
type OptionalParameter = (typeof OPTIONAL_PARAMETERS)[number];

/**
 * {@link ModelClient} over the official `openai` package, for any
 * OpenAI-compatible chat completions endpoint (OpenAI, vLLM, Ollama,
 * llama.cpp, LM Studio, OpenRouter, DeepSeek), with their departures from the
 * API reference mended ({@link ChatReply}): tool calls without ids, arguments
 * sent as an object, tool calls with `finish_reason: stop`, tool names the
 * server mangles, `reasoning_content`.
 */
export class OpenAIModelClient implements ModelClient {
  private readonly client: OpenAI;
  private readonly timeoutMs: number;
  private readonly stream: boolean;
  /** Optional parameters this server refused; not sent again. */
  private readonly refused = new Set<OptionalParameter>();

  constructor(private readonly options: OpenAIModelClientOptions) {
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

  /**
   * One attempt; resolves with the parsed reply or with why it failed
   * (CancelledError when the caller aborted). A 400 naming an optional
   * parameter we sent is asked again at once without it, in the same attempt.
   */
  private async attempt(request: ModelRequest, attempt: number): Promise<AttemptOutcome> {
    const watchdog = new AttemptSignal(request.signal, this.timeoutMs);
    const progress = { streaming: false };
    try {
      for (;;) {
        try {
          return this.stream ? await this.streamed(request, attempt, watchdog, progress) : await this.whole(request, attempt, watchdog);
        } catch (error) {
          if (request.signal?.aborted) throw new CancelledError();
          const refused = this.refusedParameter(error);
          if (refused === undefined) return { failure: classifyOpenAIFailure(error, watchdog.timedOut, this.timeoutMs, progress.streaming) };
          this.refused.add(refused);
        }
      }
    } finally {
      watchdog.dispose();
    }
  }

  private body(request: ModelRequest) {
    return {
      model: this.options.model,
      messages: request.messages.map(toChatParam),
      ...(request.tools.length ? { tools: request.tools, tool_choice: "auto" as const } : {}),
      ...(this.options.temperature === undefined ? {} : { temperature: this.options.temperature }),
      ...(this.options.maxOutputTokens === undefined ? {} : { max_completion_tokens: this.options.maxOutputTokens }),
    };
  }

  private async whole(request: ModelRequest, attempt: number, watchdog: AttemptSignal): Promise<AttemptOutcome> {
    const completion: unknown = await this.client.chat.completions.create(this.body(request), {
      signal: watchdog.signal,
      headers: runnerHeaders(request, attempt),
    });
    return parseCompletion(completion, request);
  }

  /**
   * A streamed attempt: every chunk restarts the idle timer and its text goes
   * to `onText`; the reply counts only once a finish reason arrived. The SDK
   * ends its iterator quietly when the signal aborts or the body ends early,
   * so both are checked after the loop.
   */
  private async streamed(request: ModelRequest, attempt: number, watchdog: AttemptSignal, progress: { streaming: boolean }): Promise<AttemptOutcome> {
    const { data: stream, response } = await this.client.chat.completions
      .create(
        { ...this.body(request), stream: true, ...(this.refused.has("stream_options") ? {} : { stream_options: { include_usage: true } }) },
        { signal: watchdog.signal, headers: runnerHeaders(request, attempt) },
      )
      .withResponse();
    progress.streaming = true;
    watchdog.touch();
    const type = response.headers.get("content-type") ?? "";
    // Some servers and proxies ignore `stream: true` and answer one JSON reply.
    if (/\bjson\b/i.test(type)) return parseCompletion(JSON.parse(await response.text()), request);
    if (!/^text\/event-stream\b/i.test(type)) {
      const text = await response.text();
      const page = htmlPageTitle(text);
      if (page !== null) return { failure: htmlReplyFailure(response.status, page, OPENAI_BASE_URL_HINT, undefined) };
      const start = JSON.stringify(text.slice(0, 200));
      return {
        failure: {
          reason: "invalid_response",
          retryable: true,
          detail: `answered a stream request with ${JSON.stringify(type)}, not text/event-stream: ${start}`,
          cause: undefined,
        },
      };
    }
    const reply = new ChatReply();
    for await (const chunk of stream) {
      watchdog.touch();
      const text = reply.addChunk(chunk);
      if (text) request.onText?.(text, attempt);
    }
    if (request.signal?.aborted) throw new CancelledError();
    if (watchdog.timedOut) return { failure: idleTimeout(this.timeoutMs, undefined) };
    if (!reply.finished) {
      return {
        failure: {
          reason: "truncated_response",
          retryable: true,
          detail: "ended its stream before the reply was finished (no finish_reason)",
          cause: undefined,
        },
      };
    }
    return { response: reply.response(request) };
  }

  /** The optional parameter a 400 names, when we sent it. */
  private refusedParameter(error: unknown): OptionalParameter | undefined {
    if (!(error instanceof OpenAI.APIError) || error.status !== 400 || !this.stream) return undefined;
    return OPTIONAL_PARAMETERS.find((name) => !this.refused.has(name) && error.message.includes(name));
  }
}

/**
 * Our message as the chat API takes it. Reasoning of another provider is
 * not sent; an OpenAI-compatible server's `reasoning_content` goes back on
 * assistant messages with tool calls only: DeepSeek's thinking mode answers
 * 400 when it is missing there, and ignores it on other turns
 * (api-docs.deepseek.com/guides/thinking_mode, "Tool Calls").
 */
function toChatParam(message: ChatMessage): OpenAI.Chat.Completions.ChatCompletionMessageParam {
  if (message.role !== "assistant" || message.reasoning === undefined) return message as OpenAI.Chat.Completions.ChatCompletionMessageParam;
  const { reasoning, ...rest } = message;
  const text = reasoning.provider === "openai" && rest.tool_calls?.length ? reasoningText(reasoning) : "";
  return (text ? { ...rest, reasoning_content: text } : rest) as OpenAI.Chat.Completions.ChatCompletionMessageParam;
}

function reasoningText(reasoning: ProviderReasoning): string {
  return reasoning.items
    .map((item) => (item as { reasoning_content?: unknown }).reasoning_content)
    .filter((text) => typeof text === "string")
    .join("");
}

/** One tool call as a server sent it, before {@link ChatReply.response} mends it. */
interface RawToolCall {
  id?: string;
  name: string;
  arguments: string;
}

/**
 * One reply being put together, from a whole `chat.completion` or from
 * `chat.completion.chunk` deltas, with compatible servers' quirks mended.
 * Our own instead of the SDK's `ChatCompletionStream` accumulator, because
 * that one expects the reference's shapes (arguments as text pieces, ids on
 * the first delta) and throws or garbles on the departures we must take.
 */
class ChatReply {
  private content: string | null = null;
  private reasoning = "";
  private readonly calls: RawToolCall[] = [];
  /** Streamed tool calls by their `index`. */
  private readonly byIndex = new Map<number, RawToolCall>();
  private finishReason: string | null = null;
  private usage: Usage = { prompt_tokens: 0, completion_tokens: 0, cached_tokens: 0, cache_write_tokens: 0 };

  /** True once a finish reason arrived (a stream without one was cut). */
  get finished(): boolean {
    return this.finishReason !== null;
  }

  /** Adds a streamed chunk; returns the reply text it carried ("" if none). */
  addChunk(chunk: OpenAI.Chat.Completions.ChatCompletionChunk): string {
    if (chunk.usage) this.setUsage(chunk.usage);
    const choice = chunk.choices?.find((candidate) => (candidate.index ?? 0) === 0);
    if (!choice) return "";
    const delta = (choice.delta ?? {}) as OpenAI.Chat.Completions.ChatCompletionChunk.Choice.Delta & CompatibleFields;
    const reasoning = compatibleReasoning(delta);
    if (reasoning) this.reasoning += reasoning;
    for (const piece of delta.tool_calls ?? []) this.addToolCallDelta(piece);
    if (choice.finish_reason) this.finishReason = choice.finish_reason;
    if (typeof delta.content !== "string" || delta.content === "") return "";
    this.content = (this.content ?? "") + delta.content;
    return delta.content;
  }

  /** Reads a whole `chat.completion`'s first choice (already checked to have a message). */
  addCompletion(choice: OpenAI.Chat.Completions.ChatCompletion.Choice, usage: OpenAI.CompletionUsage | undefined): void {
    const message = choice.message as OpenAI.Chat.Completions.ChatCompletionMessage & CompatibleFields;
    this.content = message.content ?? null;
    this.reasoning = compatibleReasoning(message);
    for (const call of Array.isArray(message.tool_calls) ? message.tool_calls : []) {
      if (call.type !== undefined && call.type !== "function") continue;
      const fn = (call as { function?: { name?: unknown; arguments?: unknown } }).function;
      this.calls.push({ ...(call.id ? { id: call.id } : {}), name: typeof fn?.name === "string" ? fn.name : "", arguments: argumentsText(fn?.arguments) });
    }
    this.finishReason = choice.finish_reason ?? "stop";
    if (usage) this.setUsage(usage);
  }

  /** The reply in our terms: ids given, names mapped to the request's tools, the finish reason normalised. */
  response(request: Pick<ModelRequest, "tools" | "callIndex">): ModelResponse {
    const seen = new Set<string>();
    const toolCalls: ToolCall[] = this.calls.map((call, index) => {
      // Stable (the same reply gets the same ids on resume) and unique in the conversation: the call index names the turn.
      let id = call.id?.trim() ?? "";
      if (!id || seen.has(id)) id = `call_runner_${request.callIndex}_${index}`;
      seen.add(id);
      return { id, type: "function", function: { name: knownToolName(call.name, request.tools), arguments: call.arguments } };
    });
    return {
      content: this.content,
      toolCalls,
      finishReason: normaliseFinishReason(this.finishReason, toolCalls.length > 0),
      usage: this.usage,
      ...(this.reasoning ? { reasoning: { provider: "openai", items: [{ reasoning_content: this.reasoning }] } } : {}),
    };
  }

  private addToolCallDelta(piece: OpenAI.Chat.Completions.ChatCompletionChunk.Choice.Delta.ToolCall): void {
    const fn = piece.function as { name?: unknown; arguments?: unknown } | undefined;
    const name = typeof fn?.name === "string" ? fn.name : "";
    // Servers that leave out `index` send each call whole, or its later pieces with the same id.
    let call = typeof piece.index === "number" ? this.byIndex.get(piece.index) : this.calls.find((known) => piece.id && known.id === piece.id);
    if (!call && typeof piece.index !== "number" && !name && !piece.id) call = this.calls.at(-1);
    if (!call) {
      call = { name: "", arguments: "" };
      this.calls.push(call);
      if (typeof piece.index === "number") this.byIndex.set(piece.index, call);
    }
    if (piece.id && !call.id) call.id = piece.id;
    if (name && !call.name) call.name = name;
    if (typeof fn?.arguments === "string") call.arguments += fn.arguments;
    else if (fn?.arguments !== undefined && fn.arguments !== null) call.arguments = argumentsText(fn.arguments);
  }

  private setUsage(usage: OpenAI.CompletionUsage): void {
    this.usage = {
      prompt_tokens: usage.prompt_tokens ?? 0,
      completion_tokens: usage.completion_tokens ?? 0,
      cached_tokens: usage.prompt_tokens_details?.cached_tokens ?? 0,
      cache_write_tokens: 0,
    };
  }
}

/** Fields compatible servers add to a message or delta: DeepSeek and vLLM `reasoning_content`, OpenRouter and newer vLLM `reasoning`. */
interface CompatibleFields {
  reasoning_content?: unknown;
  reasoning?: unknown;
}

function compatibleReasoning(fields: CompatibleFields): string {
  if (typeof fields.reasoning_content === "string") return fields.reasoning_content;
  return typeof fields.reasoning === "string" ? fields.reasoning : "";
}

/** Arguments as JSON text: text as sent, an object (some servers send one) as its JSON, nothing as "". */
function argumentsText(value: unknown): string {
  if (typeof value === "string") return value;
  return value === undefined || value === null ? "" : JSON.stringify(value);
}

/**
 * The request's tool a server-mangled name means: the name itself when known,
 * else the one tool whose name equals it once both are trimmed, lower-cased and
 * stripped of a `functions.` / `tools.` prefix (seen from vLLM and llama.cpp
 * chat templates). Unknown or ambiguous names stay as sent; the loop answers
 * the model that no such tool exists.
 */
function knownToolName(name: string, tools: readonly ToolDefinition[]): string {
  if (tools.some((tool) => tool.function.name === name)) return name;
  const plain = (text: string) =>
    text
      .trim()
      .replace(/^(functions?|tools?)[.:]/i, "")
      .trim()
      .toLowerCase();
  const wanted = plain(name);
  const matches = tools.filter((tool) => plain(tool.function.name) === wanted);
  return matches.length === 1 ? matches[0]!.function.name : name;
}

/**
 * The provider's finish reason in {@link FinishReason} words: `content_filter`
 * is a refusal, `function_call` (the deprecated form) is `tool_calls`, and a
 * reply with tool calls that says `stop` (or nothing) asked for tools, as
 * some compatible servers reply.
 */
function normaliseFinishReason(reason: string | null, hasToolCalls: boolean): FinishReason {
  if (reason === "content_filter") return "refusal";
  if (reason === "function_call") return "tool_calls";
  if (hasToolCalls && (reason === null || reason === "stop")) return "tool_calls";
  return reason ?? "stop";
}

/** Checks the reply's shape; a reply without a usable first choice is a retryable failure. */
function parseCompletion(completion: unknown, request: ModelRequest): AttemptOutcome {
  if (typeof completion !== "object" || completion === null) {
    const page = htmlPageTitle(String(completion));
    if (page !== null) return { failure: htmlReplyFailure(200, page, OPENAI_BASE_URL_HINT, undefined) };
    const start = JSON.stringify(String(completion).slice(0, 200));
    return { failure: { reason: "invalid_response", retryable: true, detail: `replied with something other than a JSON object: ${start}`, cause: undefined } };
  }
  const body = completion as Partial<OpenAI.Chat.Completions.ChatCompletion>;
  const choice = Array.isArray(body.choices) ? body.choices[0] : undefined;
  if (!choice || typeof choice.message !== "object" || choice.message === null) {
    return { failure: { reason: "empty_response", retryable: true, detail: "replied without choices", cause: undefined } };
  }
  const reply = new ChatReply();
  reply.addCompletion(choice, body.usage);
  return { response: reply.response(request) };
}

function idleTimeout(timeoutMs: number, cause: unknown): AttemptFailure {
  return { reason: "idle_timeout", retryable: true, detail: `sent nothing for ${timeoutMs} ms in the middle of its stream`, cause };
}

/**
 * Why a call through the `openai` package failed (shared by the chat and the
 * Responses clients): timeouts, connection errors, HTTP statuses (retryable
 * per {@link retryableStatus}, `retry-after` honoured), error events inside a
 * stream, bodies that are not JSON or were cut off. `timedOut` says the
 * attempt's own watchdog aborted it; `streaming` that its stream had begun
 * (a timeout then is an idle timeout mid-reply).
 */
export function classifyOpenAIFailure(error: unknown, timedOut: boolean, timeoutMs: number, streaming = false): AttemptFailure {
  if (timedOut && streaming) return idleTimeout(timeoutMs, error);
  if (timedOut || error instanceof OpenAI.APIConnectionTimeoutError) {
    return { reason: "timeout", retryable: true, detail: `did not answer within ${timeoutMs} ms`, cause: error };
  }
  if (error instanceof OpenAI.APIConnectionError) {
    return { reason: "connection_error", retryable: true, detail: `could not be reached: ${causeChain(error)}`, cause: error };
  }
  if (error instanceof OpenAI.APIError) {
    const message = error.message.replace(/^\d{3} /, "");
    if (error.status === undefined) {
      // An error event inside a 200 stream (OpenRouter and others send one when the upstream fails mid-reply).
      return { reason: "stream_error", retryable: true, detail: `sent an error in its stream: ${message}`, cause: error };
    }
    const status = error.status;
    if (error.code === "script_expectation_failed") {
      return { reason: "script_expectation_failed", retryable: false, detail: `answered ${status}: ${message}`, status, cause: error };
    }
    const page = htmlPageTitle(message);
    if (page !== null) return htmlReplyFailure(status, page, OPENAI_BASE_URL_HINT, error);
    const retryAfter = retryAfterMs(error.headers);
    return {
      reason: statusReason(status),
      retryable: retryableStatus(status),
      // A 404 from a base URL is most often a path without /v1: the body says what the server missed, the hint how to fix it.
      detail: `answered ${status}: ${message}${status === 404 ? ` (${OPENAI_BASE_URL_HINT}: does it end in /v1?)` : ""}`,
      status,
      ...(retryAfter === undefined ? {} : { retryAfterMs: retryAfter }),
      cause: error,
    };
  }
  return bodyReadFailure(error) ?? { reason: "unknown", retryable: false, detail: `call failed: ${causeChain(error)}`, cause: error };
}
