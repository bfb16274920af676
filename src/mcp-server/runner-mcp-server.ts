import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { CallToolResult, ServerNotification, ServerRequest } from "@modelcontextprotocol/sdk/types.js";
import type { TaskDefaults } from "../config/defaults-file.js";
import { verifyEnding } from "../delivery/verify-ending.js";
import { ConfigError, RunnerError } from "../errors.js";
import { shippedPolicyNames } from "../policy/load-policy.js";
import { RunStore } from "../run/run-store.js";
import { ApprovalInbox, type PendingApproval } from "../runner/approval-inbox.js";
import { listRuns } from "../runner/run-records.js";
import type { Runner, RunHandle } from "../runner/runner.js";
import { changedFiles, mergeAdvice, pagePatch } from "./run-result.js";
import { RunTable } from "./run-table.js";
import * as schemas from "./tool-schemas.js";
import { answerOf, offerElicitation } from "./approval-elicitation.js";
import { builtInCeilings, CeilingExceededError, recordedTaskCeilingProblems, resumeCeilingProblems, type Ceilings } from "../runner/operator-ceilings.js";
import { taskOf } from "./run-start-task.js";
import { describeEvents, describeResult, describeStatus, shortType } from "./tool-texts.js";

export interface RunnerMcpServerOptions {
  /** The Runner the tools start and resume runs on (its home is the RUNNER_HOME every tool reads). */
  runner: Runner;
  /** Directories the callers' paths (task_file, workspace and the task's paths) must lie in; at least one. */
  workspaceRoots: string[];
  /** The trusted defaults (RUNNER_HOME config.yaml, ./.runner.yaml) under a started task's fields; none when absent. */
  defaults?: (workspacePath: string) => TaskDefaults;
  /** How long an approval question waits for run_approve (ms); then it is a "no" (ApprovalInbox's default, 5 minutes). */
  approvalTimeoutMs?: number;
  /** The server's version in the MCP handshake. */
  version: string;
  /** How often a call that waits (run_events' long-poll, a start, a cancel) sends a progress notification, ms (default 5000). */
  progressIntervalMs?: number;
  /** The most a caller's run_start or run_resume may ask for (`--ceiling`); default the built-in ceilings (docs/security.md "Ceilings"). */
  ceilings?: Ceilings;
}

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/**
 * `runner mcp`'s service (docs/mcp-server.md): the tools run_start,
 * run_status, run_events, run_approve, run_cancel, run_resume, run_result and
 * runs_list over a {@link Runner}, each with a zod input schema, an output
 * schema and `structuredContent`. A front end on the Runner seam, like the
 * CLI: runs are started with `Runner.startTask`, followed through the run
 * records, answered through an {@link ApprovalInbox}. One service holds the
 * runs and the approval questions; each client session (one over stdio, any
 * number over HTTP) gets an {@link McpServer} of its own from
 * {@link createSession}, so every session sees every run.
 *
 * Callers are untrusted (src/runner/untrusted-task.ts): no hooks, MCP
 * servers, policy files, base URLs or host variables, and every path inside
 * `workspaceRoots`. Approval questions are also offered as an elicitation to
 * each connected client that supports it (the first accepted answer counts);
 * a declined, cancelled or failed elicitation is no answer (the question
 * keeps waiting for run_approve), never a "deny": some clients decline
 * elicitations without asking anyone.
 */
export class RunnerMcpService {
  readonly runs: RunTable;
  private readonly approvals: ApprovalInbox;
  private readonly roots: string[];
  private readonly policies = shippedPolicyNames();
  private readonly sessions = new Set<McpServer>();

  /** ConfigError when `workspaceRoots` is empty. */
  constructor(private readonly options: RunnerMcpServerOptions) {
    if (options.workspaceRoots.length === 0) throw new ConfigError("--workspace-root: give at least one directory the server's callers may use");
    this.roots = options.workspaceRoots.map((root) => resolve(root));
    this.approvals = new ApprovalInbox({
      ...(options.approvalTimeoutMs === undefined ? {} : { timeoutMs: options.approvalTimeoutMs }),
      onChange: (change) => {
        if (change.kind !== "requested") return;
        for (const session of this.sessions) offerElicitation(session, this.approvals, change.approval);
      },
    });
    this.runs = new RunTable(options.runner, this.approvals, this.roots);
  }

  /** A new MCP server with the tools, for one client session; it leaves the service when it closes. */
  createSession(): McpServer {
    const server = new McpServer(
      { name: "agent-runner", version: this.options.version },
      {
        instructions:
          "Runs coding tasks in sandboxed containers with verification: run_start a task, follow it with run_events (or run_status), answer its approval questions with run_approve, then read run_result (verify outcome, changed files, how to merge, the patch in pages).",
      },
    );
    registerTools(server, this.runs, this.approvals, this.roots, this.policies, this.options);
    this.sessions.add(server);
    server.server.onclose = () => this.sessions.delete(server);
    return server;
  }

  /** Cancels the runs this service started (their work committed, resumable; Runner.close) and closes every session. */
  async close(): Promise<void> {
    await this.runs.close();
    await Promise.all([...this.sessions].map((session) => session.close()));
  }
}

/** A {@link RunnerMcpService} with one session (stdio, tests): `close()` closes both. */
export function createRunnerMcpServer(options: RunnerMcpServerOptions): { server: McpServer; runs: RunTable; close(): Promise<void> } {
  const service = new RunnerMcpService(options);
  return { server: service.createSession(), runs: service.runs, close: () => service.close() };
}

function registerTools(
  server: McpServer,
  runs: RunTable,
  approvals: ApprovalInbox,
  roots: string[],
  policies: string[],
  options: RunnerMcpServerOptions,
): void {
  const interval = options.progressIntervalMs ?? 5000;
  server.registerTool(
    "run_start",
    {
      title: "Start a sandboxed run",
      description:
        "Start a coding agent on a task in a sandboxed container: either task_file (a task.yaml), or instruction + workspace (a git repository) with optional verify, model, policy, allow_hosts, max_steps. Returns run_id at once; the run goes on in the background. The agent's work lands on a branch runner/<task-name>-<short-id> of the repository, never on your checkout; with verify, it counts as done only when the command passes on a clean checkout. Follow it with run_events, then read run_result.",
      inputSchema: schemas.runStartInput(policies),
      outputSchema: schemas.runStartOutput,
      annotations: { destructiveHint: false, openWorldHint: true },
    },
    (input, extra) =>
      guarded(async () => {
        const task = taskOf(input, roots, options.defaults, options.ceilings ?? builtInCeilings());
        const handle = await withProgress(extra, interval, "starting the run (image, sandbox)", () => runs.start(task));
        return startedResult(handle, "started");
      }),
  );

  server.registerTool(
    "run_status",
    {
      title: "A run's status",
      description:
        "Status of a run, compact: running / succeeded / failed / error / cancelled / unfinished, the agent's step, cost so far (USD), approval questions waiting for run_approve, and the last few events.",
      inputSchema: schemas.runStatusInput,
      outputSchema: schemas.runStatusOutput,
      annotations: { readOnlyHint: true },
    },
    ({ run_id }) =>
      guarded(async () => {
        const id = runs.resolve(run_id);
        const state = runs.state(id);
        const recent = runs.log(id).last(5);
        const structured = {
          run_id: id,
          task: state.task,
          status: state.status,
          reason: state.reason,
          step: state.step,
          cost_usd: state.costUsd,
          pending_approvals: state.pendingApprovals.map(approvalView),
          recent_events: recent.map(({ sequence, envelope }) => ({
            sequence,
            type: shortType(envelope.type),
            ...(typeof envelope.time === "string" ? { time: envelope.time } : {}),
          })),
          event_count: state.events,
          owned_here: state.ownedHere,
        };
        return ok(describeStatus(structured, recent), structured);
      }),
  );

  server.registerTool(
    "run_events",
    {
      title: "A run's events",
      description:
        "The run's events (CloudEvents, as events.jsonl holds them) after a cursor, bounded by max_events and max_bytes. When none follows the cursor yet, waits up to wait_ms for one (long-poll). Call again with next_cursor until done is true (the run ended and every event was returned).",
      inputSchema: schemas.runEventsInput,
      outputSchema: schemas.runEventsOutput,
      annotations: { readOnlyHint: true },
    },
    (input, extra) =>
      guarded(async () => {
        const id = runs.resolve(input.run_id);
        const page = await runs.events(
          id,
          { cursor: input.cursor, maxEvents: input.max_events, maxBytes: input.max_bytes, waitMs: input.wait_ms },
          { signal: extra.signal, tickMs: interval, onWait: (waited) => void progress(extra, waited, input.wait_ms, "waiting for the run's next event") },
        );
        const structured = { run_id: id, events: page.events as schemas.EventEnvelope[], next_cursor: page.nextCursor, done: page.done };
        return ok(describeEvents(structured, page.remaining), structured);
      }),
  );

  server.registerTool(
    "run_approve",
    {
      title: "Answer an approval question",
      description:
        "Answer a question the run's permission policy asked before a risky call (run_status lists them with their approval_id): allow (this call), allow_always (this and like calls for the rest of the run, where the question allows it) or deny with a reason the agent is told. A question nobody answers in time is a deny.",
      inputSchema: schemas.runApproveInput,
      outputSchema: schemas.runApproveOutput,
      annotations: { destructiveHint: false },
    },
    (input) =>
      guarded(async () => {
        const id = runs.resolve(input.run_id);
        const pending = approvals.pending(id);
        let question: PendingApproval | undefined;
        if (input.approval_id) {
          question = pending.find((approval) => approval.id === input.approval_id);
          if (!question) {
            throw new ConfigError(
              `approval_id: run ${id} has no question ${input.approval_id} waiting (answered, timed out, or asked in another process${runs.state(id).ownedHere ? "" : ": this run is not run by this server"}); run_status lists the waiting ones`,
            );
          }
        } else if (pending.length === 1) {
          question = pending[0];
        } else {
          throw new ConfigError(
            pending.length === 0
              ? `run_id: run ${id} has no approval question waiting here; run_status lists them`
              : `approval_id: run ${id} has ${pending.length} questions waiting; name one (${pending.map((approval) => approval.id).join(", ")})`,
          );
        }
        if (input.decision === "allow_always" && !question!.request.canRemember) {
          throw new ConfigError(
            `decision: allow_always is not offered for this question (the policy's remember list leaves ${question!.request.toolName} out); answer allow or deny`,
          );
        }
        const accepted = approvals.answer(question!.id, answerOf(input.decision, input.reason));
        const structured = { run_id: id, approval_id: question!.id, decision: input.decision, accepted };
        return ok(
          accepted
            ? `${input.decision} given to ${question!.request.toolName}: ${question!.request.subject ?? question!.request.question}`
            : "The question was answered meanwhile (or timed out); nothing changed.",
          structured,
        );
      }),
  );

  server.registerTool(
    "run_cancel",
    {
      title: "Cancel a run",
      description:
        "Cancel a run this server started, as Ctrl-C would: the agent stops, its partial work is committed on the run branch, the status becomes cancelled, and run_resume can continue it later.",
      inputSchema: schemas.runCancelInput,
      outputSchema: schemas.runCancelOutput,
      annotations: { destructiveHint: true, idempotentHint: true },
    },
    (input, extra) =>
      guarded(async () => {
        const id = runs.resolve(input.run_id);
        await withProgress(extra, interval, "cancelling: stopping the sandbox and committing the partial work", () =>
          runs.cancel(id, input.reason ?? "cancelled by run_cancel"),
        );
        const state = runs.state(id);
        return ok(`run ${id}: ${state.status}${state.reason ? ` (${state.reason})` : ""}`, { run_id: id, status: state.status, reason: state.reason });
      }),
  );

  server.registerTool(
    "run_resume",
    {
      title: "Resume a run",
      description:
        "Continue an interrupted, cancelled, errored or limit-stopped run on the same branch with a new sandbox and the saved conversation. A run stopped at its step limit needs max_steps (more model calls), one stopped at its budget max_cost_usd. Returns at once; follow it with run_events.",
      inputSchema: schemas.runResumeInput,
      outputSchema: schemas.runStartOutput,
      annotations: { destructiveHint: false, openWorldHint: true },
    },
    (input, extra) =>
      guarded(async () => {
        const ceilings = options.ceilings ?? builtInCeilings();
        const above = resumeCeilingProblems(input, ceilings);
        if (above.length) throw new CeilingExceededError("run_resume", above);
        // A run not started under these ceilings (`runner exec`, or before they were lowered) goes on within them only.
        const id = runs.resolve(input.run_id);
        const recorded = recordedTaskCeilingProblems(readRecordedTask(runs.directory(id)), input, ceilings, process.env);
        if (recorded.length) throw new CeilingExceededError("run_resume", recorded);
        const limits = {
          ...(input.max_steps === undefined ? {} : { maxSteps: input.max_steps }),
          ...(input.max_cost_usd === undefined ? {} : { maxCostUsd: input.max_cost_usd }),
          ...(input.timeout_sec === undefined ? {} : { timeoutSec: input.timeout_sec }),
        };
        const handle = await withProgress(extra, interval, "resuming the run", () => runs.resume(id, limits));
        return startedResult(handle, "resumed");
      }),
  );

  server.registerTool(
    "run_result",
    {
      title: "A run's result",
      description:
        "An ended run's outcome, for acting on it: the verification result first, then what changed (files, diffstat), then how to merge the branch, the agent's final message, and the patch in pages (patch.next_offset for the next page; a large patch never comes whole).",
      inputSchema: schemas.runResultInput,
      outputSchema: schemas.runResultOutput,
      annotations: { readOnlyHint: true },
    },
    (input) =>
      guarded(async () => {
        const id = runs.resolve(input.run_id);
        const state = runs.state(id);
        const report = runs.report(id);
        if (!state.ended || !report) {
          throw new ConfigError(
            `run_id: run ${id} has no result yet (status ${state.status}); follow it with run_events until done${state.status === "unfinished" ? ", or run_resume it: its runner ended without a report" : ""}`,
          );
        }
        const store = new RunStore(runs.directory(id));
        const patch = report.patch ? readPatch(join(store.directory, report.patch)) : "";
        const files = changedFiles(patch);
        const page = pagePatch(patch, input.patch_offset, input.patch_max_lines, input.patch_max_bytes);
        const task = runs.task(id);
        const structured = {
          run_id: id,
          task: report.task,
          status: report.status,
          reason: report.reason,
          error: report.error,
          verify: report.verify
            ? {
                command: report.verify.command,
                passed: report.verify.passed,
                exit_code: report.verify.exit_code,
                ending: verifyEnding(report.verify, task?.verify?.timeout_sec ?? 0),
                output_tail: report.verify.output_tail,
              }
            : null,
          files,
          diffstat: { files: files.length, added: sum(files.map((file) => file.added)), removed: sum(files.map((file) => file.removed)) },
          branch: report.branch,
          base_commit: report.base_commit,
          head_commit: report.head_commit,
          how_to_merge: mergeAdvice(report, task?.workspacePath ?? null),
          final_message: report.final_message,
          steps: report.steps,
          cost_usd: report.cost_usd,
          patch: { offset: page.offset, lines: page.lines, total_lines: page.totalLines, next_offset: page.nextOffset, text: page.text },
        };
        return ok(describeResult(structured, Boolean(task?.verify)), structured);
      }),
  );

  server.registerTool(
    "runs_list",
    {
      title: "List runs",
      description: "Recent runs in this runner's home (started here or by any other runner process), newest first, optionally filtered by status or task name.",
      inputSchema: schemas.runsListInput,
      outputSchema: schemas.runsListOutput,
      annotations: { readOnlyHint: true },
    },
    (input) =>
      guarded(async () => {
        const listed = listRuns(options.runner.home)
          .filter((run) => runs.visible(run.id))
          // The records' status (cheap: no events read), but "running" for a run this server is resuming.
          .map((run) => ({ ...run, status: runs.runningHere(run.id) ? "running" : run.status }))
          .filter((run) => (input.status ? run.status === input.status : true) && (input.task ? run.task.includes(input.task) : true))
          .slice(0, input.limit)
          .map((run) => ({ run_id: run.id, task: run.task, status: run.status, branch: run.branch, started: run.started.toISOString() }));
        const text = listed.length ? listed.map((run) => `${run.run_id}  ${run.status.padEnd(10)} ${run.task}  ${run.branch}`).join("\n") : "No runs match.";
        return ok(text, { runs: listed });
      }),
  );
}

function startedResult(handle: RunHandle, verb: "started" | "resumed"): CallToolResult {
  const structured = {
    run_id: handle.id,
    status: "running",
    run_directory: handle.directory,
    ...(handle.resumed ? { resumed_at_model_call: handle.resumed.atModelCall } : {}),
  };
  return ok(
    `Run ${handle.id} ${verb}${handle.resumed ? ` at model call ${handle.resumed.atModelCall}` : ""} (task ${handle.task.name}). Follow it with run_events { run_id: "${handle.id}", cursor: 0 }; answer approval questions with run_approve; read run_result when done.`,
    structured,
  );
}

function approvalView(approval: PendingApproval) {
  return {
    approval_id: approval.id,
    tool: approval.request.toolName,
    subject: approval.request.subject,
    question: approval.request.question,
    rule: approval.request.rule,
    reason: approval.request.reason,
    can_allow_always: approval.request.canRemember,
    deadline: new Date(approval.deadline).toISOString(),
  };
}

/** Runs a tool's body: a RunnerError (bad input, a run that cannot be resumed, Docker unusable) becomes an isError result with its message. */
async function guarded(body: () => Promise<CallToolResult>): Promise<CallToolResult> {
  try {
    return await body();
  } catch (error) {
    if (error instanceof RunnerError) return { isError: true, content: [{ type: "text", text: `Error: ${error.message}` }] };
    throw error;
  }
}

function ok(text: string, structured: Record<string, unknown>): CallToolResult {
  return { content: [{ type: "text", text }], structuredContent: structured };
}

/** A progress notification to the caller, when it asked for them (a progressToken); best effort. */
async function progress(extra: Extra, done: number, total: number | undefined, message: string): Promise<void> {
  const requested = extra._meta;
  if (requested?.progressToken === undefined) return;
  await extra
    .sendNotification({
      method: "notifications/progress",
      params: { progressToken: requested.progressToken, progress: done, ...(total ? { total } : {}), message },
    })
    .catch(() => undefined);
}

/** `work` with a progress notification every `intervalMs` while it lasts (a run's start may build an image; a cancel commits work). */
async function withProgress<T>(extra: Extra, intervalMs: number, message: string, work: () => Promise<T>): Promise<T> {
  const started = Date.now();
  const timer = setInterval(() => void progress(extra, Date.now() - started, undefined, message), intervalMs);
  try {
    return await work();
  } finally {
    clearInterval(timer);
  }
}

function readPatch(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

function sum(values: number[]): number {
  return values.reduce((total, value) => total + value, 0);
}

/** The recorded task (task.json) of the run in `runDirectory`, or null when it cannot be read (the resume says why). */
function readRecordedTask(runDirectory: string): unknown {
  try {
    return JSON.parse(readFileSync(join(runDirectory, "task.json"), "utf8"));
  } catch {
    return null;
  }
}
