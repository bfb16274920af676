import { existsSync, readdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { isOwnerAlive } from "../process/process-owner.js";
import { removeWorktreeDirectory } from "../workspace/run-worktree.js";

/**
 * `run.json` in a run directory: which runner process owns the run and which
 * worktree it made. It lets a later start recognise a run whose runner died
 * (crash, `kill -9`) before writing report.json.
 */
export interface RunLock {
  run_id: string;
  /** `<host>:<pid>:<start ticks>` of the runner process. */
  owner: string;
  repository: string;
  worktree: string;
  branch: string;
}

export function writeRunLock(runDirectory: string, lock: RunLock): void {
  const path = join(runDirectory, "run.json");
  writeFileSync(`${path}.tmp`, `${JSON.stringify(lock, null, 2)}\n`, { mode: 0o600 });
  renameSync(`${path}.tmp`, path);
}

/**
 * Finds runs under `<home>/runs` that never finished and whose runner is
 * gone; removes their worktree directories (the branches stay, with whatever
 * was committed) and writes a report.json with status `error`, reason
 * `runner_died`. Returns the swept run ids. Resume (issue 5) is not built, so
 * nothing is kept for it.
 */
export async function sweepDeadRuns(runnerHome: string): Promise<string[]> {
  const runs = join(runnerHome, "runs");
  if (!existsSync(runs)) return [];
  const swept: string[] = [];
  for (const runId of readdirSync(runs)) {
    const directory = join(runs, runId);
    const lockPath = join(directory, "run.json");
    if (existsSync(join(directory, "report.json")) || !existsSync(lockPath)) continue;
    let lock: RunLock;
    try {
      lock = JSON.parse(readFileSync(lockPath, "utf8")) as RunLock;
    } catch {
      continue;
    }
    if (isOwnerAlive(lock.owner)) continue;
    // The verification checkout, if the runner died during verification.
    await removeWorktreeDirectory(lock.repository, join(directory, "verify"));
    await removeWorktreeDirectory(lock.repository, lock.worktree);
    const report = {
      run_id: lock.run_id,
      status: "error",
      reason: "runner_died",
      error: "the runner process ended without finishing this run (crash or kill -9); its worktree was removed at a later start",
      branch: lock.branch,
    };
    writeFileSync(join(directory, "report.json"), `${JSON.stringify(report, null, 2)}\n`, { mode: 0o600 });
    swept.push(runId);
  }
  return swept;
}
