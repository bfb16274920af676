import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { BUS_FILES } from "../bus/file-event-bus.js";

/** True while a live process owns the agency's bus (its bus.lock names a running pid): the agency is running. */
export function agencyRunning(directory: string): boolean {
  const lock = join(directory, BUS_FILES.lock);
  if (!existsSync(lock)) return false;
  const pid = Number.parseInt(readFileSync(lock, "utf8"), 10);
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
