/**
 * The submitter of a NATS batch makes a worker's run branch in the user's
 * repository (issue 26 item 10): under the worker's name when it is free
 * there, else under a longer one of the run's names, never moving a branch
 * of another run that holds the short name, and idempotent for a result
 * fetched twice. Real git, no NATS.
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
    expect(await landBranch(free.root, "runner/fix-add-ab12", alternatives, base, bundle, scratch.path)).toBe("runner/fix-add-ab12");
    expect(free.git("rev-parse", "runner/fix-add-ab12").trim()).toBe(head);

    // Taken here by another run of the task at the base commit (an ancestor: a plain fetch would fast-forward it).
    user.git("branch", "runner/fix-add-ab12", base);
    const landed = await landBranch(user.root, "runner/fix-add-ab12", alternatives, base, bundle, scratch.path);
    expect(landed).toBe("runner/fix-add-093000-ab12");
    expect(user.git("rev-parse", landed).trim()).toBe(head);
    expect(user.git("rev-parse", "runner/fix-add-ab12").trim()).toBe(base);
    // The same result landed again: the same branch, nothing new.
    expect(await landBranch(user.root, "runner/fix-add-ab12", alternatives, base, bundle, scratch.path)).toBe(landed);
    expect(user.git("for-each-ref", "--format=%(refname)", "refs/heads/runner/", "refs/agent-runner/").trim().split("\n")).toEqual([
      "refs/heads/runner/fix-add-093000-ab12",
      "refs/heads/runner/fix-add-ab12",
    ]);
  });
});
