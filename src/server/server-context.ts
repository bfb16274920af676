import { readFileSync } from "node:fs";
import { join, relative, sep } from "node:path";
import type { RunEnvelope } from "../events/event-catalogue.js";
import { readEnvelopes } from "../events/event-log-reader.js";
import type { PendingApproval } from "../runner/approval-inbox.js";
import type { ApprovalInbox } from "../runner/approval-inbox.js";
import { listRuns, runSummary, type RunSummary } from "../runner/run-records.js";
import { recordedRunRefusal } from "../runner/untrusted-task.js";
import { AgencyDirectory } from "../agency/agency-directory.js";
import type { Ceilings } from "../runner/operator-ceilings.js";
import type { AgencyHandle, AgencyRunner } from "../agency/agency.js";
import type { RunHandle } from "../runner/runner.js";
import type { ApprovalBody, RunRecordBody } from "./api-schemas.js";
import { RunRecordSchema } from "./api-schemas.js";
import type { BoardStream } from "./event-streams.js";
import type { IdempotencyKeys } from "./idempotency.js";
import { followEventsFile } from "./follow-events-file.js";
import { SharedFrames } from "./shared-frames.js";
import { HttpProblem } from "./problem.js";
import { recordedAgencyRefusal } from "./untrusted-agency.js";

/** While following a run another process runs: how often events.jsonl is read when the file system reported no change, ms. */
const FOLLOW_POLL_MS = 1_000;

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
  return recordedRunRefusal(join(context.runner.home, "runs", id), {
    roots: context.roots,
    allowMerge: true,
    vouchedPolicy: (file) => agencyOfPolicy(context, file) !== null,
  });
}

/**
 * The agency whose invocations' policy `file` is (`<home>/agencies/<id>/policies/<agent>.yaml`, generated from
 * the agency's checked definition), when the server's callers may use that agency; else null. So an agency's
 * invocation runs are as visible as their agency: their records, events and approval questions.
 */
function agencyOfPolicy(context: ServerContext, file: string): string | null {
  const root = join(context.runner.home, "agencies");
  const parts = relative(root, file).split(sep);
  if (parts.length !== 3 || parts[1] !== "policies" || !/^[\w.-]+$/.test(parts[0]!) || !parts[2]!.endsWith(".yaml")) return null;
  return agencyRefusal(context, parts[0]!) === null ? parts[0]! : null;
}

/** Why the server's callers may not use agency `id` (null: they may): one it runs, or one whose recorded definition passes the trust rule. */
export function agencyRefusal(context: ServerContext, id: string): string | null {
  if (context.agencies.has(id)) return null;
  try {
    return recordedAgencyRefusal(AgencyDirectory.of(context.runner.home, id).readRecord().definition, context.roots);
  } catch {
    return "its record (agency.json) cannot be read";
  }
}

/** The runs of RUNNER_HOME the server's callers may use, newest first. */
export function visibleRuns(context: ServerContext): RunSummary[] {
  return listRuns(context.runner.home).filter((run) => runRefusal(context, run.id) === null);
}

/**
 * Sends the board the run's fresh record once this turn of the event loop is
 * over (reading that run's records only: this is asked at every step of
 * every run; a burst of steps reads them once, and nothing is read while no
 * board is open).
 */
export function publishRun(context: ServerContext, id: string): void {
  context.board.publishLater(`run:${id}`, () => {
    const summary = runSummary(context.runner.home, id);
    return summary && runRefusal(context, id) === null ? { event: "run", data: runRecord(context, summary) } : null;
  });
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
    agency: request.agency ? { id: request.agency.agencyId, agent: request.agency.agent, invocation_id: request.agency.invocationId } : null,
  };
}

/**
 * A run's events from sequence number `from`: the shared frames of the live
 * handle when this server runs it, else events.jsonl, followed while another
 * process still runs it, until its report.json exists ({@link followEventsFile}:
 * woken by the file's changes, polled every {@link FOLLOW_POLL_MS} as well).
 */
export function runEvents(context: ServerContext, id: string, from: number): AsyncIterable<RunEnvelope> | SharedFrames {
  const frames = context.frames.get(id);
  if (frames) return frames;
  return followEventsFile(join(context.runner.home, "runs", id), from, { pollMs: FOLLOW_POLL_MS });
}

function readJson(file: string): unknown {
  try {
    return JSON.parse(readFileSync(file, "utf8")) as unknown;
  } catch {
    return null;
  }
}
