import { closeSync, existsSync, openSync, readFileSync, readSync } from "node:fs";
import { join } from "node:path";
import type { RunEnvelope } from "../events/event-catalogue.js";
import { readEnvelopes } from "../events/event-log-reader.js";
import type { PendingApproval } from "../runner/approval-inbox.js";
import type { ApprovalInbox } from "../runner/approval-inbox.js";
import { listRuns, runSummary, type RunSummary } from "../runner/run-records.js";
import { recordedRunRefusal } from "../runner/untrusted-task.js";
import type { Ceilings } from "../runner/operator-ceilings.js";
import type { AgencyHandle, AgencyRunner } from "../agency/agency.js";
import type { RunHandle } from "../runner/runner.js";
import type { ApprovalBody, RunRecordBody } from "./api-schemas.js";
import { RunRecordSchema } from "./api-schemas.js";
import type { BoardStream } from "./event-streams.js";
import type { IdempotencyKeys } from "./idempotency.js";
import { SharedFrames } from "./shared-frames.js";
import { HttpProblem } from "./problem.js";

/** What every route of the server works with: the Runner, the handles of the runs it started that have not ended, the approvals inbox, the board's stream. */
export interface ServerContext {
  runner: AgencyRunner;
  inbox: ApprovalInbox;
  /** Runs this server started or resumed, until they end: what cancel and live events need. Everything else is read from RUNNER_HOME. */
  handles: Map<string, RunHandle>;
  /** The SSE frames of the runs in `handles`, read once from each handle and shared by all their clients. */
  frames: Map<string, SharedFrames>;
  /** Steps of the main agent and USD so far of the runs in `handles`, counted as their events pass (a record need not read events.jsonl again). */
  progress: Map<string, { steps: number; cost: number | null }>;
  /** Agencies this server started, until they end: what live agency events and stopping the server need. */
  agencies: Map<string, AgencyHandle>;
  /** `--tasks-root` directories: where task files, task objects' paths and batch directories may point. */
  roots: string[];
  /** `--ceiling`s: the most a caller's task, agency or resume may ask for (src/runner/operator-ceilings.ts). */
  ceilings: Ceilings;
  board: BoardStream;
  idempotency: IdempotencyKeys;
  version: string;
}

/**
 * Keeps `handle` until its run ends and tells the board about the run's
 * run-level events (started, each main-agent step, verify, finished).
 */
export function adopt(context: ServerContext, handle: RunHandle): void {
  context.handles.set(handle.id, handle);
  // The one subscription to the run: its frames for every SSE client, its run-level events for the board.
  const frames = new SharedFrames();
  context.frames.set(handle.id, frames);
  const boardTypes = new Set(["run.started", "run.resumed", "model_call.finished", "verify.finished", "run.finished", "workspace.merged"]);
  const progress = { steps: 0, cost: null as number | null };
  context.progress.set(handle.id, progress);
  void (async () => {
    for await (const envelope of handle.events()) {
      frames.push(envelope);
      const name = eventName(envelope.type);
      countProgress(progress, name, envelope.data);
      if (boardTypes.has(name)) publishRun(context, handle.id);
    }
  })()
    .catch(() => undefined)
    .finally(() => {
      frames.end();
      context.frames.delete(handle.id);
      context.progress.delete(handle.id);
      context.handles.delete(handle.id);
      publishRun(context, handle.id);
    });
}

/**
 * Why the server's callers may not use run `id` (null: they may): a run it is running, or one whose recorded task
 * a caller could have started ({@link recordedRunRefusal}); the user's own runs elsewhere stay out of reach.
 */
export function runRefusal(context: ServerContext, id: string): string | null {
  if (context.handles.has(id)) return null;
  return recordedRunRefusal(join(context.runner.home, "runs", id), { roots: context.roots, allowMerge: true });
}

/** The runs of RUNNER_HOME the server's callers may use, newest first. */
export function visibleRuns(context: ServerContext): RunSummary[] {
  return listRuns(context.runner.home).filter((run) => runRefusal(context, run.id) === null);
}

/** Sends the board the run's fresh record (reading that run's records only: this runs at every step of every run). */
export function publishRun(context: ServerContext, id: string): void {
  const summary = runSummary(context.runner.home, id);
  if (summary && runRefusal(context, id) === null) context.board.publish({ event: "run", data: runRecord(context, summary) });
}

/** `dev.agent-runner.run.started.v1` → `run.started`. */
function eventName(type: string): string {
  return type.replace(/^dev\.agent-runner\./, "").replace(/\.v\d+$/, "");
}

/** The run's record (see RunRecordSchema). Throws a 404 problem for an unknown run. */
export function findRunRecord(context: ServerContext, id: string): RunRecordBody {
  const summary = visibleRuns(context).find((run) => run.id === id);
  if (!summary) throw new HttpProblem(404, "No such run", `no run ${id} in ${context.runner.home}/runs; GET /v1/runs lists them`);
  return runRecord(context, summary);
}

export function runRecord(context: ServerContext, summary: RunSummary): RunRecordBody {
  const directory = join(context.runner.home, "runs", summary.id);
  const report = readJson(join(directory, "report.json")) as { steps?: number; cost_usd?: number | null } | null;
  const live = report ? null : (context.progress.get(summary.id) ?? progressOf(join(directory, "events.jsonl")));
  const status = context.handles.has(summary.id) && !report ? "running" : summary.status;
  return RunRecordSchema.parse({
    id: summary.id,
    task: summary.task,
    status,
    branch: summary.branch,
    started_at: summary.started.toISOString(),
    steps: report?.steps ?? live?.steps ?? null,
    cost_usd: report ? (report.cost_usd ?? null) : (live?.cost ?? null),
    pending_approvals: context.inbox.pending(summary.id).length,
    report: report as Record<string, unknown> | null,
  });
}

/** Steps of the main agent and USD spent so far, from events.jsonl (a run still going has no report). */
function progressOf(file: string): { steps: number; cost: number | null } {
  const progress = { steps: 0, cost: null as number | null };
  for (const envelope of readEnvelopes(file)) countProgress(progress, eventName(envelope.type), envelope.data);
  return progress;
}

/** Adds one event to `progress`: a main-agent model call is a step; model calls and summaries add their USD. */
function countProgress(progress: { steps: number; cost: number | null }, name: string, data: unknown): void {
  const fields = data as { agent_id?: string; cost_usd?: number | null } | undefined;
  if (name === "model_call.finished" && fields?.agent_id === "main") progress.steps++;
  if ((name === "model_call.finished" || name === "context.summary_usage") && typeof fields?.cost_usd === "number")
    progress.cost = Math.round(((progress.cost ?? 0) + fields.cost_usd) * 1e6) / 1e6;
}

export function approvalBody(approval: PendingApproval): ApprovalBody {
  const { request } = approval;
  return {
    id: approval.id,
    run_id: request.runId,
    agent_id: request.agentId,
    tool_call_id: request.toolCallId,
    tool: request.toolName,
    subject: request.subject,
    rule: request.rule,
    reason: request.reason,
    question: request.question,
    can_remember: request.canRemember,
    asked_at: new Date(approval.askedAt).toISOString(),
    deadline: new Date(approval.deadline).toISOString(),
  };
}

/**
 * A run's events from sequence number `from`: the shared frames of the live
 * handle when this server runs it, else events.jsonl, followed (every
 * `pollMs`) while another process still runs it, until its report.json exists.
 */
export function runEvents(context: ServerContext, id: string, from: number, pollMs = 250): AsyncIterable<RunEnvelope> | SharedFrames {
  const frames = context.frames.get(id);
  if (frames) return frames;
  return followFile(join(context.runner.home, "runs", id), from, pollMs);
}

async function* followFile(directory: string, from: number, pollMs: number): AsyncGenerator<RunEnvelope> {
  const file = join(directory, "events.jsonl");
  let offset = 0;
  let sequence = 0;
  for (;;) {
    const ended = existsSync(join(directory, "report.json"));
    const { text, bytes } = readFrom(file, offset);
    offset += bytes;
    for (const line of text.split("\n")) {
      if (!line) continue;
      if (sequence++ >= from) yield JSON.parse(line) as RunEnvelope;
    }
    if (ended && bytes === 0) return;
    if (bytes === 0) await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}

/** Whole lines of `file` from byte `offset` (up to 1 MiB of them; a line still being written waits for its newline). */
function readFrom(file: string, offset: number): { text: string; bytes: number } {
  if (!existsSync(file)) return { text: "", bytes: 0 };
  const descriptor = openSync(file, "r");
  try {
    const chunk = Buffer.alloc(1 << 20);
    const read = readSync(descriptor, chunk, 0, chunk.length, offset);
    const bytes = chunk.subarray(0, read).lastIndexOf(0x0a) + 1;
    return { text: chunk.subarray(0, bytes).toString("utf8"), bytes };
  } finally {
    closeSync(descriptor);
  }
}

function readJson(file: string): unknown {
  try {
    return JSON.parse(readFileSync(file, "utf8")) as unknown;
  } catch {
    return null;
  }
}
