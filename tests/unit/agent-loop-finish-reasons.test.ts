import { describe, expect, it } from "vitest";
import { contextSettings } from "../../src/agent/context-window.js";
import { contextSchema } from "../../src/config/task-schema.js";
import { CUT_REPLY_NOTE, MAX_CUT_REPLIES, runAgentLoop } from "../../src/agent/agent-loop.js";
import type { RunEvent } from "../../src/events/run-events.js";
import { FakeSandbox } from "../../src/sandbox/fake/fake-sandbox.js";
import { workspaceTools } from "../../src/tools/builtin/index.js";
import { ToolRegistry } from "../../src/tools/tool-registry.js";
import { call, StrictScriptedModel } from "../helpers/strict-scripted-model.js";

function setup(model: StrictScriptedModel) {
  const events: RunEvent[] = [];
  const sandbox = new FakeSandbox({ "calc.py": "def add(a, b):\n    return a - b\n" });
  const run = () =>
    runAgentLoop({
      agentId: "main",
      model,
      tools: new ToolRegistry(workspaceTools()),
      sandbox,
      systemPrompt: "system",
      instruction: "fix add",
      maxSteps: 10,
      toolTimeoutMs: 1000,
      events: { emit: (event) => events.push(event) },
      signal: new AbortController().signal,
      context: contextSettings(128_000, contextSchema.parse({})),
    });
  return { events, sandbox, run };
}

const ofType = (events: RunEvent[], type: string) => events.filter((event) => event.type === type).map((event) => event.data as Record<string, unknown>);

describe("runAgentLoop and finish reason length (reply cut at the output limit)", () => {
  it("does not take cut text as the final answer: tells the model and continues", async () => {
    const model = new StrictScriptedModel([{ content: "I will now expl", finishReason: "length" }, { content: "done" }]);
    const { run, events } = setup(model);
    const outcome = await run();
    model.assertDone();
    expect(outcome).toMatchObject({ reason: "final_answer", finalMessage: "done", steps: 2 });
    expect(model.requests[1]!.messages.slice(-2)).toEqual([
      { role: "assistant", content: "I will now expl" },
      { role: "user", content: CUT_REPLY_NOTE },
    ]);
    expect(ofType(events, "model_call.cut")).toEqual([{ agent_id: "main", step: 0, dropped_tool_calls: 0, in_a_row: 1, limit: MAX_CUT_REPLIES }]);
  });

  it("never runs a turn whose tool-call arguments were cut; a whole call of a length reply runs", async () => {
    const model = new StrictScriptedModel([
      {
        toolCalls: [call("w1", "write_file", { path: "a.txt", content: "ok" }), call("w2", "write_file", '{"path": "b.txt", "content": "hal')],
        finishReason: "length",
      },
      { toolCalls: [call("w3", "write_file", { path: "c.txt", content: "whole" })], finishReason: "length" },
      { content: "done" },
    ]);
    const { run, sandbox, events } = setup(model);
    const outcome = await run();
    model.assertDone();
    expect(outcome.reason).toBe("final_answer");
    // Neither call of the cut turn ran; no call is left without a result.
    expect(sandbox.files.has("/workspace/a.txt")).toBe(false);
    expect(sandbox.files.has("/workspace/b.txt")).toBe(false);
    expect(model.requests[1]!.messages.at(-2)).toEqual({ role: "assistant", content: null });
    expect(model.requests[1]!.messages.at(-1)).toEqual({ role: "user", content: CUT_REPLY_NOTE });
    expect(sandbox.files.get("/workspace/c.txt")?.toString()).toBe("whole");
    expect(ofType(events, "model_call.cut").map((data) => data.dropped_tool_calls)).toEqual([2]);
  });

  it(`ends with reason output_limit after ${MAX_CUT_REPLIES} cut replies in a row`, async () => {
    const model = new StrictScriptedModel(Array.from({ length: MAX_CUT_REPLIES }, () => ({ content: "cut", finishReason: "length" })));
    const { run, events } = setup(model);
    const outcome = await run();
    model.assertDone();
    expect(outcome).toMatchObject({ reason: "output_limit", steps: MAX_CUT_REPLIES });
    expect(ofType(events, "model_call.cut").map((data) => data.in_a_row)).toEqual([1, 2, 3]);
    expect(ofType(events, "agent.finished")).toEqual([{ agent_id: "main", reason: "output_limit", steps: 3, final_message: "cut" }]);
  });
});

describe("runAgentLoop and finish reason refusal", () => {
  it("ends the agent with reason refusal and runs none of the reply's calls", async () => {
    const model = new StrictScriptedModel([
      { content: "I can't help with that.", toolCalls: [call("r", "write_file", { path: "x", content: "y" })], finishReason: "refusal" },
    ]);
    const { run, events, sandbox } = setup(model);
    const outcome = await run();
    model.assertDone();
    expect(outcome).toMatchObject({ reason: "refusal", finalMessage: "I can't help with that.", steps: 1, toolCalls: 0 });
    expect(sandbox.files.has("/workspace/x")).toBe(false);
    expect(outcome.messages.at(-1)).toEqual({ role: "assistant", content: "I can't help with that." });
    expect(ofType(events, "agent.finished")).toEqual([{ agent_id: "main", reason: "refusal", steps: 1, final_message: "I can't help with that." }]);
  });
});
