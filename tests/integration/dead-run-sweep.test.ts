import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { sweepDeadRuns, writeRunLock } from "../../src/run/run-lock.js";
import { createRunWorktree } from "../../src/workspace/run-worktree.js";
import { createGitRepository, temporaryDirectory } from "../helpers/git-repository.js";
import { currentOwner } from "../../src/process/process-owner.js";

describe("sweepDeadRuns (real git)", () => {
  it("commits the work of a run whose runner died on its branch, removes the worktree, and records why", async () => {
    await using repository = createGitRepository({ "a.txt": "a\n" });
    await using home = temporaryDirectory();
    const deadDirectory = join(home.path, "runs", "dead-run");
    const liveDirectory = join(home.path, "runs", "live-run");
    mkdirSync(deadDirectory, { recursive: true });
    mkdirSync(liveDirectory, { recursive: true });
    const dead = await createRunWorktree(repository.root, "dead-run", join(deadDirectory, "worktree"));
    const live = await createRunWorktree(repository.root, "live-run", join(liveDirectory, "worktree"));
    // A pid that has certainly exited: a child we already waited for.
    const exited = spawnSync("true").pid!;
    writeRunLock(deadDirectory, {
      run_id: "dead-run",
      owner: `${hostname()}:${exited}:1`,
      repository: repository.root,
      worktree: dead.path,
      git_directory: dead.gitDirectory,
      branch: dead.branch,
      base_commit: dead.baseCommit,
    });
    // Work the dead run never committed.
    writeFileSync(join(dead.path, "unsaved.txt"), "agent work\n");
    writeRunLock(liveDirectory, { run_id: "live-run", owner: currentOwner(), repository: repository.root, worktree: live.path, branch: live.branch });

    // While a container still mounts the dead run's worktree, the sweep leaves it alone.
    const mounted = new Set([dead.path]);
    const sandboxes = {
      async ensureWorkspaceIdle(path: string) {
        if (mounted.has(path)) throw new Error(`still mounted: ${path}`);
      },
    };
    expect(await sweepDeadRuns(home.path, sandboxes)).toEqual([]);
    expect(existsSync(join(dead.path, "unsaved.txt"))).toBe(true);
    expect(existsSync(join(deadDirectory, "report.json"))).toBe(false);
    mounted.clear();
    expect(await sweepDeadRuns(home.path, sandboxes)).toEqual(["dead-run"]);

    expect(existsSync(dead.path)).toBe(false);
    expect(existsSync(live.path)).toBe(true);
    const worktrees = execFileSync("git", ["worktree", "list", "--porcelain"], { cwd: repository.root, encoding: "utf8" });
    expect(worktrees).not.toContain(dead.path);
    expect(worktrees).toContain(live.path);
    expect(repository.git("branch", "--list", "runner/*")).toContain("runner/dead-run");
    expect(repository.git("show", `${dead.branch}:unsaved.txt`)).toBe("agent work\n");
    const report = JSON.parse(readFileSync(join(deadDirectory, "report.json"), "utf8"));
    expect(report).toMatchObject({ status: "error", reason: "runner_died" });
    expect(report.error).toContain(`committed on ${dead.branch}`);
    expect(report.error).toContain("runner resume dead-run");
    // A second sweep finds nothing more.
    expect(await sweepDeadRuns(home.path, sandboxes)).toEqual([]);
  });
});
