// A scripted file whose tool calls do not fit the runner's tools fails at
// load (issue 13): `runner exec` and `runner batch` exit 2 naming the turn,
// the field and the step, before any branch, worktree or container exists.
// Calls given as arguments_raw are sent unchecked (bad on purpose).
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { runCli, toolCall, writeScriptedTask } from "../helpers/runner-cli.js";

describe("runner exec: a script's tool calls are checked at load", () => {
  it("a wrong argument and an unknown tool: exit 2 naming turn, call, field and step; nothing of a run exists", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task, git } = writeScriptedTask(directory.path, {
      script: {
        turns: [
          { tool_calls: [toolCall("list_dir", {}), { name: "read_file", arguments_raw: '{"path": 5}' }] },
          { content: "looking" },
          { content: "still looking" },
          { tool_calls: [toolCall("read_file", { path: 7 }), toolCall("raed_file", { path: "README.md" })] },
          { content: "Done." },
        ],
      },
    });
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path });
    expect(result.code, result.stdout + result.stderr).toBe(2);
    expect(result.stderr).toContain(`runner: model.script ${join(directory.path, "script.yaml")}: 2 problem(s) in its tool calls`);
    expect(result.stderr).toMatch(/\n {2}- turns\[3\]\.tool_calls\[0\]\.arguments\.path \(step 4, read_file\): .*expected string, received number/);
    expect(result.stderr).toContain('\n  - turns[3].tool_calls[1].name (step 4): no tool "raed_file"; the runner\'s tools are read_file, ');
    // The arguments_raw call of turns[0] is not reported.
    expect(result.stderr).not.toContain("turns[0]");
    expect(existsSync(join(home.path, "runs"))).toBe(false);
    expect(git("branch", "--list", "runner/*")).toBe("");
  });

  it("runner batch reports the same problem for the task it is in, before anything runs", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    writeScriptedTask(join(directory.path, "broken"), {
      script: { turns: [{ tool_calls: [toolCall("edit_file", { path: "README.md", old: "a", new: "b" })] }] },
    });
    const result = await runCli(["batch", "run", directory.path], { RUNNER_HOME: home.path });
    // Its only task refused: the task's error, in every report (CI gets its JUnit file), and no run.
    expect(result.code, result.stdout + result.stderr).toBe(3);
    expect(result.stdout).toContain("broken: error (task_invalid): ");
    expect(result.stdout).toContain("3 problem(s) in its tool calls");
    const [batchId] = readdirSync(join(home.path, "batches"));
    const report = JSON.parse(readFileSync(join(home.path, "batches", batchId!, "batch-report.json"), "utf8")) as { tasks: { error: string }[] };
    expect(report.tasks[0]!.error).toMatch(/- turns\[0\]\.tool_calls\[0\]\.arguments\.old_string \(step 1, edit_file\): /);
    expect(report.tasks[0]!.error).toMatch(/- turns\[0\]\.tool_calls\[0\]\.arguments \(step 1, edit_file\): .*"old"/);
    expect(existsSync(join(home.path, "runs"))).toBe(false);
  });
});
