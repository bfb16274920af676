import { existsSync, readdirSync, realpathSync } from "node:fs";
import { basename, dirname, isAbsolute, join, resolve } from "node:path";
import { isPathInside } from "../process/path-inside.js";
import { RunStore } from "./run-store.js";
import { isOwnerAlive } from "../process/process-owner.js";
import { errorMessage } from "../errors.js";
import type { SandboxProvider } from "../sandbox/sandbox.js";
import { commitLimitsOf } from "../workspace/commit-selection.js";
import { commitRunWorktree, removeWorktreeDirectory, reopenRunWorktree, type RecordedWorktree } from "../workspace/run-worktree.js";
import { closeRunDisk, mountRunDiskIfPresent, runPaths, unmountRunDisk } from "../workspace/run-disk.js";
import { registeredRunDisks, RUN_DISK_REGISTRY } from "../workspace/run-disk-registry.js";
import { RUN_BRANCH_PREFIX } from "../workspace/run-branch-name.js";

/**
 * `run.json` in a run directory: which runner process owns the run and which
 * worktree it made. It lets a later start recognise a run whose runner died
 * (crash, `kill -9`) before writing report.json.
 */
export interface RunLock extends RecordedWorktree {
  run_id: string;
  trace_id?: string;
  /** The span the run's events hang under when a front end gave one (RunEmbedding.trace). */
  parent_span_id?: string;
  /** `<host>:<pid>:<start ticks>` of the runner process. */
  owner: string;
  /** How many times `runner resume` continued the run. */
  resumes?: number;
}

export function readRunLock(runDirectory: string): RunLock | null {
  return new RunStore(runDirectory).readJson("lock") as RunLock | null;
}

export function writeRunLock(runDirectory: string, lock: RunLock): void {
  new RunStore(runDirectory).writeJson("lock", lock);
}

/**
 * Why the runner must not act on a run record, or null. Host git, commits and
 * removals touch only what the runner made for the run: the recorded worktree
 * must lie inside the run's own directory (through links: the real path of
 * what exists) and the branch must be a run branch (`runner/...`). A record
 * that fails did not come from a runner: with RUNNER_HOME inside a
 * repository, a merge of agent work can plant `runs/<id>/run.json`, naming a
 * host directory to commit and delete, or the user's `main`.
 */
export function runLockProblem(runDirectory: string, lock: RunLock): string | null {
  if (typeof lock.branch !== "string" || !lock.branch.startsWith(RUN_BRANCH_PREFIX))
    return `its branch ${String(lock.branch)} is not a run branch (runner/...)`;
  if (typeof lock.worktree !== "string" || !isAbsolute(lock.worktree)) return `its worktree ${String(lock.worktree)} is not an absolute path`;
  const inside = isPathInside(resolve(lock.worktree), resolve(runDirectory)) && isPathInside(realExistingPath(lock.worktree), realExistingPath(runDirectory));
  return inside ? null : `its worktree ${lock.worktree} is not inside the run's directory ${runDirectory}`;
}

/** The real path of the longest existing prefix of `path`, with the rest appended. */
function realExistingPath(path: string): string {
  const absolute = resolve(path);
  if (existsSync(absolute)) return realpathSync(absolute);
  const parent = dirname(absolute);
  return parent === absolute ? absolute : join(realExistingPath(parent), basename(absolute));
}

/**
 * Finds runs under `<home>/runs` that never finished and whose runner is
 * gone (crash, `kill -9`): commits what their worktree holds on the run
 * branch (safe host git, as at the end of a run), removes the worktree
 * directory and writes a report.json with status `error`, reason
 * `runner_died`, naming `runner resume`, and removes the run's disk. A run
 * that finished but left a worktree behind (its disk is still there: a
 * sandbox on it was not confirmed gone) gets the same commit and removal,
 * its report kept. Call it
 * after the containers of dead runs are gone: a run whose worktrees
 * `sandboxes` cannot confirm idle (a container still mounts one) is left for
 * a later start, untouched, and so is a run whose record fails
 * {@link runLockProblem}. Returns the swept run ids.
 */
export async function sweepDeadRuns(runnerHome: string, sandboxes: Pick<SandboxProvider, "ensureWorkspaceIdle">): Promise<string[]> {
  const runs = join(runnerHome, "runs");
  if (!existsSync(runs)) return [];
  const dead: { runId: string; directory: string; lock: RunLock; finished: boolean }[] = [];
  for (const runId of readdirSync(runs)) {
    const directory = join(runs, runId);
    const store = new RunStore(directory);
    const lock = readRunLock(directory);
    // A record the runner did not write is never acted on (runLockProblem): left as it is.
    if (!lock || runLockProblem(directory, lock) !== null) continue;
    if (store.has("report")) {
      // A finished run whose disk is still there left a worktree behind (its sandbox was not confirmed gone).
      if (existsSync(runPaths(directory).disk)) dead.push({ runId, directory, lock, finished: true });
      continue;
    }
    if (!isOwnerAlive(lock.owner)) dead.push({ runId, directory, lock, finished: false });
  }
  // Each run is claimed (resume.lock, O_EXCL) while it is swept: a `runner resume` in another process cannot
  // reopen a worktree the sweep is committing, and the owner is read again under the claim.
  const claimed = dead.filter(({ directory, finished }) => {
    if (new RunStore(directory).claimResumeLock() !== null) return false;
    const owner = readRunLock(directory)?.owner;
    if (!finished && owner !== undefined && isOwnerAlive(owner)) {
      new RunStore(directory).remove("resumeLock");
      return false;
    }
    return true;
  });
  try {
    return await sweepClaimed(claimed, sandboxes);
  } finally {
    for (const { directory } of claimed) new RunStore(directory).remove("resumeLock");
  }
}

async function sweepClaimed(
  dead: { runId: string; directory: string; lock: RunLock; finished: boolean }[],
  sandboxes: Pick<SandboxProvider, "ensureWorkspaceIdle">,
): Promise<string[]> {
  // Every dead run's disk is mounted before any `git worktree prune` runs: prune
  // would take the worktree of a disk not mounted (after a reboot) for a deleted one.
  const unmountable = new Map<string, string>();
  for (const { directory } of dead) {
    await mountRunDiskIfPresent(directory).catch((error: unknown) => unmountable.set(directory, errorMessage(error)));
  }
  const swept: string[] = [];
  for (const { runId, directory, lock, finished } of dead) {
    const paths = runPaths(directory);
    const workers = paths.workers;
    const worktrees = [lock.worktree, paths.verify, ...(existsSync(workers) ? readdirSync(workers).map((name) => join(workers, name)) : [])];
    const idle = await Promise.all(
      worktrees.map((path) =>
        sandboxes.ensureWorkspaceIdle(path).then(
          () => true,
          () => false,
        ),
      ),
    );
    if (idle.includes(false)) continue;
    // The verification checkout, if the runner died during verification, and the subagents' worktrees
    // (their branches keep what they committed; a subagent's uncommitted work is not kept).
    await removeWorktreeDirectory(lock.repository, paths.verify);
    for (const name of existsSync(workers) ? readdirSync(workers) : []) await removeWorktreeDirectory(lock.repository, join(workers, name));
    let saved = "its worktree had nothing to save";
    let keepWorktree = false;
    try {
      if (unmountable.has(directory)) throw new Error(unmountable.get(directory));
      const reopened = await reopenRunWorktree(lock, { create: false });
      if (reopened) {
        // The task's own commit limits (task.json, written before the run started).
        const task = new RunStore(directory).readJson("task") as { commit?: Parameters<typeof commitLimitsOf>[0] } | null;
        const committed = await commitRunWorktree(
          reopened.worktree,
          `agent-runner: run ${lock.run_id} (runner died: partial work)`,
          commitLimitsOf(task?.commit),
        );
        if (committed.timedOut) {
          saved = `its worktree could not be committed within the commit time limit and is kept at ${lock.worktree}`;
          keepWorktree = true;
        } else {
          saved = `its work is committed on ${lock.branch} (${committed.head.slice(0, 12)})${committed.leftOutCount ? `, except ${committed.leftOutCount} paths left out (see docs/runs.md "The host commit")` : ""}`;
        }
      }
    } catch (error) {
      saved = `its worktree could not be committed (${errorMessage(error)}) and is kept at ${lock.worktree}`;
      keepWorktree = true;
    }
    if (!keepWorktree) {
      await removeWorktreeDirectory(lock.repository, lock.worktree);
      await closeRunDisk(directory);
    }
    if (finished) {
      swept.push(runId);
      continue;
    }
    const report = {
      run_id: lock.run_id,
      status: "error",
      reason: "runner_died",
      error: `the runner process ended without finishing this run (crash or kill -9); ${saved}; continue it with \`runner resume ${lock.run_id}\``,
      branch: lock.branch,
    };
    new RunStore(directory).writeJson("report", report);
    swept.push(runId);
  }
  return swept;
}

/**
 * Unmounts every loop-mounted run disk of the machine-wide registry
 * (src/workspace/run-disk-registry.ts) whose owner process is dead, whatever
 * RUNNER_HOME its run had: a runner killed with `kill -9` and a throw-away
 * RUNNER_HOME, or a run directory removed with `rm -rf`, would otherwise keep
 * a loop device mounted for good. Disks of live owners (other runners on the
 * machine, their runs and tests) are never touched, nor a disk a container
 * still mounts a worktree of (`sandboxes` cannot confirm it idle: a second
 * mount of the image later would corrupt it). A run directory that
 * still exists is claimed first (resume.lock), as sweepDeadRuns does, and its
 * owner read again under the claim; its image is kept, so its own home's
 * sweep can still commit the work. Returns the mount points unmounted;
 * failures are returned too, never thrown.
 */
export async function sweepDeadRunDisks(
  sandboxes: Pick<SandboxProvider, "ensureWorkspaceIdle">,
  registry: string = RUN_DISK_REGISTRY,
): Promise<{ unmounted: string[]; failed: { mountPoint: string; error: string }[] }> {
  const unmounted: string[] = [];
  const failed: { mountPoint: string; error: string }[] = [];
  for (const entry of registeredRunDisks(registry)) {
    if (isOwnerAlive(entry.owner)) continue;
    const store = existsSync(entry.run_directory) ? new RunStore(entry.run_directory) : null;
    if (store && store.claimResumeLock() !== null) continue;
    try {
      // Under the claim: a `runner resume` that took the disk over meanwhile registered itself.
      const current = registeredRunDisks(registry).find((candidate) => candidate.run_directory === entry.run_directory);
      if (!current || isOwnerAlive(current.owner)) continue;
      const disk = runPaths(entry.run_directory);
      const worktrees = [disk.worktree, disk.verify, ...(existsSync(disk.workers) ? readdirSync(disk.workers).map((name) => join(disk.workers, name)) : [])];
      await Promise.all(worktrees.map((path) => sandboxes.ensureWorkspaceIdle(path)));
      await unmountRunDisk(entry.run_directory, entry.mount_point, registry);
      unmounted.push(entry.mount_point);
    } catch (error) {
      failed.push({ mountPoint: entry.mount_point, error: errorMessage(error) });
    } finally {
      store?.remove("resumeLock");
    }
  }
  return { unmounted, failed };
}
