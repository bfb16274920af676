/**
 * Run branches named for their task (issue 26 item 10): `runner/<task-slug>-<short-id>`,
 * the slug git-ref-safe and bounded whatever the task is called, and a name
 * that is taken (a branch, or a worker branch of it) never reused or moved:
 * the run takes more of its id. Real git, no Docker.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { MAX_TASK_SLUG_LENGTH, runBranchCandidates, taskSlug } from "../../src/workspace/run-branch-name.js";
import { createRunWorktree } from "../../src/workspace/run-worktree.js";
import { createGitRepository, temporaryDirectory } from "../helpers/git-repository.js";

/** git's own verdict on a branch name (git-check-ref-format --branch). */
function gitAcceptsBranch(name: string): boolean {
  return spawnSync("git", ["check-ref-format", "--branch", name], { encoding: "utf8" }).status === 0;
}

describe("taskSlug", () => {
  it.each([
    ["fix-add", "fix-add"],
    ["Fix the Median", "fix-the-median"],
    ["  café déjà vu  ", "cafe-deja-vu"],
    ["../../etc/passwd", "etc-passwd"],
    ["feature/x..y.lock", "feature-x-y-lock"],
    ["a@{b}~c^d:e?f*g[h\\i", "a-b-c-d-e-f-g-h-i"],
    ["日本語のタスク", "task"],
    ["---", "task"],
    ["", "task"],
  ])("%j → %j, a name git accepts under runner/", (name, slug) => {
    expect(taskSlug({ name })).toBe(slug);
    expect(gitAcceptsBranch(`runner/${slug}-ab12`)).toBe(true);
  });

  it("is bounded, never ends in a dash, and falls back to the task file's directory when the task has no name", () => {
    const long = taskSlug({ name: `${"word-".repeat(30)}end` });
    expect(long.length).toBeLessThanOrEqual(MAX_TASK_SLUG_LENGTH);
    expect(long).toMatch(/^[a-z0-9]+(-[a-z0-9]+)*$/);
    expect(taskSlug({ name: "", file: "/tasks/Fix Login Bug/task.yaml" })).toBe("fix-login-bug");
    expect(taskSlug({ file: null })).toBe("task");
  });
});

describe("runBranchCandidates", () => {
  it("starts with the run id's random part and takes more of the id, then numbers the whole id", () => {
    const candidates = runBranchCandidates("fix-add", "20261201-093000-ab12");
    expect(candidates.slice(0, 4)).toEqual([
      "runner/fix-add-ab12",
      "runner/fix-add-093000-ab12",
      "runner/fix-add-20261201-093000-ab12",
      "runner/fix-add-20261201-093000-ab12-2",
    ]);
    expect(new Set(candidates).size).toBe(candidates.length);
    // None ends like a worker branch (`<run branch>-w<n>`), so prune never takes one run's branch for another's worker.
    expect(candidates.some((name) => /-w\d+$/.test(name))).toBe(false);
  });
});

describe("createRunWorktree names the branch for the task", () => {
  it("two runs of the same task get two distinct runner/<slug>-<short-id> branches", async () => {
    await using repository = createGitRepository({ "a.txt": "a\n" });
    await using directory = temporaryDirectory();
    const first = await createRunWorktree(repository.root, { runId: "20261201-093000-ab12", taskSlug: "fix-add" }, join(directory.path, "one"));
    const second = await createRunWorktree(repository.root, { runId: "20261201-093001-cd34", taskSlug: "fix-add" }, join(directory.path, "two"));
    expect([first.branch, second.branch]).toEqual(["runner/fix-add-ab12", "runner/fix-add-cd34"]);
    expect(
      repository
        .git("branch", "--list", "runner/*")
        .split("\n")
        .map((line) => line.replace(/^[*+ ] /, ""))
        .filter(Boolean),
    ).toEqual(["runner/fix-add-ab12", "runner/fix-add-cd34"]);
  });

  it("a forced short-id clash takes more of the run id and leaves the existing branch where it was", async () => {
    await using repository = createGitRepository({ "a.txt": "a\n" });
    await using directory = temporaryDirectory();
    // Someone's branch with the short name, on a commit of its own.
    repository.git("checkout", "-q", "-b", "runner/fix-add-ab12");
    repository.git("commit", "-q", "--allow-empty", "-m", "someone else's work");
    const theirs = repository.git("rev-parse", "HEAD").trim();
    repository.git("checkout", "-q", "main");
    // And a leftover worker branch of the next name: a run on it would share its workers' names.
    repository.git("branch", "runner/fix-add-093000-ab12-w1");
    const main = repository.git("rev-parse", "main").trim();

    const run = await createRunWorktree(repository.root, { runId: "20261201-093000-ab12", taskSlug: "fix-add" }, join(directory.path, "run"));
    expect(run.branch).toBe("runner/fix-add-20261201-093000-ab12");
    expect(run.baseCommit).toBe(main);
    expect(repository.git("rev-parse", "runner/fix-add-ab12").trim()).toBe(theirs);
    expect(repository.git("rev-parse", "runner/fix-add-093000-ab12-w1").trim()).toBe(main);
    expect(repository.git("log", "-1", "--format=%s", "runner/fix-add-ab12").trim()).toBe("someone else's work");

    // Every longer name taken too: the numbered ones follow.
    const again = await createRunWorktree(repository.root, { runId: "20261201-093000-ab12", taskSlug: "fix-add" }, join(directory.path, "again"));
    expect(again.branch).toBe("runner/fix-add-20261201-093000-ab12-2");
    expect(repository.git("rev-parse", run.branch).trim()).toBe(main);
  });

  it("a failure after git made the branch (the worktree path exists) is an error, not a reason to try another name", async () => {
    await using repository = createGitRepository({ "a.txt": "a\n" });
    await using directory = temporaryDirectory();
    execFileSync("mkdir", ["-p", join(directory.path, "taken", "file")]);
    await expect(createRunWorktree(repository.root, { runId: "20261201-093000-ab12", taskSlug: "fix-add" }, join(directory.path, "taken"))).rejects.toThrow(
      /could not create the worktree for runner\/fix-add-ab12: .*already exists/,
    );
    expect(repository.git("branch", "--list", "runner/fix-add-*-ab12").trim()).toBe("");
  });
});
