// `runner exec --max-cost` end to end (issue 12 item 6): the built CLI, the
// scripted model priced by the task's model.prices, real Docker and git. The
// first model call spends the budget: the run ends failed/budget_exceeded
// (exit 1) with its work committed and a summary that says the cost and how
// to go on; `runner resume --max-cost` finishes it.
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parseUsd } from "../../src/cli/exec-command.js";
import { requireDocker } from "../helpers/docker.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { eventsOfType, onlyRunDirectory, readEvents, readJson, runCli, toolCall, writeScriptedTask } from "../helpers/runner-cli.js";

describe("runner exec --max-cost", () => {
  it("amounts: a number of USD above 0, a leading $ allowed", () => {
    expect([parseUsd("5", "--max-cost"), parseUsd("0.50", "--max-cost"), parseUsd("$2", "--max-cost")]).toEqual([5, 0.5, 2]);
    for (const bad of ["0", "-1", "five", "", "1e3"]) expect(() => parseUsd(bad, "--max-cost"), bad).toThrow(/^--max-cost: expected an amount of USD above 0/);
  });

  it("stops the run at its budget: failed/budget_exceeded, exit 1, work committed, the cost in the summary; resume --max-cost finishes it", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task, git } = writeScriptedTask(directory.path, {
      script: {
        turns: [
          { tool_calls: [toolCall("write_file", { path: "half.txt", content: "first half\n" })] },
          { tool_calls: [toolCall("write_file", { path: "rest.txt", content: "second half\n" })] },
          { content: "Both halves written." },
        ],
      },
      // $1 000 per million prompt tokens: the first call alone costs more than $0.01.
      task: { name: "budget-cli", model: { provider: "scripted", script: "./script.yaml", prices: { input: 1000, output: 1000 } } },
    });
    const environment = { RUNNER_HOME: home.path };
    const first = await runCli(["exec", task, "--max-cost", "0.01"], environment);
    expect(first.code, first.stdout + first.stderr).toBe(1);
    const runDirectory = onlyRunDirectory(home.path)!;
    const report = readJson<{ run_id: string; status: string; reason: string; cost_usd: number; steps: number; branch: string }>(
      join(runDirectory, "report.json"),
    );
    expect(report).toMatchObject({ status: "failed", reason: "budget_exceeded", steps: 1 });
    expect(report.cost_usd).toBeGreaterThanOrEqual(0.01);
    expect(first.stdout).toContain("status: failed (budget_exceeded)");
    expect(first.stdout).toMatch(/cost: \$[\d.]+ \(the budget, model\.max_cost_usd, was reached\)/);
    expect(first.stdout).toContain(`continue it: runner resume ${report.run_id} --max-cost USD`);
    expect(first.stderr).toMatch(/budget reached: the model calls cost \$[\d.]+ of model\.max_cost_usd \$0\.01/);
    expect(git("show", `${report.branch}:half.txt`)).toBe("first half\n");
    expect(readJson(join(runDirectory, "task.json"))).toMatchObject({ model: { max_cost_usd: 0.01 } });

    const refused = await runCli(["resume", report.run_id], environment);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("continue it with --max-cost USD (USD more)");

    const resumed = await runCli(["resume", report.run_id, "--max-cost", "100"], environment);
    expect(resumed.code, resumed.stdout + resumed.stderr).toBe(0);
    expect(readJson(join(runDirectory, "report.json"))).toMatchObject({ status: "succeeded", steps: 3, final_message: "Both halves written." });
    expect(git("show", `${report.branch}:rest.txt`)).toBe("second half\n");
    expect(eventsOfType(readEvents(runDirectory), "run.limit_reached")).toHaveLength(1);
  });
});
