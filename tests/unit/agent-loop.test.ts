import { describe, expect, it, vi } from "vitest";
import { contextSettings } from "../../src/agent/context-window.js";
import { contextSchema } from "../../src/config/task-schema.js";
import { runAgentLoop } from "../../src/agent/agent-loop.js";
import { CancelledError } from "../../src/errors.js";
import type { RunEvent } from "../../src/events/run-events.js";
import { FakeSandbox } from "../../src/sandbox/fake/fake-sandbox.js";
import { workspaceTools } from "../../src/tools/builtin/index.js";
import { ToolRegistry } from "../../src/tools/tool-registry.js";
import { call, StrictScriptedModel } from "../helpers/strict-scripted-model.js";

function setup(model: StrictScriptedModel, sandbox = new FakeSandbox({ "calc.py": "def add(a, b):\n    return a - b\n" }), maxSteps = 10) {
  const events: RunEvent[] = [];
  const controller = new AbortController();
  const run = () =>
    runAgentLoop({
      agentId: "main",
      model,
      tools: new ToolRegistry(workspaceTools()),
      sandbox,
      systemPrompt: "system",
      instruction: "fix add",
      maxSteps,
      toolTimeoutMs: 1000,
      events: { emit: (event) => events.push(event) },
      signal: controller.signal,
      context: contextSettings(128_000, contextSchema.parse({})),
    });
  return { events, controller, sandbox, run };
}

describe("runAgentLoop", () => {
  it("runs tool calls, feeds results back, and stops at the final answer", async () => {
    const model = new StrictScriptedModel([
      { toolCalls: [call("a", "read_file", { path: "calc.py" })] },
      { toolCalls: [call("b", "edit_file", { path: "calc.py", old_string: "a - b", new_string: "a + b" })] },
      { content: "fixed" },
    ]);
    const { run, sandbox } = setup(model);
    const outcome = await run();
    model.assertDone();
    expect(outcome.reason).toBe("final_answer");
    expect(outcome.finalMessage).toBe("fixed");
    expect(outcome.steps).toBe(3);
    expect(outcome.toolCalls).toBe(2);
    expect(outcome.usage).toEqual({ prompt_tokens: 30, completion_tokens: 15, cached_tokens: 0, cache_write_tokens: 0 });
    expect(sandbox.files.get("/workspace/calc.py")?.toString()).toContain("return a + b");
    const second = model.requests[1]!.messages;
    expect(second.at(-1)).toMatchObject({ role: "tool", tool_call_id: "a" });
    expect((second.at(-1) as { content: string }).content).toContain("def add");
    expect(model.requests.map((request) => request.callIndex)).toEqual([0, 1, 2]);
  });

  it("runs a turn's read-only calls concurrently and answers each, in call order", async () => {
    const model = new StrictScriptedModel([
      { toolCalls: [call("x1", "grep", { pattern: "slow" }), call("x2", "read_file", { path: "calc.py" }), call("x3", "list_dir", { path: "." })] },
      { content: "done" },
    ]);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const sandbox = new FakeSandbox({ "calc.py": "x\n" }, async () => {
      await gate;
      return { stdout: "calc.py:1:slow\n" };
    });
    const { run, events } = setup(model, sandbox);
    const pending = run();
    // The grep (through exec) is blocked on the gate; the read and the list finish meanwhile.
    await vi.waitFor(() => expect(events.filter((event) => event.type === "tool_call.finished")).toHaveLength(2));
    release();
    await pending;
    const toolMessages = model.requests[1]!.messages.filter((message) => message.role === "tool");
    expect(toolMessages.map((message) => (message as { tool_call_id: string }).tool_call_id)).toEqual(["x1", "x2", "x3"]);
    expect((toolMessages[0] as { content: string }).content).toContain("calc.py:1:slow");
  });

  it("runs calls that change the sandbox one at a time, so two edits of one file in a turn both land", async () => {
    const model = new StrictScriptedModel([
      {
        toolCalls: [
          call("e1", "edit_file", { path: "calc.py", old_string: "a - b", new_string: "a + b" }),
          call("e2", "edit_file", { path: "calc.py", old_string: "def add", new_string: "def plus" }),
        ],
      },
      { content: "done" },
    ]);
    const sandbox = new FakeSandbox({ "calc.py": "def add(a, b):\n    return a - b\n" });
    // Make every read slow enough that interleaved edits would overwrite each other.
    const readFile = sandbox.readFile.bind(sandbox);
    sandbox.readFile = async (path, options) => {
      const file = await readFile(path, options);
      await new Promise((resolve) => setImmediate(resolve));
      return file;
    };
    const { run } = setup(model, sandbox);
    await run();
    expect(sandbox.files.get("/workspace/calc.py")?.toString()).toBe("def plus(a, b):\n    return a + b\n");
  });

  it("returns unknown tools, malformed JSON and invalid arguments to the model as errors", async () => {
    const model = new StrictScriptedModel([
      {
        toolCalls: [call("u", "delete_everything", {}), call("m", "read_file", '{"path": "calc.py"'), call("i", "read_file", { path: 5 })],
      },
      { content: "ok" },
    ]);
    const { run } = setup(model);
    await run();
    const results = model.requests[1]!.messages.filter((message) => message.role === "tool").map((message) => (message as { content: string }).content);
    expect(results[0]).toMatch(/^Error: unknown tool "delete_everything"\. Available tools: read_file, write_file, edit_file, list_dir, glob, grep, run_shell/);
    expect(results[1]).toMatch(/^Error: arguments for read_file are not valid JSON/);
    expect(results[2]).toMatch(/^Error: invalid arguments for read_file:\n- path: .*string/);
  });

  it("gives duplicate or empty tool-call ids distinct ids so each result pairs with one call", async () => {
    const model = new StrictScriptedModel([
      { toolCalls: [call("dup", "list_dir", {}), call("dup", "list_dir", {}), call("", "list_dir", {})] },
      { content: "ok" },
    ]);
    const { run } = setup(model);
    await run();
    const messages = model.requests[1]!.messages;
    const assistant = messages.find((message) => message.role === "assistant") as { tool_calls: { id: string }[] };
    const ids = assistant.tool_calls.map((toolCall) => toolCall.id);
    expect(new Set(ids).size).toBe(3);
    const answered = messages.filter((message) => message.role === "tool").map((message) => (message as { tool_call_id: string }).tool_call_id);
    expect(answered).toEqual(ids);
  });

  it("stops at max_steps", async () => {
    const model = new StrictScriptedModel([{ toolCalls: [call("1", "list_dir", {})] }, { toolCalls: [call("2", "list_dir", {})] }]);
    const { run, events } = setup(model, undefined, 2);
    const outcome = await run();
    model.assertDone();
    expect(outcome.reason).toBe("max_steps");
    expect(outcome.steps).toBe(2);
    expect(events.at(-1)).toMatchObject({ type: "agent.finished", data: { reason: "max_steps" } });
  });

  it("throws CancelledError when the signal aborts between steps", async () => {
    let controllerRef!: AbortController;
    const model = new StrictScriptedModel([
      () => {
        controllerRef.abort();
        return { toolCalls: [call("1", "list_dir", {})] };
      },
    ]);
    const context = setup(model);
    controllerRef = context.controller;
    await expect(context.run()).rejects.toBeInstanceOf(CancelledError);
  });

  it("emits tool_call.started/finished events with the call's id", async () => {
    const model = new StrictScriptedModel([{ toolCalls: [call("t1", "read_file", { path: "nope.py" })] }, { content: "ok" }]);
    const { run, events } = setup(model);
    await run();
    const finished = events.find((event) => event.type === "tool_call.finished");
    expect(finished).toMatchObject({ data: { tool_call_id: "t1", name: "read_file", is_error: true } });
    expect(events.map((event) => event.type)).toEqual([
      "model_call.started",
      "model_call.finished",
      "tool_call.started",
      "tool_call.finished",
      "model_call.started",
      "model_call.finished",
      "agent.finished",
    ]);
  });
});
