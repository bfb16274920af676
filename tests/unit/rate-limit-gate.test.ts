import { readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { ModelError } from "../../src/errors.js";
import { OpenAIModelClient } from "../../src/model/openai-model-client.js";
import { RateLimitGate } from "../../src/model/rate-limit-gate.js";
import { createRunner } from "../../src/runner/runner.js";
import { HostDirectorySandboxProvider } from "../../src/sandbox/fake/host-directory-sandbox.js";
import { fakeShell, fakeTierEnvironment, writeScriptedTask } from "../helpers/fake-runner.js";
import { temporaryDirectory } from "../helpers/git-repository.js";

// A real OpenAI-shaped endpoint on loopback: answers 429 (Retry-After in
// seconds) to the first `limited` requests, then a plain completion. The real
// openai client talks to it.
const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

async function stormEndpoint(limited: number, retryAfterSeconds: number, answerDelayMs = 0) {
  const arrivals: { at: number; status: number }[] = [];
  const server = createServer((request, response) => {
    request.resume();
    request.on("end", () => {
      const status = arrivals.length < limited ? 429 : 200;
      arrivals.push({ at: Date.now(), status });
      const body =
        status === 429
          ? { error: { message: "rate limited", type: "rate_limit_error", code: null } }
          : {
              id: "x",
              object: "chat.completion",
              created: 0,
              model: "m",
              choices: [{ index: 0, message: { role: "assistant", content: "ok" }, finish_reason: "stop" }],
            };
      const text = JSON.stringify(body);
      const send = () => {
        response.writeHead(status, { "content-type": "application/json", ...(status === 429 ? { "retry-after": String(retryAfterSeconds) } : {}) });
        response.end(text);
      };
      if (status === 200 && answerDelayMs > 0) setTimeout(send, answerDelayMs);
      else send();
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { baseURL: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, arrivals };
}

const call = (client: OpenAIModelClient) => client.complete({ messages: [{ role: "user", content: "hi" }], tools: [], agentId: "main", callIndex: 0 });

describe("RateLimitGate shared by clients of one endpoint", () => {
  it("a 429 storm slows the clients that share a gate instead of failing them; without the gate they fail", async () => {
    const alone = await stormEndpoint(12, 0.05);
    const lonely = Array.from({ length: 3 }, () => new OpenAIModelClient({ baseURL: alone.baseURL, apiKey: "k", model: "m", maxRetries: 1 }));
    const failures = await Promise.all(lonely.map((client) => call(client).catch((error: unknown) => error)));
    expect(failures.every((failure) => failure instanceof ModelError && failure.reason === "rate_limited")).toBe(true);

    const shared = await stormEndpoint(12, 0.05);
    const gate = new RateLimitGate();
    const clients = Array.from({ length: 3 }, () => new OpenAIModelClient({ baseURL: shared.baseURL, apiKey: "k", model: "m", maxRetries: 1, gate }));
    const answers = await Promise.all(clients.map(call));
    expect(answers.map((answer) => answer.content)).toEqual(["ok", "ok", "ok"]);
    expect(shared.arrivals.filter((arrival) => arrival.status === 200)).toHaveLength(3);
  });

  it("after a 429 nobody sends before its retry-after, and one probe goes first", async () => {
    // Answers take 150 ms: the others, held until the probe's answer, arrive at least that much after it.
    const endpoint = await stormEndpoint(1, 0.3, 150);
    const gate = new RateLimitGate();
    const clients = Array.from({ length: 4 }, () => new OpenAIModelClient({ baseURL: endpoint.baseURL, apiKey: "k", model: "m", maxRetries: 0, gate }));
    // The first call meets the 429; the others start once it has paused the gate (its retry is announced).
    let rest: Promise<unknown>[] = [];
    const first = clients[0]!.complete({
      messages: [{ role: "user", content: "hi" }],
      tools: [],
      agentId: "main",
      callIndex: 0,
      onRetry: () => (rest = clients.slice(1).map(call)),
    });
    await first;
    await Promise.all(rest);
    const [limited, ...after] = endpoint.arrivals;
    expect(limited!.status).toBe(429);
    expect(after).toHaveLength(4);
    // Timer slack: setTimeout may fire a millisecond early relative to Date.now().
    for (const arrival of after) expect(arrival.at - limited!.at).toBeGreaterThanOrEqual(295);
    const [probe, ...followers] = after;
    for (const follower of followers) expect(follower.at - probe!.at).toBeGreaterThanOrEqual(145);
  });
});

describe("a Runner's runs share their endpoint's rate limit", () => {
  it("three runs against an endpoint in a 429 storm all succeed, with no retries of their own (max_retries 0)", async () => {
    const endpoint = await stormEndpoint(6, 0.05);
    await using home = temporaryDirectory("agent-runner-fake-home-");
    await using directory = temporaryDirectory();
    await using runner = await createRunner({
      home: home.path,
      sandboxProvider: new HostDirectorySandboxProvider({ exec: fakeShell() }),
      environment: { ...fakeTierEnvironment(home.path), OPENAI_API_KEY: "test-key" },
      sharedRateLimits: true,
    });
    const tasks = ["a", "b", "c"].map((name) => {
      const { task } = writeScriptedTask(`${directory.path}/${name}`, { script: { turns: [] }, task: { name: `storm-${name}` } });
      const object = JSON.parse(readFileSync(task, "utf8")) as Record<string, unknown>;
      writeFileSync(task, JSON.stringify({ ...object, model: { provider: "openai", name: "m", base_url: endpoint.baseURL, max_retries: 0 } }));
      return task;
    });
    const runs = await Promise.all(tasks.map((task) => runner.start(task)));
    const reports = await Promise.all(runs.map((run) => run.result));
    expect(reports.map((report) => report.status)).toEqual(["succeeded", "succeeded", "succeeded"]);
    expect(endpoint.arrivals.filter((arrival) => arrival.status === 429)).toHaveLength(6);
  });
});
