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
   * client sees a reply cut mid-body.
   */
  sendAnswer(response: ServerResponse, answer: ScriptedAnswer, request: WireRequest, usage: Usage, options: { truncate: boolean }): void;
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
