import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { CancelledError, ConfigError, ModelError } from "../../src/errors.js";
import type { ChatMessage } from "../../src/model/messages.js";
import type { ModelRequest, ModelRetryInfo } from "../../src/model/model-client.js";
import { OpenAIModelClient, type OpenAIModelClientOptions } from "../../src/model/openai-model-client.js";
import { OpenAIResponsesModelClient } from "../../src/model/openai-responses-model-client.js";
import { ATTEMPT_HEADER } from "../../src/model/request-headers.js";
import { backoffDelayMs, RETRY_AFTER_CAP_MS, retryAfterMs } from "../../src/model/retry.js";
import { DEFAULT_SUMMARY_PREFIX, loadScript, ScriptedModelServer, type Script } from "../../src/model/scripted-model-server.js";

// Real HTTP on loopback with the real openai client; only the backoff sleep is
// injected (it records the delay and returns at once), so no test waits seconds.

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

const base: ChatMessage[] = [
  { role: "system", content: "s" },
  { role: "user", content: "u" },
];

function recordingSleep() {
  const delays: number[] = [];
  const sleep = async (ms: number) => {
    delays.push(ms);
  };
  return { delays, sleep };
}

async function scripted(script: Script, options: Partial<OpenAIModelClientOptions> = {}) {
  const server = new ScriptedModelServer(script);
  const baseURL = await server.start();
  closers.push(() => server.close());
  const { delays, sleep } = recordingSleep();
  const client = new OpenAIModelClient({ baseURL, apiKey: "test", model: "scripted", maxRetries: 4, sleep, random: () => 0.5, ...options });
  return { server, client, delays, baseURL };
}

/** A plain HTTP server answering request n (0-based) with `handlers[n]` (the last one repeats). */
async function rawServer(handlers: ((request: IncomingMessage, response: ServerResponse) => void)[]) {
  let count = 0;
  const server = createServer((request, response) => {
    request.resume();
    const handler = handlers[Math.min(count, handlers.length - 1)]!;
    count += 1;
    handler(request, response);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closers.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, count: () => count };
}

const okBody = JSON.stringify({
  id: "x",
  object: "chat.completion",
  created: 0,
  model: "m",
  choices: [{ index: 0, message: { role: "assistant", content: "hello" }, finish_reason: "stop" }],
});
const ok = (_request: IncomingMessage, response: ServerResponse) => {
  response.writeHead(200, { "content-type": "application/json" });
  response.end(okBody);
};

function call(client: OpenAIModelClient, extra: Partial<ModelRequest> = {}) {
  const retries: ModelRetryInfo[] = [];
  const promise = client.complete({ messages: base, tools: [], agentId: "main", callIndex: 0, onRetry: (info) => retries.push(info), ...extra });
  return { promise, retries };
}

async function failure(promise: Promise<unknown>): Promise<ModelError> {
  const error = await promise.then(
    () => new Error("expected the call to fail"),
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(ModelError);
  return error as ModelError;
}

describe("OpenAIModelClient retries against the scripted model", () => {
  it("retries a 429 after the retry-after it names (2 s → one 2000 ms sleep)", async () => {
    const { client, server, delays } = await scripted({ turns: [{ content: "done", faults: [{ status: 429, retry_after: 2 }] }] });
    const { promise, retries } = call(client);
    expect((await promise).content).toBe("done");
    expect(delays).toEqual([2000]);
    expect(retries).toEqual([{ attempt: 1, delayMs: 2000, reason: "rate_limited", status: 429 }]);
    expect(server.requests.map((request) => [request.callIndex, request.attempt, request.purpose])).toEqual([
      [0, 0, "turn"],
      [0, 1, "turn"],
    ]);
  });

  it("retries 503 twice with doubling full-jitter backoff, then succeeds", async () => {
    const { client, server, delays } = await scripted({
      turns: [{ content: "done", faults: [{ status: 503 }, { status: 503, message: "still overloaded" }] }],
    });
    const { promise, retries } = call(client);
    expect((await promise).content).toBe("done");
    // random() = 0.5: half of 500 ms, then half of 1000 ms.
    expect(delays).toEqual([250, 500]);
    expect(retries.map((retry) => [retry.attempt, retry.reason, retry.status])).toEqual([
      [1, "server_error", 503],
      [2, "server_error", 503],
    ]);
    expect(server.requests.map((request) => request.attempt)).toEqual([0, 1, 2]);
  });

  it("retries 529 (overloaded)", async () => {
    const { client, delays } = await scripted({ turns: [{ content: "done", faults: [{ status: 529, message: "overloaded" }] }] });
    expect((await call(client).promise).content).toBe("done");
    expect(delays).toHaveLength(1);
  });

  it("retries a reply cut off mid-body and returns the whole turn, never half of it", async () => {
    const turn = {
      content: "reading",
      tool_calls: [
        { name: "read_file", arguments: { path: "calc.py" } },
        { name: "run_shell", arguments: { command: "python3 -m pytest -q" } },
      ],
    };
    const { client, server } = await scripted({ turns: [{ ...turn, faults: [{ truncate: true }] }] });
    const { promise, retries } = call(client);
    const response = await promise;
    expect(retries.map((retry) => retry.reason)).toEqual(["truncated_response"]);
    expect(response).toEqual({
      content: "reading",
      toolCalls: [
        { id: "call_0_0", type: "function", function: { name: "read_file", arguments: '{"path":"calc.py"}' } },
        { id: "call_0_1", type: "function", function: { name: "run_shell", arguments: '{"command":"python3 -m pytest -q"}' } },
      ],
      finishReason: "tool_calls",
      usage: expect.objectContaining({ prompt_tokens: expect.any(Number) }) as never,
    });
    expect(server.requests).toHaveLength(2);
  });

  it("times out a slow attempt (300 ms client timeout) and retries it", async () => {
    const { client, delays } = await scripted({ turns: [{ content: "done", faults: [{ delay_ms: 30_000 }] }] }, { timeoutMs: 300 });
    const started = Date.now();
    const { promise, retries } = call(client);
    expect((await promise).content).toBe("done");
    expect(retries.map((retry) => retry.reason)).toEqual(["timeout"]);
    expect(delays).toHaveLength(1);
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it("gives up with reason rate_limited, naming the endpoint and the attempt count", async () => {
    const { client, server, baseURL, delays } = await scripted(
      { turns: [{ content: "never", faults: [{ status: 429 }, { status: 429 }, { status: 429, message: "quota exhausted" }] }] },
      { maxRetries: 2 },
    );
    const error = await failure(call(client).promise);
    expect(error.reason).toBe("rate_limited");
    expect(error.exitCode).toBe(3);
    expect(error.message).toContain(baseURL);
    expect(error.message).toMatch(/answered 429: quota exhausted; gave up after 3 attempts/);
    expect(server.requests).toHaveLength(3);
    expect(delays).toHaveLength(2);
  });

  it.each([
    [400, "bad_request"],
    [401, "unauthorized"],
    [403, "unauthorized"],
    [404, "not_found"],
    [422, "bad_request"],
  ])("does not retry %i", async (status, reason) => {
    const { client, server, delays } = await scripted({ turns: [{ content: "never", faults: [{ status, message: "no" }] }] });
    const error = await failure(call(client).promise);
    expect(error.reason).toBe(reason);
    expect(error.message).toMatch(new RegExp(`answered ${status}: no${status === 404 ? " \\(is model\\.base_url .* does it end in /v1\\?\\)" : ""}$`));
    expect(server.requests).toHaveLength(1);
    expect(delays).toEqual([]);
  });

  it("does not retry script_expectation_failed", async () => {
    const { client, server } = await scripted({ turns: [{ expect: { tool_result_matches: "never there" }, content: "x" }] });
    const error = await failure(call(client).promise);
    expect(error.reason).toBe("script_expectation_failed");
    expect(server.requests).toHaveLength(1);
  });

  it("an abort during the backoff sleep ends the call at once with CancelledError", async () => {
    // The real timer sleep: the server asks for 30 s, the abort comes from onRetry.
    const server = new ScriptedModelServer({ turns: [{ content: "never", faults: [{ status: 429, retry_after: 30 }] }] });
    const baseURL = await server.start();
    closers.push(() => server.close());
    const client = new OpenAIModelClient({ baseURL, apiKey: "test", model: "scripted", maxRetries: 4 });
    const controller = new AbortController();
    const started = Date.now();
    const retries: ModelRetryInfo[] = [];
    const error = await client
      .complete({
        messages: base,
        tools: [],
        agentId: "main",
        callIndex: 0,
        signal: controller.signal,
        onRetry: (info) => {
          retries.push(info);
          controller.abort();
        },
      })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(CancelledError);
    expect(retries).toEqual([{ attempt: 1, delayMs: 30_000, reason: "rate_limited", status: 429 }]);
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(server.requests).toHaveLength(1);
  });

  it("sends the attempt, purpose, call index and agent id headers", async () => {
    const seen: Record<string, string | string[] | undefined>[] = [];
    const { baseURL } = await rawServer([
      (request, response) => {
        seen.push(request.headers);
        response.writeHead(500, { "content-type": "application/json" });
        response.end(JSON.stringify({ error: { message: "boom" } }));
      },
      (request, response) => {
        seen.push(request.headers);
        ok(request, response);
      },
    ]);
    const client = new OpenAIModelClient({ baseURL, apiKey: "k", model: "m", sleep: recordingSleep().sleep });
    await client.complete({ messages: base, tools: [], agentId: "sub-1", callIndex: 5, purpose: "compaction" });
    expect(
      seen.map((headers) => [
        headers[ATTEMPT_HEADER],
        headers["x-agent-runner-purpose"],
        headers["x-agent-runner-call-index"],
        headers["x-agent-runner-agent-id"],
      ]),
    ).toEqual([
      ["0", "compaction", "5", "sub-1"],
      ["1", "compaction", "5", "sub-1"],
    ]);
  });
});

describe("OpenAIModelClient retries against hand-made failures", () => {
  it("honours retry-after-ms before retry-after, and retries a connection reset", async () => {
    const { baseURL, count } = await rawServer([
      (_request, response) => {
        response.writeHead(429, { "content-type": "application/json", "retry-after-ms": "300", "retry-after": "9" });
        response.end(JSON.stringify({ error: { message: "slow down" } }));
      },
      (request) => request.socket.destroy(),
      ok,
    ]);
    const { delays, sleep } = recordingSleep();
    const client = new OpenAIModelClient({ baseURL, apiKey: "k", model: "m", sleep, random: () => 0.5 });
    const { promise, retries } = call(client);
    expect((await promise).content).toBe("hello");
    expect(retries.map((retry) => [retry.reason, retry.delayMs])).toEqual([
      ["rate_limited", 300],
      ["connection_error", 500],
    ]);
    expect(delays).toEqual([300, 500]);
    expect(count()).toBe(3);
  });

  it("retries a body that is not JSON, a non-JSON content type and a reply without choices", async () => {
    const { baseURL, count } = await rawServer([
      (_request, response) => {
        response.writeHead(200, { "content-type": "application/json" });
        response.end("{not json");
      },
      (_request, response) => {
        response.writeHead(200, { "content-type": "text/plain" });
        response.end("upstream hiccup");
      },
      (_request, response) => {
        response.writeHead(200, { "content-type": "application/json" });
        response.end(JSON.stringify({ id: "x", object: "chat.completion", choices: [] }));
      },
      ok,
    ]);
    const client = new OpenAIModelClient({ baseURL, apiKey: "k", model: "m", sleep: recordingSleep().sleep });
    const { promise, retries } = call(client);
    expect((await promise).content).toBe("hello");
    expect(retries.map((retry) => retry.reason)).toEqual(["invalid_response", "invalid_response", "empty_response"]);
    expect(count()).toBe(4);
  });

  const page = (status: number) => (_request: IncomingMessage, response: ServerResponse) => {
    response.writeHead(status, { "content-type": "text/html" });
    response.end(`<!DOCTYPE html>\n<html><head><title>Welcome to nginx!</title></head><body>${"<p>filler</p>".repeat(2000)}</body></html>`);
  };

  it("an HTML page where the API belongs (200 or 404, streamed or not) is not retried nor dumped: its title and the base URL hint", async () => {
    for (const status of [200, 404]) {
      for (const stream of [false, true]) {
        const { baseURL, count } = await rawServer([page(status)]);
        const client = new OpenAIModelClient({ baseURL, apiKey: "k", model: "m", stream, sleep: recordingSleep().sleep });
        const error = await failure(call(client).promise);
        expect(count(), `${status} stream ${stream}`).toBe(1);
        expect(error.message).toContain(`answered ${status} with an HTML page ("Welcome to nginx!"), not the API's JSON: is model.base_url`);
        expect(error.message).toContain("ends in /v1");
        expect(error.message).not.toContain("filler");
        expect(error.message.length).toBeLessThan(600);
      }
    }
  });

  it("a gateway's HTML error page (502) is retried, still without the page", async () => {
    const { baseURL, count } = await rawServer([page(502), ok]);
    const client = new OpenAIModelClient({ baseURL, apiKey: "k", model: "m", sleep: recordingSleep().sleep });
    const { promise, retries } = call(client);
    expect((await promise).content).toBe("hello");
    expect(count()).toBe(2);
    expect(retries.map((retry) => retry.reason)).toEqual(["server_error"]);
  });

  it("a JSON 404 shows its body and asks whether the base URL ends in /v1, without retrying", async () => {
    const { baseURL, count } = await rawServer([
      (_request, response) => {
        response.writeHead(404, { "content-type": "application/json" });
        response.end(JSON.stringify({ error: { message: "no route POST /chat/completions", type: "not_found" } }));
      },
    ]);
    const client = new OpenAIModelClient({ baseURL: baseURL.replace(/\/v1$/, ""), apiKey: "k", model: "m", sleep: recordingSleep().sleep });
    const error = await failure(call(client).promise);
    expect(count()).toBe(1);
    expect(error.reason).toBe("not_found");
    expect(error.message).toMatch(/answered 404: no route POST \/chat\/completions \(is model\.base_url .* does it end in \/v1\?\)/);
  });

  it("a JSON 404 without an `error` key (FastAPI's, vLLM's) keeps its body, in the chat and the Responses client", async () => {
    const body = JSON.stringify({ detail: "Not Found", path: "/chat/completions" });
    for (const Client of [OpenAIModelClient, OpenAIResponsesModelClient]) {
      const { baseURL, count } = await rawServer([
        (_request, response) => {
          response.writeHead(404, { "content-type": "application/json" });
          response.end(body);
        },
      ]);
      const client = new Client({ baseURL, apiKey: "k", model: "m", sleep: recordingSleep().sleep });
      const error = await failure(call(client as OpenAIModelClient).promise);
      expect(count(), Client.name).toBe(1);
      expect(error.reason).toBe("not_found");
      expect(error.message, Client.name).toContain(`answered 404: ${body} (is model.base_url`);
    }
  });

  it("names connection_error when the endpoint refuses connections on every attempt", async () => {
    const { baseURL } = await rawServer([ok]);
    const closed = baseURL;
    await closers.pop()!();
    const client = new OpenAIModelClient({ baseURL: closed, apiKey: "k", model: "m", maxRetries: 1, sleep: recordingSleep().sleep });
    const error = await failure(call(client).promise);
    expect(error.reason).toBe("connection_error");
    expect(error.message).toMatch(/could not be reached: .*; gave up after 2 attempts/);
  });
});

describe("backoff and retry-after", () => {
  it("backs off 500 ms doubling, capped at 8 s, with full jitter", () => {
    expect([0, 1, 2, 3, 4, 5, 10].map((retry) => backoffDelayMs(retry, () => 0.999_999))).toEqual([499, 999, 1999, 3999, 7999, 7999, 7999]);
    expect(backoffDelayMs(3, () => 0)).toBe(0);
  });

  it("reads retry-after-ms, retry-after seconds and HTTP dates, capped at 60 s", () => {
    const now = Date.parse("2025-01-01T00:00:00Z");
    expect(retryAfterMs(new Headers({ "retry-after-ms": "1500" }), now)).toBe(1500);
    expect(retryAfterMs(new Headers({ "retry-after": "2" }), now)).toBe(2000);
    expect(retryAfterMs(new Headers({ "retry-after": "0.5" }), now)).toBe(500);
    expect(retryAfterMs(new Headers({ "retry-after": "Wed, 01 Jan 2025 00:00:07 GMT" }), now)).toBe(7000);
    expect(retryAfterMs(new Headers({ "retry-after": "Tue, 31 Dec 2024 23:00:00 GMT" }), now)).toBe(0);
    expect(retryAfterMs(new Headers({ "retry-after": "3600" }), now)).toBe(RETRY_AFTER_CAP_MS);
    expect(retryAfterMs(new Headers({ "retry-after": "soon" }), now)).toBeUndefined();
    expect(retryAfterMs(new Headers(), now)).toBeUndefined();
  });
});

describe("scripted compaction requests", () => {
  const history: ChatMessage[] = [
    ...base,
    {
      role: "assistant",
      content: null,
      tool_calls: [
        { id: "a", type: "function", function: { name: "read_file", arguments: '{"path":"src/calc.py"}' } },
        { id: "b", type: "function", function: { name: "edit_file", arguments: '{"path": "tests/test \\"x\\".py", "old_string": "a"}' } },
        { id: "c", type: "function", function: { name: "read_file", arguments: '{"path":"src/calc.py","offset":3}' } },
      ],
    },
    { role: "tool", tool_call_id: "a", content: "def add" },
  ];

  it("answers from compactions by index, else a default summary naming the files; never checks expect or consumes turns", async () => {
    const { client, server, delays } = await scripted({
      turns: [{ expect: { tool_result_matches: "never there" }, content: "turn 0" }],
      compactions: [{ content: "first summary", faults: [{ status: 500 }] }],
    });
    const first = await client.complete({ messages: history, tools: [], agentId: "main", callIndex: 0, purpose: "compaction" });
    expect(first.content).toBe("first summary");
    expect(first.toolCalls).toEqual([]);
    expect(delays).toHaveLength(1);
    const second = await client.complete({ messages: history, tools: [], agentId: "main", callIndex: 1, purpose: "compaction" });
    expect(second.content).toBe(`${DEFAULT_SUMMARY_PREFIX} 4 messages. Files: src/calc.py, tests/test "x".py.`);
    const none = await client.complete({ messages: base, tools: [], agentId: "main", callIndex: 2, purpose: "compaction" });
    expect(none.content).toBe(`${DEFAULT_SUMMARY_PREFIX} 2 messages. Files: (none).`);
    // turns[0] is still there to answer (and still checks its expect).
    expect((await failure(client.complete({ messages: history, tools: [], agentId: "main", callIndex: 0 }))).reason).toBe("script_expectation_failed");
    expect(server.requests.map((request) => [request.purpose, request.callIndex, request.attempt])).toEqual([
      ["compaction", 0, 0],
      ["compaction", 0, 1],
      ["compaction", 1, 0],
      ["compaction", 2, 0],
      ["turn", 0, 0],
    ]);
  });
});

describe("script validation of faults", () => {
  function problems(script: unknown): string {
    const directory = mkdtempSync(join(tmpdir(), "agent-runner-script-"));
    try {
      const file = join(directory, "script.yaml");
      writeFileSync(file, JSON.stringify(script));
      loadScript(file);
      return "(valid)";
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      return (error as Error).message;
    } finally {
      rmSync(directory, { recursive: true, force: true });
    }
  }

  it("accepts each kind of fault", () => {
    expect(
      problems({
        turns: [{ content: "x", faults: [{ status: 429, retry_after: 1.5, message: "m" }, { delay_ms: 10 }, { truncate: true }, { stall_ms: 10 }] }],
        compactions: [{ faults: [{ status: 503 }] }, { content: "s" }],
      }),
    ).toBe("(valid)");
  });

  it("lists every bad fault with its path", () => {
    const message = problems({
      turns: [
        { content: "x", faults: [{ status: 503, delay_ms: 5 }, {}, { status: 200 }, { delay_ms: 5, retry_after: 1 }, { truncate: false }, { sleep: 1 }] },
      ],
      compactions: [{ faults: [{ status: 700 }] }],
    });
    expect(message).toMatch(/turns\.0\.faults\.0: a fault has exactly one kind; got status and delay_ms/);
    expect(message).toMatch(/turns\.0\.faults\.1: a fault needs one of status, delay_ms, truncate or stall_ms/);
    expect(message).toMatch(/turns\.0\.faults\.2\.status: /);
    expect(message).toMatch(/turns\.0\.faults\.3\.retry_after: retry_after belongs to a status fault/);
    expect(message).toMatch(/turns\.0\.faults\.4\.truncate: /);
    expect(message).toMatch(/turns\.0\.faults\.5: .*sleep/);
    expect(message).toMatch(/compactions\.0\.faults\.0\.status: /);
  });
});
