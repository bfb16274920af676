import { chmodSync, mkdirSync, mkdtempSync } from "node:fs";
import { join } from "node:path";
import type { DiskLimitReached, SandboxSpec } from "../sandbox.js";

/**
 * The writable directories a container gets outside /workspace (its image is
 * read-only): the places an unprivileged user can write in a Debian-like
 * image (`find / -xdev -perm -0002 -type d`), HOME being /tmp.
 */
export const SCRATCH_MOUNTS = [
  { name: "tmp", target: "/tmp" },
  { name: "var-tmp", target: "/var/tmp" },
  { name: "run-lock", target: "/run/lock" },
] as const;

/**
 * A fresh directory under `parent` holding one world-writable, sticky
 * directory per {@link SCRATCH_MOUNTS} entry (like /tmp itself); returns its path.
 */
export function createScratchDirectory(parent: string): string {
  mkdirSync(parent, { recursive: true, mode: 0o700 });
  const scratch = mkdtempSync(join(parent, "s-"));
  for (const { name } of SCRATCH_MOUNTS) {
    const directory = join(scratch, name);
    mkdirSync(directory);
    chmodSync(directory, 0o1777);
  }
  return scratch;
}

/** Time between two checks of a filesystem-held limit (a statfs call), ms. */
const FILESYSTEM_INTERVAL_MS = 1000;
/**
 * Time between two measurements of a monitored limit, ms: at least this, and
 * at least {@link MONITOR_DUTY_FACTOR} times what the last walk took, so that
 * measuring a large tree costs at most a tenth of the sandbox's CPU.
 */
const MONITOR_INTERVAL_MS = 2000;
const MONITOR_DUTY_FACTOR = 10;

export interface DiskUsage {
  usedBytes: number;
  /** `monitor`: the files (inodes) under the sandbox's directories, and how many the limit allows. */
  inodes?: { used: number; limit: number };
  /** The limit is reached: the filesystem is full (`filesystem`), or the directories hold more than the limit (`monitor`). */
  full: boolean;
}

/**
 * Watches one sandbox's disk against `SandboxSpec.disk` and reports once when
 * the limit is reached. `filesystem`: the kernel already refuses writes past
 * it; the watch checks the filesystem's counters every second and after every
 * command, and reports `refused`. `monitor`: it measures the sandbox's
 * directories (allocated blocks and inodes) every {@link MONITOR_INTERVAL_MS}
 * or more, and when they hold more than the limit (or more files than it
 * allows, `BYTES_PER_INODE`), stops every process of the sandbox
 * and reports `stopped`. Between two measurements a fast writer can pass the
 * limit by what it writes in that time.
 */
export class DiskWatch {
  private timer: NodeJS.Timeout | null = null;
  private reached = false;
  private closed = false;
  private lastMeasureMs = 0;

  constructor(
    private readonly disk: SandboxSpec["disk"],
    private readonly actions: {
      measure: () => Promise<DiskUsage>;
      stopProcesses: () => Promise<void>;
      onReached: (reached: Omit<DiskLimitReached, "sandboxId">) => void;
    },
  ) {}

  start(): void {
    this.schedule();
  }

  /** After a command: a cheap check where the kernel holds the limit (one statfs); nothing for the monitor, which runs on its timer. */
  async afterCommand(): Promise<void> {
    if (this.disk.enforcement === "filesystem") await this.check();
  }

  close(): void {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private schedule(): void {
    if (this.closed || this.reached) return;
    const delay = this.disk.enforcement === "filesystem" ? FILESYSTEM_INTERVAL_MS : Math.max(MONITOR_INTERVAL_MS, this.lastMeasureMs * MONITOR_DUTY_FACTOR);
    this.timer = setTimeout(() => {
      void this.check().finally(() => this.schedule());
    }, delay);
    this.timer.unref();
  }

  private async check(): Promise<void> {
    if (this.closed || this.reached) return;
    const started = Date.now();
    let usage: DiskUsage;
    try {
      usage = await this.actions.measure();
    } catch {
      // The sandbox is going (closed, restarted): its successor watches for itself.
      return;
    }
    this.lastMeasureMs = Date.now() - started;
    if (!usage.full || this.closed || this.reached) return;
    this.reached = true;
    const stopping = this.disk.enforcement === "monitor";
    if (stopping) await this.actions.stopProcesses().catch(() => undefined);
    this.actions.onReached({
      usedBytes: usage.usedBytes,
      limitBytes: this.disk.limitBytes,
      ...(usage.inodes ? { inodes: usage.inodes } : {}),
      enforcement: this.disk.enforcement,
      action: stopping ? "stopped" : "refused",
    });
  }
}
