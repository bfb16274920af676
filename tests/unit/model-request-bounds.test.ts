/**
 * Issue 20 item 9: one model reply has a byte cap (streamed or read whole),
 * one model request has a total deadline (a server trickling empty pieces
 * keeps the idle timeout from ever firing), and a run has a default
 * wall-clock limit. The servers are loopback servers the test owns.
 */
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ModelError } from "../../src/errors.js";
import { AnthropicModelClient } from "../../src/model/anthropic-model-client.js";
import type { ModelClient } from "../../src/model/model-client.js";
import { OpenAIModelClient } from "../../src/model/openai-model-client.js";
import { OpenAIResponsesModelClient } from "../../src/model/openai-responses-model-client.js";
import { MAX_REPLY_BYTES } from "../../src/model/reply-size.js";
import { DEFAULT_RUN_TIMEOUT_SEC, startTimeLimit } from "../../src/run/run-limits.js";
import type { RunEvent } from "../../src/events/run-events.js";
import type { RunReport } from "../../src/run/run-report.js";

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  vi.useRealTimers();
  await Promise.all(closers.splice(0).map((close) => close()));
});

/**
 * A loopback server answering every request with `answer`; counts requests
 * and the responses whose client went away before the server ended them.
 */
async function server(answer: (response: ServerResponse) => void) {
  const seen = { requests: 0, abandoned: 0 };
  const http = createServer((request, response) => {
    seen.requests += 1;
    request.resume();
    response.on("close", () => {
      if (!response.writableEnded) seen.abandoned += 1;
    });
    answer(response);
  });
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  closers.push(async () => {
    http.closeAllConnections();
    await new Promise<void>((resolve) => http.close(() => resolve()));
  });
  return { origin: `http://127.0.0.1:${(http.address() as AddressInfo).port}`, seen };
}

/** Writes `piece` until the client goes away (a reply without end), each write after the last drained. */
function endless(response: ServerResponse, piece: string): void {
  const write = () => {
    while (!response.destroyed && response.write(piece));
    if (!response.destroyed) response.once("drain", write);
  };
  write();
}

/** Writes `piece` every 10 ms until the client goes away. */
function trickle(response: ServerResponse, piece: string): void {
  const timer = setInterval(() => response.write(piece), 10);
  response.on("close", () => clearInterval(timer));
}

const request = { messages: [{ role: "user" as const, content: "u" }], tools: [], agentId: "main", callIndex: 0 };

const openAiChunk = (content: string) =>
  `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
const anthropicDelta = (text: string) =>
  `event: content_block_delta\ndata: ${JSON.stringify({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text } })}\n\n`;
const anthropicStart =
  `event: message_start\ndata: ${JSON.stringify({ type: "message_start", message: { id: "m", type: "message", role: "assistant", model: "c", content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 1, output_tokens: 0 } } })}\n\n` +
  `event: content_block_start\ndata: ${JSON.stringify({ type: "content_block_start", index: 0, content_block: { type: "text", text: "" } })}\n\n`;
const responsesDelta = (delta: string) =>
  `event: response.output_text.delta\ndata: ${JSON.stringify({ type: "response.output_text.delta", item_id: "i", output_index: 0, content_index: 0, delta, sequence_number: 1 })}\n\n`;

const CAP = 256 * 1024;

/** The three providers' clients against `origin`, streamed or not, with a small reply cap and the given timeouts. */
function clients(origin: string, stream: boolean, bounds: { maxReplyBytes?: number; timeoutMs?: number; deadlineMs?: number }): Record<string, ModelClient> {
  const common = { apiKey: "k", model: "m", stream, maxRetries: 3, ...bounds };
  return {
    openai: new OpenAIModelClient({ ...common, baseURL: `${origin}/v1` }),
    anthropic: new AnthropicModelClient({ ...common, baseURL: origin }),
    "openai-responses": new OpenAIResponsesModelClient({ ...common, baseURL: `${origin}/v1` }),
  };
}

async function failure(promise: Promise<unknown>): Promise<ModelError> {
  const error = await promise.then(
    () => null,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(ModelError);
  return error as ModelError;
}

describe("the cap of one model reply", () => {
  it("is 64 MiB by default", () => {
    expect(MAX_REPLY_BYTES).toBe(64 * 1024 ** 2);
  });

  it.each([
    ["openai", (response: ServerResponse) => endless(response, openAiChunk("x".repeat(1000)))],
    ["anthropic", (response: ServerResponse) => (response.write(anthropicStart), endless(response, anthropicDelta("x".repeat(1000))))],
    ["openai-responses", (response: ServerResponse) => endless(response, responsesDelta("x".repeat(1000)))],
  ] as const)("%s: a streamed reply that never ends fails at the cap, once, not retried", async (provider, stream) => {
    const { origin, seen } = await server((response) => {
      response.writeHead(200, { "content-type": "text/event-stream" });
      stream(response);
    });
    const error = await failure(clients(origin, true, { maxReplyBytes: CAP })[provider]!.complete(request));
    expect(error.reason).toBe("reply_too_large");
    expect(error.message).toContain(`replied with more than ${CAP} bytes`);
    expect(error.message).toContain("the cap of one model reply");
    expect(seen.requests).toBe(1);
  });

  it.each(["openai", "anthropic", "openai-responses"])("%s: a whole reply over the cap fails the same way", async (provider) => {
    const { origin, seen } = await server((response) => {
      response.writeHead(200, { "content-type": "application/json" });
      response.end(JSON.stringify({ padding: "x".repeat(CAP + 1) }));
    });
    const error = await failure(clients(origin, false, { maxReplyBytes: CAP })[provider]!.complete(request));
    expect(error.reason).toBe("reply_too_large");
    expect(seen.requests).toBe(1);
  });
});

describe("the total deadline of one model request", () => {
  it.each([
    ["openai", (response: ServerResponse) => trickle(response, openAiChunk(""))],
    ["anthropic", (response: ServerResponse) => (response.write(anthropicStart), trickle(response, ": keep-alive\n\n"))],
    ["openai-responses", (response: ServerResponse) => trickle(response, responsesDelta(""))],
  ] as const)("%s: a server trickling empty pieces is cut at the deadline, though the idle timeout never fires", async (provider, pieces) => {
    const { origin, seen } = await server((response) => {
      response.writeHead(200, { "content-type": "text/event-stream" });
      pieces(response);
    });
    const error = await failure(clients(origin, true, { timeoutMs: 10_000, deadlineMs: 400 })[provider]!.complete(request));
    expect(error.reason).toBe("deadline_exceeded");
    expect(error.message).toContain("model.request_deadline_sec");
    expect(seen.requests).toBe(1);
    // The connection was given up by the client, not ended by the server.
    await vi.waitFor(() => expect(seen.abandoned).toBe(1));
  });
});

describe("a run's default wall-clock limit", () => {
  it("stops a run without timeout_sec after 4 hours", () => {
    vi.useFakeTimers();
    const stop = new AbortController();
    const events: RunEvent[] = [];
    const cancel = startTimeLimit(undefined, stop, { cost_usd: 0 } as RunReport, { emit: (event) => events.push(event) }, Date.now());
    vi.advanceTimersByTime(DEFAULT_RUN_TIMEOUT_SEC * 1000 - 1);
    expect(stop.signal.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(stop.signal.aborted).toBe(true);
    expect(events).toMatchObject([{ type: "run.limit_reached", data: { limit: "timeout_sec", value: 4 * 3600 } }]);
    cancel();
  });
});
