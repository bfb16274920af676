import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { restoreSession, type RestoredAgent } from "../agent/session-journal.js";
import type { SubagentReport } from "../agents/subagents.js";
import type { Task } from "../config/load-task.js";
import { ConfigError } from "../errors.js";
import { newTraceId } from "../events/cloud-event-log.js";
import { currentOwner, isOwnerAlive } from "../process/process-owner.js";
import { readRunEvents } from "../events/event-log-reader.js";
import { MAIN_AGENT } from "./report-counter.js";
import { readRunLock, runLockProblem, writeRunLock, type RunLock } from "./run-lock.js";
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
  /**
   * The limit the run ended `failed` at, which `runner resume` can raise: its
   * step limit (it goes on only with more steps), its budget (only with more
   * money) or its time limit (each attempt gets `timeout_sec` anew); null otherwise.
   */
  stoppedAt: StoppedAtLimit | null;
  /**
   * What the run's model calls have cost so far, USD, summed from its events
   * (what the resumed report starts from); null when a call was not priced.
   */
  spentUsd: number | null;
  /**
   * The user's message this attempt adds after the conversation (`runner
   * continue`), or null for a resume, which goes on where the run stopped.
   */
  followUp: string | null;
}

/** The `failed` reasons of limits a resume can raise. */
export type StoppedAtLimit = "max_steps" | "budget_exceeded" | "timed_out";
const RESUMABLE_LIMITS: readonly string[] = ["max_steps", "budget_exceeded", "timed_out"] satisfies StoppedAtLimit[];

/**
 * Checks that run `idOrPrefix` under `<home>/runs` can be resumed: it has a
 * task record and a session, no live runner owns it, and it did not end
 * succeeded or failed (except failed at a limit a resume can raise:
 * `max_steps`, `budget_exceeded`, `timed_out`). Throws ConfigError (exit 2)
 * saying why not.
 */
export function findResumableRun(home: string, idOrPrefix: string): ResumableRun {
  const record = readRunRecord(home, idOrPrefix, "resumed");
  const { runId, previous, lock } = record;
  // A run stopped at a limit goes on with it raised (runner resume --max-steps N, --max-cost USD, --timeout D); other finished runs are done.
  const stoppedAt = previous?.status === "failed" && RESUMABLE_LIMITS.includes(previous.reason ?? "") ? (previous.reason as StoppedAtLimit) : null;
  if ((previous?.status === "succeeded" || previous?.status === "failed") && !stoppedAt) {
    throw new ConfigError(
      `run ${runId} already ended ${previous.status} (${previous.reason ?? "?"}); only interrupted, crashed or errored runs, and runs stopped at max_steps, its budget or its time limit, can be resumed — to talk back to it, \`runner continue ${runId} "your feedback"\`; or start a new run`,
    );
  }
  // A run with a report has ended, even when its runner lives on (a library process that cancelled it).
  if (!previous && isOwnerAlive(lock.owner)) throw new ConfigError(`run ${runId} is still running (runner ${lock.owner}); stop it first (Ctrl-C or kill)`);
  return conversationOf(record, stoppedAt, null);
}

/**
 * Checks that run `idOrPrefix` under `<home>/runs` can be continued with the
 * user's `message` (`runner continue`): it has ended (a report.json, whatever
 * its status: succeeded, failed, error or cancelled), has a task record and a
 * conversation, and its record was written by a runner. Throws ConfigError
 * (exit 2) saying why not; a run still going is refused (call it after the
 * sweep of dead runs, which gives a crashed run its report).
 */
export function findContinuableRun(home: string, idOrPrefix: string, message: string): ResumableRun {
  const record = readRunRecord(home, idOrPrefix, "continued");
  if (!record.previous) {
    throw new ConfigError(
      `run ${record.runId} has not ended (no report.json): it is still running (runner ${record.lock.owner}); wait for it or stop it (Ctrl-C, kill), then continue it`,
    );
  }
  return conversationOf(record, null, message);
}

interface RunRecord {
  runId: string;
  runDirectory: string;
  store: RunStore;
  lock: RunLock;
  previous: { status?: string; reason?: string; agents?: SubagentReport[] } | null;
}

/** The run `idOrPrefix` names (a unique prefix will do), with its run.json, task.json and report; ConfigError when it cannot be `purpose`. */
function readRunRecord(home: string, idOrPrefix: string, purpose: "resumed" | "continued"): RunRecord {
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
  const untrusted = runLockProblem(runDirectory, lock);
  if (untrusted) throw new ConfigError(`run ${runId} cannot be ${purpose}: its run.json was not written by a runner (${untrusted}); start a new run instead`);
  const previous = store.readJson("report") as RunRecord["previous"];
  return { runId, runDirectory, store, lock, previous };
}

/** The {@link ResumableRun} of a checked record: its conversation (ConfigError when the agent never started), task and spending. */
function conversationOf(record: RunRecord, stoppedAt: StoppedAtLimit | null, followUp: string | null): ResumableRun {
  const { runId, runDirectory, store, lock, previous } = record;
  const session = restoreSession(store.path("journal"));
  const restored = session.get(MAIN_AGENT);
  if (!restored || restored.messages.length === 0) {
    throw new ConfigError(
      `run ${runId} ended before its agent started (${previous?.reason ?? "no report"}): there is no conversation to ${followUp === null ? "resume" : "continue"}; fix the cause and start a new run`,
    );
  }
  const task = JSON.parse(readFileSync(store.path("task"), "utf8")) as Task;
  const subagentIds = [...session.keys()].filter((id) => id !== MAIN_AGENT);
  const previousAgents = (previous?.agents ?? []).filter((agent) => typeof agent?.id === "string");
  return {
    task,
    runId,
    traceId: lock.trace_id ?? newTraceId(),
    runDirectory,
    lock,
    restored,
    subagentIds,
    previousAgents,
    stoppedAt,
    spentUsd: spentOf(store.path("events")),
    followUp,
  };
}

/** The summed `cost_usd` of a run's model calls and compactions in its events.jsonl; null when one has none. */
function spentOf(eventsFile: string): number | null {
  let spent = 0;
  for (const event of readRunEvents(eventsFile)) {
    if (event.type !== "model_call.finished" && event.type !== "context.summary_usage") continue;
    if (typeof event.data.cost_usd !== "number") return null;
    spent += event.data.cost_usd;
  }
  return spent;
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
