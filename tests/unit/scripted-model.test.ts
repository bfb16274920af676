import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { ModelError } from "../../src/errors.js";
import type { ChatMessage } from "../../src/model/messages.js";
import { OpenAIModelClient } from "../../src/model/openai-model-client.js";
import { SCRIPT_FINISHED_CONTENT, ScriptedModelServer, type Script } from "../../src/model/scripted-model-server.js";

const servers: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

async function scripted(script: Script) {
  const server = new ScriptedModelServer(script);
  servers.push(server);
  const baseURL = await server.start();
  return { server, client: new OpenAIModelClient({ baseURL, apiKey: "test", model: "scripted", maxRetries: 0 }) };
}

const base: ChatMessage[] = [
  { role: "system", content: "s" },
  { role: "user", content: "u" },
];

describe("ScriptedModelServer through the openai client", () => {
  it("answers the turn named by the call index, with tool calls and raw arguments", async () => {
    const { client, server } = await scripted({
      turns: [
        { content: "first", tool_calls: [{ name: "read_file", arguments: { path: "a.py" } }, { name: "run_shell", arguments_raw: "{not json" }] },
        { content: "second" },
      ],
    });
    const first = await client.complete({ messages: base, tools: [], agentId: "main", callIndex: 0 });
    expect(first.content).toBe("first");
    expect(first.toolCalls).toEqual([
      { id: "call_0_0", type: "function", function: { name: "read_file", arguments: '{"path":"a.py"}' } },
      { id: "call_0_1", type: "function", function: { name: "run_shell", arguments: "{not json" } },
    ]);
    expect(first.usage.prompt_tokens).toBeGreaterThan(0);
    const again = await client.complete({ messages: base, tools: [], agentId: "main", callIndex: 1 });
    expect(again.content).toBe("second");
    expect((await client.complete({ messages: base, tools: [], agentId: "main", callIndex: 7 })).content).toBe(SCRIPT_FINISHED_CONTENT);
    expect(server.requests.map((request) => request.callIndex)).toEqual([0, 1, 7]);
  });

  it("checks expect against the tool results after the last assistant message", async () => {
    const { client } = await scripted({
      turns: [
        { content: "x" },
        { expect: { tool_result_matches: "def add", tool_result_not_matches: "Traceback" }, content: "ok" },
      ],
    });
    const history: ChatMessage[] = [
      ...base,
      { role: "tool", tool_call_id: "old", content: "def add (old, before the assistant)" },
      { role: "assistant", content: null, tool_calls: [{ id: "c", type: "function", function: { name: "read_file", arguments: "{}" } }] },
      { role: "tool", tool_call_id: "c", content: "def sub(a, b): ..." },
    ];
    const failure = await client.complete({ messages: history, tools: [], agentId: "main", callIndex: 1 }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ModelError);
    expect((failure as ModelError).reason).toBe("script_expectation_failed");
    expect((failure as ModelError).message).toMatch(/turn 1 \(turns\[1\]\) expect\.tool_result_matches \/def add\/ not met; tool results began: "def sub/);
    history[history.length - 1] = { role: "tool", tool_call_id: "c", content: "def add(a, b): ..." };
    expect((await client.complete({ messages: history, tools: [], agentId: "main", callIndex: 1 })).content).toBe("ok");
    history[history.length - 1] = { role: "tool", tool_call_id: "c", content: "def add\nTraceback (most recent call last)" };
    const second = await client.complete({ messages: history, tools: [], agentId: "main", callIndex: 1 }).catch((error: unknown) => error);
    expect((second as ModelError).message).toMatch(/tool_result_not_matches \/Traceback\/ matched/);
  });
});

describe("OpenAIModelClient retries", () => {
  it("retries 429 and 503, honouring retry-after, then succeeds", async () => {
    const arrivals: number[] = [];
    const server = createServer((request, response) => {
      request.resume();
      arrivals.push(Date.now());
      if (arrivals.length === 1) {
        response.writeHead(429, { "content-type": "application/json", "retry-after-ms": "300" });
        response.end(JSON.stringify({ error: { message: "slow down" } }));
        return;
      }
      if (arrivals.length === 2) {
        response.writeHead(503, { "content-type": "application/json", "retry-after-ms": "10" });
        response.end(JSON.stringify({ error: { message: "overloaded" } }));
        return;
      }
      response.writeHead(200, { "content-type": "application/json" });
      response.end(JSON.stringify({ id: "x", object: "chat.completion", created: 0, model: "m", choices: [{ index: 0, message: { role: "assistant", content: "hello" }, finish_reason: "stop" }] }));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    servers.push({ close: () => new Promise<void>((resolve) => server.close(() => resolve())) });
    const client = new OpenAIModelClient({ baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, apiKey: "k", model: "m", maxRetries: 3 });
    const response = await client.complete({ messages: base, tools: [], agentId: "main", callIndex: 0 });
    expect(response.content).toBe("hello");
    expect(arrivals).toHaveLength(3);
    expect(arrivals[1]! - arrivals[0]!).toBeGreaterThanOrEqual(290);
  });

  it("gives up with reason rate_limited when 429s outlast the retries", async () => {
    let count = 0;
    const server = createServer((request, response) => {
      request.resume();
      count += 1;
      response.writeHead(429, { "content-type": "application/json", "retry-after-ms": "1" });
      response.end(JSON.stringify({ error: { message: "quota" } }));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    servers.push({ close: () => new Promise<void>((resolve) => server.close(() => resolve())) });
    const client = new OpenAIModelClient({ baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, apiKey: "k", model: "m", maxRetries: 2 });
    const error = await client.complete({ messages: base, tools: [], agentId: "main", callIndex: 0 }).catch((failure: unknown) => failure);
    expect(error).toBeInstanceOf(ModelError);
    expect((error as ModelError).reason).toBe("rate_limited");
    expect((error as ModelError).exitCode).toBe(3);
    expect(count).toBe(3);
  });
});
