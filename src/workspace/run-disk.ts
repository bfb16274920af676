import { execFile } from "node:child_process";
import { closeSync, existsSync, ftruncateSync, mkdirSync, openSync, readdirSync, rmSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { SandboxError, errorMessage } from "../errors.js";
import { BYTES_PER_INODE } from "../sandbox/sandbox.js";
import { registerRunDisk, unregisterRunDisk } from "./run-disk-registry.js";
// run-task.ts reads the run disk's free space through this module; the statfs reading itself sits below the sandbox, which needs it too.

const run = promisify(execFile);

/**
 * How `sandbox.limits.disk` is held (docs/security.md "Security model"):
 * - `filesystem`: the run's disk is a filesystem of its own, exactly the limit
 *   in size; the kernel refuses a write past it (ENOSPC), whoever makes it.
 * - `monitor`: the run's disk is a plain directory; each sandbox measures what
 *   its writable directories hold every few seconds and, over the limit, its
 *   processes are stopped and the run fails. Best effort (see {@link openRunDisk}).
 */
export type DiskEnforcement = "filesystem" | "monitor";

/** Where a run keeps what its sandboxes can write, inside `runs/<run-id>/`. */
export function runPaths(runDirectory: string) {
  const disk = join(runDirectory, "disk");
  return {
    /** The run's disk: its own filesystem (mounted here) or a plain directory. */
    disk,
    /** The filesystem image behind `disk` (sparse: it takes the host's space only as the task writes). */
    image: join(runDirectory, "disk.img"),
    /** The main agent's worktree (mounted at /workspace). */
    worktree: join(disk, "worktree"),
    /** The verification checkout of the run's commit. */
    verify: join(disk, "verify"),
    /** Worker subagents' worktrees (`<agent-id>`) and their verification checkouts (`<agent-id>-verify`). */
    workers: join(disk, "workers"),
    /** Each container's writable directories outside /workspace (/tmp, /var/tmp, /run/lock), one directory per container. */
    sandboxes: join(disk, "sandboxes"),
    /** What the containers' git is made of: the seeds of their own git directories and the worktrees' `.git` files (containerGitView). */
    gitView: join(disk, "git-view"),
  };
}

/** The run's disk, as {@link openRunDisk} made it. */
export interface RunDisk {
  /** Host directory of the run's disk ({@link runPaths}`.disk`). */
  root: string;
  /** `sandbox.limits.disk`, bytes: the filesystem's size, or the monitored bound. */
  limitBytes: number;
  enforcement: DiskEnforcement;
  /** Why the limit is only monitored; null when a filesystem holds it. */
  detail: string | null;
}

/** `auto`: a filesystem of the run's own when the runner can make one, else the monitor; `monitor`: always the monitor. */
export type DiskEnforcementChoice = "auto" | "monitor";

/**
 * Makes (or, for a resumed run, finds again) the run's disk for `limitBytes`
 * and says how the limit is held. A filesystem of the run's own is used when
 * the runner is root and `mkfs.ext4` and a loop device work: a sparse ext4
 * image of exactly `limitBytes` (`runs/<id>/disk.img`) loop-mounted `nosuid,nodev`
 * on `runs/<id>/disk`. The kernel then counts what the task really occupies —
 * allocated blocks (a 1 TiB sparse file costs nothing), inodes, a deleted file a
 * process still holds open — and refuses the write that would pass it. The
 * usable space is a few percent below the limit (ext4's inode tables and journal).
 *
 * Otherwise (not root, no loop device, no mkfs.ext4, RUNNER_DISK_ENFORCEMENT=monitor)
 * the disk is a plain directory and {@link RunDisk.detail} says why; the
 * sandboxes then measure it (`monitor`). Never throws for that: the run goes
 * on with the weaker bound, and says so.
 *
 * Why this and not (issue 10 item 8):
 * - `--storage-opt size=` on the container: overlay2 supports it only on xfs
 *   with `pquota`, not on the usual ext4; and a /workspace bind mount has no quota at all.
 * - tmpfs for /tmp: its pages are charged to the memory cgroup, so with a disk
 *   limit above the memory limit a big file ends in the OOM killer taking the
 *   largest process (the runner's in-container daemon) rather than in ENOSPC.
 * - the writable layer's SizeRw from the Docker API: the apparent size (a 1 TiB
 *   sparse file counts 1 TiB; measured here), computed by dockerd walking the
 *   layer on every call, and only after the fact.
 * - XFS project quotas: need the runner home on xfs mounted with `prjquota`;
 *   a loop device needs nothing of the host's filesystem.
 *
 * mkfs.ext4 and mount(8) are run as programs (argv, no shell): no maintained npm
 * library sets up loop devices, and mount(8) is what picks and frees one (autoclear).
 */
export async function openRunDisk(runDirectory: string, limitBytes: number, choice: DiskEnforcementChoice = "auto"): Promise<RunDisk> {
  const paths = runPaths(runDirectory);
  const monitored = (detail: string): RunDisk => {
    mkdirSync(paths.disk, { recursive: true, mode: 0o700 });
    return { root: paths.disk, limitBytes, enforcement: "monitor", detail };
  };
  if (await mountRunDiskIfPresent(runDirectory)) {
    return { root: paths.disk, limitBytes: statSync(paths.image).size, enforcement: "filesystem", detail: null };
  }
  if (existsSync(paths.disk) && readdirSync(paths.disk).length > 0) {
    return monitored("an earlier attempt of this run kept its files without a filesystem of their own");
  }
  if (choice === "monitor") return monitored("RUNNER_DISK_ENFORCEMENT=monitor forced the measured fallback");
  if ((process.getuid?.() ?? 0) !== 0) return monitored("the runner is not root, and a filesystem of the run's own needs a loop mount");
  try {
    mkdirSync(paths.disk, { recursive: true, mode: 0o700 });
    // Registered before it exists: a runner that dies after the mount leaves an entry any later start can sweep.
    registerRunDisk(runDirectory, paths);
    const descriptor = openSync(paths.image, "wx", 0o600);
    try {
      ftruncateSync(descriptor, limitBytes);
    } finally {
      closeSync(descriptor);
    }
    // -m 0: no blocks reserved for root (nothing in the sandbox is root); lazy init: ~15 ms for 10 GiB.
    await system("mkfs.ext4", ["-q", "-F", "-m", "0", "-i", String(BYTES_PER_INODE), "-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard", paths.image]);
    await mountImage(paths.image, paths.disk);
    return { root: paths.disk, limitBytes, enforcement: "filesystem", detail: null };
  } catch (error) {
    rmSync(paths.image, { force: true });
    unregisterRunDisk(runDirectory);
    return monitored(`no filesystem of the run's own could be made (${errorMessage(error).split("\n")[0]})`);
  }
}

/**
 * Mounts the run's existing disk image (a resumed or dead run whose disk is no
 * longer mounted, e.g. after a reboot), registering this process as its
 * owner; true when the disk is a mounted filesystem afterwards. Throws when an image exists but cannot be mounted:
 * its files would otherwise look missing.
 */
export async function mountRunDiskIfPresent(runDirectory: string): Promise<boolean> {
  const paths = runPaths(runDirectory);
  if (!existsSync(paths.image)) return false;
  // This process holds the disk now (a resumed run, a sweep): the registry names it the owner.
  registerRunDisk(runDirectory, paths);
  if (isMountPoint(paths.disk)) return true;
  mkdirSync(paths.disk, { recursive: true, mode: 0o700 });
  await mountImage(paths.image, paths.disk).catch((error: unknown) => {
    throw new SandboxError(`could not mount the run's disk ${paths.image} again: ${errorMessage(error)}`, { cause: error, reason: "disk_failed" });
  });
  return true;
}

/**
 * Unmounts the run's disk (when it is a filesystem) and removes it with the
 * image and its entry in the machine-wide registry (src/workspace/run-disk-registry.ts). Call it once no sandbox uses it and the worktrees on it are removed.
 * Errors are returned, not thrown: cleanup must go on.
 */
export async function closeRunDisk(runDirectory: string): Promise<Error | null> {
  const paths = runPaths(runDirectory);
  try {
    if (existsSync(paths.disk) && isMountPoint(paths.disk)) {
      // A lazy unmount when something still holds it: the mount point is free at once, the device when the holder lets go.
      await system("umount", [paths.disk]).catch(() => system("umount", ["--lazy", paths.disk]));
    }
    rmSync(paths.image, { force: true });
    rmSync(paths.disk, { recursive: true, force: true });
    unregisterRunDisk(runDirectory);
    return null;
  } catch (error) {
    return error as Error;
  }
}

/**
 * Unmounts the disk of a run whose runner died (lazily when something still
 * holds it) and drops its registry entry, keeping the image: the run's own
 * RUNNER_HOME, if it is still there, mounts it again to commit the work
 * (sweepDeadRuns). Throws when the unmount fails (the entry stays for a
 * later sweep).
 */
export async function unmountRunDisk(runDirectory: string, mountPoint: string, registry?: string): Promise<void> {
  if (isMountPoint(mountPoint)) await system("umount", [mountPoint]).catch(() => system("umount", ["--lazy", mountPoint]));
  unregisterRunDisk(runDirectory, registry);
}

async function mountImage(image: string, directory: string): Promise<void> {
  await system("mount", ["-o", "loop,nosuid,nodev,noatime", image, directory]);
}

/** A mount point is a directory on another device than its parent. */
function isMountPoint(directory: string): boolean {
  try {
    return statSync(directory).dev !== statSync(dirname(directory)).dev;
  } catch {
    return false;
  }
}

/** Runs a system program (argv, no shell) with sbin on PATH; rejects with its stderr. */
async function system(program: string, args: string[]): Promise<void> {
  try {
    await run(program, args, { env: { PATH: `${process.env.PATH ?? "/usr/bin:/bin"}:/usr/sbin:/sbin`, LC_ALL: "C" }, timeout: 30_000 });
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr?.trim();
    throw new Error(`${program} failed: ${stderr || errorMessage(error)}`, { cause: error });
  }
}
