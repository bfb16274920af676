import { existsSync, readFileSync, realpathSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Context } from "hono";
import type { Task } from "../config/load-task.js";
import { TaskValidationError } from "../config/load-task.js";
import type { ApprovalAnswer } from "../policy/approval.js";
import { loadUntrustedTaskFile, untrustedTaskProblems, validateUntrustedTask } from "../runner/untrusted-task.js";
import { CeilingExceededError, recordedTaskCeilingProblems, resumeCeilingProblems } from "../runner/operator-ceilings.js";
import { isPathInside } from "../process/path-inside.js";
import {
  ApprovalAnsweredSchema,
  ApprovalDecisionRequest,
  ApprovalListSchema,
  ApprovalParams,
  CancelledSchema,
  CancelRunRequest,
  EventsQuery,
  EventPageQuery,
  EventPageSchema,
  ListRunsQuery,
  MergeOutcomeSchema,
  ProblemSchema,
  ResumeRunRequest,
  RunIdParams,
  RunListSchema,
  RunRecordSchema,
  StartRunRequest,
} from "./api-schemas.js";
import type { ApiRoutes } from "./api-routes.js";
import { runEventStream, sharedFrameStream, startSequence } from "./event-streams.js";
import { SharedFrames } from "./shared-frames.js";
import { HttpProblem, problemOfError } from "./problem.js";
import { readEnvelopes } from "../events/event-log-reader.js";
import { adopt, approvalBody, findRunRecord, runEvents, runRecord, visibleRuns, type ServerContext } from "./server-context.js";

const problem = (description: string) => ({ description, schema: ProblemSchema });

/** Trust problems name these fields (src/runner/untrusted-task.ts); any other problem of a task is its schema's. */
const TRUST_FIELDS = new Set([
  "",
  "hooks",
  "mcp_servers",
  "policy",
  "subagents.explore_policy",
  "subagents.worker_policy",
  "model.base_url",
  "sandbox.pass_env",
  "sandbox.secret_env",
  "workspace",
  "model.script",
  "sandbox.build.context",
  "sandbox.build.dockerfile",
]);

/** `/v1/runs…` and `/v1/approvals` (docs/http-api.md). */
export function addRunRoutes(api: ApiRoutes, context: ServerContext): void {
  api.add(
    {
      method: "post",
      path: "/v1/runs",
      summary: "Start a run from a task file under --tasks-root or an (untrusted) task object",
      body: StartRunRequest,
      headers: { "Idempotency-Key": "a retry with the same key and body gets the first response and starts nothing" },
      responses: {
        201: { description: "the run's record", schema: RunRecordSchema },
        400: problem("a field of the body is wrong (named in errors)"),
        403: problem(
          "the task sets what an API caller may not (hooks, MCP servers, a policy file, paths outside --tasks-root), or asks for more than a --ceiling: the field is named",
        ),
        422: problem("the task is not valid, or its workspace is no repository: every field named"),
        503: problem("Docker or the sandbox image is unusable"),
      },
    },
    async (c, { body }) => {
      const stored = await context.idempotency.run("POST /v1/runs", c.req.header("idempotency-key"), body, async () => {
        const task = body.task_file !== undefined ? taskFromFile(context, body.task_file) : taskFromObject(context, body.task!);
        const handle = await context.runner.startTask(task, { approvals: context.inbox, ...(body.merge ? { merge: true } : {}) }).catch((error: unknown) => {
          throw problemOfError(error);
        });
        adopt(context, handle);
        return { status: 201, body: findRunRecord(context, handle.id) };
      });
      return c.json(RunRecordSchema.parse(stored.body), 201, { location: `/v1/runs/${(stored.body as { id: string }).id}` });
    },
  );

  api.add(
    {
      method: "get",
      path: "/v1/runs",
      summary: "Runs, newest first, paged",
      query: ListRunsQuery,
      responses: { 200: { description: "a page of runs and the cursor of the next", schema: RunListSchema }, 400: problem("a query parameter is wrong") },
    },
    (c, { query }) => {
      const all = visibleRuns(context)
        .filter((run) => query.cursor === undefined || run.id < query.cursor)
        .map((run) => runRecord(context, run))
        .filter((run) => query.status === undefined || run.status === query.status);
      const page = all.slice(0, query.limit);
      return c.json(RunListSchema.parse({ runs: page, next_cursor: all.length > query.limit ? page.at(-1)!.id : null }));
    },
  );

  api.add(
    {
      method: "get",
      path: "/v1/runs/:id",
      summary: "A run's record (with report.json once it ended)",
      params: RunIdParams,
      responses: { 200: { description: "the run's record", schema: RunRecordSchema }, 404: problem("no such run") },
    },
    (c, { params }) => c.json(findRunRecord(context, params.id)),
  );

  api.add(
    {
      method: "get",
      path: "/v1/runs/:id/events",
      summary: "The run's events as Server-Sent Events: id = sequence number, event = CloudEvents type, data = the CloudEvents line; ends with `event: end`",
      params: RunIdParams,
      query: EventsQuery,
      headers: { "Last-Event-ID": "resume after this sequence number (no gap, no duplicate); wins over ?from=" },
      responses: {
        200: { description: "text/event-stream", mediaType: "text/event-stream" },
        400: problem("a bad from or Last-Event-ID"),
        404: problem("no such run"),
      },
    },
    (c, { params, query }) => {
      findRunRecord(context, params.id);
      const from = startSequence(c.req.header("last-event-id"), query.from);
      const events = runEvents(context, params.id, from);
      return events instanceof SharedFrames ? sharedFrameStream(c, events, from) : runEventStream(c, events, from);
    },
  );

  api.add(
    {
      method: "get",
      path: "/v1/runs/:id/event-page",
      summary: "A page of the run's events as JSON, ending before sequence number `before`: how the page loads what scrolled out of its window",
      params: RunIdParams,
      query: EventPageQuery,
      responses: { 200: { description: "events with their sequence numbers", schema: EventPageSchema }, 404: problem("no such run") },
    },
    (c, { params, query }) => {
      findRunRecord(context, params.id);
      const envelopes = readEnvelopes(join(context.runner.home, "runs", params.id, "events.jsonl"));
      const end = Math.min(query.before ?? envelopes.length, envelopes.length);
      const start = Math.max(0, end - query.limit);
      const events = envelopes.slice(start, end).map((event, index) => ({ sequence: start + index, event }));
      return c.json(EventPageSchema.parse({ events, total: envelopes.length }));
    },
  );

  api.add(
    {
      method: "post",
      path: "/v1/runs/:id/cancel",
      summary: "Cancel a run this server runs (as Ctrl-C: status cancelled, partial work committed); answers once it ended",
      params: RunIdParams,
      body: CancelRunRequest,
      responses: {
        200: { description: "cancelled", schema: CancelledSchema },
        404: problem("no such run"),
        409: problem("the run has ended, or another process runs it"),
      },
    },
    async (c, { params, body }) => {
      const handle = context.handles.get(params.id);
      if (!handle) {
        const record = findRunRecord(context, params.id);
        throw new HttpProblem(
          409,
          "Run not cancellable here",
          record.status === "running"
            ? `run ${params.id} is run by another process; stop it there (Ctrl-C, or kill its runner)`
            : `run ${params.id} is not running (status ${record.status}); nothing to cancel`,
        );
      }
      await handle.cancel(body.reason ?? "cancelled through the HTTP API");
      return c.json(CancelledSchema.parse({ id: params.id, status: "cancelled" }));
    },
  );

  api.add(
    {
      method: "post",
      path: "/v1/runs/:id/resume",
      summary: "Continue an interrupted, failed-at-a-limit or errored run (as `runner resume`)",
      params: RunIdParams,
      body: ResumeRunRequest,
      headers: { "Idempotency-Key": "a retry with the same key and body gets the first response" },
      responses: {
        201: { description: "the resumed run's record", schema: RunRecordSchema },
        403: problem(
          "max_steps, max_cost_usd or timeout_sec, or the run's recorded task (`task.<field>`), above the server's --ceiling: the field, the value and the ceiling named",
        ),
        404: problem("no such run"),
        409: problem("the run cannot be resumed (the detail says why and which field to add)"),
      },
    },
    async (c, { params, body }) => {
      const stored = await context.idempotency.run(`POST /v1/runs/${params.id}/resume`, c.req.header("idempotency-key"), body, async () => {
        findRunRecord(context, params.id);
        if (context.handles.has(params.id)) throw new HttpProblem(409, "Run is running", `run ${params.id} is running; nothing to resume`);
        const above = resumeCeilingProblems(body, context.ceilings);
        if (above.length) throw aboveCeiling(above.map((entry) => ({ field: `body.${entry.path}`, message: entry.message })));
        // A run not started under these ceilings (`runner exec`, or before they were lowered) goes on within them only.
        const recorded = recordedTaskCeilingProblems(readRecordedTask(context, params.id), body, context.ceilings, process.env);
        if (recorded.length) throw aboveCeiling(recorded.map((entry) => ({ field: entry.path, message: entry.message })));
        const options = {
          approvals: context.inbox,
          ...(body.max_steps ? { maxSteps: body.max_steps } : {}),
          ...(body.max_cost_usd ? { maxCostUsd: body.max_cost_usd } : {}),
          ...(body.timeout_sec ? { timeoutSec: body.timeout_sec } : {}),
        };
        const handle = await context.runner.resume(params.id, options).catch((error: unknown) => {
          throw problemOfError(error, 409);
        });
        adopt(context, handle);
        return { status: 201, body: findRunRecord(context, handle.id) };
      });
      return c.json(RunRecordSchema.parse(stored.body), 201);
    },
  );

  api.add(
    {
      method: "post",
      path: "/v1/runs/:id/merge",
      summary: "Fast-forward your branch to the run's verified commit (refuses what --merge refuses, with the same reasons)",
      params: RunIdParams,
      responses: {
        200: { description: "merged", schema: MergeOutcomeSchema },
        404: problem("no such run"),
        409: problem("not merged: the detail says why (not verified, your branch moved, uncommitted changes, ...); `merge` holds the outcome"),
      },
    },
    async (c, { params }) => {
      findRunRecord(context, params.id);
      if (context.handles.has(params.id)) throw new HttpProblem(409, "Not merged", `run ${params.id} is still running; merge it once it is verified`);
      const outcome = await context.runner.merge(params.id).catch((error: unknown) => {
        throw problemOfError(error, 409);
      });
      if (!outcome.merged) throw new HttpProblem(409, "Not merged", outcome.detail, { merge: outcome });
      return c.json(MergeOutcomeSchema.parse(outcome));
    },
  );

  api.add(
    {
      method: "get",
      path: "/v1/runs/:id/patch",
      summary: "The run's patch.diff (the run branch against its base)",
      params: RunIdParams,
      responses: { 200: { description: "the diff", mediaType: "text/x-diff" }, 404: problem("no such run, or no patch (yet)") },
    },
    (c, { params }) => runFile(c, context, params.id, "patch.diff", "text/x-diff; charset=utf-8"),
  );

  api.add(
    {
      method: "get",
      path: "/v1/runs/:id/report",
      summary: "The run's report.json",
      params: RunIdParams,
      responses: { 200: { description: "report.json", mediaType: "application/json" }, 404: problem("no such run, or it has not ended") },
    },
    (c, { params }) => runFile(c, context, params.id, "report.json", "application/json"),
  );

  api.add(
    {
      method: "get",
      path: "/v1/approvals",
      summary: "Pending approval questions across runs, oldest first",
      responses: { 200: { description: "pending approvals", schema: ApprovalListSchema } },
    },
    (c) => c.json(ApprovalListSchema.parse({ approvals: context.inbox.pending().map(approvalBody) })),
  );

  api.add(
    {
      method: "post",
      path: "/v1/runs/:id/approvals/:approval_id",
      summary: "Answer a pending approval: allow, allow_always (for this run) or deny",
      params: ApprovalParams,
      body: ApprovalDecisionRequest,
      responses: {
        200: { description: "answered", schema: ApprovalAnsweredSchema },
        404: problem("no such pending approval (answered, timed out, or the run stopped waiting)"),
        409: problem("allow_always for a call the policy does not let be remembered"),
      },
    },
    (c, { params, body }) => {
      const pending = context.inbox.pending(params.id).find((approval) => approval.id === params.approval_id);
      if (!pending)
        throw new HttpProblem(404, "No such approval", `no pending approval ${params.approval_id} for run ${params.id}; GET /v1/approvals lists what waits`);
      if (body.decision === "allow_always" && !pending.request.canRemember) {
        throw new HttpProblem(
          409,
          "Cannot remember",
          `the policy does not let ${pending.request.toolName} be allowed for the whole run; answer allow or deny`,
          {
            errors: [{ field: "body.decision", message: "allow_always is not allowed for this call" }],
          },
        );
      }
      const answer: ApprovalAnswer =
        body.decision === "allow"
          ? { answer: "yes" }
          : body.decision === "allow_always"
            ? { answer: "always" }
            : { answer: "no", ...(body.reason ? { reason: body.reason } : {}) };
      if (!context.inbox.answer(params.approval_id, answer))
        throw new HttpProblem(404, "No such approval", `approval ${params.approval_id} was answered meanwhile`);
      return c.json(ApprovalAnsweredSchema.parse({ id: params.approval_id, run_id: params.id, decision: body.decision }));
    },
  );
}

function runFile(c: Context, context: ServerContext, id: string, file: string, contentType: string): Response {
  const record = findRunRecord(context, id);
  const path = join(context.runner.home, "runs", id, file);
  if (!existsSync(path)) {
    throw new HttpProblem(
      404,
      "Not there",
      record.report
        ? `run ${id} has no ${file} (${file === "patch.diff" ? "nothing was committed" : "it did not write one"})`
        : `run ${id} has not ended; ${file} is written when it does (GET /v1/runs/${id}/events follows it)`,
    );
  }
  return c.body(readFileSync(path), 200, { "content-type": contentType });
}

function taskFromFile(context: ServerContext, file: string): Task {
  const absolute = resolve(context.roots[0] ?? process.cwd(), file);
  if (!context.roots.some((root) => isPathInside(realOrSelf(absolute), realOrSelf(resolve(root))))) {
    throw new HttpProblem(
      403,
      "Task file not allowed",
      context.roots.length === 0
        ? "task_file: this server allows no task files; start it with --tasks-root DIR"
        : `task_file: ${absolute} is outside the allowed roots (${context.roots.join(", ")}); name a task file inside one`,
      { errors: [{ field: "body.task_file", message: "outside every --tasks-root" }] },
    );
  }
  return checkedTask("body.task_file", () => loadUntrustedTaskFile(absolute, context.roots, { rootsOption: "--tasks-root", ceilings: context.ceilings }));
}

function taskFromObject(context: ServerContext, task: Record<string, unknown>): Task {
  const trust = { roots: context.roots, baseDirectory: context.roots[0] ?? process.cwd(), rootsOption: "--tasks-root" };
  const refused = untrustedTaskProblems(task, trust);
  if (refused.length) {
    throw new HttpProblem(403, "Task not allowed", refused.map((entry) => `task.${entry.path}: ${entry.message}`).join("; "), {
      errors: refused.map((entry) => ({ field: `body.task.${entry.path}`, message: entry.message })),
    });
  }
  return checkedTask("body.task", () => validateUntrustedTask(task, trust, { label: "POST /v1/runs", ceilings: context.ceilings }));
}

/** The task `load` makes; its problems as a 403 (a trust rule) or 422 (the schema), each field named under `where`. */
function checkedTask(where: string, load: () => Task): Task {
  try {
    return load();
  } catch (error) {
    if (!(error instanceof TaskValidationError)) throw problemOfError(error);
    const errors = error.problems.map((entry) => ({ field: entry.path ? `${where}.${entry.path}` : where, message: entry.message }));
    if (error instanceof CeilingExceededError) throw aboveCeiling(errors);
    const trust = error.problems.some((entry) => TRUST_FIELDS.has(entry.path) && /not allowed here|only a shipped policy|outside/.test(entry.message));
    throw new HttpProblem(trust ? 403 : 422, trust ? "Task not allowed" : "Invalid task", error.message, { errors });
  }
}

/** Run `id`'s recorded task (task.json), or null when it cannot be read (the resume says why). */
function readRecordedTask(context: ServerContext, id: string): unknown {
  try {
    return JSON.parse(readFileSync(join(context.runner.home, "runs", id, "task.json"), "utf8"));
  } catch {
    return null;
  }
}

/** A 403 for fields above the operator's ceilings, each named with the value asked and the ceiling. */
function aboveCeiling(errors: { field: string; message: string }[]): HttpProblem {
  return new HttpProblem(403, "Above the server's ceiling", errors.map((entry) => `${entry.field}: ${entry.message}`).join("; "), { errors });
}

function realOrSelf(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}
