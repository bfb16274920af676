import { readFile, unlink, writeFile } from "node:fs/promises";

/** The lock is held by a live process (`holder`: its pid, or "this process"). */
export class LockHeldError extends Error {
  constructor(
    message: string,
    readonly holder: number | "this process",
  ) {
    super(message);
    this.name = "LockHeldError";
  }
}

/** Lock files this process holds, so a second open in the same process is refused too. */
const held = new Set<string>();

function processIsAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * Takes the lock file `path` for this process: created exclusively, holding
 * the pid. A lock whose process is gone (killed, crashed) is taken over. Node
 * 20 has no flock(2); an exclusive create plus a liveness check of the pid is
 * the portable equivalent (a recycled pid keeps a stale lock until that
 * process ends). Throws LockHeldError, naming the holder, when a live process holds it.
 * Resolves with the function that releases it.
 */
export async function lockFile(path: string, what: string): Promise<() => Promise<void>> {
  for (let attempt = 0; ; attempt += 1) {
    try {
      await writeFile(path, `${process.pid}\n`, { flag: "wx", mode: 0o600 });
      held.add(path);
      return async () => {
        if (!held.delete(path)) return;
        await unlink(path).catch(() => undefined);
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST" || attempt > 0) throw error;
    }
    const pid = Number.parseInt(await readFile(path, "utf8").catch(() => ""), 10);
    if (held.has(path) || (pid !== process.pid && Number.isSafeInteger(pid) && pid > 0 && processIsAlive(pid))) {
      const holder = held.has(path) ? "this process" : pid;
      throw new LockHeldError(
        `${what} is already open in ${holder === "this process" ? holder : `process ${holder}`} (lock ${path}); ` +
          "one process at a time owns it: close it there first, or remove the lock file if that process is gone",
        holder,
      );
    }
    await unlink(path).catch(() => undefined);
  }
}
