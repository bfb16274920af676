import Anthropic from "@anthropic-ai/sdk";
import { sizeCappedFetch } from "./reply-size.js";
import { CancelledError } from "../errors.js";
import { toAnthropicPrompt, withCacheBreakpoints, type AnthropicPrompt } from "./anthropic-messages.js";
import type { ToolCall, ToolDefinition, Usage } from "./messages.js";
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
  type AttemptFailure,
  type AttemptOutcome,
  type RetryOptions,
} from "./retry.js";

/**
 * `max_tokens` when task.yaml sets no `model.max_output_tokens`: the API
 * requires one, and 8192 is what every current Claude model allows
 * (docs.anthropic.com "Models overview", max output) while leaving room for tool calls.
 */
export const DEFAULT_ANTHROPIC_MAX_TOKENS = 8192;
/**
 * Most `pause_turn` continuations of one reply: the API pauses a long
 * server-tool turn and wants it sent back to continue (docs.anthropic.com
 * "Handling stop reasons", `pause_turn`); a bound keeps a server that pauses
 * forever from looping.
 */
const MAX_PAUSE_CONTINUATIONS = 8;

export interface AnthropicModelClientOptions extends RetryOptions {
  /** Origin of the API (default https://api.anthropic.com); the SDK adds `/v1/messages`. */
  baseURL?: string;
  apiKey: string;
  model: string;
  temperature?: number;
  /** Stream the reply (server-sent events); then `timeoutMs` is the idle timeout. Default true. */
  stream?: boolean;
  /** `max_tokens` of each request (default {@link DEFAULT_ANTHROPIC_MAX_TOKENS}). */
  maxOutputTokens?: number;
  /** Extended thinking's `budget_tokens` (≥ 1024, below `maxOutputTokens`); off when undefined. */
  thinkingBudgetTokens?: number;
}

/** One content block of a reply as it was received (stream or whole). */
type ReplyBlock =
  | { type: "text"; text: string }
  | { type: "tool_use"; id: string; name: string; arguments: string }
  | { type: "thinking"; thinking: string; signature: string }
  | { type: "redacted_thinking"; data: string }
  | { type: "other"; block: Record<string, unknown> };

/** One HTTP reply, read whole. */
interface Reply {
  blocks: ReplyBlock[];
  stopReason: string | null;
  usage: Usage;
}

/**
 * {@link ModelClient} over the official `@anthropic-ai/sdk`, for Anthropic's
 * Messages API: the conversation translated by {@link toAnthropicPrompt},
 * `cache_control` breakpoints by {@link withCacheBreakpoints}, thinking blocks
 * carried in `reasoning`, `stop_reason` mapped to {@link FinishReason}, usage
 * summed to our split. The SDK's retries are off: {@link completeWithRetries}
 * retries (529 `overloaded_error` too).
 *
 * Streams are read from the SDK's raw event stream (`messages.create` with
 * `stream: true`), not its `MessageStream` helper: the helper parses tool
 * input as it arrives and keeps no text of it, and a reply cut at
 * `max_tokens` mid-call must keep the raw arguments so the agent loop can tell
 * they were cut.
 */
export class AnthropicModelClient implements ModelClient {
  private readonly client: Anthropic;
  private readonly timeoutMs: number;
  /** The tools of each agent's latest turn request, for its compaction requests (see {@link attempt}). */
  private readonly toolsOfAgent = new Map<string, ToolDefinition[]>();

  constructor(private readonly options: AnthropicModelClientOptions) {
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.client = new Anthropic({
      apiKey: options.apiKey,
      ...(options.baseURL === undefined ? {} : { baseURL: options.baseURL }),
      maxRetries: 0,
      timeout: this.timeoutMs,
      fetch: sizeCappedFetch(options.maxReplyBytes),
    });
  }

  /** The endpoint named in error messages. */
  get endpoint(): string {
    return this.client.baseURL;
  }

  complete(request: ModelRequest): Promise<ModelResponse> {
    if (request.tools.length) this.toolsOfAgent.set(request.agentId, request.tools);
    return completeWithRetries(request, this.endpoint, this.options, (attempt, bounded) => this.attempt(bounded, attempt));
  }

  /**
   * One attempt: a request, plus its `pause_turn` continuations (the paused
   * turn sent back, its reply's blocks appended). Resolves with the whole
   * reply or why it failed; nothing of a failed attempt is kept.
   *
   * A request without tools (a compaction's summary request) over a
   * conversation with tool calls gets the agent's tools of its latest turn
   * with `tool_choice: none`: the API refuses `tool_use` / `tool_result`
   * blocks in a request that defines no tools, and the same tools keep the
   * prefix the turns cached, so the summary reads it from the cache. With no
   * tools known (a resumed run compacting first), the calls and results are
   * sent as text ({@link toAnthropicPrompt}).
   */
  private async attempt(request: ModelRequest, attempt: number): Promise<AttemptOutcome> {
    const tools = request.tools.length ? request.tools : (this.toolsOfAgent.get(request.agentId) ?? []);
    const prompt = toAnthropicPrompt(request.messages, tools);
    const toolChoice = request.tools.length ? ("auto" as const) : ("none" as const);
    const blocks: ReplyBlock[] = [];
    let usage: Usage = { prompt_tokens: 0, completion_tokens: 0, cached_tokens: 0, cache_write_tokens: 0 };
    for (let continuation = 0; ; continuation += 1) {
      const sent: AnthropicPrompt = blocks.length ? { ...prompt, messages: [...prompt.messages, { role: "assistant", content: blocks.map(toParam) }] } : prompt;
      const outcome = await this.send(withCacheBreakpoints(sent), toolChoice, request, attempt);
      if ("failure" in outcome) return outcome;
      blocks.push(...outcome.reply.blocks);
      usage = {
        prompt_tokens: usage.prompt_tokens + outcome.reply.usage.prompt_tokens,
        completion_tokens: usage.completion_tokens + outcome.reply.usage.completion_tokens,
        cached_tokens: usage.cached_tokens + outcome.reply.usage.cached_tokens,
        cache_write_tokens: usage.cache_write_tokens + outcome.reply.usage.cache_write_tokens,
      };
      if (outcome.reply.stopReason === "pause_turn" && continuation < MAX_PAUSE_CONTINUATIONS) continue;
      return { response: toResponse(blocks, outcome.reply.stopReason, usage) };
    }
  }

  private async send(
    prompt: AnthropicPrompt,
    toolChoice: "auto" | "none",
    request: ModelRequest,
    attempt: number,
  ): Promise<{ reply: Reply } | { failure: AttemptFailure }> {
    const watchdog = new AttemptSignal(request.signal, this.timeoutMs);
    const maxTokens = this.options.maxOutputTokens ?? DEFAULT_ANTHROPIC_MAX_TOKENS;
    const body = {
      model: this.options.model,
      max_tokens: maxTokens,
      messages: prompt.messages,
      ...(prompt.system.length ? { system: prompt.system } : {}),
      ...(prompt.tools.length ? { tools: prompt.tools, tool_choice: { type: toolChoice } } : {}),
      ...(this.options.thinkingBudgetTokens === undefined
        ? this.options.temperature === undefined
          ? {}
          : { temperature: this.options.temperature }
        : // Thinking allows no temperature but the default (docs.anthropic.com "Extended thinking", feature compatibility).
          { thinking: { type: "enabled" as const, budget_tokens: this.options.thinkingBudgetTokens } }),
    };
    const requestOptions = { signal: watchdog.signal, headers: runnerHeaders(request, attempt) };
    try {
      if (this.options.stream === false) {
        const message = await this.client.messages.create({ ...body, stream: false }, requestOptions);
        return { reply: wholeReply(message) };
      }
      const stream = await this.client.messages.create({ ...body, stream: true }, requestOptions);
      const read = await readStream(stream, watchdog, (delta) => request.onText?.(delta, attempt));
      // The SDK ends the iteration quietly when the signal aborts: say why it ended.
      if (request.signal?.aborted) throw new CancelledError();
      if ("failure" in read && watchdog.timedOut) return { failure: classify(undefined, true, this.timeoutMs, true) };
      return read;
    } catch (error) {
      if (request.signal?.aborted) throw new CancelledError();
      return { failure: classify(error, watchdog.timedOut, this.timeoutMs, this.options.stream !== false) };
    } finally {
      watchdog.dispose();
    }
  }
}

/**
 * Reads a reply's events into whole blocks, touching the watchdog on each
 * (the idle timeout). A stream that ends before `message_stop` is a
 * truncated reply (retryable).
 */
async function readStream(
  stream: AsyncIterable<Anthropic.Messages.RawMessageStreamEvent>,
  watchdog: AttemptSignal,
  onText: (delta: string) => void,
): Promise<{ reply: Reply } | { failure: AttemptFailure }> {
  const blocks: ReplyBlock[] = [];
  let stopReason: string | null = null;
  let usage: Partial<Anthropic.Messages.Usage> = {};
  let stopped = false;
  for await (const event of stream) {
    watchdog.touch();
    switch (event.type) {
      case "message_start":
        usage = { ...event.message.usage };
        break;
      case "content_block_start":
        blocks[event.index] = startBlock(event.content_block as unknown as Record<string, unknown>);
        break;
      case "content_block_delta": {
        const block = blocks[event.index];
        const delta = event.delta;
        if (block?.type === "text" && delta.type === "text_delta") {
          block.text += delta.text;
          onText(delta.text);
        } else if (block?.type === "tool_use" && delta.type === "input_json_delta") block.arguments += delta.partial_json;
        else if (block?.type === "thinking" && delta.type === "thinking_delta") block.thinking += delta.thinking;
        else if (block?.type === "thinking" && delta.type === "signature_delta") block.signature += delta.signature;
        break;
      }
      case "message_delta":
        stopReason = event.delta.stop_reason ?? stopReason;
        // message_delta's counts are cumulative; a field it leaves out (or null) keeps message_start's.
        for (const [key, value] of Object.entries(event.usage)) if (typeof value === "number") (usage as Record<string, number>)[key] = value;
        break;
      case "message_stop":
        stopped = true;
        break;
      default:
        break;
    }
  }
  if (!stopped) return { failure: { reason: "truncated_response", retryable: true, detail: "stream ended before message_stop", cause: undefined } };
  return { reply: { blocks: blocks.filter((block) => block !== undefined), stopReason, usage: ourUsage(usage) } };
}

function startBlock(block: Record<string, unknown>): ReplyBlock {
  switch (block.type) {
    case "text":
      return { type: "text", text: String(block.text ?? "") };
    case "tool_use":
      return { type: "tool_use", id: String(block.id), name: String(block.name), arguments: "" };
    case "thinking":
      return { type: "thinking", thinking: String(block.thinking ?? ""), signature: String(block.signature ?? "") };
    case "redacted_thinking":
      return { type: "redacted_thinking", data: String(block.data ?? "") };
    default:
      return { type: "other", block };
  }
}

function wholeReply(message: Anthropic.Messages.Message): Reply {
  const blocks = message.content.map((block): ReplyBlock => {
    switch (block.type) {
      case "text":
        return { type: "text", text: block.text };
      case "tool_use":
        return { type: "tool_use", id: block.id, name: block.name, arguments: JSON.stringify(block.input ?? {}) };
      case "thinking":
        return { type: "thinking", thinking: block.thinking, signature: block.signature };
      case "redacted_thinking":
        return { type: "redacted_thinking", data: block.data };
      default:
        return { type: "other", block: block as unknown as Record<string, unknown> };
    }
  });
  return { blocks, stopReason: message.stop_reason, usage: ourUsage(message.usage) };
}

/** Anthropic's split summed to ours: `prompt_tokens` = uncached input + cache reads + cache writes. */
function ourUsage(usage: Partial<Anthropic.Messages.Usage>): Usage {
  const cached = usage.cache_read_input_tokens ?? 0;
  const written = usage.cache_creation_input_tokens ?? 0;
  return {
    prompt_tokens: (usage.input_tokens ?? 0) + cached + written,
    completion_tokens: usage.output_tokens ?? 0,
    cached_tokens: cached,
    cache_write_tokens: written,
  };
}

/** A received block as the API takes it back (a paused turn sent to continue). */
function toParam(block: ReplyBlock): Anthropic.Messages.ContentBlockParam {
  switch (block.type) {
    case "text":
      return { type: "text", text: block.text };
    case "tool_use":
      return { type: "tool_use", id: block.id, name: block.name, input: parseObject(block.arguments) };
    case "thinking":
      return { type: "thinking", thinking: block.thinking, signature: block.signature };
    case "redacted_thinking":
      return { type: "redacted_thinking", data: block.data };
    case "other":
      return block.block as unknown as Anthropic.Messages.ContentBlockParam;
  }
}

function parseObject(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text || "{}");
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/**
 * `stop_reason` in our words (docs.anthropic.com "Handling stop reasons"):
 * `tool_use` → `tool_calls`, `end_turn` / `stop_sequence` → `stop`,
 * `max_tokens` and `model_context_window_exceeded` (the reply was cut because
 * the context window filled) → `length`, `refusal` → `refusal`; anything else as it is.
 */
function finishReasonOf(stopReason: string | null): FinishReason {
  switch (stopReason) {
    case "tool_use":
      return "tool_calls";
    case "end_turn":
    case "stop_sequence":
    case null:
      return "stop";
    case "max_tokens":
    case "model_context_window_exceeded":
      return "length";
    default:
      return stopReason;
  }
}

function toResponse(blocks: ReplyBlock[], stopReason: string | null, usage: Usage): ModelResponse {
  const text = blocks.flatMap((block) => (block.type === "text" ? [block.text] : [])).join("");
  const toolCalls: ToolCall[] = blocks.flatMap((block) =>
    block.type === "tool_use" ? [{ id: block.id, type: "function" as const, function: { name: block.name, arguments: block.arguments || "{}" } }] : [],
  );
  const reasoning = blocks.flatMap((block) => (block.type === "thinking" || block.type === "redacted_thinking" ? [toParam(block)] : []));
  return {
    content: text === "" ? null : text,
    toolCalls,
    finishReason: finishReasonOf(stopReason),
    usage,
    ...(reasoning.length ? { reasoning: { provider: "anthropic" as const, items: reasoning } } : {}),
  };
}

/** Error types Anthropic sends in a stream's `error` event that another attempt may cure (docs.anthropic.com "Errors"). */
const RETRYABLE_STREAM_ERRORS: Record<string, string> = { overloaded_error: "overloaded", api_error: "server_error", rate_limit_error: "rate_limited" };

function classify(error: unknown, timedOut: boolean, timeoutMs: number, streaming: boolean): AttemptFailure {
  if (timedOut || error instanceof Anthropic.APIConnectionTimeoutError) {
    return streaming
      ? { reason: "idle_timeout", retryable: true, detail: `sent nothing for ${timeoutMs} ms`, cause: error }
      : { reason: "timeout", retryable: true, detail: `did not answer within ${timeoutMs} ms`, cause: error };
  }
  if (error instanceof Anthropic.APIConnectionError) {
    return { reason: "connection_error", retryable: true, detail: `could not be reached: ${causeChain(error)}`, cause: error };
  }
  if (error instanceof Anthropic.APIError) {
    const message = error.apiMessage ?? error.message.replace(/^\d{3} /, "");
    if (error.status === undefined) {
      // An `error` event inside a 200 stream.
      const reason = RETRYABLE_STREAM_ERRORS[error.type ?? ""];
      return {
        reason: reason ?? "stream_error",
        retryable: reason !== undefined,
        detail: `sent an error mid-stream (${error.type ?? "?"}): ${message}`,
        cause: error,
      };
    }
    const status = error.status;
    if ((error.type as string | null) === "script_expectation_failed") {
      return { reason: "script_expectation_failed", retryable: false, detail: `answered ${status}: ${message}`, status, cause: error };
    }
    const page = htmlPageTitle(message);
    if (page !== null) return htmlReplyFailure(status, page, "is model.base_url (or ANTHROPIC_BASE_URL) the API's address?", error);
    const retryAfter = retryAfterMs(error.headers);
    return {
      reason: statusReason(status),
      retryable: retryableStatus(status),
      detail: `answered ${status}${error.type ? ` ${error.type}` : ""}: ${message}`,
      status,
      ...(retryAfter === undefined ? {} : { retryAfterMs: retryAfter }),
      cause: error,
    };
  }
  return bodyReadFailure(error) ?? { reason: "unknown", retryable: false, detail: `call failed: ${causeChain(error)}`, cause: error };
}
