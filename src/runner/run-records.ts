import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { restoreSession } from "../agent/session-journal.js";
import { ConfigError } from "../errors.js";
import type { ChatMessage } from "../model/messages.js";
import { isOwnerAlive } from "../process/process-owner.js";
import { RunStore } from "../run/run-store.js";
import { isPathInside } from "../process/path-inside.js";

/** One run of RUNNER_HOME as `runner runs` lists it. */
export interface RunSummary {
  id: string;
  /** The task's name (from report.json, else task.json), `?` when neither is readable. */
  task: string;
  /** report.json's status; without one `running` while its runner lives, else `unfinished`. */
  status: string;
  /** The run branch, `-` before the worktree existed. */
  branch: string;
  /** When the run directory was made. */
  started: Date;
}

/** Runs under `<home>/runs`, newest first, read from their records (report.json, run.json, task.json). */
export function listRuns(home: string): RunSummary[] {
  const runs = join(home, "runs");
  if (!existsSync(runs)) return [];
  return readdirSync(runs)
    .map((id) => runSummary(home, id)!)
    .sort((a, b) => (a.id < b.id ? 1 : -1));
}

/** One run's line of {@link listRuns}, read alone (null: no such run directory): what a caller following one run needs without listing them all. */
export function runSummary(home: string, id: string): RunSummary | null {
  const directory = join(home, "runs", id);
  if (!existsSync(directory)) return null;
  const store = new RunStore(directory);
  const report = store.readJson("report") as { task?: string; status?: string; branch?: string | null } | null;
  const lock = store.readJson("lock") as { owner?: string; branch?: string } | null;
  const recordedTask = store.readJson("task") as { name?: string } | null;
  const status = report?.status ?? (lock && isOwnerAlive(lock.owner) ? "running" : "unfinished");
  return {
    id,
    task: report?.task ?? recordedTask?.name ?? "?",
    status,
    // A run that changed nothing has no branch (report.json branch null) once it ended.
    branch: (report ? report.branch : lock?.branch) ?? "-",
    started: statSync(store.directory).birthtime,
  };
}

/** A run's records for reading: its report (null before it ended) and each agent's conversation. */
export interface RunRecord {
  id: string;
  directory: string;
  report: unknown;
  /** Per agent id, its messages: session.json when the run ended, else the journal (a run going on, or one that died). */
  agents: Record<string, { messages: ChatMessage[] }>;
}

/** Reads run `idOrPrefix` (a unique prefix of a run id will do). Throws ConfigError when none or several runs match. */
export function readRunRecord(home: string, idOrPrefix: string): RunRecord {
  const id = findRunId(home, idOrPrefix);
  const store = new RunStore(join(home, "runs", id));
  const session = store.readJson("session") as { agents?: Record<string, { messages: ChatMessage[] }> } | null;
  const agents =
    session?.agents ?? Object.fromEntries([...restoreSession(store.path("journal"))].map(([agentId, agent]) => [agentId, { messages: agent.messages }]));
  return { id, directory: store.directory, report: store.readJson("report"), agents };
}

/** The id of the one run in `<home>/runs` that is `idOrPrefix` or starts with it. Throws ConfigError when none or several match. */
export function findRunId(home: string, idOrPrefix: string): string {
  const matches = listRuns(home).filter((run) => run.id.startsWith(idOrPrefix));
  if (matches.length !== 1) {
    throw new ConfigError(
      matches.length === 0
        ? `no run ${idOrPrefix} in ${join(home, "runs")} (see \`runner runs\`)`
        : `${idOrPrefix} matches ${matches.length} runs (${matches
            .slice(0, 5)
            .map((match) => match.id)
            .join(", ")}${matches.length > 5 ? ", ..." : ""}); give more of the id`,
    );
  }
  return matches[0]!.id;
}

/**
 * Every finished tool call's whole result in a run directory, per agent id
 * and then per tool call id: the file under `tool-results/` when the result
 * was cut to the per-result cap for the model, else the result the journal
 * recorded (whole even when clearing later took it out of the conversation).
 * Redacted like every record (the runner redacts before it writes).
 */
export function wholeToolResults(directory: string): Map<string, Map<string, string>> {
  const store = new RunStore(directory);
  const whole = new Map<string, Map<string, string>>();
  for (const [agentId, agent] of restoreSession(store.path("journal"))) {
    const results = new Map<string, string>();
    for (const { callId, content } of agent.results.values()) results.set(callId, content);
    for (const [callId, file] of agent.fullOutputs) {
      const path = resolve(directory, file);
      // The journal names a file of the run's own records; anything else is not read.
      if (isPathInside(path, store.path("toolResults")) && existsSync(path)) results.set(callId, readFileSync(path, "utf8"));
    }
    whole.set(agentId, results);
  }
  return whole;
}

/**
 * Whether a runner process still works on the run: the owner in run.json or
 * the holder of resume.lock is alive. A run directory without run.json yet
 * (its runner is opening the workspace) counts as alive.
 */
export function isRunAlive(directory: string): boolean {
  const store = new RunStore(directory);
  const lock = store.readJson("lock") as { owner?: string } | null;
  if (!lock) return true;
  if (lock.owner && isOwnerAlive(lock.owner)) return true;
  let resumer = "";
  try {
    resumer = readFileSync(store.path("resumeLock"), "utf8").trim();
  } catch {
    return false;
  }
  return resumer !== "" && isOwnerAlive(resumer);
}
