import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { restoreSession, type RestoredAgent } from "../agent/session-journal.js";
import type { SubagentReport } from "../agents/subagents.js";
import type { Task } from "../config/load-task.js";
import { ConfigError } from "../errors.js";
import { newTraceId } from "../events/cloud-event-log.js";
import { currentOwner, isOwnerAlive } from "../process/process-owner.js";
import { MAIN_AGENT } from "./report-counter.js";
import { readRunLock, writeRunLock, type RunLock } from "./run-lock.js";
import { RunStore } from "./run-store.js";

/** A run `runner resume` can continue, as found on disk by {@link findResumableRun}. */
export interface ResumableRun {
  task: Task;
  runId: string;
  traceId: string;
  runDirectory: string;
  lock: RunLock;
  restored: RestoredAgent;
  /** Ids of the subagents earlier attempts started (their journal entries). */
  subagentIds: string[];
  /** The subagents an earlier attempt's report listed (kept in the resumed report). */
  previousAgents: SubagentReport[];
  /** The run ended `failed` at its step limit: it goes on only with more steps. */
  stoppedAtStepLimit: boolean;
}

/**
 * Checks that run `idOrPrefix` under `<home>/runs` can be resumed: it has a
 * task record and a session, no live runner owns it, and it did not end
 * succeeded or failed (except failed at its step limit, `max_steps`, which
 * goes on with more steps). Throws ConfigError (exit 2) saying why not.
 */
export function findResumableRun(home: string, idOrPrefix: string): ResumableRun {
  const runs = join(home, "runs");
  const matches = existsSync(runs) ? readdirSync(runs).filter((id) => id.startsWith(idOrPrefix)) : [];
  if (matches.length !== 1) {
    throw new ConfigError(
      matches.length === 0
        ? `no run ${idOrPrefix} in ${runs} (see \`runner runs\`)`
        : `${idOrPrefix} matches ${matches.length} runs (${matches.slice(0, 5).join(", ")}${matches.length > 5 ? ", ..." : ""}); give more of the id`,
    );
  }
  const runId = matches[0]!;
  const runDirectory = join(runs, runId);
  const store = new RunStore(runDirectory);
  const lock = readRunLock(runDirectory);
  if (!lock || !store.has("task")) {
    throw new ConfigError(`run ${runId} has no run.json or task.json (it never started, or an older runner made it); start a new run instead`);
  }
  const previous = store.readJson("report") as { status?: string; reason?: string; agents?: SubagentReport[] } | null;
  // A run that stopped at its step limit can go on with more steps (runner resume --max-steps N); other finished runs are done.
  const stoppedAtLimit = previous?.status === "failed" && previous.reason === "max_steps";
  if ((previous?.status === "succeeded" || previous?.status === "failed") && !stoppedAtLimit) {
    throw new ConfigError(
      `run ${runId} already ended ${previous.status} (${previous.reason ?? "?"}); only interrupted, crashed or errored runs, and runs stopped at max_steps, can be resumed — start a new run`,
    );
  }
  // A run with a report has ended, even when its runner lives on (a library process that cancelled it).
  if (!previous && isOwnerAlive(lock.owner)) throw new ConfigError(`run ${runId} is still running (runner ${lock.owner}); stop it first (Ctrl-C or kill)`);
  const session = restoreSession(store.path("journal"));
  const restored = session.get(MAIN_AGENT);
  if (!restored || restored.messages.length === 0) {
    throw new ConfigError(
      `run ${runId} ended before its agent started (${previous?.reason ?? "no report"}): there is no conversation to resume; fix the cause and start a new run`,
    );
  }
  const task = JSON.parse(readFileSync(store.path("task"), "utf8")) as Task;
  const subagentIds = [...session.keys()].filter((id) => id !== MAIN_AGENT);
  const previousAgents = (previous?.agents ?? []).filter((agent) => typeof agent?.id === "string");
  return { task, runId, traceId: lock.trace_id ?? newTraceId(), runDirectory, lock, restored, subagentIds, previousAgents, stoppedAtStepLimit: stoppedAtLimit };
}

/**
 * The final answer of a restored conversation (its last message is an
 * assistant message without tool calls), or undefined when the agent had not
 * answered yet: a resume then needs only commit and verification.
 */
export function finalAnswerOf(restored: RestoredAgent): string | null | undefined {
  const last = restored.messages.at(-1);
  if (restored.unfinishedTurn || last?.role !== "assistant" || last.tool_calls?.length) return undefined;
  return last.content;
}

/**
 * Makes this process the run's owner before anything is touched, atomically
 * (`O_EXCL` on resume.lock), so two `runner resume` of one run cannot both go
 * on. A claim left by a runner that died is taken over. Throws ConfigError
 * when a live runner holds it. The finalize phase removes the claim.
 */
export function claimRun(store: RunStore, runId: string): void {
  const holder = store.claimResumeLock();
  if (holder !== null) throw new ConfigError(`run ${runId} is being resumed by another runner (${holder}); wait for it or stop it`);
  writeRunLock(store.directory, { ...readRunLock(store.directory)!, owner: currentOwner() });
}
