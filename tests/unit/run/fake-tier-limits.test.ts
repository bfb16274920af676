/**
 * The run's budget and wall-clock limit in the Docker-free tier (issue 12
 * item 6, issue 15 item 5, issue 13 "a run that ran out of budget or time can
 * be continued"): `model.max_cost_usd` ends the run `failed`/`budget_exceeded`
 * before the next model call, subagents' calls counting; `timeout_sec` ends
 * it `failed`/`timed_out`, stopping what runs; both commit the work so far,
 * and `runner resume` continues each with a raised limit.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { costOf, roundUsd } from "../../../src/model/pricing.js";
import type { Usage } from "../../../src/model/messages.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { eventData, eventsFile, fakeRunner, fakeShell, toolCall, writeScriptedTask } from "../../helpers/fake-runner.js";

/** $1 000 per million prompt tokens: the first call of any run (its system prompt alone is hundreds of tokens) costs more than $0.01. */
const DEAR = { input: 1000, cached_input: 1000, cache_write: 1000, output: 1000 };

const finishedCosts = (runDirectory: string) =>
  eventData(eventsFile(runDirectory), "model_call.finished").map((data) => ({
    agent: data.agent_id,
    usage: data.usage as Usage,
    cost: data.cost_usd as number,
  }));

describe("the run's budget (model.max_cost_usd)", () => {
  it("ends the run failed/budget_exceeded before the next model call, the work so far committed; resume --max-cost goes on from what was spent", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell() });
    const { task, git } = writeScriptedTask(directory.path, {
      script: {
        turns: [
          { tool_calls: [toolCall("run_shell", { command: "echo one >> work.txt" })] },
          { tool_calls: [toolCall("run_shell", { command: "echo two >> work.txt" })] },
          { content: "Both lines written." },
        ],
      },
      task: { name: "budget", model: { provider: "scripted", script: "./script.yaml", prices: DEAR, max_cost_usd: 0.01 } },
    });
    const first = await fake.runner.start(task);
    const report = await first.result;

    // The first call spent the budget: its tool call ran, no second call started.
    expect(report).toMatchObject({ status: "failed", reason: "budget_exceeded", steps: 1, tool_calls: 1, pricing: { source: "task", prices: DEAR } });
    const [call] = finishedCosts(first.directory);
    expect(call!.cost).toBeCloseTo(costOf(call!.usage, DEAR), 12);
    expect(report.cost_usd).toBe(roundUsd(call!.cost));
    expect(report.cost_usd).toBeGreaterThanOrEqual(0.01);
    const events = eventsFile(first.directory);
    expect(eventData(events, "run.limit_reached")).toEqual([{ limit: "max_cost_usd", value: 0.01, cost_usd: report.cost_usd, elapsed_ms: expect.any(Number) }]);
    expect(eventData(events, "agent.finished")).toEqual([expect.objectContaining({ agent_id: "main", reason: "budget_exceeded", steps: 1 })]);
    expect(git("show", `${report.branch}:work.txt`)).toBe("one\n");
    expect(git("rev-parse", report.branch!).trim()).toBe(report.head_commit);

    await expect(fake.runner.resume(first.id)).rejects.toThrow(
      /stopped at its budget \(spent \$[\d.]+ of model\.max_cost_usd \$0\.01\); continue it with --max-cost USD/,
    );
    const resumed = await fake.runner.resume(first.id, { maxCostUsd: 1000 });
    const final = await resumed.result;
    expect(final).toMatchObject({ status: "succeeded", reason: "finished_unverified", resumes: 1, steps: 3, final_message: "Both lines written." });
    expect(git("show", `${report.branch}:work.txt`)).toBe("one\ntwo\n");
    // The whole run's cost: every call's, the earlier attempt's included; the new budget is 1000 more than was spent.
    const calls = finishedCosts(first.directory);
    expect(calls).toHaveLength(3);
    expect(final.cost_usd).toBe(roundUsd(calls.reduce((sum, entry) => sum + entry.cost, 0)));
    expect(JSON.parse(readFileSync(join(first.directory, "task.json"), "utf8"))).toMatchObject({ model: { max_cost_usd: roundUsd(report.cost_usd! + 1000) } });
  });

  it("counts a subagent's calls: the main agent makes no call once its explorer spent the budget", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell() });
    // The explorer's prompt (~12 500 tokens at $1 per million: ~$0.0125) spends the $0.01 the main agent's first call (~$0.001-0.003) did not.
    const brief = "Read every file and report. ".repeat(1800);
    const { task } = writeScriptedTask(directory.path, {
      script: {
        turns: [{ tool_calls: [toolCall("agent", { mode: "explore", description: "survey", prompt: brief })] }, { content: "never asked" }],
        subagents: { survey: { turns: [{ content: "Surveyed." }] } },
      },
      task: {
        name: "budget-subagent",
        model: { provider: "scripted", script: "./script.yaml", prices: { input: 1, output: 0 }, max_cost_usd: 0.01 },
      },
    });
    const run = await fake.runner.start(task);
    const report = await run.result;

    const calls = finishedCosts(run.directory);
    expect(calls.map((entry) => entry.agent)).toEqual(["main", "e1"]);
    const [main, explorer] = calls;
    expect(main!.cost).toBeLessThan(0.01);
    expect(report).toMatchObject({ status: "failed", reason: "budget_exceeded", steps: 1 });
    expect(report.agents).toEqual([expect.objectContaining({ id: "e1", status: "finished", steps: 1, cost_usd: roundUsd(explorer!.cost) })]);
    expect(report.cost_usd).toBe(roundUsd(main!.cost + explorer!.cost));
    // The prices were the task's, cached and written tokens billed as input since it gave none.
    expect(report.pricing.prices).toEqual({ input: 1, cached_input: 1, cache_write: 1, output: 0 });
  });

  it("is refused up front for a model without prices (a cost the runner cannot know cannot stop a run)", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell() });
    const { task } = writeScriptedTask(directory.path, {
      script: { turns: [{ content: "Done." }] },
      task: { name: "budget-unpriced", model: { provider: "scripted", script: "./script.yaml", max_cost_usd: 1 } },
    });
    await expect(fake.runner.start(task)).rejects.toThrow(
      "model.max_cost_usd: a budget needs the model's prices, and the scripted model has no model to price as: set model.name (e.g. claude-sonnet-4-5) or model.prices",
    );
  });

  it("prices a scripted run as the model named in model.name, and says once when a run is not priced", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell() });
    const named = writeScriptedTask(join(directory.path, "named"), {
      script: { turns: [{ content: "Done." }] },
      task: { name: "priced-as-sonnet", model: { provider: "scripted", script: "./script.yaml", name: "claude-sonnet-4-5-20250929" } },
    });
    const priced = await (await fake.runner.start(named.task)).result;
    expect(priced.pricing).toMatchObject({ model: "claude-sonnet-4-5-20250929", source: "table", prices: { input: 3, output: 15 } });
    expect(priced.cost_usd).toBeGreaterThan(0);

    const unnamed = writeScriptedTask(join(directory.path, "unnamed"), { script: { turns: [{ content: "Done." }] }, task: { name: "unpriced" } });
    const run = await fake.runner.start(unnamed.task);
    const report = await run.result;
    expect(report).toMatchObject({ status: "succeeded", cost_usd: null, pricing: { prices: null, source: null } });
    expect(eventData(eventsFile(run.directory), "model.unpriced")).toEqual([{ model: null, detail: report.pricing.unpriced }]);
    expect(eventData(eventsFile(run.directory), "model_call.finished")).toEqual([expect.objectContaining({ cost_usd: null })]);
  });
});

describe("the run's wall-clock limit (timeout_sec)", () => {
  it("stops what runs and ends the run failed/timed_out, the work so far committed; resume --timeout continues it", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell() });
    const { task, git } = writeScriptedTask(directory.path, {
      script: {
        turns: [
          { tool_calls: [toolCall("write_file", { path: "before.txt", content: "written before the limit\n" })] },
          // `sleep` waits until it is stopped: the time limit stops it.
          { tool_calls: [toolCall("run_shell", { command: "sleep 600" })] },
          { expect: { tool_result_matches: "\\[interrupted\\]" }, content: "Done after the resume." },
        ],
      },
      // Long enough for the first two calls to start on a loaded machine; the second then waits for the limit.
      task: { name: "time-limit", timeout_sec: 5 },
    });
    const first = await fake.runner.start(task);
    const report = await first.result;

    expect(report).toMatchObject({ status: "failed", reason: "timed_out", error: "the run's time limit was reached (timeout_sec 5)", steps: 2 });
    expect(eventData(eventsFile(first.directory), "run.limit_reached")).toEqual([
      { limit: "timeout_sec", value: 5, cost_usd: null, elapsed_ms: expect.any(Number) },
    ]);
    expect(git("show", `${report.branch}:before.txt`)).toBe("written before the limit\n");
    expect(git("log", "-1", "--format=%s", report.branch!).trim()).toBe(`agent-runner: time-limit (run ${first.id}, failed: partial work)`);

    const resumed = await fake.runner.resume(first.id, { timeoutSec: 600 });
    const final = await resumed.result;
    expect(final).toMatchObject({ status: "succeeded", resumes: 1, steps: 3, final_message: "Done after the resume." });
    expect(JSON.parse(readFileSync(join(first.directory, "task.json"), "utf8"))).toMatchObject({ timeout_sec: 600 });
  });
});
