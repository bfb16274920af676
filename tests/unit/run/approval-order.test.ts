/**
 * Ask first, then start (issue 26 item 6; docs/events.md `tool_call.started`:
 * "a tool call the policy let through begins"): a call that needs
 * confirmation writes `approval.requested` and `approval.resolved` before its
 * `tool_call.started`, and a refused call never starts. A run of the
 * Docker-free tier with the worker policy and a broker that answers.
 */
import { describe, expect, it } from "vitest";
import type { ApprovalBroker } from "../../../src/runner/runner.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { eventsFile, fakeRunner, fakeShell, toolCall, writeScriptedTask } from "../../helpers/fake-runner.js";

/** `type call` of each approval and tool call event, in the order events.jsonl holds them; calls named by `names` in order of first appearance. */
function callEvents(runDirectory: string, names: string[]): string[] {
  const seen: string[] = [];
  return eventsFile(runDirectory)
    .map((envelope) => ({ type: /^dev\.agent-runner\.(.+)\.v\d+$/.exec(envelope.type)![1]!, data: envelope.data as Record<string, unknown> }))
    .filter(({ type }) => type.startsWith("approval.") || type.startsWith("tool_call."))
    .map(({ type, data }) => {
      const id = String(data.tool_call_id);
      if (!seen.includes(id)) seen.push(id);
      return `${type} ${names[seen.indexOf(id)]}`;
    });
}

describe("approval before start", () => {
  it("a confirmed call starts after its answer; a refused one never starts; a call needing no answer starts at once", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell() });
    const { task } = writeScriptedTask(directory.path, {
      task: { name: "ask-first", policy: "worker" },
      script: {
        turns: [
          { tool_calls: [toolCall("run_shell", { command: "git push origin main" })] },
          { tool_calls: [toolCall("run_shell", { command: "git push origin HEAD" })] },
          { tool_calls: [toolCall("list_dir", { path: "." })] },
          { content: "Done." },
        ],
      },
    });
    const asked: (string | null)[] = [];
    const approvals: ApprovalBroker = {
      request: async ({ subject }) => {
        asked.push(subject);
        return asked.length === 1 ? { answer: "no", reason: "not now" } : { answer: "yes" };
      },
    };
    const run = await fake.runner.start(task, { approvals });
    const report = await run.result;
    expect(asked).toEqual(["git push origin main", "git push origin HEAD"]);
    expect(report.denials).toEqual({ "commands.git-push": 1 });
    expect(callEvents(run.directory, ["push1", "push2", "look"])).toEqual([
      "approval.requested push1",
      "approval.resolved push1",
      "tool_call.denied push1",
      "tool_call.finished push1",
      "approval.requested push2",
      "approval.resolved push2",
      "tool_call.started push2",
      "tool_call.finished push2",
      "tool_call.started look",
      "tool_call.finished look",
    ]);
  });
});
