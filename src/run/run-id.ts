import { randomBytes } from "node:crypto";

/** `YYYYMMDD-HHMMSS-xxxx` (UTC, 4 random hex): sortable, and safe in branch and container names. */
export function newRunId(now = new Date()): string {
  const stamp = now.toISOString().replace(/[-:]/g, "").replace("T", "-").slice(0, 15);
  return `${stamp}-${randomBytes(2).toString("hex")}`;
}

/**
 * Whether `value` is a run id as {@link newRunId} makes it, `YYYYMMDD-HHMMSS-xxxx` and nothing else (every run id
 * comes from it; there is no longer form): a run id read from elsewhere (a worker's lease or result on NATS) is a
 * path component under `$RUNNER_HOME/runs/` only once this holds, and then it holds no `/`, `.` or `..`.
 */
export function isRunId(value: unknown): value is string {
  return typeof value === "string" && /^\d{8}-\d{6}-[0-9a-f]{4}$/.test(value);
}
