import type { ServerResponse } from "node:http";
import type { ChatMessage, Usage } from "./messages.js";
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
   * client sees a reply cut mid-body. With `stallMs`, a streamed answer goes
   * silent for that long after its first events (until the client leaves or
   * `closing` aborts); a wire that does not stream ignores it.
   */
  sendAnswer(
    response: ServerResponse,
    answer: ScriptedAnswer,
    request: WireRequest,
    usage: Usage,
    options: { truncate: boolean; stallMs?: number; closing: AbortSignal },
  ): void;
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
