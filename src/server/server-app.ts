import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Hono, type MiddlewareHandler } from "hono";
import { ApprovalInbox } from "../runner/approval-inbox.js";
import { builtInCeilings, type Ceilings } from "../runner/operator-ceilings.js";
import type { AgencyRunner } from "../agency/agency.js";
import { addAgencyRoutes, visibleAgency } from "./agency-routes.js";
import { ApiRoutes } from "./api-routes.js";
import { HealthSchema } from "./api-schemas.js";
import { requireToken } from "./auth.js";
import { addBatchRoutes } from "./batch-routes.js";
import { BoardStream } from "./event-streams.js";
import { IdempotencyKeys } from "./idempotency.js";
import { addPageRoutes } from "./page-routes.js";
import { HttpProblem, problemOfError, sendProblem } from "./problem.js";
import { addRunRoutes } from "./run-routes.js";
import { approvalBody, publishRun, runRecord, runRefusal, visibleRuns, type ServerContext } from "./server-context.js";

export interface ServerAppOptions {
  /** A Runner that also runs agencies (the library's `createRunner`, src/agency/agency.ts). */
  runner: AgencyRunner;
  /** The token every request but GET /v1/health needs. */
  token: string;
  /** `--tasks-root` directories (task files, task objects' paths, batch directories must lie inside one). */
  tasksRoots?: string[];
  /** How long an approval waits for an answer before the policy's non-interactive answer (a timed-out "no"), ms; default 5 minutes. */
  approvalTimeoutMs?: number;
  /** The operator's ceilings on what callers' tasks and agencies ask for (`--ceiling`); default the built-in ones (docs/security.md "Ceilings"). */
  ceilings?: Ceilings;
}

/** The HTTP app of `runner serve` and what stopping it needs. */
export interface ServerApp {
  app: Hono;
  /** Cancels the runs, batches and agencies this server started and waits until they ended. */
  close(): Promise<void>;
}

/**
 * `runner serve`'s HTTP API and page (issue 23, docs/http-api.md) on a
 * Runner: a front end that keeps no run state of its own (records come from
 * RUNNER_HOME through the Runner's readers; live events from the run
 * handles). Approvals of the runs it starts wait in an {@link ApprovalInbox}
 * for `POST /v1/runs/{id}/approvals/{approval_id}`.
 */
export function createServerApp(options: ServerAppOptions): ServerApp {
  const app = new Hono();
  const board = new BoardStream();
  const stopping = new AbortController();
  const batches = new Set<Promise<unknown>>();
  const context: ServerContext = {
    runner: options.runner,
    handles: new Map(),
    frames: new Map(),
    progress: new Map(),
    agencies: new Map(),
    roots: options.tasksRoots ?? [],
    ceilings: options.ceilings ?? builtInCeilings(),
    board,
    idempotency: new IdempotencyKeys(),
    version: packageVersion(),
    inbox: new ApprovalInbox({
      ...(options.approvalTimeoutMs === undefined ? {} : { timeoutMs: options.approvalTimeoutMs }),
      onChange: (change) => {
        board.publish({ event: `approval.${change.kind}`, data: approvalBody(change.approval) });
        publishRun(context, change.approval.request.runId);
      },
    }),
  };
  app.onError((error, c) => {
    const problem = error instanceof HttpProblem ? error : problemOfError(error);
    return sendProblem(c, problem);
  });
  app.notFound((c) =>
    sendProblem(c, new HttpProblem(404, "Not found", `no route ${c.req.method} ${new URL(c.req.url).pathname}; GET /v1/openapi.json lists the API`)),
  );
  app.use("*", async (c, next) => {
    await next();
    c.header("x-content-type-options", "nosniff");
    c.header("referrer-policy", "no-referrer");
    if (!c.res.headers.has("content-security-policy")) c.header("content-security-policy", PAGE_CSP);
    if (!c.res.headers.has("cache-control")) c.header("cache-control", "no-store");
  });
  app.use("*", requireToken(options.token));
  // A run's routes serve only runs a caller could have started: not the user's own runs elsewhere in RUNNER_HOME.
  const visibleRun: MiddlewareHandler = async (c, next) => {
    const id = c.req.param("id");
    if (id && /^[\w.-]+$/.test(id) && existsSync(join(context.runner.home, "runs", id))) {
      const refusal = runRefusal(context, id);
      if (refusal) throw new HttpProblem(403, "Run not available", `run ${id} is not one this server's callers may use: ${refusal} (--tasks-root)`);
    }
    await next();
  };
  app.use("/v1/runs/:id", visibleRun);
  app.use("/v1/runs/:id/*", visibleRun);
  app.use("/v1/agencies/:id", visibleAgency(context));
  app.use("/v1/agencies/:id/*", visibleAgency(context));

  const api = new ApiRoutes(app);
  api.add(
    {
      method: "get",
      path: "/v1/health",
      summary: "Liveness; the only route without a token",
      public: true,
      responses: { 200: { description: "ok", schema: HealthSchema } },
    },
    (c) => c.json(HealthSchema.parse({ status: "ok", version: context.version })),
  );
  addRunRoutes(api, context);
  addBatchRoutes(api, context, stopping.signal, batches);
  addAgencyRoutes(api, context);
  api.add(
    {
      method: "get",
      path: "/v1/events",
      summary:
        "The runs board's stream (SSE): `snapshot` (runs and pending approvals) first, then `run` and `approval.requested`/`approval.resolved` as they happen",
      responses: { 200: { description: "text/event-stream", mediaType: "text/event-stream" } },
    },
    (c) =>
      board.respond(c, () => ({
        runs: visibleRuns(context)
          .slice(0, 200)
          .map((run) => runRecord(context, run)),
        approvals: context.inbox.pending().map(approvalBody),
      })),
  );
  api.add(
    { method: "get", path: "/v1/openapi.json", summary: "This document", responses: { 200: { description: "OpenAPI 3.1", mediaType: "application/json" } } },
    (c) => c.json(api.document(context.version)),
  );
  addPageRoutes(app, context);

  return {
    app,
    async close() {
      stopping.abort();
      await Promise.all([
        ...[...context.handles.values()].map((handle) => handle.cancel("the server stopped")),
        ...[...context.agencies.values()].map((agency) => agency.cancel()),
      ]);
      await Promise.all([...batches]);
    },
  };
}

/**
 * The CSP of every answer: nothing but this origin's own files; no inline
 * script, no eval, no framing, no form posts elsewhere. Styles may be inline
 * only as attributes diff2html writes (`'unsafe-inline'` for style alone).
 */
const PAGE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-src 'self'; frame-ancestors 'none'";

function packageVersion(): string {
  return (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;
}
