import { existsSync, readdirSync, readFileSync, realpathSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { buildBatchReport, type BatchReport } from "../batch/batch-report.js";
import { BatchDirectory, type BatchPlan } from "../batch/batch-state.js";
import { discoverTasks, parseFilter, selectTasks } from "../batch/discover-tasks.js";
import { runBatch } from "../batch/run-batch.js";
import { ConfigError } from "../errors.js";
import { isPathInside } from "../process/path-inside.js";
import { newRunId } from "../run/run-id.js";
import { batchCeilingProblems } from "../runner/operator-ceilings.js";
import { loadUntrustedTaskFile } from "../runner/untrusted-task.js";
import { BatchIdParams, BatchListSchema, BatchSummarySchema, ProblemSchema, StartBatchRequest } from "./api-schemas.js";
import type { ApiRoutes } from "./api-routes.js";
import { HttpProblem, problemOfError } from "./problem.js";
import type { ServerContext } from "./server-context.js";

const problem = (description: string) => ({ description, schema: ProblemSchema });

/**
 * `/v1/batches…` (docs/http-api.md): a batch of the task files under a
 * `--tasks-root` directory, run on the server's Runner as `runner batch run`
 * runs it (same records under `$RUNNER_HOME/batches/<id>/`), in the
 * background until it ends or the server stops (then it is interrupted and
 * `runner batch resume <id>` continues it). Every task file is checked as
 * untrusted (src/runner/untrusted-task.ts); task lists in JSONL are refused.
 */
export function addBatchRoutes(api: ApiRoutes, context: ServerContext, signal: AbortSignal, running: Set<Promise<unknown>>): void {
  api.add(
    {
      method: "post",
      path: "/v1/batches",
      summary: "Start a batch of the task files under a directory inside --tasks-root",
      body: StartBatchRequest,
      headers: { "Idempotency-Key": "a retry with the same key and body gets the first response and starts nothing" },
      responses: {
        201: { description: "the batch", schema: BatchSummarySchema },
        400: problem("a field of the body is wrong"),
        403: problem("the path is outside --tasks-root, or a task sets what an API caller may not or asks for more than a --ceiling"),
        422: problem("a task is not valid (every problem named)"),
      },
    },
    async (c, { body }) => {
      const stored = await context.idempotency.run("POST /v1/batches", c.req.header("idempotency-key"), body, async () => {
        const above = batchCeilingProblems(body.jobs, context.ceilings).map((entry) => ({ field: `body.${entry.path}`, message: entry.message }));
        if (above.length)
          throw new HttpProblem(403, "Above the server's ceiling", above.map((entry) => `${entry.field}: ${entry.message}`).join("; "), { errors: above });
        const input = resolve(context.roots[0] ?? process.cwd(), body.path);
        if (!context.roots.some((root) => isPathInside(realOrSelf(input), realOrSelf(resolve(root))))) {
          throw new HttpProblem(
            403,
            "Path not allowed",
            `path: ${input} is outside the allowed roots (${context.roots.join(", ") || "none: start the server with --tasks-root DIR"})`,
            {
              errors: [{ field: "body.path", message: "outside every --tasks-root" }],
            },
          );
        }
        // Only a directory or a glob: a list file (or JSONL) would name files anywhere on the host.
        if (existsSync(input) && !statSync(input).isDirectory()) {
          throw new HttpProblem(
            403,
            "Task list not allowed",
            "path: task lists (list files, JSONL) are not accepted through the API; give a directory of task files or a glob",
            {
              errors: [{ field: "body.path", message: "not a directory or a glob" }],
            },
          );
        }
        const roots = context.roots.map((root) => realOrSelf(resolve(root)));
        // Every task file's real path must be inside a root before anything reads it (a task.yaml may be a link out).
        const acceptFile = (file: string): string | null => {
          let real: string;
          try {
            real = realpathSync.native(file);
          } catch {
            return "refused: its real path cannot be resolved";
          }
          return roots.some((root) => isPathInside(real, root)) ? null : "refused: the task file's real path is outside every --tasks-root";
        };
        const discovered = await discoverTasks(input, process.cwd(), { acceptFile }).catch((error: unknown) => {
          throw problemOfError(error);
        });
        let selected = discovered.tasks;
        try {
          selected = selectTasks(discovered.tasks, {
            ...(body.filter ? { filter: parseFilter(body.filter) } : {}),
            ...(body.limit ? { limit: body.limit } : {}),
          });
        } catch (error) {
          throw problemOfError(error, 400);
        }
        if (selected.length === 0) throw new HttpProblem(422, "No tasks", `filter: matches none of the ${discovered.tasks.length} task ids`);
        for (const task of selected) {
          if (discovered.kind === "jsonl") {
            throw new HttpProblem(403, "Task list not allowed", "path: JSONL task lists are not accepted through the API; give a directory of task files");
          }
          try {
            // The task as checked, within the ceilings, is the one the batch runs.
            task.task = loadUntrustedTaskFile(task.task_file, context.roots, { rootsOption: "--tasks-root", ceilings: context.ceilings });
          } catch (error) {
            if (error instanceof ConfigError)
              throw new HttpProblem(403, "Task not allowed", error.message, { errors: [{ field: "body.path", message: `${task.id}: refused` }] });
            throw error;
          }
        }
        const plan: BatchPlan = {
          batch_id: newRunId(),
          created_at: new Date().toISOString(),
          input: { path: input, kind: discovered.kind, root: discovered.root },
          options: {
            jobs: body.jobs,
            attempts: body.attempts,
            retries: body.retries,
            min_pass_rate: body.min_pass_rate,
            max_errors: body.max_errors,
            filter: body.filter ?? null,
            shard: null,
            limit: body.limit ?? null,
            junit: null,
            summary: null,
          },
          tasks: selected,
          discovered: discovered.tasks.length,
        };
        const directory = BatchDirectory.of(context.runner.home, plan.batch_id);
        directory.create(plan);
        const batch = runBatch(
          {
            home: context.runner.home,
            startTask: (task, options) => context.runner.startTask(task, options),
            resume: (id, options) => context.runner.resume(id, options),
          },
          directory,
          signal,
        ).catch(() => undefined);
        running.add(batch);
        void batch.finally(() => running.delete(batch));
        return { status: 201, body: batchSummary(context, plan.batch_id, false) };
      });
      return c.json(BatchSummarySchema.parse(stored.body), 201);
    },
  );

  api.add(
    { method: "get", path: "/v1/batches", summary: "Batches, newest first", responses: { 200: { description: "batches", schema: BatchListSchema } } },
    (c) => {
      const root = resolve(context.runner.home, "batches");
      const ids = existsSync(root)
        ? readdirSync(root)
            .filter((id) => /^[\w.-]+$/.test(id))
            .sort()
            .reverse()
        : [];
      return c.json(BatchListSchema.parse({ batches: ids.flatMap((id) => summaryOrNone(context, id)) }));
    },
  );

  api.add(
    {
      method: "get",
      path: "/v1/batches/:id",
      summary: "A batch with its batch-report.json (built from its journal while it runs)",
      params: BatchIdParams,
      responses: { 200: { description: "the batch", schema: BatchSummarySchema }, 404: problem("no such batch") },
    },
    (c, { params }) => c.json(BatchSummarySchema.parse(batchSummary(context, params.id, true))),
  );

  api.add(
    {
      method: "get",
      path: "/v1/batches/:id/report.html",
      summary: "The batch's report.html (self-contained; served with a CSP of its own)",
      params: BatchIdParams,
      responses: { 200: { description: "report.html", mediaType: "text/html" }, 404: problem("no such batch, or no report yet") },
    },
    (c, { params }) => {
      const file = BatchDirectory.of(context.runner.home, params.id).file("report.html");
      if (!existsSync(file)) throw new HttpProblem(404, "Not there", `batch ${params.id} has no report.html yet; it is written as attempts finish`);
      // The report is self-contained (inline style and its filter script) and shows untrusted text escaped; nothing else may load or run.
      return c.body(readFileSync(file), 200, {
        "content-type": "text/html; charset=utf-8",
        "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:; frame-ancestors 'self'",
      });
    },
  );
}

function summaryOrNone(context: ServerContext, id: string) {
  try {
    return [batchSummary(context, id, false)];
  } catch {
    return [];
  }
}

function batchSummary(context: ServerContext, id: string, withReport: boolean) {
  const directory = BatchDirectory.of(context.runner.home, id);
  let report: BatchReport;
  const file = directory.file("batch-report.json");
  try {
    report = existsSync(file)
      ? (JSON.parse(readFileSync(file, "utf8")) as BatchReport)
      : buildBatchReport(directory.readPlan(), directory.readJournal(), context.runner.home, { ended: false, interrupted: false, skipReason: "not_run" });
  } catch {
    throw new HttpProblem(404, "No such batch", `no batch ${id} in ${context.runner.home}/batches; GET /v1/batches lists them`);
  }
  return {
    id,
    status: report.status,
    created_at: report.created_at ?? null,
    tasks: report.tasks.length,
    report: withReport ? (report as unknown as Record<string, unknown>) : null,
  };
}

function realOrSelf(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}
