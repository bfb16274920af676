import { existsSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { currentOwner, isOwnerAlive } from "../process/process-owner.js";

/**
 * The files of a run directory `<RUNNER_HOME>/runs/<run-id>/` (README "Run
 * records"). Every reader and writer names them through this table, so the
 * layout lives in one place.
 */
export const RUN_FILES = {
  /** The final report (written once, atomically, when the run ends). */
  report: "report.json",
  /** CloudEvents, one per line, fsynced each turn (docs/events.md). */
  events: "events.jsonl",
  /** Append-only journal of every agent's conversation (resume reads it). */
  journal: "session.jsonl",
  /** The conversation as one JSON document, written at the end. */
  session: "session.json",
  /** The validated task, paths made absolute (resume reads it). */
  task: "task.json",
  /** Which runner owns the run and which worktree it made. */
  lock: "run.json",
  /** Held (O_EXCL) by the runner resuming the run. */
  resumeLock: "resume.lock",
  /** `git diff` of the run branch against its base. */
  patch: "patch.diff",
  /** Whole tool results too long for the conversation, per agent. */
  toolResults: "tool-results",
} as const;

export type RunFile = keyof typeof RUN_FILES;

/**
 * One run directory: the paths of its files and their atomic reads and
 * writes. Reads return null for a missing or unreadable file (a run that died
 * may have written only some of them).
 */
export class RunStore {
  constructor(readonly directory: string) {}

  /** Absolute path of one of the run's files. */
  path(file: RunFile): string {
    return join(this.directory, RUN_FILES[file]);
  }

  has(file: RunFile): boolean {
    return existsSync(this.path(file));
  }

  /** The file's JSON value, or null when it is missing or not JSON. */
  readJson(file: RunFile): unknown {
    return readJsonFile(this.path(file));
  }

  /** Writes `value` as indented JSON through a temporary file and a rename: a reader sees the old or the new file, never half of one. */
  writeJson(file: RunFile, value: unknown): void {
    writeAtomically(this.path(file), `${JSON.stringify(value, null, 2)}\n`);
  }

  remove(file: RunFile): void {
    rmSync(this.path(file), { force: true });
  }

  /**
   * Takes the run's resume.lock for this process, atomically (`O_EXCL`): the
   * one claim that `runner resume` and the dead-run sweep both take, so they
   * never work on one run at once. A claim left by a runner that died is
   * taken over. Returns null when claimed, else who holds it (a live
   * runner's `<host>:<pid>:<start>`, or `another runner` when it raced).
   * Undone by `remove("resumeLock")`.
   */
  claimResumeLock(): string | null {
    const claim = this.path("resumeLock");
    for (let attempt = 0; attempt < 2; attempt += 1) {
      try {
        writeFileSync(claim, currentOwner(), { flag: "wx", mode: 0o600 });
        return null;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
        let holder = "";
        try {
          holder = readFileSync(claim, "utf8").trim();
        } catch {
          continue; // released meanwhile
        }
        if (isOwnerAlive(holder)) return holder;
        rmSync(claim, { force: true });
      }
    }
    return "another runner";
  }
}

/** Writes `content` to `path` (mode 0600) through `<path>.tmp` and a rename. */
export function writeAtomically(path: string, content: string): void {
  const temporary = `${path}.tmp`;
  writeFileSync(temporary, content, { mode: 0o600 });
  renameSync(temporary, path);
}

/** A JSON file's value, or null when it is missing or unreadable. */
function readJsonFile(path: string): unknown {
  try {
    return JSON.parse(readFileSync(path, "utf8"));
  } catch {
    return null;
  }
}
