import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { AnthropicModelClient, DEFAULT_ANTHROPIC_MAX_TOKENS } from "../../src/model/anthropic-model-client.js";
import { OpenAIModelClient } from "../../src/model/openai-model-client.js";

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

/** A loopback server that records each request body and answers `reply`. */
async function recorder(reply: unknown) {
  const bodies: Record<string, unknown>[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      bodies.push(JSON.parse(Buffer.concat(chunks).toString("utf8")) as Record<string, unknown>);
      response.writeHead(200, { "content-type": "application/json" });
      response.end(JSON.stringify(reply));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closers.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, bodies };
}

const request = { messages: [{ role: "user" as const, content: "u" }], tools: [], agentId: "main", callIndex: 0 };

describe("model.max_output_tokens on the wire", () => {
  it("anthropic: max_tokens is always sent (default 8192), thinking with its budget, no temperature beside thinking", async () => {
    const message = {
      id: "m",
      type: "message",
      role: "assistant",
      model: "c",
      content: [{ type: "text", text: "ok" }],
      stop_reason: "end_turn",
      stop_sequence: null,
      usage: { input_tokens: 3, cache_read_input_tokens: 5, cache_creation_input_tokens: 7, output_tokens: 2 },
    };
    const { origin, bodies } = await recorder(message);
    const plain = new AnthropicModelClient({ baseURL: origin, apiKey: "k", model: "c", stream: false, temperature: 0.2 });
    const response = await plain.complete(request);
    expect(response.usage).toEqual({ prompt_tokens: 15, completion_tokens: 2, cached_tokens: 5, cache_write_tokens: 7 });
    const thinking = new AnthropicModelClient({
      baseURL: origin,
      apiKey: "k",
      model: "c",
      stream: false,
      temperature: 0.2,
      maxOutputTokens: 20_000,
      thinkingBudgetTokens: 4096,
    });
    await thinking.complete(request);
    expect(bodies[0]).toMatchObject({ max_tokens: DEFAULT_ANTHROPIC_MAX_TOKENS, temperature: 0.2 });
    expect(bodies[0]).not.toHaveProperty("thinking");
    expect(bodies[1]).toMatchObject({ max_tokens: 20_000, thinking: { type: "enabled", budget_tokens: 4096 } });
    expect(bodies[1]).not.toHaveProperty("temperature");
  });

  it("openai chat: max_completion_tokens only when set", async () => {
    const completion = {
      id: "c",
      object: "chat.completion",
      created: 0,
      model: "m",
      choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }],
    };
    const { origin, bodies } = await recorder(completion);
    await new OpenAIModelClient({ baseURL: `${origin}/v1`, apiKey: "k", model: "m" }).complete(request);
    await new OpenAIModelClient({ baseURL: `${origin}/v1`, apiKey: "k", model: "m", maxOutputTokens: 1234 }).complete(request);
    expect(bodies[0]).not.toHaveProperty("max_completion_tokens");
    expect(bodies[1]).toMatchObject({ max_completion_tokens: 1234 });
  });
});
