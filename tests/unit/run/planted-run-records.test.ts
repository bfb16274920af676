/**
 * A run record the runner did not write is never acted on (issue 20, the
 * RUNNER_HOME-inside-the-repository case): a merge of agent work into a
 * checkout that holds RUNNER_HOME can plant `runs/<id>/run.json` with a dead
 * owner. The start-up sweep would then commit and delete the worktree it
 * names, as root: a host directory, through a link too, or the user's `main`.
 * Real git and files, no Docker.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runLockProblem, sweepDeadRuns, writeRunLock } from "../../../src/run/run-lock.js";
import { createGitRepository, temporaryDirectory } from "../../helpers/git-repository.js";

const idle = { async ensureWorkspaceIdle() {} };

describe("planted run records", () => {
  it("the sweep leaves a run whose record names a worktree outside its directory (directly or through a link) or a branch not runner/", async () => {
    await using repository = createGitRepository({ "a.txt": "a\n" });
    await using home = temporaryDirectory();
    await using host = temporaryDirectory();
    writeFileSync(join(host.path, "host-secret.txt"), "do not commit or delete\n");
    const dead = `${hostname()}:${spawnSync("true").pid!}:1`;
    const plant = (runId: string, worktree: (directory: string) => string, branch = `runner/${runId}`) => {
      const directory = join(home.path, "runs", runId);
      mkdirSync(directory, { recursive: true });
      const lock = { run_id: runId, owner: dead, repository: repository.root, worktree: worktree(directory), branch };
      writeRunLock(directory, lock);
      return { directory, lock };
    };
    const outside = plant("outside", () => host.path);
    const linked = plant("linked", (directory) => {
      mkdirSync(join(directory, "disk"));
      symlinkSync(host.path, join(directory, "disk", "worktree"));
      return join(directory, "disk", "worktree");
    });
    const main = plant("main-branch", (directory) => join(directory, "disk", "worktree"), "main");
    // The destructive one: an existing branch and a host directory (a runner of today's main deletes it).
    const both = plant("outside-main", () => host.path, "main");
    expect(runLockProblem(outside.directory, outside.lock)).toMatch(/is not inside the run's directory/);
    expect(runLockProblem(linked.directory, linked.lock)).toMatch(/is not inside the run's directory/);
    expect(runLockProblem(main.directory, main.lock)).toBe("its branch main is not a run branch (runner/...)");

    const mainBefore = repository.git("rev-parse", "main").trim();
    expect(await sweepDeadRuns(home.path, idle)).toEqual([]);
    expect(readFileSync(join(host.path, "host-secret.txt"), "utf8")).toBe("do not commit or delete\n");
    expect(runLockProblem(both.directory, both.lock)).not.toBeNull();
    for (const { directory } of [outside, linked, main, both]) expect(existsSync(join(directory, "report.json"))).toBe(false);
    expect(repository.git("rev-parse", "main").trim()).toBe(mainBefore);
  });
});
