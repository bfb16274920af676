import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import type { ChatMessage, ToolDefinition } from "../../src/model/messages.js";
import type { ModelRequest, ModelRetryInfo } from "../../src/model/model-client.js";
import { OpenAIModelClient, type OpenAIModelClientOptions } from "../../src/model/openai-model-client.js";
import { ScriptedModelServer, type Script } from "../../src/model/scripted-model-server.js";

// The real openai client over real loopback HTTP against the scripted model's
// chat wire (whole replies and server-sent chunk streams); only the backoff
// sleep is injected, so no test waits for a backoff.

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

const base: ChatMessage[] = [
  { role: "system", content: "s" },
  { role: "user", content: "u" },
];

const tool = (name: string): ToolDefinition => ({ type: "function", function: { name, description: name, parameters: { type: "object" } } });
const tools = [tool("read_file"), tool("run_shell")];

async function scripted(script: Script, options: Partial<OpenAIModelClientOptions> = {}) {
  const server = new ScriptedModelServer(script);
  const baseURL = await server.start();
  closers.push(() => server.close());
  const delays: number[] = [];
  const client = new OpenAIModelClient({
    baseURL,
    apiKey: "test",
    model: "scripted",
    maxRetries: 4,
    sleep: async (ms) => {
      delays.push(ms);
    },
    ...options,
  });
  return { server, client, delays };
}

/** Calls the client, recording the streamed text (by attempt) and the retries. */
async function call(client: OpenAIModelClient, extra: Partial<ModelRequest> = {}) {
  const texts: [number, string][] = [];
  const retries: ModelRetryInfo[] = [];
  const response = await client.complete({
    messages: base,
    tools,
    agentId: "main",
    callIndex: 0,
    onText: (delta, attempt) => texts.push([attempt, delta]),
    onRetry: (info) => retries.push(info),
    ...extra,
  });
  return { response, texts, retries };
}

const LONG = "I will read calc.py first, then run the tests to see what fails.";
const READ = { name: "read_file", arguments: { path: "calc.py" } };
const SHELL = { name: "run_shell", arguments: { command: "python3 -m pytest -q" } };
const expectedCalls = [
  { id: "call_0_0", type: "function", function: { name: "read_file", arguments: '{"path":"calc.py"}' } },
  { id: "call_0_1", type: "function", function: { name: "run_shell", arguments: '{"command":"python3 -m pytest -q"}' } },
];

describe("OpenAIModelClient streaming (chat completion chunks)", () => {
  it("streams: asks for a stream with usage, shows the text piece by piece, assembles tool calls from their deltas", async () => {
    const { client, server } = await scripted({ turns: [{ content: LONG, tool_calls: [READ, SHELL] }] });
    const { response, texts } = await call(client);
    expect(server.requests[0]).toMatchObject({ stream: true });
    expect(server.requests[0]!.parameters).toContain("stream_options");
    expect(server.requests[0]!.parameters).not.toContain("parallel_tool_calls");
    expect(texts.length).toBeGreaterThan(3);
    expect(texts.every(([attempt]) => attempt === 0)).toBe(true);
    expect(texts.map(([, text]) => text).join("")).toBe(LONG);
    expect(response).toEqual({
      content: LONG,
      toolCalls: expectedCalls,
      finishReason: "tool_calls",
      usage: { prompt_tokens: expect.any(Number), completion_tokens: expect.any(Number), cached_tokens: 0, cache_write_tokens: 0 },
    });
    expect(response.usage.prompt_tokens).toBeGreaterThan(0);
  });

  it("a stream cut mid-reply is retried and never half-applied: the text shown by attempt 0 is replaced by attempt 1's whole reply", async () => {
    // Text long enough that the cut (half the events) falls inside it.
    const text = LONG.repeat(4);
    const { client, server } = await scripted({ turns: [{ content: text, tool_calls: [READ, SHELL], faults: [{ truncate: true }] }] });
    const { response, texts, retries } = await call(client);
    expect(retries.map((retry) => retry.reason)).toEqual(["truncated_response"]);
    const shown = (attempt: number) =>
      texts
        .filter(([which]) => which === attempt)
        .map(([, text]) => text)
        .join("");
    expect(shown(0).length).toBeGreaterThan(0);
    expect(text.startsWith(shown(0))).toBe(true);
    expect(shown(0)).not.toBe(text);
    expect(shown(1)).toBe(text);
    expect(response.content).toBe(text);
    expect(response.toolCalls).toEqual(expectedCalls);
    expect(server.requests.map((request) => request.attempt)).toEqual([0, 1]);
  });

  it("a stream that stalls mid-reply longer than the idle timeout is given up (idle_timeout) and retried", async () => {
    const { client } = await scripted({ turns: [{ content: LONG, faults: [{ stall_ms: 30_000 }] }] }, { timeoutMs: 300 });
    const started = Date.now();
    const { response, texts, retries } = await call(client);
    expect(retries.map((retry) => retry.reason)).toEqual(["idle_timeout"]);
    expect(texts.some(([attempt]) => attempt === 0)).toBe(true);
    expect(response.content).toBe(LONG);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it("a stall shorter than the idle timeout is waited out, in the same attempt", async () => {
    const { client } = await scripted({ turns: [{ content: LONG, faults: [{ stall_ms: 50 }] }] }, { timeoutMs: 5_000 });
    const { response, retries } = await call(client);
    expect(retries).toEqual([]);
    expect(response.content).toBe(LONG);
  });

  it("the idle timeout is not a total timeout: a reply streaming for longer than it, a chunk every 100 ms, is not cut", async () => {
    const words = Array.from({ length: 12 }, (_, index) => `w${index} `);
    const server = createServer((request, response) => {
      request.resume();
      response.writeHead(200, { "content-type": "text/event-stream" });
      const chunk = (delta: object, finish: string | null = null) =>
        `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      let sent = 0;
      const timer = setInterval(() => {
        if (sent < words.length) response.write(chunk({ content: words[sent++] }));
        else {
          clearInterval(timer);
          response.end(`${chunk({}, "stop")}data: [DONE]\n\n`);
        }
      }, 100);
      response.on("close", () => clearInterval(timer));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    closers.push(async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    });
    const client = new OpenAIModelClient({
      baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
      apiKey: "k",
      model: "m",
      maxRetries: 0,
      timeoutMs: 1_000,
    });
    const started = Date.now();
    const { response, retries } = await call(client);
    expect(Date.now() - started).toBeGreaterThan(1_000);
    expect(retries).toEqual([]);
    expect(response.content).toBe(words.join(""));
    // A server that sends no usage in its stream: usage 0.
    expect(response.usage).toEqual({ prompt_tokens: 0, completion_tokens: 0, cached_tokens: 0, cache_write_tokens: 0 });
  });

  it("an error event inside a 200 stream (as OpenRouter sends when the upstream fails) is retried as stream_error", async () => {
    let requests = 0;
    const server = createServer((request, response) => {
      request.resume();
      requests += 1;
      response.writeHead(200, { "content-type": "text/event-stream" });
      const chunk = (delta: object, finish: string | null = null) =>
        `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      if (requests === 1) response.end(`${chunk({ content: "half" })}data: ${JSON.stringify({ error: { message: "upstream failed", code: 502 } })}\n\n`);
      else response.end(`${chunk({ content: "whole" })}${chunk({}, "stop")}data: [DONE]\n\n`);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    closers.push(async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    });
    const client = new OpenAIModelClient({
      baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
      apiKey: "k",
      model: "m",
      maxRetries: 1,
      sleep: async () => undefined,
    });
    const { response, retries } = await call(client);
    expect(retries.map((retry) => retry.reason)).toEqual(["stream_error"]);
    expect(response.content).toBe("whole");
  });

  it("silence before the headers is a timeout in both modes", async () => {
    for (const stream of [true, false]) {
      const { client } = await scripted({ turns: [{ content: "done", faults: [{ delay_ms: 30_000 }] }] }, { timeoutMs: 300, stream });
      const { response, retries } = await call(client);
      expect([stream, retries.map((retry) => retry.reason)]).toEqual([stream, ["timeout"]]);
      expect(response.content).toBe("done");
    }
  });

  it("stream: false asks for one JSON reply and shows nothing while waiting", async () => {
    const { client, server } = await scripted({ turns: [{ content: LONG, tool_calls: [READ, SHELL] }] }, { stream: false });
    const { response, texts } = await call(client);
    expect(server.requests[0]).toMatchObject({ stream: false });
    expect(server.requests[0]!.parameters).not.toContain("stream_options");
    expect(texts).toEqual([]);
    expect(response.content).toBe(LONG);
    expect(response.toolCalls).toEqual(expectedCalls);
  });

  it("reports the usage chunk's cached tokens", async () => {
    const big = "x".repeat(8_000);
    const { client } = await scripted({ turns: [{ content: "a" }, { content: "b" }] });
    const messages: ChatMessage[] = [{ role: "system", content: big }, ...base.slice(1)];
    await call(client, { messages });
    const { response } = await call(client, { messages, callIndex: 1 });
    expect(response.usage.cached_tokens).toBeGreaterThanOrEqual(1024);
  });
});

describe.each([
  ["streamed", true],
  ["whole", false],
])("OpenAI-compatible quirks, %s replies", (_mode, stream) => {
  it("tool calls without ids get stable ids unique in the conversation", async () => {
    const { client } = await scripted({ turns: [{ tool_calls: [READ, SHELL] }, { tool_calls: [READ] }], quirks: { omit_tool_call_ids: true } }, { stream });
    const first = await call(client);
    expect(first.response.toolCalls.map((toolCall) => toolCall.id)).toEqual(["call_runner_0_0", "call_runner_0_1"]);
    const second = await call(client, { callIndex: 1 });
    expect(second.response.toolCalls.map((toolCall) => toolCall.id)).toEqual(["call_runner_1_0"]);
    expect(first.response.toolCalls.map((toolCall) => toolCall.function)).toEqual(expectedCalls.map((expected) => expected.function));
  });

  it("arguments sent as a JSON object become their JSON text", async () => {
    const { client } = await scripted({ turns: [{ tool_calls: [READ, SHELL] }], quirks: { arguments_as_object: true } }, { stream });
    expect((await call(client)).response.toolCalls).toEqual(expectedCalls);
  });

  it("tool calls with finish_reason stop are tool calls; content and tool calls together keep both", async () => {
    const { client } = await scripted({ turns: [{ content: "Reading it.", tool_calls: [READ], finish_reason: "stop" }] }, { stream });
    const { response } = await call(client);
    expect(response.finishReason).toBe("tool_calls");
    expect(response.content).toBe("Reading it.");
    expect(response.toolCalls).toEqual([expectedCalls[0]]);
  });

  it("finish reasons in FinishReason words: content_filter is a refusal, length stays", async () => {
    const { client } = await scripted(
      {
        turns: [
          { content: "no", finish_reason: "content_filter" },
          { content: "cut", finish_reason: "length" },
        ],
      },
      { stream },
    );
    expect((await call(client)).response.finishReason).toBe("refusal");
    expect((await call(client, { callIndex: 1 })).response.finishReason).toBe("length");
  });

  it("tool names the server mangles map back to the one known tool; unknown and ambiguous names stay", async () => {
    const { client } = await scripted(
      {
        turns: [
          {
            tool_calls: [
              { name: "functions.read_file", arguments: {} },
              { name: " Run_Shell ", arguments: {} },
              { name: "delete_everything", arguments: {} },
              { name: "READ", arguments: {} },
            ],
          },
        ],
      },
      { stream },
    );
    const { response } = await call(client, { tools: [...tools, tool("Read"), tool("read")] });
    expect(response.toolCalls.map((toolCall) => toolCall.function.name)).toEqual(["read_file", "run_shell", "delete_everything", "READ"]);
  });

  it("reasoning_content is kept, not shown as reply text, and sent back only with the assistant's tool calls", async () => {
    const { client, server } = await scripted(
      {
        turns: [
          { reasoning: "The tests fail in calc.py; read it.", content: "Reading.", tool_calls: [READ] },
          { reasoning: "Done now.", content: "Fixed." },
          { content: "ok" },
        ],
      },
      { stream },
    );
    const first = await call(client);
    expect(first.response.reasoning).toEqual({ provider: "openai", items: [{ reasoning_content: "The tests fail in calc.py; read it." }] });
    expect(first.texts.map(([, text]) => text).join("")).toBe(stream ? "Reading." : "");
    const history: ChatMessage[] = [
      ...base,
      { role: "assistant", content: first.response.content, tool_calls: first.response.toolCalls, reasoning: first.response.reasoning! },
      { role: "tool", tool_call_id: first.response.toolCalls[0]!.id, content: "def add" },
    ];
    const second = await call(client, { messages: history, callIndex: 1 });
    history.push({ role: "assistant", content: second.response.content, reasoning: second.response.reasoning! }, { role: "user", content: "more" });
    await call(client, { messages: history, callIndex: 2 });
    const sent = server.requests[2]!.messages.filter((message) => message.role === "assistant") as Record<string, unknown>[];
    expect(sent.map((message) => message.reasoning_content)).toEqual(["The tests fail in calc.py; read it.", undefined]);
    expect(sent.every((message) => !("reasoning" in message))).toBe(true);
  });

  it("never sends parallel_tool_calls, so a server that rejects it works", async () => {
    const { client, server } = await scripted({ turns: [{ tool_calls: [READ] }], quirks: { reject_params: ["parallel_tool_calls"] } }, { stream });
    expect((await call(client)).response.toolCalls).toEqual([expectedCalls[0]]);
    expect(server.requests).toHaveLength(1);
  });
});

describe("a server that rejects stream_options", () => {
  it("is asked again at once without it, and never sent it again by that client; usage is then 0", async () => {
    const { client, server, delays } = await scripted({ turns: [{ content: LONG }, { content: "second" }], quirks: { reject_params: ["stream_options"] } });
    const first = await call(client);
    expect(first.response.content).toBe(LONG);
    expect(first.response.usage.prompt_tokens).toBe(0);
    expect(first.retries).toEqual([]);
    expect(delays).toEqual([]);
    expect((await call(client, { callIndex: 1 })).response.content).toBe("second");
    expect(server.requests.map((request) => [request.callIndex, request.attempt, request.parameters.includes("stream_options")])).toEqual([
      [0, 0, true],
      [0, 0, false],
      [1, 0, false],
    ]);
  });

  it("another 400 is not retried", async () => {
    const { client, server } = await scripted({ turns: [{ content: "x", faults: [{ status: 400, message: "bad tools" }] }] });
    await expect(call(client)).rejects.toThrow(/answered 400: bad tools$/);
    expect(server.requests).toHaveLength(1);
  });
});
