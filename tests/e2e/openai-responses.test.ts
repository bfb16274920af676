/**
 * `model.wire: openai-responses` end to end: the built CLI runs a scripted
 * task through the real `openai` client's Responses API (streamed) against
 * the scripted model's Responses wire, with a real sandbox. The wire refuses
 * (400) a function call whose reasoning item is not passed back, so the run
 * succeeding shows the agent loop carries the reasoning between turns.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { requireDocker } from "../helpers/docker.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { eventsOfType, onlyRunDirectory, readEvents, readJson, runCli, toolCall, writeScriptedTask } from "../helpers/runner-cli.js";

describe("runner exec with the scripted model speaking OpenAI Responses (real CLI, real Docker)", () => {
  it("succeeds over two tool turns, a cut stream retried, with the reasoning items journaled", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task, git } = writeScriptedTask(directory.path, {
      script: {
        turns: [
          { content: "Appending a line first.", tool_calls: [toolCall("run_shell", { command: "echo applied >> applied.txt" })] },
          {
            faults: [{ truncate: true }],
            expect: { tool_result_matches: "^exit_code: 0" },
            tool_calls: [toolCall("run_shell", { command: "cat applied.txt" })],
          },
          { expect: { tool_result_matches: "applied" }, content: "Appended and checked." },
        ],
      },
      task: { name: "responses-wire", model: { provider: "scripted", script: "./script.yaml", wire: "openai-responses", max_retries: 1 } },
    });
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr + result.stdout).toBe(0);
    const runDirectory = onlyRunDirectory(home.path)!;
    const report = readJson(join(runDirectory, "report.json"));
    expect(report).toMatchObject({ status: "succeeded", steps: 3, tool_calls: 2, final_message: "Appended and checked." });
    const events = readEvents(runDirectory);
    expect(eventsOfType(events, "model_call.retrying").map((event) => event.data)).toEqual([
      expect.objectContaining({ step: 1, attempt: 1, reason: "truncated_response" }),
    ]);
    expect(eventsOfType(events, "tool_call.started")).toHaveLength(2);
    expect(git("show", `${report.branch}:applied.txt`)).toBe("applied\n");
    const session = readFileSync(join(runDirectory, "session.jsonl"), "utf8");
    for (const id of ["rs_scripted_0", "rs_scripted_1", "rs_scripted_2"]) expect(session).toContain(`"id":"${id}"`);
  });
});
