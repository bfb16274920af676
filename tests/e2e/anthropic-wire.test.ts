/**
 * The Anthropic client end to end: the built CLI runs a scripted task with
 * `model.wire: anthropic`, so the real @anthropic-ai/sdk client streams from
 * the scripted model's Messages API wire (cache_control breakpoints measured
 * by its prompt cache), with a real sandbox.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { requireDocker } from "../helpers/docker.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { eventsOfType, onlyRunDirectory, readEvents, readJson, runCli, toolCall, writeScriptedTask } from "../helpers/runner-cli.js";

async function runAnthropic(directory: string, home: string, script: unknown) {
  const { task, git } = writeScriptedTask(directory, {
    script,
    task: { name: "anthropic-wire", model: { provider: "scripted", wire: "anthropic", script: "./script.yaml", thinking_budget_tokens: 2048 } },
  });
  const result = await runCli(["exec", task], { RUNNER_HOME: home });
  const runDirectory = onlyRunDirectory(home)!;
  return { result, git, report: readJson(join(runDirectory, "report.json")), events: readEvents(runDirectory) };
}

describe("runner exec with model.wire: anthropic (real CLI, real SDK over loopback, real Docker)", () => {
  it("succeeds with thinking carried between turns, and report.json counts cached tokens", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { result, report, git } = await runAnthropic(directory.path, home.path, {
      turns: [
        { thinking: "Start by writing the file.", tool_calls: [toolCall("run_shell", { command: "echo one > notes.txt" })] },
        {
          thinking: "Now append.",
          expect: { tool_result_matches: "^exit_code: 0" },
          tool_calls: [toolCall("run_shell", { command: "echo two >> notes.txt" })],
        },
        { expect: { tool_result_matches: "^exit_code: 0" }, content: "Wrote notes.txt." },
      ],
    });
    expect(result.code, result.stderr + result.stdout).toBe(0);
    expect(report).toMatchObject({ status: "succeeded", steps: 3, tool_calls: 2, final_message: "Wrote notes.txt." });
    const usage = report.usage as { prompt_tokens: number; cached_tokens: number; cache_write_tokens: number };
    expect(usage.cached_tokens).toBeGreaterThan(0);
    expect(usage.cache_write_tokens).toBeGreaterThan(0);
    expect(usage.prompt_tokens).toBeGreaterThan(usage.cached_tokens);
    expect(git("show", `${String(report.branch)}:notes.txt`)).toBe("one\ntwo\n");
  });

  it("a refusal ends the run failed with reason refusal (exit 1), its tool call not run", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { result, report, events } = await runAnthropic(directory.path, home.path, {
      turns: [{ content: "I can't help with that.", tool_calls: [toolCall("run_shell", { command: "echo no > no.txt" })], stop_reason: "refusal" }],
    });
    expect(result.code, result.stderr + result.stdout).toBe(1);
    expect(report).toMatchObject({ status: "failed", reason: "refusal", steps: 1, tool_calls: 0 });
    expect(result.stdout).toMatch(/status: failed \(refusal\)/);
    expect(eventsOfType(events, "tool_call.started")).toEqual([]);
    expect(eventsOfType(events, "agent.finished").map((event) => event.data)).toEqual([expect.objectContaining({ reason: "refusal" })]);
  });
});
