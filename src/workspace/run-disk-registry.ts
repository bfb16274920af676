import { createHash } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { currentOwner } from "../process/process-owner.js";

/**
 * The machine-wide registry of loop-mounted run disks: one file per mount,
 * whatever the run's RUNNER_HOME, so any runner start can unmount the disks
 * of runs whose runner died (`kill -9` with a throw-away RUNNER_HOME, or a
 * run directory removed with `rm -rf`, would otherwise leave a loop device
 * mounted for good). On /run: a tmpfs that, like the mounts, is gone after a
 * reboot. Only a root runner makes loop mounts, so only root writes here.
 */
export const RUN_DISK_REGISTRY = "/run/agent-runner/run-disks";

/** One registered mount. */
export interface RegisteredRunDisk {
  /** Where the disk is mounted: `<run directory>/disk`. */
  mount_point: string;
  /** Its image, `<run directory>/disk.img`. */
  image: string;
  run_directory: string;
  /** `<host>:<pid>:<start ticks>` of the runner process that mounted it (src/process/process-owner.ts). */
  owner: string;
}

/** The registry file of a run's disk: named by a hash of the run directory, so a name never needs escaping. */
function entryFile(registry: string, runDirectory: string): string {
  return join(registry, `${createHash("sha256").update(runDirectory).digest("hex").slice(0, 32)}.json`);
}

/**
 * Records that this process (or `owner`) holds the disk of `runDirectory`,
 * replacing an earlier entry (a resumed run's new owner). Written before the
 * mount, so no mount is ever unregistered; atomically (a reader never sees
 * half an entry). Throws when the registry cannot be written.
 */
export function registerRunDisk(runDirectory: string, paths: { disk: string; image: string }, options: { registry?: string; owner?: string } = {}): void {
  const registry = options.registry ?? RUN_DISK_REGISTRY;
  mkdirSync(registry, { recursive: true, mode: 0o700 });
  const entry: RegisteredRunDisk = { mount_point: paths.disk, image: paths.image, run_directory: runDirectory, owner: options.owner ?? currentOwner() };
  const file = entryFile(registry, runDirectory);
  const temporary = `${file}.${process.pid}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(entry)}\n`, { mode: 0o600 });
  renameSync(temporary, file);
}

/** Forgets the disk of `runDirectory` (after its unmount). */
export function unregisterRunDisk(runDirectory: string, registry: string = RUN_DISK_REGISTRY): void {
  rmSync(entryFile(registry, runDirectory), { force: true });
}

/** Every entry of the registry; unreadable or half-written files are skipped. */
export function registeredRunDisks(registry: string = RUN_DISK_REGISTRY): RegisteredRunDisk[] {
  let names: string[];
  try {
    names = readdirSync(registry).filter((name) => name.endsWith(".json"));
  } catch {
    return [];
  }
  const entries: RegisteredRunDisk[] = [];
  for (const name of names) {
    try {
      const entry = JSON.parse(readFileSync(join(registry, name), "utf8")) as RegisteredRunDisk;
      if (typeof entry.mount_point === "string" && typeof entry.owner === "string" && typeof entry.run_directory === "string") entries.push(entry);
    } catch {
      // gone meanwhile, or not ours
    }
  }
  return entries;
}
