import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { sweepDeadRuns, writeRunLock } from "../../src/run/run-lock.js";
import { createRunWorktree } from "../../src/workspace/run-worktree.js";
import { openRunDisk, runPaths } from "../../src/workspace/run-disk.js";
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
    const dead = await createRunWorktree(repository.root, { runId: "dead-run", taskSlug: "test" }, join(deadDirectory, "worktree"));
    const live = await createRunWorktree(repository.root, { runId: "live-run", taskSlug: "test" }, join(liveDirectory, "worktree"));
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
    expect(repository.git("branch", "--list", "runner/*")).toContain(dead.branch);
    expect(repository.git("show", `${dead.branch}:unsaved.txt`)).toBe("agent work\n");
    const report = JSON.parse(readFileSync(join(deadDirectory, "report.json"), "utf8"));
    expect(report).toMatchObject({ status: "error", reason: "runner_died" });
    expect(report.error).toContain(`committed on ${dead.branch}`);
    expect(report.error).toContain("runner resume dead-run");
    // A second sweep finds nothing more.
    expect(await sweepDeadRuns(home.path, sandboxes)).toEqual([]);
  });

  it("mounts again the disks of dead runs that were unmounted (a reboot) before anything prunes worktrees, commits their work and removes the disks", async () => {
    if (process.getuid?.() !== 0) throw new Error("a run's own filesystem needs a root runner (loop mounts); run this test as root, as CI does");
    await using repository = createGitRepository({ "a.txt": "a\n" });
    await using home = temporaryDirectory();
    const exited = spawnSync("true").pid!;
    const runs = ["dead-a", "dead-b"].map((runId) => ({ runId, directory: join(home.path, "runs", runId), branch: "" }));
    for (const run of runs) {
      const { runId, directory } = run;
      mkdirSync(directory, { recursive: true });
      expect((await openRunDisk(directory, 64 * 1024 * 1024)).enforcement).toBe("filesystem");
      const worktree = await createRunWorktree(repository.root, { runId, taskSlug: "test" }, runPaths(directory).worktree);
      writeRunLock(directory, {
        run_id: runId,
        owner: `${hostname()}:${exited}:1`,
        repository: repository.root,
        worktree: worktree.path,
        git_directory: worktree.gitDirectory,
        branch: worktree.branch,
      });
      run.branch = worktree.branch;
      writeFileSync(join(worktree.path, "unsaved.txt"), `work of ${runId}\n`);
      execFileSync("umount", [runPaths(directory).disk]);
    }

    expect((await sweepDeadRuns(home.path, { ensureWorkspaceIdle: async () => undefined })).sort()).toEqual(["dead-a", "dead-b"]);

    for (const { runId, directory, branch } of runs) {
      expect(repository.git("show", `${branch}:unsaved.txt`)).toBe(`work of ${runId}\n`);
      expect(JSON.parse(readFileSync(join(directory, "report.json"), "utf8")).error).toContain(`committed on ${branch}`);
      expect(existsSync(runPaths(directory).image)).toBe(false);
      expect(existsSync(runPaths(directory).disk)).toBe(false);
    }
    expect(readFileSync("/proc/self/mounts", "utf8")).not.toContain(home.path);
  });
});
