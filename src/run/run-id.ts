import { randomBytes } from "node:crypto";

/** `YYYYMMDD-HHMMSS-xxxx` (UTC, 4 random hex): sortable, and safe in branch and container names. */
export function newRunId(now = new Date()): string {
  const stamp = now.toISOString().replace(/[-:]/g, "").replace("T", "-").slice(0, 15);
  return `${stamp}-${randomBytes(2).toString("hex")}`;
}
