import { readFileSync } from "node:fs";
import { hostname } from "node:os";

/**
 * Identity of a runner process that survives pid reuse: host name, pid, and the
 * process start time (field 22 of /proc/<pid>/stat, clock ticks since boot).
 */
function processStartTicks(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return fields[19] ?? null;
  } catch {
    return null;
  }
}

export function currentOwner(): string {
  return `${hostname()}:${process.pid}:${processStartTicks(process.pid) ?? "0"}`;
}

/**
 * Whether the runner process named by an owner label still runs. Resources of
 * another host are assumed alive (we cannot tell), so they are never swept.
 */
export function isOwnerAlive(owner: string | undefined): boolean {
  if (!owner) return false;
  const [host, pid, ticks] = owner.split(":");
  if (host !== hostname()) return true;
  const started = processStartTicks(Number(pid));
  return started !== null && started === ticks;
}
