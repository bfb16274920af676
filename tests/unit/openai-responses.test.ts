import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { ModelError } from "../../src/errors.js";
import type { ChatMessage, ToolDefinition, Usage } from "../../src/model/messages.js";
import type { ModelRequest, ModelResponse, ModelRetryInfo } from "../../src/model/model-client.js";
import { OpenAIResponsesModelClient, type OpenAIResponsesModelClientOptions } from "../../src/model/openai-responses-model-client.js";
import { MIN_CACHED_PREFIX_TOKENS } from "../../src/model/scripted-prompt-cache.js";
import { ScriptedModelServer, type Script } from "../../src/model/scripted-model-server.js";

// The real `openai` client's Responses API over real loopback HTTP, against
// the scripted model's Responses wire or a plain server answering in the API
// reference's shapes. Only the backoff sleep is injected (recorded, returns at once).

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
  delays.length = 0;
});

const delays: number[] = [];
const sleep = async (ms: number) => {
  delays.push(ms);
};

const tools: ToolDefinition[] = [
  {
    type: "function",
    function: {
      name: "run_shell",
      description: "Run a command.",
      parameters: { type: "object", properties: { command: { type: "string" } }, required: ["command"] },
    },
  },
];

async function scripted(script: Script, options: Partial<OpenAIResponsesModelClientOptions> = {}) {
  const server = new ScriptedModelServer(script);
  const baseURL = await server.start();
  closers.push(() => server.close());
  const client = new OpenAIResponsesModelClient({ baseURL, apiKey: "test", model: "scripted", maxRetries: 3, sleep, random: () => 0.5, ...options });
  return { server, client };
}

/** A plain HTTP server answering request n with `handlers[n]` (the last repeats); records each request's JSON body. */
async function rawServer(handlers: ((request: IncomingMessage, response: ServerResponse) => void)[]) {
  const bodies: Record<string, unknown>[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      bodies.push(JSON.parse(Buffer.concat(chunks).toString("utf8")));
      handlers[Math.min(bodies.length - 1, handlers.length - 1)]!(request, response);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closers.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, bodies };
}

function rawClient(baseURL: string, options: Partial<OpenAIResponsesModelClientOptions> = {}) {
  return new OpenAIResponsesModelClient({ baseURL, apiKey: "test", model: "gpt-test", maxRetries: 3, sleep, random: () => 0.5, ...options });
}

/** A `response` object in the API reference's shape. */
function responseBody(fields: Record<string, unknown>) {
  return {
    id: "resp_1",
    object: "response",
    created_at: 0,
    status: "completed",
    error: null,
    incomplete_details: null,
    model: "gpt-test",
    output: [],
    usage: { input_tokens: 10, input_tokens_details: { cached_tokens: 0 }, output_tokens: 2, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 12 },
    ...fields,
  };
}

const json = (body: unknown) => (_request: IncomingMessage, response: ServerResponse) => {
  const text = JSON.stringify(body);
  response.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  response.end(text);
};

const sse =
  (events: Record<string, unknown>[], options: { stall?: boolean } = {}) =>
  (_request: IncomingMessage, response: ServerResponse) => {
    response.writeHead(200, { "content-type": "text/event-stream" });
    const text = events.map((event, index) => `event: ${event.type}\ndata: ${JSON.stringify({ sequence_number: index, ...event })}\n\n`).join("");
    if (options.stall) response.write(text);
    else response.end(text);
  };

function request(messages: ChatMessage[], extra: Partial<ModelRequest> = {}) {
  const retries: ModelRetryInfo[] = [];
  const text: [string, number][] = [];
  return {
    request: {
      messages,
      tools,
      agentId: "main",
      callIndex: 0,
      onRetry: (info: ModelRetryInfo) => retries.push(info),
      onText: (delta: string, attempt: number) => text.push([delta, attempt]),
      ...extra,
    } satisfies ModelRequest,
    retries,
    text,
  };
}

async function failure(promise: Promise<unknown>): Promise<ModelError> {
  const error = await promise.then(
    () => new Error("expected the call to fail"),
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(ModelError);
  return error as ModelError;
}

/** The assistant message the agent loop appends for a response. */
function assistantOf(response: ModelResponse): ChatMessage {
  return {
    role: "assistant",
    content: response.content,
    ...(response.toolCalls.length ? { tool_calls: response.toolCalls } : {}),
    ...(response.reasoning ? { reasoning: response.reasoning } : {}),
  };
}

/** Plays the agent loop's part for `turns` calls: append the reply, answer each tool call. */
async function converse(client: OpenAIResponsesModelClient, start: ChatMessage[], turns: number, result: (step: number) => string = () => "ok") {
  const messages = [...start];
  const usages: Usage[] = [];
  for (let step = 0; step < turns; step += 1) {
    const response = await client.complete(request(messages, { callIndex: step }).request);
    usages.push(response.usage);
    messages.push(assistantOf(response));
    for (const call of response.toolCalls) messages.push({ role: "tool", tool_call_id: call.id, content: result(step) });
  }
  return { messages, usages };
}

const start: ChatMessage[] = [
  { role: "system", content: "You are a careful engineer." },
  { role: "user", content: "Fix the bug." },
];
const shell = (command: string) => ({ name: "run_shell", arguments: { command } });

describe("OpenAIResponsesModelClient: the request on the wire", () => {
  it("sends instructions, input items, function tools, store false and the encrypted-reasoning include", async () => {
    const reasoningItem = { id: "rs_1", type: "reasoning", summary: [], encrypted_content: "gAAAA-opaque" };
    const { baseURL, bodies } = await rawServer([
      json(
        responseBody({
          output: [{ id: "msg_1", type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "hi", annotations: [] }] }],
        }),
      ),
    ]);
    const messages: ChatMessage[] = [
      ...start,
      {
        role: "assistant",
        content: "Looking.",
        tool_calls: [{ id: "call_a", type: "function", function: { name: "run_shell", arguments: '{"command":"ls"}' } }],
        reasoning: { provider: "openai-responses", items: [reasoningItem] },
      },
      { role: "tool", tool_call_id: "call_a", content: "calc.py" },
      { role: "assistant", content: "An Anthropic turn.", reasoning: { provider: "anthropic", items: [{ type: "thinking", thinking: "t", signature: "s" }] } },
      { role: "user", content: "Go on." },
    ];
    const response = await rawClient(baseURL, { stream: false, temperature: 0.2 }).complete(request(messages).request);
    expect(response).toEqual({
      content: "hi",
      toolCalls: [],
      finishReason: "stop",
      usage: { prompt_tokens: 10, completion_tokens: 2, cached_tokens: 0, cache_write_tokens: 0 },
    });
    expect(bodies[0]).toEqual({
      model: "gpt-test",
      instructions: "You are a careful engineer.",
      input: [
        { type: "message", role: "user", content: "Fix the bug." },
        reasoningItem,
        { type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "Looking." }] },
        { type: "function_call", call_id: "call_a", name: "run_shell", arguments: '{"command":"ls"}' },
        { type: "function_call_output", call_id: "call_a", output: "calc.py" },
        // Another provider's reasoning is not sent.
        { type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "An Anthropic turn." }] },
        { type: "message", role: "user", content: "Go on." },
      ],
      tools: [{ type: "function", name: "run_shell", description: "Run a command.", parameters: tools[0]!.function.parameters, strict: false }],
      tool_choice: "auto",
      store: false,
      include: ["reasoning.encrypted_content"],
      temperature: 0.2,
      stream: false,
    });
  });

  it("round trip: what the client sends reads back on the scripted wire as the same conversation", async () => {
    const { client, server } = await scripted({
      turns: [{ content: "Looking.", tool_calls: [shell("ls"), shell("cat calc.py")] }, { tool_calls: [shell("pytest")] }, { content: "Fixed." }],
    });
    const { messages } = await converse(client, [...start, { role: "system", content: "Later note." }], 3);
    // The last request held everything but the last reply.
    expect(server.requests.at(-1)!.messages).toEqual(messages.slice(0, -1));
    expect(server.requests.map((seen) => seen.wire)).toEqual(["openai-responses", "openai-responses", "openai-responses"]);
    expect(messages.at(-1)).toMatchObject({ role: "assistant", content: "Fixed." });
    expect(messages[3]).toMatchObject({
      role: "assistant",
      content: "Looking.",
      tool_calls: [
        { id: "call_0_0", function: { name: "run_shell", arguments: '{"command":"ls"}' } },
        { id: "call_0_1", function: { name: "run_shell", arguments: '{"command":"cat calc.py"}' } },
      ],
      reasoning: { provider: "openai-responses", items: [{ id: "rs_scripted_0", type: "reasoning", encrypted_content: expect.any(String) }] },
    });
  });
});

describe("OpenAIResponsesModelClient: reasoning items carried under store: false", () => {
  const script: Script = { turns: [{ tool_calls: [shell("ls")] }, { tool_calls: [shell("pytest")] }, { content: "Done." }] };

  it("passes every turn's reasoning item back unchanged, so a 3-turn tool conversation is accepted", async () => {
    const { client, server } = await scripted(script);
    const { messages } = await converse(client, start, 3);
    expect(messages.at(-1)).toMatchObject({ content: "Done." });
    expect(server.requests.map((seen) => seen.attempt)).toEqual([0, 0, 0]);
  });

  it("the scripted server answers 400 (not retried) when a function call comes without its reasoning item", async () => {
    const { client } = await scripted(script);
    const { messages } = await converse(client, start, 1);
    const dropped = messages.map((message) => (message.role === "assistant" ? { ...message, reasoning: undefined } : message));
    const error = await failure(client.complete(request(dropped, { callIndex: 1 }).request));
    expect(error.reason).toBe("bad_request");
    expect(error.message).toMatch(/answered 400: scripted model: input\[1\]: function_call "call_0_0" was provided without its required reasoning item/);
    expect(delays).toEqual([]);
  });

  it("the scripted server answers 400 when the reasoning item was altered", async () => {
    const { client } = await scripted(script);
    const { messages } = await converse(client, start, 1);
    const assistant = messages[2] as Extract<ChatMessage, { role: "assistant" }>;
    const item = assistant.reasoning!.items[0] as { encrypted_content: string };
    const altered = {
      ...assistant,
      reasoning: { provider: "openai-responses" as const, items: [{ ...item, encrypted_content: `x${item.encrypted_content}` }] },
    };
    const error = await failure(client.complete(request([...messages.slice(0, 2), altered, ...messages.slice(3)], { callIndex: 1 }).request));
    expect(error.message).toMatch(/answered 400: scripted model: input\[1\]: the encrypted content of reasoning item "rs_scripted_0" could not be verified/);
  });
});

describe("OpenAIResponsesModelClient: finish reasons and usage", () => {
  const partialMessage = {
    id: "msg_1",
    type: "message",
    role: "assistant",
    status: "incomplete",
    content: [{ type: "output_text", text: "The fix is to", annotations: [] }],
  };

  it("status incomplete (max_output_tokens) is finishReason length, whole or streamed", async () => {
    const incomplete = responseBody({ status: "incomplete", incomplete_details: { reason: "max_output_tokens" }, output: [partialMessage] });
    const whole = await rawServer([json(incomplete)]);
    expect(await rawClient(whole.baseURL, { stream: false }).complete(request(start).request)).toMatchObject({
      content: "The fix is to",
      finishReason: "length",
    });
    const streamed = await rawServer([
      sse([
        { type: "response.created", response: { ...incomplete, status: "in_progress", output: [] } },
        { type: "response.output_text.delta", item_id: "msg_1", output_index: 0, content_index: 0, delta: "The fix is to" },
        { type: "response.incomplete", response: incomplete },
      ]),
    ]);
    expect(await rawClient(streamed.baseURL).complete(request(start).request)).toMatchObject({ content: "The fix is to", finishReason: "length" });
  });

  it("status incomplete (content_filter) and a refusal part are finishReason refusal", async () => {
    const filtered = await rawServer([json(responseBody({ status: "incomplete", incomplete_details: { reason: "content_filter" }, output: [] }))]);
    expect(await rawClient(filtered.baseURL, { stream: false }).complete(request(start).request)).toMatchObject({ content: null, finishReason: "refusal" });
    const refusal = {
      id: "msg_2",
      type: "message",
      role: "assistant",
      status: "completed",
      content: [{ type: "refusal", refusal: "I can't help with that." }],
    };
    const refused = await rawServer([json(responseBody({ output: [refusal] }))]);
    expect(await rawClient(refused.baseURL, { stream: false }).complete(request(start).request)).toMatchObject({
      content: "I can't help with that.",
      finishReason: "refusal",
    });
  });

  it("reports cached tokens over a 20-turn conversation: each turn reads the whole previous prompt from the cache", async () => {
    const turns = Array.from({ length: 20 }, (_, index) => ({ content: `Step ${index}.`, tool_calls: [shell(`echo ${index}`)] }));
    const { client } = await scripted({ turns });
    // A system prompt past the 1024-token minimum, and tool output of about 300 tokens a turn.
    const system = `You are a careful engineer. ${"Follow the house rules. ".repeat(200)}`;
    const { usages } = await converse(client, [{ role: "system", content: system }, start[1]!], 20, (step) => `${step}: ${"output line\n".repeat(100)}`);
    expect(usages[0]!.cached_tokens).toBe(0);
    for (let step = 1; step < 20; step += 1) {
      // Automatic caching: the previous request is a prefix of this one; hits come in 128-token steps past 1024.
      const previous = usages[step - 1]!.prompt_tokens;
      expect(usages[step]!.cached_tokens).toBe(MIN_CACHED_PREFIX_TOKENS + Math.floor((previous - MIN_CACHED_PREFIX_TOKENS) / 128) * 128);
      expect(usages[step]!.prompt_tokens).toBeGreaterThan(previous);
    }
    const prompt = usages.reduce((sum, usage) => sum + usage.prompt_tokens, 0);
    const cached = usages.reduce((sum, usage) => sum + usage.cached_tokens, 0);
    console.log(`20-turn Responses conversation: prompt ${prompt} tokens, cached ${cached}, ratio ${(cached / prompt).toFixed(3)}`);
    expect(cached / prompt).toBeGreaterThan(0.85);
  });
});

describe("OpenAIResponsesModelClient: streaming", () => {
  it("streams the text as output_text deltas and returns the whole reply", async () => {
    const { client } = await scripted({ turns: [{ content: "I will run the tests now.", tool_calls: [shell("python3 -m pytest -q")] }] });
    const { request: call, text } = request(start);
    const response = await client.complete(call);
    expect(text.length).toBeGreaterThan(3);
    expect(text.every(([, attempt]) => attempt === 0)).toBe(true);
    expect(text.map(([delta]) => delta).join("")).toBe("I will run the tests now.");
    expect(response).toMatchObject({
      content: "I will run the tests now.",
      finishReason: "tool_calls",
      toolCalls: [{ id: "call_0_0", type: "function", function: { name: "run_shell", arguments: '{"command":"python3 -m pytest -q"}' } }],
    });
  });

  it("a stream cut mid-reply is retried; the reply returned is the retry's whole one, never a mix", async () => {
    const turn = {
      content: "Reading both files before I change anything, since the bug may sit in either of them and the tests do not say which one is wrong.",
      tool_calls: [shell("cat a.py"), shell("cat b.py")],
      faults: [{ truncate: true as const }],
    };
    const { client, server } = await scripted({ turns: [turn] });
    const { request: call, retries, text } = request(start);
    const response = await client.complete(call);
    expect(retries.map((retry) => retry.reason)).toEqual(["truncated_response"]);
    expect(server.requests.map((seen) => seen.attempt)).toEqual([0, 1]);
    // Attempt 0 showed part of the text before the cut; attempt 1 all of it.
    const shown = (attempt: number) =>
      text
        .filter(([, of]) => of === attempt)
        .map(([delta]) => delta)
        .join("");
    expect(shown(0).length).toBeGreaterThan(0);
    expect(shown(0).length).toBeLessThan(turn.content.length);
    expect(shown(1)).toBe(turn.content);
    expect(response.content).toBe(turn.content);
    expect(response.toolCalls.map((toolCall) => toolCall.id)).toEqual(["call_0_0", "call_0_1"]);
  });

  it("a stream that goes silent past the idle timeout is retried (idle_timeout); one that keeps sending outlives it", async () => {
    const created = { type: "response.created", response: responseBody({ status: "in_progress", output: [] }) };
    const delta = { type: "response.output_text.delta", item_id: "msg_1", output_index: 0, content_index: 0, delta: "Hel" };
    const message = {
      id: "msg_1",
      type: "message",
      role: "assistant",
      status: "completed",
      content: [{ type: "output_text", text: "Hello", annotations: [] }],
    };
    const completed = { type: "response.completed", response: responseBody({ output: [message] }) };
    const { baseURL } = await rawServer([sse([created, delta], { stall: true }), sse([created, delta, completed])]);
    const { request: call, retries } = request(start);
    const response = await rawClient(baseURL, { timeoutMs: 300 }).complete(call);
    expect(retries.map((retry) => retry.reason)).toEqual(["idle_timeout"]);
    expect(response.content).toBe("Hello");

    // Events 150 ms apart for 1.2 s: well past 300 ms in total, never 300 ms silent.
    const slow = await rawServer([
      (_request, response) => {
        response.writeHead(200, { "content-type": "text/event-stream" });
        const events = [created, ...Array.from({ length: 7 }, () => delta), completed];
        const send = (index: number) => {
          response.write(`event: ${events[index]!.type}\ndata: ${JSON.stringify({ sequence_number: index, ...events[index] })}\n\n`);
          if (index + 1 < events.length) setTimeout(() => send(index + 1), 150);
          else response.end();
        };
        send(0);
      },
    ]);
    const patient = request(start);
    expect((await rawClient(slow.baseURL, { timeoutMs: 300 }).complete(patient.request)).content).toBe("Hello");
    expect(patient.retries).toEqual([]);
  });

  it("response.failed with server_error is retried; an error event with a request error code is not", async () => {
    const created = { type: "response.created", response: responseBody({ status: "in_progress", output: [] }) };
    const failed = {
      type: "response.failed",
      response: responseBody({ status: "failed", error: { code: "server_error", message: "The model had an error." }, output: [] }),
    };
    const completed = {
      type: "response.completed",
      response: responseBody({
        output: [{ id: "m", type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "ok", annotations: [] }] }],
      }),
    };
    const flaky = await rawServer([sse([created, failed]), sse([created, completed])]);
    const first = request(start);
    expect((await rawClient(flaky.baseURL).complete(first.request)).content).toBe("ok");
    expect(first.retries.map((retry) => retry.reason)).toEqual(["server_error"]);

    const refused = await rawServer([sse([created, { type: "error", code: "invalid_prompt", message: "Invalid prompt.", param: null }])]);
    const error = await failure(rawClient(refused.baseURL).complete(request(start).request));
    expect(error.reason).toBe("bad_request");
    expect(error.message).toMatch(/sent an error event \(invalid_prompt\): Invalid prompt\.$/);
  });

  it("without streaming: a JSON reply cut mid-body is retried too", async () => {
    const { client } = await scripted({ turns: [{ content: "whole", faults: [{ truncate: true }] }] }, { stream: false });
    const { request: call, retries, text } = request(start);
    expect((await client.complete(call)).content).toBe("whole");
    expect(retries.map((retry) => retry.reason)).toEqual(["truncated_response"]);
    expect(text).toEqual([]);
  });
});
