/**
 * Run branches say which task they hold (issue 26 item 10): two runs of one
 * task get two `runner/<task-slug>-<short-id>` branches, recorded in the
 * report, run.json and `run.started`, and the run id (directories, records)
 * stays as it was. A run recorded by an older runner on `runner/<run-id>`
 * still resumes, merges and is pruned on that branch. The Docker-free tier
 * (HostDirectorySandboxProvider, scripted model, real git).
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { listRuns } from "../../../src/runner/run-records.js";
import { pruneRuns } from "../../../src/run/prune-runs.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { eventData, eventsFile, fakeRunner, fakeShell, toolCall, writeScriptedTask } from "../../helpers/fake-runner.js";

const readJson = (path: string) => JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;

describe("run branch names", () => {
  it("two runs of the same task make two distinct runner/<task-slug>-<short-id> branches, each recorded where every consumer reads it", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell() });
    const { task, git } = writeScriptedTask(directory.path, {
      script: { turns: [{ tool_calls: [toolCall("run_shell", { command: "echo fixed >> notes.txt" })] }, { content: "Done." }] },
      files: { "notes.txt": "" },
      task: { name: "fix-median" },
    });
    const runs = [];
    for (let attempt = 0; attempt < 2; attempt++) {
      const run = await fake.runner.start(task);
      runs.push({ id: run.id, directory: run.directory, report: await run.result });
    }
    const branches = runs.map((run) => run.report.branch);
    expect(new Set(branches).size).toBe(2);
    for (const run of runs) {
      const branch = run.report.branch!;
      // The random part of the run id, not the whole of it: the name leads with the task.
      expect(branch).toBe(`runner/fix-median-${run.id.split("-").at(-1)}`);
      expect(run.id).toMatch(/^\d{8}-\d{6}-[0-9a-f]{4}$/);
      expect(run.directory.endsWith(run.id)).toBe(true);
      expect(readJson(join(run.directory, "run.json")).branch).toBe(branch);
      expect(eventData(eventsFile(run.directory), "run.started")).toEqual([expect.objectContaining({ run_id: run.id, branch })]);
      expect(git("show", `${branch}:notes.txt`)).toBe("fixed\n");
    }
    expect(
      git("branch", "--list", "runner/*")
        .split("\n")
        .map((line) => line.trim())
        .filter(Boolean)
        .sort(),
    ).toEqual([...branches].sort());
    expect(new Map(listRuns(fake.home).map((run) => [run.id, run.branch]))).toEqual(new Map(runs.map((run) => [run.id, run.report.branch])));
  });

  it("a run recorded on an old-style runner/<run-id> branch resumes, merges and is pruned on that branch", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell() });
    const { task, git } = writeScriptedTask(directory.path, {
      script: {
        turns: [
          { tool_calls: [toolCall("run_shell", { command: "echo one >> steps.txt" })] },
          { tool_calls: [toolCall("run_shell", { command: "echo two >> steps.txt" })] },
          { content: "Finished after more steps." },
        ],
      },
      task: { name: "old-style", max_steps: 1, verify: { command: "grep -q two steps.txt", timeout_sec: 30 } },
    });
    const first = await fake.runner.start(task);
    const stopped = await first.result;
    expect(stopped).toMatchObject({ status: "failed", reason: "max_steps" });
    // What a runner before the new names left: the branch runner/<run-id>, recorded so.
    const old = `runner/${first.id}`;
    git("branch", "-m", stopped.branch!, old);
    for (const record of ["run.json", "report.json"]) {
      const path = join(first.directory, record);
      writeFileSync(path, JSON.stringify({ ...readJson(path), branch: old }));
    }

    const resumed = await fake.runner.resume(first.id, { maxSteps: 5 });
    const report = await resumed.result;
    expect(report).toMatchObject({ status: "succeeded", reason: "verified", resumes: 1, branch: old });
    expect(git("show", `${old}:steps.txt`)).toBe("one\ntwo\n");
    expect(git("rev-parse", old).trim()).toBe(report.head_commit);
    // No branch of the new form was made for it.
    expect(git("branch", "--list", "runner/*").trim()).toBe(old);

    expect(await fake.runner.merge(first.id)).toMatchObject({ merged: true, branch: "refs/heads/main" });
    expect(git("rev-parse", "main").trim()).toBe(report.head_commit);

    expect(await pruneRuns(fake.home)).toEqual([{ runId: first.id, branches: [old], action: "removed", reason: "merged", unmergedCommits: 0 }]);
    expect(git("branch", "--list", "runner/*").trim()).toBe("");
  });
  it("continuing a run whose unchanged branch was dropped refuses a branch that took its name meanwhile, and leaves that branch alone", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell() });
    const { task, git } = writeScriptedTask(directory.path, {
      script: { turns: [{ content: "Nothing to change." }] },
      task: { name: "unchanged" },
    });
    const run = await fake.runner.start(task);
    expect(await run.result).toMatchObject({ status: "succeeded", branch: null });
    const { branch: dropped } = readJson(join(run.directory, "run.json")) as { branch: string };
    // Another run of the task drew the same short id once the name was free again.
    git("checkout", "-q", "-b", dropped);
    git("commit", "-q", "--allow-empty", "-m", "another run's work");
    const theirs = git("rev-parse", "HEAD").trim();
    git("checkout", "-q", "main");

    const continued = await fake.runner.continue(run.id, "Look again.");
    // The repository's state, refused as bad input: not the agent's failure nor the infrastructure's.
    expect(await continued.result).toMatchObject({
      status: "error",
      reason: "invalid_task",
      error: expect.stringMatching(/branch .* was deleted when the run ended \(it changed nothing\), and another branch of that name holds other commits now/),
    });
    expect(git("rev-parse", dropped).trim()).toBe(theirs);
  });
});
