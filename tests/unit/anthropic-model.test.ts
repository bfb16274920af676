import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { ModelError } from "../../src/errors.js";
import { toAnthropicPrompt, withCacheBreakpoints } from "../../src/model/anthropic-messages.js";
import { AnthropicModelClient, type AnthropicModelClientOptions } from "../../src/model/anthropic-model-client.js";
import type { ChatMessage, ToolDefinition } from "../../src/model/messages.js";
import type { ModelRequest, ModelRetryInfo } from "../../src/model/model-client.js";
import { ScriptedModelServer, type Script } from "../../src/model/scripted-model-server.js";
import { MAX_CACHE_BREAKPOINTS, scriptedThinkingSignature } from "../../src/model/scripted-wire-anthropic.js";

// The real @anthropic-ai/sdk client over loopback HTTP against the scripted
// model's anthropic wire; only the backoff sleep is injected (returns at once).

const closers: (() => Promise<void>)[] = [];

const frame = (name: string, data: unknown) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;

/** The SSE frames of a text reply sent as `pieces`, one frame per event. */
function streamFrames(pieces: string[]): string[] {
  return [
    frame("message_start", {
      type: "message_start",
      message: {
        id: "m",
        type: "message",
        role: "assistant",
        model: "c",
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 4, output_tokens: 1 },
      },
    }),
    frame("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }),
    ...pieces.map((text) => frame("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text } })),
    frame("content_block_stop", { type: "content_block_stop", index: 0 }),
    frame("message_delta", { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 2 } }),
    frame("message_stop", { type: "message_stop" }),
  ];
}
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

async function scripted(script: Script, options: Partial<AnthropicModelClientOptions> = {}) {
  const server = new ScriptedModelServer(script);
  const url = await server.start();
  closers.push(() => server.close());
  const origin = url.replace(/\/v1$/, "");
  const delays: number[] = [];
  const client = new AnthropicModelClient({
    baseURL: origin,
    apiKey: "test",
    model: "claude-scripted",
    maxRetries: 3,
    sleep: async (ms) => void delays.push(ms),
    random: () => 0.5,
    ...options,
  });
  return { server, client, delays, origin };
}

const readFile: ToolDefinition = {
  type: "function",
  function: { name: "read_file", description: "Read a file", parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] } },
};
const base: ChatMessage[] = [
  { role: "system", content: "You fix bugs." },
  { role: "user", content: "fix add" },
];

function request(messages: ChatMessage[], callIndex: number, extra: Partial<ModelRequest> = {}) {
  const retries: ModelRetryInfo[] = [];
  const text: [string, number][] = [];
  return {
    retries,
    text,
    request: {
      messages,
      tools: [readFile],
      agentId: "main",
      callIndex,
      onRetry: (info: ModelRetryInfo) => retries.push(info),
      onText: (delta: string, attempt: number) => text.push([delta, attempt]),
      ...extra,
    } satisfies ModelRequest,
  };
}

const parallelTurn: ChatMessage[] = [
  ...base,
  {
    role: "assistant",
    content: "Reading both.",
    tool_calls: [
      { id: "call_a", type: "function", function: { name: "read_file", arguments: '{"path":"a.py"}' } },
      { id: "call_b", type: "function", function: { name: "read_file", arguments: '{"path": "b.py' } },
    ],
  },
  { role: "tool", tool_call_id: "call_a", content: "A" },
  { role: "tool", tool_call_id: "call_b", content: "B" },
  { role: "user", content: "[background task t1 ended]" },
];

describe("ChatMessage[] → Messages API", () => {
  it("puts parallel tool results, then the user text after them, in ONE user turn; malformed arguments become {}", () => {
    const prompt = toAnthropicPrompt(parallelTurn, [readFile]);
    expect(prompt.system).toEqual([{ type: "text", text: "You fix bugs." }]);
    expect(prompt.tools).toEqual([{ name: "read_file", description: "Read a file", input_schema: readFile.function.parameters }]);
    expect(prompt.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "fix add" }] },
      {
        role: "assistant",
        content: [
          { type: "text", text: "Reading both." },
          { type: "tool_use", id: "call_a", name: "read_file", input: { path: "a.py" } },
          { type: "tool_use", id: "call_b", name: "read_file", input: {} },
        ],
      },
      {
        role: "user",
        content: [
          { type: "tool_result", tool_use_id: "call_a", content: "A" },
          { type: "tool_result", tool_use_id: "call_b", content: "B" },
          { type: "text", text: "[background task t1 ended]" },
        ],
      },
    ]);
  });

  it("sends thinking blocks back unchanged, before the text and tool_use blocks of their turn; another provider's reasoning is dropped", () => {
    const thinking = { type: "thinking", thinking: "hmm", signature: "sig" };
    const redacted = { type: "redacted_thinking", data: "opaque" };
    const prompt = toAnthropicPrompt(
      [
        ...base,
        {
          role: "assistant",
          content: "x",
          tool_calls: [{ id: "c1", type: "function", function: { name: "read_file", arguments: "{}" } }],
          reasoning: { provider: "anthropic", items: [thinking, redacted] },
        },
        { role: "tool", tool_call_id: "c1", content: "r" },
        { role: "assistant", content: "y", reasoning: { provider: "openai-responses", items: [{ type: "reasoning" }] } },
      ],
      [readFile],
    );
    expect(prompt.messages[1]!.content).toEqual([
      thinking,
      redacted,
      { type: "text", text: "x" },
      { type: "tool_use", id: "c1", name: "read_file", input: {} },
    ]);
    expect(prompt.messages[3]!.content).toEqual([{ type: "text", text: "y" }]);
  });
});

/** Where a prompt carries cache_control: "tools[i]", "system[i]", "messages[i][j]". */
function breakpointsOf(prompt: ReturnType<typeof withCacheBreakpoints>): string[] {
  const marks: string[] = [];
  prompt.tools.forEach((tool, index) => tool.cache_control && marks.push(`tools[${index}]`));
  prompt.system.forEach((block, index) => block.cache_control && marks.push(`system[${index}]`));
  prompt.messages.forEach((message, index) =>
    (Array.isArray(message.content) ? message.content : []).forEach(
      (block, inner) => "cache_control" in block && block.cache_control && marks.push(`messages[${index}][${inner}]`),
    ),
  );
  return marks;
}

describe("cache_control breakpoints", () => {
  it("marks the tools, the system prompt, the last message and the previous turn's last message: 4 at most", () => {
    const first = withCacheBreakpoints(toAnthropicPrompt(base, [readFile, readFile]));
    expect(breakpointsOf(first)).toEqual(["tools[1]", "system[0]", "messages[0][0]"]);
    const later = withCacheBreakpoints(
      toAnthropicPrompt([...parallelTurn, { role: "assistant", content: "ok" }, { role: "user", content: "go on" }], [readFile]),
    );
    // messages: 0 user, 1 assistant, 2 user (results + text), 3 assistant, 4 user
    expect(breakpointsOf(later)).toEqual(["tools[0]", "system[0]", "messages[2][2]", "messages[4][0]"]);
    expect(breakpointsOf(later).length).toBeLessThanOrEqual(MAX_CACHE_BREAKPOINTS);
    // Computed afresh: a shorter (compacted) conversation gets valid breakpoints too, and the input is not changed.
    const compacted = toAnthropicPrompt([base[0]!, { role: "user", content: "Summary: ..." }], []);
    expect(breakpointsOf(withCacheBreakpoints(compacted))).toEqual(["system[0]", "messages[0][0]"]);
    expect(breakpointsOf(compacted)).toEqual([]);
  });

  it("a 20-turn conversation through the scripted anthropic wire reads ≥ 90 % of its prompt from the cache in late turns", async () => {
    const turns = Array.from({ length: 20 }, (_, index) => ({ tool_calls: [{ name: "read_file", arguments: { path: `f${index}.py` } }] }));
    const { client } = await scripted({ turns });
    const messages: ChatMessage[] = [{ role: "system", content: `You fix bugs. ${"Rules of the house. ".repeat(300)}` }, base[1]!];
    const ratios: number[] = [];
    let cacheWrites = 0;
    for (let index = 0; index < 20; index += 1) {
      const response = await client.complete(request(messages, index).request);
      ratios.push(response.usage.cached_tokens / response.usage.prompt_tokens);
      cacheWrites += response.usage.cache_write_tokens;
      expect(response.usage.prompt_tokens).toBeGreaterThan(response.usage.cached_tokens + response.usage.cache_write_tokens - 1);
      messages.push({ role: "assistant", content: response.content, tool_calls: response.toolCalls });
      for (const call of response.toolCalls)
        messages.push({ role: "tool", tool_call_id: call.id, content: `contents of ${call.function.arguments}\n${"x = 1\n".repeat(100)}` });
    }
    expect(ratios[0]).toBe(0);
    expect(cacheWrites).toBeGreaterThan(0);
    for (const ratio of ratios.slice(10)) expect(ratio).toBeGreaterThanOrEqual(0.9);
  });
});

describe("AnthropicModelClient against the scripted anthropic wire (real SDK, loopback)", () => {
  it("pairs parallel tool results in one user turn the wire accepts, and reads tool_use, streamed arguments and usage", async () => {
    const { client, server } = await scripted({
      turns: [
        { content: "x" },
        {
          content: "Both read.",
          tool_calls: [
            { name: "read_file", arguments: { path: "c.py" } },
            { name: "read_file", arguments: { path: "d.py" } },
          ],
        },
      ],
    });
    const response = await client.complete(request(parallelTurn, 1).request);
    expect(response).toMatchObject({
      content: "Both read.",
      finishReason: "tool_calls",
      toolCalls: [
        { id: "call_1_0", type: "function", function: { name: "read_file", arguments: '{"path":"c.py"}' } },
        { id: "call_1_1", type: "function", function: { name: "read_file", arguments: '{"path":"d.py"}' } },
      ],
    });
    // The wire read our one user turn back as two results and the text.
    expect(server.requests[0]!.messages.slice(-3)).toEqual([
      { role: "tool", tool_call_id: "call_a", content: "A" },
      { role: "tool", tool_call_id: "call_b", content: "B" },
      { role: "user", content: "[background task t1 ended]" },
    ]);
    const usage = response.usage;
    expect(usage.prompt_tokens).toBeGreaterThan(0);
    expect(usage.completion_tokens).toBeGreaterThan(0);
  });

  it("the wire refuses a tool_use without its tool_result (so the pairing above is checked)", async () => {
    const { client } = await scripted({ turns: [{ content: "x" }, { content: "y" }] });
    const unpaired = parallelTurn.filter((message) => !(message.role === "tool" && message.tool_call_id === "call_b"));
    const failure = await client.complete(request(unpaired, 1).request).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ModelError);
    expect((failure as ModelError).reason).toBe("bad_request");
    expect((failure as ModelError).message).toMatch(/tool_use` ids were found without `tool_result` blocks immediately after: call_b/);
  });

  it("streams text deltas to onText and returns the whole text", async () => {
    const { client } = await scripted({ turns: [{ content: "The bug is in add: it subtracts." }] });
    const call = request(base, 0);
    const response = await client.complete(call.request);
    expect(response).toMatchObject({ content: "The bug is in add: it subtracts.", finishReason: "stop", toolCalls: [] });
    expect(call.text.length).toBeGreaterThan(1);
    expect(call.text.map(([delta]) => delta).join("")).toBe(response.content);
    expect(new Set(call.text.map(([, attempt]) => attempt))).toEqual(new Set([0]));
  });

  it("reads a whole (non-streamed) reply when stream is false, with the same usage split", async () => {
    const { client } = await scripted({ turns: [{ content: "whole", tool_calls: [{ name: "read_file", arguments: { path: "a" } }] }] }, { stream: false });
    const call = request(base, 0);
    const response = await client.complete(call.request);
    expect(response).toMatchObject({ content: "whole", finishReason: "tool_calls", toolCalls: [{ function: { arguments: '{"path":"a"}' } }] });
    expect(call.text).toEqual([]);
  });

  it("maps stop_reason: max_tokens → length (raw cut arguments kept), refusal → refusal, pause_turn → sent back and continued", async () => {
    const { client, server } = await scripted({
      turns: [
        { content: "partial", tool_calls: [{ name: "read_file", arguments_raw: '{"path": "a.p' }], stop_reason: "max_tokens" },
        { content: "I can't help with that.", stop_reason: "refusal" },
        { content: "Searching first.", tool_calls: [{ name: "read_file", arguments: { path: "p" } }], stop_reason: "pause_turn" },
      ],
    });
    const cut = await client.complete(request(base, 0).request);
    expect(cut).toMatchObject({ finishReason: "length", content: "partial", toolCalls: [{ function: { arguments: '{"path": "a.p' } }] });
    expect((await client.complete(request(base, 1).request)).finishReason).toBe("refusal");
    const paused = await client.complete(request(base, 2).request);
    expect(paused).toMatchObject({ content: "Searching first.", finishReason: "tool_calls", toolCalls: [{ id: "call_2_0" }] });
    const [first, continued] = server.requests.filter((seen) => seen.callIndex === 2);
    expect(first!.messages.at(-1)!.role).toBe("user");
    expect(continued!.messages.at(-1)).toEqual({ role: "assistant", content: "Searching first." });
  });

  it("keeps thinking blocks with their signatures; the wire answers 400 when they are not sent back unchanged", async () => {
    const script: Script = {
      turns: [{ thinking: "add subtracts; read calc.py first", tool_calls: [{ name: "read_file", arguments: { path: "calc.py" } }] }, { content: "fixed" }],
    };
    const { client } = await scripted(script, { thinkingBudgetTokens: 2048 });
    const first = await client.complete(request(base, 0).request);
    expect(first.reasoning).toEqual({
      provider: "anthropic",
      items: [{ type: "thinking", thinking: "add subtracts; read calc.py first", signature: scriptedThinkingSignature("add subtracts; read calc.py first") }],
    });
    const next = (reasoning: ChatMessage & { role: "assistant" }): ChatMessage[] => [
      ...base,
      reasoning,
      { role: "tool", tool_call_id: "call_0_0", content: "def add" },
    ];
    const assistant = { role: "assistant" as const, content: first.content, tool_calls: first.toolCalls };
    expect((await client.complete(request(next({ ...assistant, reasoning: first.reasoning! }), 1).request)).content).toBe("fixed");

    const dropped = await client.complete(request(next(assistant), 1).request).catch((error: unknown) => error);
    expect((dropped as ModelError).reason).toBe("bad_request");
    expect((dropped as ModelError).message).toMatch(/Expected `thinking` or `redacted_thinking`, but found `tool_use`/);
    expect((dropped as ModelError).message).toContain("(scripted model: the thinking of step 1 (turns[0]) was not sent back unchanged)");
    const changed = { ...first.reasoning!, items: [{ ...(first.reasoning!.items[0] as object), thinking: "something else" }] };
    const tampered = await client.complete(request(next({ ...assistant, reasoning: changed }), 1).request).catch((error: unknown) => error);
    expect((tampered as ModelError).message).toMatch(/Invalid `signature` in `thinking` block/);
  });

  it("retries 529 overloaded_error (reason overloaded), sent in Anthropic's error shape", async () => {
    const { client, origin, delays } = await scripted({ turns: [{ content: "done", faults: [{ status: 529, message: "Overloaded" }, { status: 529 }] }] });
    const call = request(base, 0);
    expect((await client.complete(call.request)).content).toBe("done");
    expect(call.retries.map((retry) => [retry.reason, retry.status])).toEqual([
      ["overloaded", 529],
      ["overloaded", 529],
    ]);
    expect(delays).toHaveLength(2);
    const raw = await fetch(`${origin}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-agent-runner-call-index": "0" },
      body: JSON.stringify({ model: "m", max_tokens: 10, messages: [{ role: "user", content: "u" }] }),
    });
    expect(raw.status).toBe(529);
    expect(await raw.json()).toEqual({ type: "error", error: { type: "overloaded_error", message: "Overloaded" } });
  });

  it("gives up a stream that goes idle (300 ms idle timeout) and retries it", async () => {
    const { client } = await scripted({ turns: [{ content: "after the stall", faults: [{ stall_ms: 30_000 }] }] }, { timeoutMs: 300 });
    const started = Date.now();
    const call = request(base, 0);
    expect((await client.complete(call.request)).content).toBe("after the stall");
    expect(call.retries.map((retry) => retry.reason)).toEqual(["idle_timeout"]);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it("retries a stream cut mid-reply and returns the retried attempt's whole reply, never half of it", async () => {
    const turn = {
      content: "Reading the two files now.",
      tool_calls: [
        { name: "read_file", arguments: { path: "calc.py" } },
        { name: "read_file", arguments: { path: "test_calc.py" } },
      ],
    };
    const { client, server } = await scripted({ turns: [{ ...turn, faults: [{ truncate: true }] }] });
    const call = request(base, 0);
    const response = await client.complete(call.request);
    expect(call.retries.map((retry) => retry.reason)).toEqual(["truncated_response"]);
    expect(response.content).toBe("Reading the two files now.");
    expect(response.toolCalls.map((toolCall) => toolCall.function.arguments)).toEqual(['{"path":"calc.py"}', '{"path":"test_calc.py"}']);
    expect(server.requests).toHaveLength(2);
    // Text shown from the cut attempt is labelled with its attempt; the retried attempt's text is whole.
    expect(
      call.text
        .filter(([, attempt]) => attempt === 1)
        .map(([delta]) => delta)
        .join(""),
    ).toBe(response.content);
  });

  it("the timeout of a stream is an idle timeout: a reply that keeps streaming for longer than it is not cut", async () => {
    const frames = streamFrames(["The ", "reply ", "takes ", "a ", "while."]);
    const server = createServer((incoming, response) => {
      incoming.resume();
      response.writeHead(200, { "content-type": "text/event-stream" });
      // One event every 100 ms: about a second in all, never 300 ms of silence.
      const timer = setInterval(() => {
        const next = frames.shift();
        if (next === undefined) {
          clearInterval(timer);
          response.end();
        } else response.write(next);
      }, 100);
      response.on("close", () => clearInterval(timer));
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    closers.push(async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    });
    const client = new AnthropicModelClient({
      baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      apiKey: "k",
      model: "c",
      timeoutMs: 300,
      maxRetries: 0,
    });
    const started = Date.now();
    const call = request(base, 0);
    expect((await client.complete(call.request)).content).toBe("The reply takes a while.");
    expect(Date.now() - started).toBeGreaterThan(300);
    expect(call.retries).toEqual([]);
  });

  it("retries a stream that sends an overloaded_error event mid-reply (reason overloaded)", async () => {
    const [start, ...rest] = streamFrames(["ok"]);
    let count = 0;
    const server = createServer((incoming, response) => {
      incoming.resume();
      count += 1;
      response.writeHead(200, { "content-type": "text/event-stream" });
      response.end(
        count === 1 ? start! + frame("error", { type: "error", error: { type: "overloaded_error", message: "Overloaded" } }) : [start, ...rest].join(""),
      );
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    closers.push(async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    });
    const client = new AnthropicModelClient({
      baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      apiKey: "k",
      model: "c",
      sleep: async () => undefined,
    });
    const call = request(base, 0);
    const response = await client.complete(call.request);
    expect(response).toMatchObject({
      content: "ok",
      finishReason: "stop",
      usage: { prompt_tokens: 4, completion_tokens: 2, cached_tokens: 0, cache_write_tokens: 0 },
    });
    expect(call.retries.map((retry) => retry.reason)).toEqual(["overloaded"]);
    expect(count).toBe(2);
  });
});

describe("compaction requests (no tools of their own) through the anthropic client", () => {
  const turn: ChatMessage[] = [
    { role: "system", content: `You fix bugs. ${"Rules of the house. ".repeat(300)}` },
    base[1]!,
    { role: "assistant", content: null, tool_calls: [{ id: "call_0_0", type: "function", function: { name: "read_file", arguments: '{"path":"calc.py"}' } }] },
    { role: "tool", tool_call_id: "call_0_0", content: "def add(a, b): return a - b" },
  ];
  const summary: ChatMessage = { role: "user", content: "Summarise the conversation so far." };

  it("sends the agent's tools of its last turn with tool_choice none, so the wire accepts it and the summary reads the turns' cache", async () => {
    const { client } = await scripted({ turns: [{ content: "x" }, { content: "y" }], compactions: [{ content: "Summary: read calc.py." }] });
    await client.complete(request(turn, 1).request);
    const compaction = await client.complete({ ...request([...turn, summary], 0).request, tools: [], purpose: "compaction" });
    expect(compaction.content).toBe("Summary: read calc.py.");
    expect(compaction.usage.cached_tokens).toBeGreaterThan(0);
  });

  it("with no tools known, sends the calls and results as text (the wire refuses tool blocks without tools)", async () => {
    const { client, server, origin } = await scripted({ turns: [], compactions: [{ content: "Summary." }] });
    const compaction = await client.complete({ ...request([...turn, summary], 0).request, tools: [], purpose: "compaction" });
    expect(compaction.content).toBe("Summary.");
    expect(server.requests[0]!.messages.slice(2)).toEqual([
      { role: "assistant", content: '[tool call read_file {"path":"calc.py"}] (id call_0_0)' },
      { role: "user", content: "[tool result for call_0_0]\ndef add(a, b): return a - b\nSummarise the conversation so far." },
    ]);
    const refused = await fetch(`${origin}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-agent-runner-call-index": "0", "x-agent-runner-purpose": "compaction" },
      body: JSON.stringify({
        model: "m",
        max_tokens: 10,
        messages: [
          { role: "user", content: "u" },
          { role: "assistant", content: [{ type: "tool_use", id: "t", name: "read_file", input: {} }] },
          { role: "user", content: [{ type: "tool_result", tool_use_id: "t", content: "r" }] },
        ],
      }),
    });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toMatch(/must define tools/);
  });
});
