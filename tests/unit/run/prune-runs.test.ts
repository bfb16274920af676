/**
 * `runner prune` (issue 26 item 10), without Docker: ended runs go with their
 * branches when nothing would be lost (no branch, or merged); a branch with
 * commits no other ref holds stays unless --force; a running run is never
 * touched; --dry-run removes nothing; --merged and --older-than narrow it.
 */
import { existsSync, mkdirSync, readFileSync, realpathSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { pruneCommand } from "../../../src/cli/prune-command.js";
import { currentOwner } from "../../../src/process/process-owner.js";
import { pruneRuns } from "../../../src/run/prune-runs.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { fakeRunner, toolCall, writeScriptedTask } from "../../helpers/fake-runner.js";

const writes = (content: string) => ({ turns: [{ tool_calls: [toolCall("write_file", { path: "a.txt", content })] }, { content: "Done." }] });

describe("pruneRuns", () => {
  it("removes what is merged or has no branch, keeps unmerged work and running runs, and --force takes the unmerged too", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner();
    const start = async (name: string, script: unknown) => {
      const { task, git, repo } = writeScriptedTask(join(directory.path, name), { script, task: { name } });
      const run = await fake.runner.start(task);
      const { branch } = await run.result;
      return { id: run.id, directory: run.directory, branch, git, repo };
    };
    const unmerged = await start("unmerged", writes("kept\n"));
    const unchanged = await start("unchanged", { turns: [{ content: "Nothing to change." }] });
    const merged = await start("merged", writes("merged\n"));
    merged.git("merge", "--ff-only", "-q", merged.branch!);
    // A run whose runner is alive (this process) and that has no report yet.
    const live = join(fake.home, "runs", "20991231-000000-live");
    mkdirSync(live, { recursive: true });
    writeFileSync(
      join(live, "run.json"),
      JSON.stringify({
        run_id: "20991231-000000-live",
        owner: currentOwner(),
        repository: merged.repo,
        worktree: join(live, "worktree"),
        branch: "runner/live",
      }),
    );

    // Decisions come in run id order; runs made in the same second order by their random suffix, so look them up by id.
    const planned = await pruneRuns(fake.home, { dryRun: true });
    const plan = new Map(planned.map((decision) => [decision.runId, decision]));
    expect(planned).toHaveLength(4);
    expect(plan.get(unmerged.id)).toMatchObject({ action: "kept", branches: [unmerged.branch!], unmergedCommits: 1 });
    expect(plan.get(unchanged.id)).toMatchObject({ action: "remove", branches: [], reason: "no branch" });
    expect(plan.get(merged.id)).toMatchObject({ action: "remove", branches: [merged.branch!], reason: "merged" });
    expect(plan.get("20991231-000000-live")).toMatchObject({ action: "kept", reason: "still running" });
    expect(plan.get(unmerged.id)!.reason).toMatch(/^1 commit on no other branch \(merge it, or --force removes it\)$/);
    expect([unmerged, unchanged, merged].every((run) => existsSync(run.directory))).toBe(true);
    expect(merged.git("branch", "--list", merged.branch!).trim()).toBe(merged.branch!);

    // --merged lists only the runs merged into the checked-out branch (a run without a branch counts).
    expect((await pruneRuns(fake.home, { dryRun: true, merged: true })).map((decision) => decision.runId).sort()).toEqual([unchanged.id, merged.id].sort());
    // --older-than: every run ended just now.
    expect(await pruneRuns(fake.home, { olderThanMs: 7 * 86_400_000 })).toEqual([]);

    const done = await pruneRuns(fake.home);
    expect(new Map(done.map((decision) => [decision.runId, decision.action]))).toEqual(
      new Map([
        [unmerged.id, "kept"],
        [unchanged.id, "removed"],
        [merged.id, "removed"],
        ["20991231-000000-live", "kept"],
      ]),
    );
    expect(existsSync(unchanged.directory) || existsSync(merged.directory)).toBe(false);
    expect(merged.git("branch", "--list", "runner/*").trim()).toBe("");
    expect(existsSync(unmerged.directory)).toBe(true);
    expect(unmerged.git("branch", "--list", "runner/*").trim()).toBe(unmerged.branch!);
    expect(existsSync(live)).toBe(true);

    const forced = await pruneRuns(fake.home, { force: true });
    expect(forced.find((decision) => decision.runId === unmerged.id)).toMatchObject({ action: "removed", reason: "forced: 1 unmerged commits dropped" });
    expect(unmerged.git("branch", "--list", "runner/*").trim()).toBe("");
    expect(existsSync(unmerged.directory)).toBe(false);
    expect(existsSync(live)).toBe(true);
  });

  it("runner prune --json prints one snake_case object per run; an --older-than it cannot read is refused, naming the flag", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner();
    const { task } = writeScriptedTask(directory.path, { script: { turns: [{ content: "Nothing to change." }] }, task: { name: "unchanged" } });
    const run = await fake.runner.start(task);
    await run.result;
    const printed: string[] = [];
    const write = vi.spyOn(process.stdout, "write").mockImplementation((chunk) => printed.push(String(chunk)) > 0);
    try {
      expect(await pruneCommand(fake.home, { json: true, dryRun: true, olderThan: "0d" })).toBe(0);
    } finally {
      write.mockRestore();
    }
    expect(printed.map((line) => JSON.parse(line) as unknown)).toEqual([
      { run_id: run.id, branches: [], action: "remove", reason: "no branch", unmerged_commits: 0 },
    ]);
    expect(existsSync(run.directory)).toBe(true);
    await expect(pruneCommand(fake.home, { olderThan: "a week" })).rejects.toThrow(/^--older-than: expected an age such as "7d"/);
  });

  it("keeps runs a batch's or an agency's records name (their reports link them) unless --referenced", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner();
    const ids: string[] = [];
    for (const name of ["in-batch", "in-agency", "alone"]) {
      const { task } = writeScriptedTask(join(directory.path, name), { script: { turns: [{ content: "Nothing to change." }] }, task: { name } });
      const run = await fake.runner.start(task);
      await run.result;
      ids.push(run.id);
    }
    const [inBatch, inAgency, alone] = ids as [string, string, string];
    mkdirSync(join(fake.home, "batches", "b1"), { recursive: true });
    writeFileSync(join(fake.home, "batches", "b1", "batch.jsonl"), `${JSON.stringify({ type: "attempt.started", task: "x", run_id: inBatch })}\n`);
    mkdirSync(join(fake.home, "agencies", "a1"), { recursive: true });
    writeFileSync(join(fake.home, "agencies", "a1", "invocations.jsonl"), `${JSON.stringify({ kind: "started", run_id: inAgency })}\n`);
    // Run ids made in the same second sort by their random part: compare as maps.
    const byRun = (decisions: Awaited<ReturnType<typeof pruneRuns>>) =>
      Object.fromEntries(decisions.map((decision) => [decision.runId, `${decision.action}: ${decision.reason}`]));
    expect(byRun(await pruneRuns(fake.home))).toEqual({
      [inBatch]: "kept: batch b1 names it (its reports link the run); --referenced removes it too",
      [inAgency]: "kept: agency a1 names it (its reports link the run); --referenced removes it too",
      [alone]: "removed: no branch",
    });
    expect(existsSync(join(fake.home, "runs", inBatch))).toBe(true);
    expect(byRun(await pruneRuns(fake.home, { referenced: true }))).toEqual({ [inBatch]: "removed: no branch", [inAgency]: "removed: no branch" });
  });

  it("finds old (runner/<run-id>) and new branch names by their records, takes exactly <branch>-w<n> as a worker's, and lists branches no record accounts for without removing them", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner();
    const { task, git, repo } = writeScriptedTask(directory.path, { script: writes("new\n"), task: { name: "fix" } });
    const newer = await fake.runner.start(task);
    const newerBranch = (await newer.result).branch!;
    writeFileSync(
      join(directory.path, "script.yaml"),
      JSON.stringify({ turns: [{ tool_calls: [toolCall("write_file", { path: "b.txt", content: "old\n" })] }, { content: "Done." }] }),
    );
    const older = await fake.runner.start(task);
    const olderReport = await older.result;
    // What a runner before the new names recorded: runner/<run-id>.
    const oldStyle = `runner/${older.id}`;
    git("branch", "-m", olderReport.branch!, oldStyle);
    for (const record of ["run.json", "report.json"]) {
      const path = join(older.directory, record);
      writeFileSync(path, JSON.stringify({ ...(JSON.parse(readFileSync(path, "utf8")) as object), branch: oldStyle }));
    }
    git("branch", `${newerBranch}-w1`, newerBranch); // its worker's
    git("branch", `${newerBranch}-w1-cd34`, newerBranch); // another run's (a task named "<task>-<id>-w1"), not recorded here
    git("branch", "runner/gone-9f3a", "main"); // a run whose directory was removed by hand
    git("merge", "-q", "--no-edit", newerBranch, oldStyle);

    const printed: string[] = [];
    const write = vi.spyOn(process.stdout, "write").mockImplementation((chunk) => printed.push(String(chunk)) > 0);
    try {
      expect(await pruneCommand(fake.home, { json: true })).toBe(0);
    } finally {
      write.mockRestore();
    }
    const lines = printed.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(new Map(lines.filter((line) => line.run_id !== null).map((line) => [line.run_id, [line.action, line.branches]]))).toEqual(
      new Map([
        [newer.id, ["removed", [newerBranch, `${newerBranch}-w1`]]],
        [older.id, ["removed", [oldStyle]]],
      ]),
    );
    expect(lines.filter((line) => line.run_id === null)).toEqual(
      [`${newerBranch}-w1-cd34`, "runner/gone-9f3a"]
        .sort()
        .map((branch) => expect.objectContaining({ branches: [branch], repository: realpathSync(repo), action: "kept" })),
    );
    expect(
      git("branch", "--list", "runner/*")
        .split("\n")
        .map((line) => line.trim())
        .filter(Boolean)
        .sort(),
    ).toEqual([`${newerBranch}-w1-cd34`, "runner/gone-9f3a"].sort());
  });
});
