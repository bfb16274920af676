/**
 * The idle rule in the Docker-free tier (issue 11 item 5; README "Security
 * model"): host git never reads or removes a worktree while a sandbox that
 * mounts it writable cannot be confirmed gone. A sandbox that lingers after
 * close() (as a container Docker failed to remove) leaves its worktree
 * uncommitted and in place, and says so; nothing else of the run is lost.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runPaths } from "../../../src/workspace/run-disk.js";
import { sweepDeadRuns } from "../../../src/run/run-lock.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { eventData, eventsFile, fakeRunner, fakeShell, toolCall, writeScriptedTask } from "../../helpers/fake-runner.js";

describe("the idle rule in the Docker-free tier", () => {
  it("the main agent's sandbox cannot be confirmed gone: nothing committed, verified or removed; an infrastructure error", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell(), lingerAfterClose: (spec) => spec.agentId === "main" });
    const { task, git } = writeScriptedTask(directory.path, {
      script: { turns: [{ tool_calls: [toolCall("write_file", { path: "work.txt", content: "uncommitted\n" })] }, { content: "Done." }] },
      task: { name: "lingering", verify: { command: "grep -q uncommitted work.txt", timeout_sec: 30 } },
    });
    const run = await fake.runner.start(task);
    const report = await run.result;

    expect(report).toMatchObject({ status: "error", reason: "sandbox_not_idle", head_commit: null, commit: null, verify: null, patch: null });
    expect(report.error).toMatch(/^sandbox fake-1-main \(not removed\) still mounts .* writable/);
    // The branch is where it started; the agent's file is still only in the worktree, which is still there.
    expect(git("rev-parse", report.branch!).trim()).toBe(report.base_commit);
    const worktree = runPaths(run.directory).worktree;
    expect(readFileSync(join(worktree, "work.txt"), "utf8")).toBe("uncommitted\n");
    expect(fake.provider.created.map((sandbox) => sandbox.spec.agentId)).toEqual(["main"]);
    const events = eventsFile(run.directory);
    expect(eventData(events, "workspace.committed")).toEqual([]);
    // Said in an event naming the worktree left behind and the sandbox that holds it.
    expect(eventData(events, "cleanup.failed")).toContainEqual({
      what: expect.stringContaining(worktree),
      error: expect.stringContaining("sandbox fake-1-main (not removed) still mounts"),
    });
    expect(eventData(events, "run.finished")).toEqual([expect.objectContaining({ status: "error", exit_code: 3 })]);
    fake.provider.release();
  });

  /** A run whose worker w1 edits calc.txt and whose sandbox then lingers. */
  async function lingeringWorkerRun() {
    const directory = temporaryDirectory();
    const fake = await fakeRunner({ exec: fakeShell(), lingerAfterClose: (spec) => spec.agentId === "w1" });
    const { task, git } = writeScriptedTask(directory.path, {
      files: { "calc.txt": "times2\n" },
      task: { name: "lingering-worker", verify: { command: "grep -q times2 calc.txt", timeout_sec: 30 } },
      script: {
        turns: [
          { tool_calls: [toolCall("agent", { mode: "worker", description: "make it triple", prompt: "Triple it.", verify: "grep -q times3 calc.txt" })] },
          {
            expect: { tool_result_matches: "^Error: subagent w1 \\(make it triple\\) failed: sandbox fake-2-w1 \\(not removed\\) still mounts" },
            content: "w1 was lost.",
          },
        ],
        subagents: {
          "make it triple": { turns: [{ tool_calls: [toolCall("write_file", { path: "calc.txt", content: "times3\n" })] }, { content: "tripled." }] },
        },
      },
    });
    const run = await fake.runner.start(task);
    const report = await run.result;
    return {
      run,
      report,
      git,
      provider: fake.provider,
      home: fake.home,
      workerWorktree: join(runPaths(run.directory).workers, "w1"),
      async [Symbol.asyncDispose]() {
        fake.provider.release();
        await fake[Symbol.asyncDispose]();
        await directory[Symbol.asyncDispose]();
      },
    };
  }

  it("a worker's sandbox cannot be confirmed gone: its work is neither committed nor verified nor merged; the run goes on", async () => {
    await using lingering = await lingeringWorkerRun();
    const { run, report, git, workerWorktree } = lingering;

    expect(report).toMatchObject({ status: "succeeded", reason: "verified" });
    expect(report.agents).toEqual([expect.objectContaining({ id: "w1", status: "failed", verify: null, merge: null, commit: null })]);
    // Its branch is where it started (the parent had nothing to snapshot): its edit was never committed.
    expect(git("rev-parse", `${report.branch}-w1`).trim()).toBe(report.base_commit);
    expect(git("show", `${report.branch}:calc.txt`)).toBe("times2\n");
    // No verification sandbox for the worker; the main agent's worktree went as usual.
    expect(lingering.provider.created.map((sandbox) => sandbox.spec.agentId)).toEqual(["main", "w1", "verify"]);
    expect(existsSync(runPaths(run.directory).worktree)).toBe(false);
    expect(eventData(eventsFile(run.directory), "cleanup.failed")).toContainEqual({
      what: expect.stringContaining(workerWorktree),
      error: expect.stringContaining("sandbox fake-2-w1 (not removed) still mounts"),
    });
  });

  // The run's disk stays while any worktree on it was left behind (before: it was removed once the main
  // worktree was idle, taking the lingering worker's tree with it); a later start's sweep commits and removes it.
  it("a worker's sandbox cannot be confirmed gone: its worktree stays, with the run's disk, until a later sweep finds it idle", async () => {
    await using lingering = await lingeringWorkerRun();
    const { run, provider } = lingering;
    expect(readFileSync(join(lingering.workerWorktree, "calc.txt"), "utf8")).toBe("times3\n");
    const before = readFileSync(join(run.directory, "report.json"), "utf8");
    // While the sandbox lingers the sweep leaves the run alone; once it is gone the worktree and the disk go.
    expect(await sweepDeadRuns(lingering.home, provider)).toEqual([]);
    expect(existsSync(lingering.workerWorktree)).toBe(true);
    provider.release();
    expect(await sweepDeadRuns(lingering.home, provider)).toEqual([run.id]);
    expect(existsSync(runPaths(run.directory).disk)).toBe(false);
    // The finished run's report is kept as it was.
    expect(readFileSync(join(run.directory, "report.json"), "utf8")).toBe(before);
  });
});
