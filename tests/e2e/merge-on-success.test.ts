/**
 * `runner exec --merge` / `on_success: merge` end to end (issue 4): the built
 * CLI, the scripted model over HTTP, real Docker and real git on the user's
 * checkout. A verified run fast-forwards the user's checked-out branch; in
 * every other case (the branch moved, tracked changes, an untracked file in
 * the way, a failed or unverified run) the branch and the files are left
 * exactly as they were and report.json `merge` says why.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { requireDocker } from "../helpers/docker.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { eventsOfType, readEvents, runCli, startCli, toolCall, waitForRunEvent, writeScriptedTask } from "../helpers/runner-cli.js";
import { escapeRegExp, inspectGit, mainWorktree, readReport, release, runDirectoryOf, waitForRelease } from "../helpers/subagent-e2e.js";

const FILES = { "app.txt": "broken\n", "keep.txt": "the user's\n" };
const VERIFY = { command: "grep -qx fixed app.txt", timeout_sec: 60 };
const FIX = toolCall("write_file", { path: "app.txt", content: "fixed\n" });

/** A task whose agent fixes app.txt (and runs `extra` calls first); verified by VERIFY unless `task` says otherwise. */
function fixingTask(directory: string, options: { extra?: unknown[]; task?: Record<string, unknown>; calls?: unknown[] } = {}) {
  return writeScriptedTask(directory, {
    files: FILES,
    task: { name: "merge-on-success", verify: VERIFY, ...options.task },
    script: { turns: [{ tool_calls: options.calls ?? [FIX] }, ...(options.extra ?? []), { content: "Fixed app.txt." }] },
  });
}

/** The user's checkout as the user sees it: branch, HEAD, status (untracked included), file contents. */
function checkout(repo: string, files: string[] = Object.keys(FILES)) {
  return {
    branch: inspectGit(repo, ["symbolic-ref", "HEAD"]).trim(),
    head: inspectGit(repo, ["rev-parse", "HEAD"]).trim(),
    status: inspectGit(repo, ["status", "--porcelain", "--untracked-files=all"]),
    files: Object.fromEntries(files.map((file) => [file, readFileSync(join(repo, file), "utf8")])),
  };
}

describe("runner exec --merge / on_success: merge (real CLI, real Docker and git)", () => {
  beforeAll(async () => {
    await requireDocker();
  });

  it("a verified run fast-forwards the user's checked-out branch: the run commit is on it and the files are updated", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task, repo } = fixingTask(directory.path);
    const before = checkout(repo);
    const result = await runCli(["exec", task, "--merge"], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr + result.stdout).toBe(0);
    const runDirectory = runDirectoryOf(result);
    const report = readReport(runDirectory);
    expect(report).toMatchObject({ status: "succeeded", reason: "verified" });
    expect(report.merge).toEqual({ merged: true, branch: "refs/heads/main", detail: `fast-forwarded refs/heads/main to ${report.branch}` });
    expect(result.stdout).toContain(`merge: fast-forwarded refs/heads/main to ${report.branch}`);
    // A fast-forward: main now is the run commit, whose parent is where main was.
    expect(inspectGit(repo, ["rev-parse", "main"]).trim()).toBe(report.head_commit);
    expect(inspectGit(repo, ["log", "--format=%H %s", "main"]).trim().split("\n")).toEqual([
      `${report.head_commit} agent-runner: merge-on-success (run ${report.run_id})`,
      `${before.head} initial`,
    ]);
    expect(checkout(repo)).toEqual({ ...before, head: report.head_commit, files: { ...before.files, "app.txt": "fixed\n" } });
    expect(eventsOfType(readEvents(runDirectory), "workspace.merged").map((event) => event.data)).toEqual([report.merge]);
  });

  it("not merged when the user's branch moved while the run ran (on_success: merge in task.yaml): the branch is untouched and the report says why", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task, repo, git } = fixingTask(directory.path, {
      task: { on_success: "merge" },
      // The agent waits until the test has committed to the user's branch.
      extra: [{ tool_calls: [toolCall("run_shell", { command: waitForRelease("user-committed") })] }],
    });
    const base = checkout(repo).head;
    const running = startCli(["exec", task], { RUNNER_HOME: home.path });
    const { runDirectory } = await waitForRunEvent(home.path, "tool_call.started", (data) => String(data.arguments).includes(".release-user-committed"), {
      process: running,
    });
    writeFileSync(join(repo, "keep.txt"), "the user's, edited while the run ran\n");
    git("commit", "-q", "-am", "user's own commit");
    const moved = checkout(repo);
    release(mainWorktree(runDirectory), "user-committed");
    const result = await running.result;
    expect(result.code, result.stderr + result.stdout).toBe(4);
    const report = readReport(runDirectory);
    expect(report).toMatchObject({ status: "succeeded", reason: "verified" });
    expect(report.merge).toEqual({
      merged: false,
      branch: "refs/heads/main",
      detail: `refs/heads/main moved since the run started (${base.slice(0, 12)} → ${moved.head.slice(0, 12)}); merge ${report.branch} yourself`,
    });
    expect(result.stdout).toMatch(
      new RegExp(`merge: not merged: refs/heads/main moved since the run started .*; merge ${escapeRegExp(`${report.branch}`)} yourself`),
    );
    expect(checkout(repo)).toEqual(moved);
    expect(moved.files["app.txt"]).toBe("broken\n");
  });

  it("not merged when a tracked file has uncommitted changes: they stay as they are", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task, repo } = fixingTask(directory.path);
    writeFileSync(join(repo, "keep.txt"), "the user's, not committed yet\n");
    const before = checkout(repo);
    const result = await runCli(["exec", task, "--merge"], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr + result.stdout).toBe(4);
    const report = readReport(runDirectoryOf(result));
    expect(report.merge).toEqual({
      merged: false,
      branch: "refs/heads/main",
      detail: `tracked files have uncommitted changes (keep.txt); commit or stash them, then merge ${report.branch}`,
    });
    expect(checkout(repo)).toEqual(before);
    expect(before.status).toBe(" M keep.txt\n");
  });

  it("an untracked user file where the run adds one: git refuses the fast-forward and the user's file is intact", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task, repo } = fixingTask(directory.path, { calls: [FIX, toolCall("write_file", { path: "notes/todo.txt", content: "the agent's\n" })] });
    mkdirSync(join(repo, "notes"));
    writeFileSync(join(repo, "notes/todo.txt"), "the user's own, untracked\n");
    const before = checkout(repo, [...Object.keys(FILES), "notes/todo.txt"]);
    expect(before.status).toBe("?? notes/todo.txt\n");
    const result = await runCli(["exec", task, "--merge"], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr + result.stdout).toBe(4);
    const report = readReport(runDirectoryOf(result));
    expect(inspectGit(repo, ["show", `${report.branch}:notes/todo.txt`])).toBe("the agent's\n");
    expect(report.merge).toMatchObject({ merged: false, branch: "refs/heads/main" });
    expect(report.merge!.detail).toMatch(/^git refused the fast-forward: .*untracked working tree files would be overwritten by merge: .*notes\/todo\.txt/);
    expect(checkout(repo, [...Object.keys(FILES), "notes/todo.txt"])).toEqual(before);
  });

  it("a failed run (verification fails) is not merged: no merge is attempted", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task, repo } = fixingTask(directory.path, { calls: [toolCall("write_file", { path: "app.txt", content: "still broken\n" })] });
    const before = checkout(repo);
    const result = await runCli(["exec", task, "--merge"], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr + result.stdout).toBe(1);
    const runDirectory = runDirectoryOf(result);
    const report = readReport(runDirectory);
    expect(report).toMatchObject({ status: "failed", reason: "verify_failed", merge: null });
    expect(eventsOfType(readEvents(runDirectory), "workspace.merged")).toEqual([]);
    expect(result.stdout).not.toMatch(/^merge:/m);
    expect(checkout(repo)).toEqual(before);
  });

  it("a run without a verify command is not merged, and the report says a merge needs verification", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task, repo } = fixingTask(directory.path, { task: { verify: undefined } });
    const before = checkout(repo);
    const result = await runCli(["exec", task, "--merge"], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr + result.stdout).toBe(4);
    const report = readReport(runDirectoryOf(result));
    expect(report).toMatchObject({ status: "succeeded", reason: "finished_unverified" });
    expect(report.merge).toMatchObject({ merged: false, detail: expect.stringMatching(/only a verified run is merged/) });
    expect(checkout(repo)).toEqual(before);
  });

  it("an ignored user file where the run adds one (after un-ignoring it): not merged, the user's file is intact", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task, repo } = writeScriptedTask(directory.path, {
      files: { ...FILES, ".gitignore": "local.cfg\n" },
      task: { name: "merge-over-ignored", verify: VERIFY },
      script: {
        turns: [
          {
            tool_calls: [
              FIX,
              toolCall("write_file", { path: ".gitignore", content: "" }),
              toolCall("write_file", { path: "local.cfg", content: "the agent's\n" }),
            ],
          },
          { content: "Fixed app.txt and committed local.cfg." },
        ],
      },
    });
    writeFileSync(join(repo, "local.cfg"), "the user's local settings\n");
    expect(inspectGit(repo, ["status", "--porcelain", "--ignored"])).toBe("!! local.cfg\n");
    const before = checkout(repo, [...Object.keys(FILES), "local.cfg"]);
    const result = await runCli(["exec", task, "--merge"], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr + result.stdout).toBe(4);
    const report = readReport(runDirectoryOf(result));
    expect(inspectGit(repo, ["show", `${report.branch}:local.cfg`])).toBe("the agent's\n");
    // Today: { merged: true } and local.cfg holds "the agent's".
    expect(readFileSync(join(repo, "local.cfg"), "utf8")).toBe("the user's local settings\n");
    expect(report.merge).toMatchObject({ merged: false });
    expect(checkout(repo, [...Object.keys(FILES), "local.cfg"])).toEqual(before);
  });
});
