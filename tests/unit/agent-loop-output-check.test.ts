/**
 * A run's final-answer check (RunEmbedding.checkFinalAnswer, the agency's
 * `output_schema`, issue 22 item 4) inside the agent loop: exactly one
 * correction turn, kept in the journal so a resumed run gets no second one.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { contextSettings } from "../../src/agent/context-window.js";
import { contextSchema } from "../../src/config/task-schema.js";
import { outputCorrectionNote, runAgentLoop, type AgentLoopOptions } from "../../src/agent/agent-loop.js";
import { restoreSession, SessionJournal } from "../../src/agent/session-journal.js";
import { StructuredOutput } from "../../src/agency/guards/structured-output.js";
import type { RunEvent } from "../../src/events/run-events.js";
import { FakeSandbox } from "../../src/sandbox/fake/fake-sandbox.js";
import { workspaceTools } from "../../src/tools/builtin/index.js";
import { ToolRegistry } from "../../src/tools/tool-registry.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { StrictScriptedModel } from "../helpers/strict-scripted-model.js";

const VERDICT = new StructuredOutput({ type: "object", required: ["verdict"], properties: { verdict: { enum: ["approve", "changes_requested"] } } });

function loop(model: StrictScriptedModel, extra: Partial<AgentLoopOptions> = {}) {
  const events: RunEvent[] = [];
  const run = () =>
    runAgentLoop({
      agentId: "main",
      model,
      tools: new ToolRegistry(workspaceTools()),
      sandbox: new FakeSandbox({}),
      systemPrompt: "system",
      instruction: "review",
      maxSteps: 10,
      toolTimeoutMs: 1000,
      events: { emit: (event) => events.push(event) },
      signal: new AbortController().signal,
      context: contextSettings(128_000, contextSchema.parse({})),
      checkFinalAnswer: VERDICT.checkFinalAnswer,
      ...extra,
    });
  return { events, run };
}

const ofType = (events: RunEvent[], type: string) => events.filter((event) => event.type === type).map((event) => event.data as Record<string, unknown>);

describe("the final-answer check in the agent loop", () => {
  it("a rejected answer gets exactly one correction turn naming the problems; a second rejection ends output_invalid", async () => {
    const model = new StrictScriptedModel([{ content: "Looks good to me." }, { content: '{"verdict": "maybe"}' }]);
    const { run, events } = loop(model);
    const outcome = await run();
    model.assertDone();
    expect(outcome).toMatchObject({ reason: "output_invalid", steps: 2, finalMessage: '{"verdict": "maybe"}' });
    const correction = model.requests[1]!.messages.at(-1)!;
    expect(correction.role).toBe("user");
    expect(correction.content).toContain("is not a JSON object");
    expect(ofType(events, "agent.output_rejected")).toEqual([
      { agent_id: "main", step: 0, problems: [expect.stringContaining("not a JSON object")], correction: true },
      { agent_id: "main", step: 1, problems: [expect.stringMatching(/\/verdict must be equal to one of the allowed values.*approve/)], correction: false },
    ]);
    expect(ofType(events, "agent.finished")).toEqual([{ agent_id: "main", reason: "output_invalid", steps: 2, final_message: '{"verdict": "maybe"}' }]);
  });

  it("a valid answer on the correction turn (in a ```json block) ends final_answer", async () => {
    const answer = 'Two problems remain.\n```json\n{"verdict": "changes_requested"}\n```';
    const model = new StrictScriptedModel([{ content: '{"verdict": "reject"}' }, { content: answer }]);
    const { run } = loop(model);
    const outcome = await run();
    model.assertDone();
    expect(outcome).toMatchObject({ reason: "final_answer", steps: 2, finalMessage: answer });
    expect(VERDICT.check(outcome.finalMessage)).toEqual({ valid: true, output: { verdict: "changes_requested" } });
  });

  it("judges the answer after redaction: the check never sees a secret", async () => {
    const seen: string[] = [];
    const model = new StrictScriptedModel([{ content: '{"verdict": "approve", "note": "token sk-live-123"}' }]);
    const { run } = loop(model, {
      redact: (text) => text.replaceAll("sk-live-123", "[REDACTED]"),
      checkFinalAnswer: (answer) => {
        seen.push(answer);
        return null;
      },
    });
    expect((await run()).reason).toBe("final_answer");
    expect(seen).toEqual(['{"verdict": "approve", "note": "token [REDACTED]"}']);
  });

  it("without a check, any answer ends final_answer (the loop as before)", async () => {
    const model = new StrictScriptedModel([{ content: "Looks good to me." }]);
    const { run } = loop(model, { checkFinalAnswer: undefined });
    expect((await run()).reason).toBe("final_answer");
  });
});

describe("the correction turn across a resume", () => {
  it("is counted from the journal: a resumed run whose correction was given gets none again", async () => {
    await using directory = temporaryDirectory();
    const path = join(directory.path, "session.jsonl");
    const journal = new SessionJournal(path);
    // The first attempt stops right after the correction (its step limit stands in for a crash).
    const first = new StrictScriptedModel([{ content: "Looks good to me." }]);
    expect((await loop(first, { journal, maxSteps: 1 }).run()).reason).toBe("max_steps");
    journal.close();
    const restored = restoreSession(path).get("main")!;
    expect(restored.outputCorrections).toBe(1);
    expect(restored.messages.at(-1)).toMatchObject({ role: "user", content: expect.stringContaining("Your final answer was rejected") });
    const second = new StrictScriptedModel([{ content: "Still fine." }]);
    const { run, events } = loop(second, { journal: new SessionJournal(path), resume: restored });
    const outcome = await run();
    second.assertDone();
    expect(outcome.reason).toBe("output_invalid");
    expect(ofType(events, "agent.output_rejected").map((data) => data.correction)).toEqual([false]);
  });

  it("an answer the first attempt made but never judged is judged on resume, before any model call", async () => {
    await using directory = temporaryDirectory();
    const path = join(directory.path, "session.jsonl");
    const journal = new SessionJournal(path);
    journal.append({ type: "message", agent_id: "main", message: { role: "system", content: "system" } });
    journal.append({ type: "message", agent_id: "main", message: { role: "user", content: "review" } });
    journal.append({ type: "message", agent_id: "main", message: { role: "assistant", content: "Looks good to me." }, step: 0 });
    journal.close();
    const model = new StrictScriptedModel([{ content: '{"verdict": "approve"}' }]);
    const outcome = await loop(model, { resume: restoreSession(path).get("main")! }).run();
    model.assertDone();
    expect(outcome).toMatchObject({ reason: "final_answer", steps: 2 });
    expect(model.requests[0]!.messages.at(-1)).toEqual({
      role: "user",
      content: outputCorrectionNote(["the final answer is not a JSON object: give the object as the whole answer, or in one ```json fenced block"]),
    });
  });
});
