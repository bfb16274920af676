import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { requestLimit, runAgentLoop, type AgentLoopOptions } from "../../src/agent/agent-loop.js";
import {
  clearOldToolResults,
  compactionCut,
  contextSettings,
  extendsPrefix,
  messageTokens,
  repairToolPairing,
  SUMMARY_PREFIX,
  TokenEstimator,
  type ContextSettings,
} from "../../src/agent/context-window.js";
import { restoreSession, SessionJournal } from "../../src/agent/session-journal.js";
import { readToolResultTool, ToolResultStore } from "../../src/agent/tool-result-store.js";
import { contextSchema } from "../../src/config/task-schema.js";
import { CancelledError, ModelError } from "../../src/errors.js";
import type { RunEvent } from "../../src/events/run-events.js";
import type { ChatMessage, ToolCall } from "../../src/model/messages.js";
import type { ModelClient, ModelRequest, ModelResponse } from "../../src/model/model-client.js";
import { FakeSandbox } from "../../src/sandbox/fake/fake-sandbox.js";
import { workspaceTools } from "../../src/tools/builtin/index.js";
import { ToolRegistry } from "../../src/tools/tool-registry.js";
import { call } from "../helpers/strict-scripted-model.js";

const directories: string[] = [];
afterEach(() => {
  for (const directory of directories.splice(0)) rmSync(directory, { recursive: true, force: true });
});

function runDirectory(): string {
  const directory = mkdtempSync(join(tmpdir(), "context-test-"));
  directories.push(directory);
  return directory;
}

type Answer = Partial<ModelResponse>;

/**
 * A model for these tests: turn requests are answered by call index (like the
 * scripted server), compaction requests by `summarise`. Records every request.
 */
class TurnModel implements ModelClient {
  readonly requests: ModelRequest[] = [];
  constructor(
    private readonly turn: (callIndex: number, request: ModelRequest) => Answer | Promise<Answer>,
    private readonly summarise: (request: ModelRequest) => Answer | Promise<Answer> = () => ({ content: "goal: fix; files: big.txt" }),
  ) {}

  async complete(request: ModelRequest): Promise<ModelResponse> {
    this.requests.push({ ...request, messages: structuredClone(request.messages) });
    const answer = request.purpose === "compaction" ? await this.summarise(request) : await this.turn(request.callIndex, request);
    return {
      content: null,
      toolCalls: [],
      finishReason: "stop",
      usage: { prompt_tokens: 0, completion_tokens: 0, cached_tokens: 0, cache_write_tokens: 0 },
      ...answer,
    };
  }

  turnRequests(): ModelRequest[] {
    return this.requests.filter((request) => request.purpose !== "compaction");
  }
}

/** Every call answered exactly once, right after its assistant message; no stray results. */
function expectPaired(messages: readonly ChatMessage[]): void {
  expect(repairToolPairing([...messages]).repairs).toEqual([]);
}

const BIG_FILE = `${"0123456789abcdef ".repeat(170)}\n`.repeat(1); // ~2.9 KB, ~730 tokens

function loop(model: ModelClient, overrides: Partial<AgentLoopOptions> & { context?: ContextSettings } = {}) {
  const events: RunEvent[] = [];
  const sandbox = (overrides.sandbox as FakeSandbox | undefined) ?? new FakeSandbox({ "big.txt": BIG_FILE, "small.txt": "hello\n" });
  const options: AgentLoopOptions = {
    agentId: "main",
    model,
    tools: new ToolRegistry(workspaceTools()),
    sandbox,
    systemPrompt: "system",
    instruction: "read things",
    maxSteps: 40,
    toolTimeoutMs: 1000,
    events: { emit: (event) => events.push(event) },
    signal: new AbortController().signal,
    context: contextSettings(128_000, contextSchema.parse({})),
    ...overrides,
  };
  return { events, sandbox, run: () => runAgentLoop(options), options };
}

function small(window: number, settings: Record<string, unknown> = {}): ContextSettings {
  return contextSettings(window, contextSchema.parse(settings));
}

describe("context-window helpers", () => {
  const assistant = (...ids: string[]): ChatMessage => ({
    role: "assistant",
    content: null,
    tool_calls: ids.map((id) => call(id, "read_file", { path: id }) as ToolCall),
  });
  const result = (id: string, content = `result ${id}`): ChatMessage => ({ role: "tool", tool_call_id: id, content });
  const head: ChatMessage[] = [
    { role: "system", content: "s" },
    { role: "user", content: "u" },
  ];

  it("clears all but the latest K tool results, keeps skill results, and keeps the pairing", () => {
    const messages = [...head, assistant("a"), result("a"), assistant("b", "c"), result("b", "[skill] tests\nbody"), result("c"), assistant("d"), result("d")];
    const { messages: cleared, cleared: count } = clearOldToolResults(messages, 1);
    expect(count).toBe(2);
    expect((cleared[3] as { content: string }).content).toMatch(/^\[cleared to save context: the read_file result .*read_tool_result with tool_call_id "a"/);
    expect((cleared[5] as { content: string }).content).toBe("[skill] tests\nbody");
    expect(cleared[8]).toBe(messages[8]);
    expect(cleared[2]).toBe(messages[2]);
    expectPaired(cleared);
    // Clearing again changes nothing.
    expect(clearOldToolResults(cleared, 1).cleared).toBe(0);
  });

  it("cuts compaction only at the start of a turn and keeps the latest N turns", () => {
    const messages = [...head, assistant("a"), result("a"), assistant("b", "c"), result("b"), result("c"), assistant("d"), result("d")];
    expect(compactionCut(messages, 2, 2)).toBe(4);
    expect(compactionCut(messages, 2, 1)).toBe(7);
    // Fewer turns than N: keep only the latest; a single turn cannot be compacted.
    expect(compactionCut(messages, 2, 10)).toBe(7);
    expect(compactionCut([...head, assistant("a"), result("a")], 2, 1)).toBeNull();
  });

  it("repairs orphans: missing results become interrupted, stray and duplicate results are dropped", () => {
    const messages = [...head, assistant("a", "b"), result("a"), result("a", "again"), result("zz"), assistant("c"), result("c")];
    const repaired = repairToolPairing(messages);
    expect(repaired.repairs).toHaveLength(3);
    expect(repaired.messages.map((message) => (message.role === "tool" ? `${message.tool_call_id}:${message.content.slice(0, 20)}` : message.role))).toEqual([
      "system",
      "user",
      "assistant",
      "a:result a",
      "b:Error: [interrupted]",
      "assistant",
      "c:result c",
    ]);
    expect(repairToolPairing(repaired.messages).repairs).toEqual([]);
    // A well-formed conversation comes back as the same array.
    expect(repairToolPairing(repaired.messages).messages).toBe(repaired.messages);
  });

  it("tells whether a request extends the previous one exactly", () => {
    const first = [...head, assistant("a"), result("a")];
    expect(extendsPrefix(first, [...first, assistant("b")])).toBe(true);
    expect(extendsPrefix(first, structuredClone([...first, assistant("b")]))).toBe(true);
    expect(extendsPrefix(first, clearOldToolResults(first, 0).messages)).toBe(false);
    expect(extendsPrefix(first, first.slice(0, 3))).toBe(false);
  });

  it("calibrates the estimate up to the provider's count, never below the heuristic", () => {
    const estimator = new TokenEstimator();
    const messages: ChatMessage[] = [...head, { role: "user", content: "x".repeat(4000) }];
    const raw = estimator.raw(messages, []);
    expect(raw).toBe(messages.reduce((sum, message) => sum + messageTokens(message), 0));
    estimator.calibrate(raw, raw * 2);
    expect(estimator.estimate(messages, [])).toBe(raw * 2);
    estimator.calibrate(raw, Math.floor(raw / 2));
    expect(estimator.estimate(messages, [])).toBe(raw);
  });
});

describe("runAgentLoop context management", () => {
  it("clears older tool results above the soft threshold; every request stays paired and under the window", async () => {
    const model = new TurnModel((index) =>
      index < 12 ? { toolCalls: [call(`r${index}`, "read_file", { path: "big.txt" }) as ToolCall] } : { content: "done" },
    );
    const context = small(8000, { clear_at: 0.4, compact_at: 0.9, keep_tool_results: 2 });
    const { run, events } = loop(model, { context });
    const outcome = await run();
    expect(outcome.reason).toBe("final_answer");
    const cleared = events.filter((event) => event.type === "context.cleared");
    expect(cleared.length).toBeGreaterThan(0);
    expect(events.some((event) => event.type === "context.compacted")).toBe(false);
    for (const request of model.turnRequests()) {
      expectPaired(request.messages);
      expect(request.messages.reduce((sum, message) => sum + messageTokens(message), 0)).toBeLessThan(requestLimit(context));
    }
    // Prompt-cache stability: the system prompt and the tool list never change within a run.
    const first = model.turnRequests()[0]!;
    for (const request of model.turnRequests()) {
      expect(request.messages[0]).toEqual(first.messages[0]);
      expect(JSON.stringify(request.tools)).toBe(JSON.stringify(first.tools));
    }
    const last = model.turnRequests().at(-1)!.messages;
    const verbatim = last.filter((message) => message.role === "tool" && !message.content.startsWith("[cleared"));
    expect(verbatim.length).toBeGreaterThanOrEqual(2);
    // Between clearings the requests only grow, so most extend the previous one.
    const started = events.filter((event) => event.type === "model_call.started").map((event) => event.data.prefix_stable);
    expect(started[0]).toBeNull();
    expect(started.filter((stable) => stable === true).length).toBeGreaterThan(started.filter((stable) => stable === false).length);
    expect(started.filter((stable) => stable === false)).toHaveLength(cleared.length);
  });

  it("compacts above the hard threshold with parallel calls pending: the summary replaces older turns, the latest turns stay verbatim", async () => {
    // Each turn reads a file four times at once (read-only calls run concurrently) and says a lot:
    // the long assistant texts cannot be cleared, so only compaction can make room.
    const model = new TurnModel((index) =>
      index < 8
        ? { content: `plan ${index} `.repeat(800), toolCalls: [0, 1, 2, 3].map((n) => call(`t${index}_${n}`, "read_file", { path: "small.txt" }) as ToolCall) }
        : { content: "done" },
    );
    const context = small(12_000, { clear_at: 0.7, compact_at: 0.75, keep_turns: 1 });
    const { run, events } = loop(model, { context });
    await run();
    const compactions = model.requests.filter((request) => request.purpose === "compaction");
    expect(compactions.length).toBeGreaterThan(0);
    expect(compactions.map((request) => request.callIndex)).toEqual(compactions.map((_, index) => index));
    // The summary request ends with the instruction and holds no call without its result.
    expect(compactions[0]!.messages.at(-1)).toMatchObject({ role: "user" });
    expectPaired(compactions[0]!.messages);
    const after = model
      .turnRequests()
      .find((request) => request.messages.some((message) => message.role === "user" && message.content.startsWith(SUMMARY_PREFIX)))!;
    expect(after).toBeDefined();
    expectPaired(after.messages);
    expect(after.messages.slice(0, 2).map((message) => message.content)).toEqual(["system", "read things"]);
    // The latest turn (an assistant with four calls) and its four results come right after the summary.
    expect(after.messages[3]).toMatchObject({ role: "assistant" });
    expect(after.messages.slice(4).filter((message) => message.role === "tool")).toHaveLength(4);
    expect(events.filter((event) => event.type === "context.compacted").length).toBe(compactions.length);
  });

  it("a failed summary keeps the conversation, logs why, and the run goes on", async () => {
    let summaries = 0;
    const model = new TurnModel(
      (index) =>
        index < 8
          ? { content: `plan ${index} `.repeat(800), toolCalls: [0, 1].map((n) => call(`t${index}_${n}`, "read_file", { path: "small.txt" }) as ToolCall) }
          : { content: "done" },
      () => {
        summaries += 1;
        if (summaries === 1) throw new ModelError("model endpoint answered 500", "server_error");
        return { content: "goal: read things" };
      },
    );
    const context = small(12_000, { clear_at: 0.7, compact_at: 0.75, keep_turns: 1 });
    const { run, events } = loop(model, { context });
    const outcome = await run();
    expect(outcome.reason).toBe("final_answer");
    const failures = events.filter((event) => event.type === "context.compaction_failed");
    expect(failures).toHaveLength(1);
    expect(failures[0]!.data).toMatchObject({ error: expect.stringContaining("answered 500") });
    // The request right after the failure still holds every earlier turn; the next compaction then succeeds.
    const failedAt = failures[0]!.data.step;
    const after = model.turnRequests().find((request) => request.callIndex === failedAt)!;
    expect(after.messages.filter((message) => message.role === "assistant")).toHaveLength(failedAt);
    expect(events.filter((event) => event.type === "context.compacted").length).toBeGreaterThan(0);
    for (const request of model.turnRequests()) expectPaired(request.messages);
  });

  it("ends with context_window_exceeded instead of sending a request larger than the window", async () => {
    const model = new TurnModel(() => ({ content: "never" }));
    const { run } = loop(model, { context: small(4000), instruction: "x".repeat(40_000) });
    await expect(run()).rejects.toMatchObject({ reason: "context_window_exceeded" });
    expect(model.requests).toHaveLength(0);
  });

  it("cuts a long result to the cap and keeps the whole text for read_tool_result", async () => {
    const directory = runDirectory();
    const store = new ToolResultStore(directory, "main");
    const lines = Array.from({ length: 3000 }, (_, index) => `line ${index + 1}`).join("\n");
    const context = small(16_000, { tool_result_max_tokens: 500 });
    const model = new TurnModel(
      (index) =>
        [
          { toolCalls: [call("big", "run_shell", { command: "seq 3000" }) as ToolCall] },
          { toolCalls: [call("page", "read_tool_result", { tool_call_id: "big", offset: 2990, limit: 40 }) as ToolCall] },
          { content: "done" },
        ][index]!,
    );
    const sandbox = new FakeSandbox({}, () => ({ stdout: `${lines}\n` }));
    const tools = new ToolRegistry([...workspaceTools(), readToolResultTool(store, context.toolResultMaxTokens * 4)]);
    const { run } = loop(model, { context, sandbox, tools, results: store });
    await run();
    const capped = model.requests[1]!.messages.at(-1) as { content: string };
    expect(capped.content.length).toBeLessThan(2200);
    expect(capped.content).toContain('read_tool_result {"tool_call_id": "big"}');
    expect(readFileSync(join(directory, "tool-results", "main", "0-big.txt"), "utf8")).toContain("line 1500\n");
    const page = (model.requests[2]!.messages.at(-1) as { content: string }).content;
    // The run_shell result has two label lines before stdout and two after.
    expect(page).toMatch(/^\[lines 2990-3004 of 3004\.\]\nline 2988\n/);
    expect(page).toContain("line 3000\nstderr:");
  });

  it("gives duplicate tool-call ids of one turn distinct ids and runs calls that reuse an earlier turn's id", async () => {
    const model = new TurnModel(
      (index) =>
        [
          { toolCalls: [call("dup", "read_file", { path: "small.txt" }), call("dup", "list_dir", { path: "." })] as ToolCall[] },
          { toolCalls: [call("dup", "read_file", { path: "big.txt" })] as ToolCall[] },
          { content: "done" },
        ][index]!,
    );
    const { run, events } = loop(model);
    const outcome = await run();
    expect(outcome.toolCalls).toBe(3);
    expectPaired(model.requests[2]!.messages);
    expect(events.filter((event) => event.type === "tool_call.finished")).toHaveLength(3);
    expect(events.some((event) => event.type === "tool_call.replayed")).toBe(false);
  });
});

describe("session journal and resume", () => {
  it("rebuilds exactly the conversation the loop had, across clearing and compaction", async () => {
    const directory = runDirectory();
    const journal = new SessionJournal(join(directory, "session.jsonl"));
    // Long assistant texts (never cleared) push the conversation past the compaction threshold.
    const model = new TurnModel((index) =>
      index < 8
        ? { content: `thinking ${index} `.repeat(300), toolCalls: [0, 1].map((n) => call(`t${index}_${n}`, "read_file", { path: "big.txt" }) as ToolCall) }
        : { content: "done" },
    );
    const { run, events } = loop(model, { context: small(10_000, { clear_at: 0.5, compact_at: 0.7, keep_tool_results: 3, keep_turns: 1 }), journal });
    const outcome = await run();
    journal.close();
    expect(events.some((event) => event.type === "context.cleared")).toBe(true);
    expect(events.some((event) => event.type === "context.compacted")).toBe(true);
    const restored = restoreSession(join(directory, "session.jsonl")).get("main")!;
    expect(restored.messages).toEqual(outcome.messages);
    expect(restored.nextStep).toBe(outcome.steps);
    expect(restored.unfinishedTurn).toBeNull();
    expect(restored.toolCalls).toBe(outcome.toolCalls);
  });

  it("an interrupt mid-turn keeps finished results; the resumed loop does not run them again and marks the rest interrupted", async () => {
    const directory = runDirectory();
    const path = join(directory, "session.jsonl");
    let release!: () => void;
    const blocked = new Promise<void>((resolve) => (release = resolve));
    const sandbox = new FakeSandbox({ "small.txt": "hello\n" }, async (request) => {
      if (request.command === "sleep 600") await blocked;
      return { stdout: "ran\n" };
    });
    const controller = new AbortController();
    const first = new TurnModel((index) =>
      index === 0
        ? { toolCalls: [call("w", "write_file", { path: "a.txt", content: "A" }), call("s", "run_shell", { command: "sleep 600" })] as ToolCall[] }
        : { content: "unexpected" },
    );
    const journal = new SessionJournal(path);
    const { run, events } = loop(first, { sandbox, journal, signal: controller.signal });
    const pending = run();
    await vi.waitFor(() => expect(events.some((event) => event.type === "tool_call.started" && event.data.name === "run_shell")).toBe(true));
    controller.abort();
    release();
    await expect(pending).rejects.toBeInstanceOf(CancelledError);
    journal.close();

    const restored = restoreSession(path).get("main")!;
    expect(restored.unfinishedTurn?.calls.map((entry) => entry.id)).toEqual(["w", "s"]);
    expect(restored.nextStep).toBe(1);
    const writesBefore = sandbox.commands.length;
    sandbox.files.delete("/workspace/a.txt");

    const second = new TurnModel((index) => (index === 1 ? { content: "resumed" } : { content: "wrong turn" }));
    const resumedJournal = new SessionJournal(path);
    const resumed = loop(second, { sandbox, journal: resumedJournal, resume: restored });
    const outcome = await resumed.run();
    resumedJournal.close();
    expect(outcome.finalMessage).toBe("resumed");
    // The write finished before the interrupt: its recorded result is replayed, the file is not written again.
    expect(sandbox.files.has("/workspace/a.txt")).toBe(false);
    expect(sandbox.commands.length).toBe(writesBefore);
    expect(resumed.events.filter((event) => event.type === "tool_call.replayed").map((event) => event.data.tool_call_id)).toEqual(["w"]);
    expect(resumed.events.filter((event) => event.type === "tool_call.interrupted").map((event) => event.data.tool_call_id)).toEqual(["s"]);
    const request = second.requests[0]!;
    expect(request.callIndex).toBe(1);
    expectPaired(request.messages);
    expect(request.messages.slice(-2).map((message) => (message as { content: string }).content)).toEqual([
      expect.stringMatching(/^Wrote 1 byte/),
      expect.stringContaining("[interrupted]"),
    ]);
    // A second restore sees the whole, finished conversation.
    expect(restoreSession(path).get("main")!.messages).toEqual(outcome.messages);
  });
});
