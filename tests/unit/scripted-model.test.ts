import { afterEach, describe, expect, it, vi } from "vitest";
import { ModelError } from "../../src/errors.js";
import type { ChatMessage } from "../../src/model/messages.js";
import { OpenAIModelClient } from "../../src/model/openai-model-client.js";
import { SCRIPT_FINISHED_CONTENT, ScriptedModelServer, type Script } from "../../src/model/scripted-model-server.js";

const servers: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => server.close()));
});

async function scriptedWithURL(script: Script) {
  const server = new ScriptedModelServer(script);
  servers.push(server);
  return { server, baseURL: await server.start() };
}

async function scripted(script: Script) {
  const { server, baseURL } = await scriptedWithURL(script);
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
        {
          content: "first",
          tool_calls: [
            { name: "read_file", arguments: { path: "a.py" } },
            { name: "run_shell", arguments_raw: "{not json" },
          ],
        },
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
      turns: [{ content: "x" }, { expect: { tool_result_matches: "def add", tool_result_not_matches: "Traceback" }, content: "ok" }],
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
    expect((failure as ModelError).message).toMatch(/: step 2 \(turns\[1\]\) expect\.tool_result_matches \/def add\/ not met; tool results began: "def sub/);
    history[history.length - 1] = { role: "tool", tool_call_id: "c", content: "def add(a, b): ..." };
    expect((await client.complete({ messages: history, tools: [], agentId: "main", callIndex: 1 })).content).toBe("ok");
    history[history.length - 1] = { role: "tool", tool_call_id: "c", content: "def add\nTraceback (most recent call last)" };
    const second = await client.complete({ messages: history, tools: [], agentId: "main", callIndex: 1 }).catch((error: unknown) => error);
    expect((second as ModelError).message).toMatch(/tool_result_not_matches \/Traceback\/ matched/);
  });
});

describe("ScriptedModelServer requests and faults", () => {
  it("records call index, attempt and purpose; a request without the attempt or purpose header is attempt 0 of a turn", async () => {
    const { server, baseURL } = await scriptedWithURL({ turns: [{ content: "zero" }] });
    const response = await fetch(`${baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-agent-runner-call-index": "0" },
      body: JSON.stringify({ model: "scripted", messages: base }),
    });
    expect(((await response.json()) as { choices: { message: { content: string } }[] }).choices[0]!.message.content).toBe("zero");
    expect(server.requests).toEqual([
      { callIndex: 0, attempt: 0, purpose: "turn", model: "scripted", messages: base, wire: "openai-chat", stream: false, parameters: ["model", "messages"] },
    ]);
    const bad = await fetch(`${baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-agent-runner-call-index": "0", "x-agent-runner-purpose": "chat" },
      body: JSON.stringify({ model: "scripted", messages: base }),
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(/bad x-agent-runner-purpose header "chat"/);
  });

  it("answers a status fault with an OpenAI-shaped error body and Retry-After", async () => {
    const { baseURL } = await scriptedWithURL({ turns: [{ content: "x", faults: [{ status: 429, retry_after: 3, message: "slow down" }] }] });
    const response = await fetch(`${baseURL}/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-agent-runner-call-index": "0", "x-agent-runner-attempt": "0" },
      body: JSON.stringify({ model: "scripted", messages: base }),
    });
    expect(response.status).toBe(429);
    expect(response.headers.get("retry-after")).toBe("3");
    expect(await response.json()).toEqual({ error: { message: "slow down", type: "scripted_fault", code: null } });
  });

  it("close() ends a pending delay fault at once", async () => {
    const { server, baseURL } = await scriptedWithURL({ turns: [{ content: "x", faults: [{ delay_ms: 60_000 }] }] });
    const client = new OpenAIModelClient({ baseURL, apiKey: "test", model: "scripted", maxRetries: 0 });
    const started = Date.now();
    const pending = client.complete({ messages: base, tools: [], agentId: "main", callIndex: 0 }).catch((error: unknown) => error);
    await vi.waitFor(() => expect(server.requests).toHaveLength(1));
    await server.close();
    const error = await pending;
    expect(error).toBeInstanceOf(ModelError);
    expect((error as ModelError).reason).toBe("connection_error");
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});
