import type { ServerResponse } from "node:http";
import type { ChatMessage, Usage } from "./messages.js";
import { z } from "zod";
import type { PromptBlock } from "./scripted-prompt-cache.js";

/** The wire formats the scripted model speaks (task.yaml `model.wire`). */
export type WireName = "openai-chat" | "anthropic" | "openai-responses";

/** One tool call of a scripted answer, already given its id. */
export interface ScriptedToolCall {
  id: string;
  name: string;
  /** The arguments' JSON text, sent verbatim (it may be malformed on purpose). */
  arguments: string;
}

/** What the script answers, before a wire puts it in its provider's shape. */
export interface ScriptedAnswer {
  /** Unique within the server's life; wires build their message / response ids from it. */
  id: string;
  content: string | null;
  toolCalls: ScriptedToolCall[];
  /** Thinking to send before the reply (wires whose provider has thinking blocks; others ignore it). */
  thinking?: string;
  /**
   * Why the reply stops, in Anthropic's words, when not the natural end
   * (`tool_use` / `end_turn`): `max_tokens`, `refusal`, or `pause_turn` (the
   * text first, the rest when the client sends the turn back). Wires of
   * other providers ignore it.
   */
  stop?: "max_tokens" | "refusal" | "pause_turn";
  /** The model's reasoning text (a turn's `reasoning`), for wires whose provider sends it. */
  reasoning?: string;
  /** The provider's own finish reason to send instead of the implied one (a turn's `finish_reason`). */
  finishReason?: string;
}

/**
 * Ways an OpenAI-compatible server departs from the chat completions API
 * reference, played on every answer of the `openai-chat` wire (other wires
 * ignore them):
 * - `omit_tool_call_ids`: tool calls come without an `id`;
 * - `arguments_as_object`: `function.arguments` is a JSON object, not its text;
 * - `omit_stream_usage`: a stream has no usage chunk, even when asked for one;
 * - `reject_params`: a request whose body has one of these top-level fields
 *   (e.g. `stream_options`, `parallel_tool_calls`) is answered 400 naming it,
 *   as servers that do not know a parameter do.
 */
export const chatQuirksSchema = z.strictObject({
  omit_tool_call_ids: z.boolean().optional(),
  arguments_as_object: z.boolean().optional(),
  omit_stream_usage: z.boolean().optional(),
  reject_params: z.array(z.string().min(1)).optional(),
});

export type ChatQuirks = z.infer<typeof chatQuirksSchema>;

/** How {@link ScriptedWire.sendAnswer} departs from a plain answer (the turn's fault, the script's quirks). */
export interface AnswerOptions {
  /** Write about half of the answer, then destroy the socket. */
  truncate: boolean;
  /** Awaited after about half of a stream's events (a whole answer: after its headers); ends early when the client hangs up. */
  stall?: () => Promise<void>;
  quirks: ChatQuirks;
}

/** A request as the engine needs it, whatever the wire. */
export interface WireRequest {
  model: string;
  /** The conversation in our own shape: `expect` and the default summary read it. */
  messages: ChatMessage[];
  /** The prompt in the provider's order, for the prompt cache ({@link PromptBlock}). */
  blocks: PromptBlock[];
  /** Whether the client asked for a stream (server-sent events). */
  stream: boolean;
  /** Whether a streamed answer should end with the usage (OpenAI's `stream_options.include_usage`); wires whose provider always sends it leave it out. */
  streamUsage?: boolean;
}

/** A request body a wire cannot read: answered 400 in the wire's error shape. */
export class WireRequestError extends Error {}

/**
 * One provider's HTTP shape on the scripted model server: which route it
 * answers, how it reads a request, and how it writes an answer (whole or as a
 * stream of server-sent events in the order the provider's API reference
 * gives) and an error.
 */
export interface ScriptedWire {
  name: WireName;
  /** How the prompt cache of this provider works ({@link PromptCache.measure}). */
  cacheMode: "automatic" | "breakpoints";
  /** Whether `POST <path>` is this wire's route (e.g. `/v1/chat/completions`). */
  route(path: string): boolean;
  /** Reads a request body; throws {@link WireRequestError} for one the provider would refuse with 400. */
  readRequest(body: unknown): WireRequest;
  /**
   * Writes a 200 answer. With `truncate`, writes about half of it (half the
   * body, or half the stream's events) and destroys the socket, so the
   * client sees a reply cut mid-body; with `stall`, pauses half-way.
   * Resolves once written (or the client went away during a stall).
   */
  sendAnswer(response: ServerResponse, answer: ScriptedAnswer, request: WireRequest, usage: Usage, options: AnswerOptions): void | Promise<void>;
  /** Writes an error in the provider's error shape; `code` is e.g. `script_expectation_failed`. */
  sendError(response: ServerResponse, status: number, error: { message: string; type: string; code: string | null }, headers?: Record<string, string>): void;
}

/** Writes `body` as a JSON response. */
export function sendJson(response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  response.writeHead(status, { ...headers, "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  response.end(text);
}

/** Writes `body` as JSON, but only its first half, then destroys the socket: a reply cut mid-body. */
export function sendTruncatedJson(response: ServerResponse, body: unknown): void {
  const bytes = Buffer.from(JSON.stringify(body), "utf8");
  response.writeHead(200, { "content-type": "application/json", "content-length": bytes.length });
  response.write(bytes.subarray(0, Math.floor(bytes.length / 2)), () => response.socket?.destroy());
}

/** Waits `ms`, or less when the response's connection closes or `signal` (server closing) aborts. */
export function waitUnlessGone(ms: number, response: ServerResponse, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      response.off("close", done);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    response.once("close", done);
    signal.addEventListener("abort", done, { once: true });
    if (signal.aborted || response.destroyed) done();
  });
}

/**
 * Writes server-sent events, one `data: <json>` each, then `data: [DONE]`
 * when `done` (the OpenAI streams' end marker). With `truncate`, writes the
 * first half of the events and destroys the socket; with `stall`, awaits it
 * after the first half and stops if the client has gone.
 */
export async function sendEvents(
  response: ServerResponse,
  events: { event?: string; data: unknown }[],
  options: Pick<AnswerOptions, "truncate" | "stall"> & { done?: boolean },
): Promise<void> {
  const lines = events.map(({ event, data }) => `${event === undefined ? "" : `event: ${event}\n`}data: ${JSON.stringify(data)}\n\n`);
  if (options.done) lines.push("data: [DONE]\n\n");
  response.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  const half = Math.max(1, Math.floor(lines.length / 2));
  if (options.truncate) {
    response.write(lines.slice(0, half).join(""), () => response.socket?.destroy());
    return;
  }
  if (options.stall) {
    response.write(lines.slice(0, half).join(""));
    await options.stall();
    if (response.destroyed || response.writableEnded) return;
    response.end(lines.slice(half).join(""));
    return;
  }
  response.end(lines.join(""));
}
