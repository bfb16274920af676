/**
 * A killed run's loop-mounted disk does not stay mounted (issue 20 item 11):
 * every run disk is in a machine-wide registry with its owner process, and a
 * sweep unmounts those whose owner is dead, whatever their RUNNER_HOME, also
 * after `rm -rf` of the run directory; a live owner's disk and one a
 * container still uses are left alone. Real loop mounts: needs a root runner,
 * as CI has. Other runners on the machine (other test processes) only ever
 * see their own live disks untouched: the sweep touches dead owners alone.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { hostname } from "node:os";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { sweepDeadRunDisks } from "../../src/run/run-lock.js";
import { closeRunDisk, openRunDisk, runPaths } from "../../src/workspace/run-disk.js";
import { registeredRunDisks, registerRunDisk } from "../../src/workspace/run-disk-registry.js";
import { temporaryDirectory } from "../helpers/git-repository.js";

function isMountPoint(directory: string): boolean {
  try {
    return statSync(directory).dev !== statSync(dirname(directory)).dev;
  } catch {
    return false;
  }
}

const idle = { async ensureWorkspaceIdle() {} };

describe("the machine-wide registry of run disks", () => {
  it("a sweep from any RUNNER_HOME unmounts the disks of dead owners (also after rm -rf of the run), never a live owner's or one still in use", async () => {
    if (process.getuid?.() !== 0) throw new Error("run disks are loop mounts, which need a root runner; run these tests as root, as CI does");
    await using homeOfDeadRun = temporaryDirectory();
    await using homeOfLiveRun = temporaryDirectory();
    const dead = join(homeOfDeadRun.path, "runs", "dead-run");
    const busy = join(homeOfDeadRun.path, "runs", "busy-run");
    const live = join(homeOfLiveRun.path, "runs", "live-run");
    for (const directory of [dead, busy, live]) {
      const disk = await openRunDisk(directory, 16 * 1024 * 1024);
      expect(disk.enforcement).toBe("filesystem");
    }
    try {
      // The dead run's runner was killed (a pid that has certainly exited); then its run directory was removed.
      const exited = spawnSync("true").pid!;
      registerRunDisk(dead, runPaths(dead), { owner: `${hostname()}:${exited}:1` });
      registerRunDisk(busy, runPaths(busy), { owner: `${hostname()}:${exited}:1` });
      spawnSync("rm", ["-rf", dead]);
      expect(existsSync(runPaths(dead).image)).toBe(false);
      expect(isMountPoint(runPaths(dead).disk)).toBe(true);

      // A container still mounts the busy run's worktree: not unmounted (a later mount of its image would corrupt it).
      const sandboxes = {
        async ensureWorkspaceIdle(path: string) {
          if (path === runPaths(busy).worktree) throw new Error(`still mounted: ${path}`);
        },
      };
      const swept = await sweepDeadRunDisks(sandboxes);
      expect(swept.unmounted).toContain(runPaths(dead).disk);
      expect(swept.unmounted).not.toContain(runPaths(busy).disk);
      expect(swept.unmounted).not.toContain(runPaths(live).disk);
      expect(swept.failed).toContainEqual({ mountPoint: runPaths(busy).disk, error: expect.stringContaining("still mounted") });
      expect(isMountPoint(runPaths(dead).disk)).toBe(false);
      expect(isMountPoint(runPaths(busy).disk)).toBe(true);
      expect(isMountPoint(runPaths(live).disk)).toBe(true);
      const registered = registeredRunDisks().map((entry) => entry.run_directory);
      expect(registered).not.toContain(dead);
      expect(registered).toContain(busy);
      expect(registered).toContain(live);

      // Once idle, the busy run's disk goes too, its image kept for its own home's sweep to commit the work.
      expect((await sweepDeadRunDisks(idle)).unmounted).toContain(runPaths(busy).disk);
      expect(isMountPoint(runPaths(busy).disk)).toBe(false);
      expect(existsSync(runPaths(busy).image)).toBe(true);
    } finally {
      for (const directory of [dead, busy, live]) await closeRunDisk(directory);
      execFileSync("rm", ["-rf", dead]);
    }
    expect(registeredRunDisks().map((entry) => entry.run_directory)).not.toContain(live);
  });
});
