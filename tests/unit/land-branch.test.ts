/**
 * The submitter of a NATS batch makes a worker's run branch in the user's
 * repository (issue 26 item 10): under the worker's name when it is free
 * there, else under a longer one of the run's names, never moving a branch
 * of another run that holds the short name, and idempotent for a result
 * fetched twice (the run's own record names the branch). A name that is not
 * one of the run's is refused, and a branch the run's record does not name
 * is never taken for the run's, even at the same commit. Real git, no NATS.
 */
import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { bundleBranch, landBranch } from "../../src/worker/git-bundles.js";
import { runBranchCandidates } from "../../src/workspace/run-branch-name.js";
import { createGitRepository, temporaryDirectory } from "../helpers/git-repository.js";

describe("landBranch", () => {
  it("lands under the worker's name, or a longer one when another run holds it here; the other branch is never moved", async () => {
    await using user = createGitRepository({ "a.txt": "a\n" });
    await using scratch = temporaryDirectory();
    await using clone = temporaryDirectory();
    const base = user.git("rev-parse", "HEAD").trim();
    // The worker's clone: the run's commit on its branch.
    execFileSync("git", ["clone", "-q", user.root, clone.path]);
    const inClone = (...args: string[]) =>
      execFileSync("git", ["-c", "user.name=w", "-c", "user.email=w@example.com", ...args], { cwd: clone.path, encoding: "utf8" });
    inClone("checkout", "-q", "-b", "runner/fix-add-ab12");
    inClone("commit", "-q", "--allow-empty", "-m", "the worker's run");
    const head = inClone("rev-parse", "HEAD").trim();
    const bundle = (await bundleBranch(clone.path, "runner/fix-add-ab12", base, scratch.path))!;
    const alternatives = runBranchCandidates("fix-add", "20261201-093000-ab12");

    // Free here: the worker's name.
    await using free = createGitRepository({ "a.txt": "a\n" });
    execFileSync("git", ["fetch", "-q", user.root, "main:refs/heads/base"], { cwd: free.root });
    const freeBase = free.git("rev-parse", "base").trim();
    expect(freeBase).toBe(base);
    expect(await landBranch(free.root, "runner/fix-add-ab12", alternatives, base, bundle, scratch.path, null)).toBe("runner/fix-add-ab12");
    expect(free.git("rev-parse", "runner/fix-add-ab12").trim()).toBe(head);

    // Taken here by another run of the task at the base commit (an ancestor: a plain fetch would fast-forward it).
    user.git("branch", "runner/fix-add-ab12", base);
    const landed = await landBranch(user.root, "runner/fix-add-ab12", alternatives, base, bundle, scratch.path, null);
    expect(landed).toBe("runner/fix-add-093000-ab12");
    expect(user.git("rev-parse", landed).trim()).toBe(head);
    expect(user.git("rev-parse", "runner/fix-add-ab12").trim()).toBe(base);
    // The same result landed again (the run's report.json names its branch): the same branch, nothing new.
    expect(await landBranch(user.root, "runner/fix-add-ab12", alternatives, base, bundle, scratch.path, landed)).toBe(landed);
    expect(user.git("for-each-ref", "--format=%(refname)", "refs/heads/runner/", "refs/agent-runner/").trim().split("\n")).toEqual([
      "refs/heads/runner/fix-add-093000-ab12",
      "refs/heads/runner/fix-add-ab12",
    ]);
  });

  it("refuses a name that is not one of the run's (main, another run's branch): nothing is made or moved", async () => {
    await using user = createGitRepository({ "a.txt": "a\n" });
    await using scratch = temporaryDirectory();
    const base = user.git("rev-parse", "HEAD").trim();
    user.git("branch", "runner/fix-add-ffff", base);
    const candidates = runBranchCandidates("fix-add", "20261201-093000-ab12");
    const refs = () => user.git("for-each-ref", "--format=%(refname) %(objectname)").trim();
    const before = refs();
    for (const name of ["main", "runner/fix-add-ffff", "runner/other-ab12"]) {
      await expect(landBranch(user.root, name, candidates, base, null, scratch.path, null)).rejects.toThrow(/not one of the run's names/);
    }
    expect(refs()).toBe(before);
  });

  it("a branch of another run at the worker's commit (same task, same short id, no commits) is not taken for this run's unless its record names it", async () => {
    await using user = createGitRepository({ "a.txt": "a\n" });
    await using scratch = temporaryDirectory();
    const base = user.git("rev-parse", "HEAD").trim();
    // Another run (20261130-…-ab12) of the task made no commits: its branch is at the base.
    user.git("branch", "runner/fix-add-ab12", base);
    const candidates = runBranchCandidates("fix-add", "20261201-093000-ab12");
    const landed = await landBranch(user.root, "runner/fix-add-ab12", candidates, base, null, scratch.path, null);
    expect(landed).toBe("runner/fix-add-093000-ab12");
    expect(user.git("rev-parse", landed).trim()).toBe(base);
    // Landed again, its report.json naming its branch: that one, nothing new.
    expect(await landBranch(user.root, "runner/fix-add-ab12", candidates, base, null, scratch.path, landed)).toBe(landed);
  });
});
