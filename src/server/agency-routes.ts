import { existsSync, readdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { HTTP, ValidationError, type CloudEventV1 } from "cloudevents";
import type { Context, MiddlewareHandler } from "hono";
import { AgencyBus } from "../agency/agency-bus.js";
import { AgencyDirectory } from "../agency/agency-directory.js";
import { agencyEvent } from "../agency/agency-event.js";
import { agencyRunning } from "../agency/agency-log.js";
import type { AgencyHandle, OutsideEvent } from "../agency/agency.js";
import { AgencyFileError } from "../agency/load-agency.js";
import { checkAgencyEvent } from "../bus/agency-event.js";
import { EventRejectedError, type AgencyEvent } from "../bus/event-bus.js";
import { ConfigError } from "../errors.js";
import { recordedAgencyCeilingProblems } from "../runner/operator-ceilings.js";
import {
  AgencyEventAcceptedSchema,
  AgencyIdParams,
  AgencyListSchema,
  AgencyRecordSchema,
  EventsQuery,
  ListAgenciesQuery,
  ProblemSchema,
  StartAgencyRequest,
  type AgencyRecordBody,
} from "./api-schemas.js";
import type { ApiRoutes } from "./api-routes.js";
import { runEventStream, startSequence } from "./event-streams.js";
import { HttpProblem, problemOfError } from "./problem.js";
import { agencyRefusal, type ServerContext } from "./server-context.js";
import { readUntrustedAgency, type AgencyTrustProblem } from "./untrusted-agency.js";

const problem = (description: string) => ({ description, schema: ProblemSchema });

/** Bytes of a CloudEvent request body at most: 16 KiB of data (the bus's limit) and room for its attributes. */
const MAX_EVENT_BODY_BYTES = 64 * 1024;

/** How long an event sent to an agency run by another process waits for that process to take it from the bus's inbox, ms. */
const PUBLISH_TIMEOUT_MS = 30_000;

/** While following an agency another process runs: how often to look whether that process still lives, ms. */
const OWNER_CHECK_MS = 1_000;

/**
 * `/v1/agencies…` (docs/http-api.md "Agencies"): start an agency from an
 * agency.yaml under `--tasks-root` or an agency object (untrusted: every
 * agent as a task object, src/server/untrusted-agency.ts), list and read
 * agencies, follow an agency's bus as SSE, and publish an outside event into
 * it as a CloudEvent in the HTTP binding's structured or binary mode (read
 * with the `cloudevents` package), so a webhook relay or a CI job can start a
 * pipeline. Agencies run on the server's Runner (`runner.agency`), their
 * records in `$RUNNER_HOME/agencies/<id>/` as `runner agency run` writes them.
 */
export function addAgencyRoutes(api: ApiRoutes, context: ServerContext): void {
  // Agencies being resumed for an event: a second event meanwhile finds the agency running, not resumable.
  const resuming = new Map<string, Promise<boolean>>();

  /**
   * Why the caller may not resume the agency of `directory` (null: it may): its recorded definition above the
   * server's ceilings, which an agency not started under them (`runner agency run`, or before they were lowered) can be.
   */
  const ceilingRefusal = (directory: AgencyDirectory): HttpProblem | null => {
    const errors = recordedAgencyCeilingProblems(directory.readRecord().definition, context.ceilings).map((problem) => ({
      field: `agency.${problem.path}`,
      message: problem.message,
    }));
    if (!errors.length) return null;
    return new HttpProblem(
      403,
      "Above the server's ceiling",
      `the agency would be resumed to take the event, and its recorded definition is above this server's ceilings: ${errors.map((entry) => `${entry.field}: ${entry.message}`).join("; ")}`,
      { errors },
    );
  };

  /** Resumes agency `id` when no process runs it (true), adopting its handle; a resume under way is awaited. */
  const resumeIdle = (id: string, directory: AgencyDirectory): Promise<boolean> => {
    const under = resuming.get(id);
    if (under) return under;
    if (context.agencies.has(id) || agencyRunning(directory.path)) return Promise.resolve(false);
    const above = ceilingRefusal(directory);
    if (above) return Promise.reject(above);
    const resumed = context.runner
      .resumeAgency(id, { approvals: context.inbox })
      .then((handle) => (adoptAgency(context, handle), true))
      .catch((error: unknown) => Promise.reject(problemOfError(error, 409)))
      .finally(() => resuming.delete(id));
    resuming.set(id, resumed);
    return resumed;
  };

  /**
   * Stores `event` in the agency's bus as `runner agency publish` does: straight into the log of an idle agency,
   * through the inbox of a running one. An agency this server runs that ends before it took the event from its
   * inbox is resumed (its bus takes the inbox when it opens); another process has {@link PUBLISH_TIMEOUT_MS}.
   */
  const publishOutside = async (id: string, directory: AgencyDirectory, event: AgencyEvent): Promise<number> => {
    const timeout = AbortSignal.timeout(PUBLISH_TIMEOUT_MS);
    try {
      checkAgencyEvent(event);
      const publishing = AgencyBus.of(directory).publish(event, { signal: timeout });
      for (;;) {
        const handle = context.agencies.get(id);
        if (!handle) return await publishing;
        const first = await Promise.race([
          publishing,
          handle.result.then(
            () => null,
            () => null,
          ),
        ]);
        if (first !== null) return first;
        if (context.agencies.get(id) === handle) context.agencies.delete(id);
        await resumeIdle(id, directory);
      }
    } catch (error) {
      if (error instanceof EventRejectedError) {
        const tooLarge = error.reason === "too_large";
        throw new HttpProblem(tooLarge ? 413 : 400, tooLarge ? "Event too large" : "Invalid event", error.message, {
          errors: [{ field: tooLarge ? "data" : "event", message: error.message }],
        });
      }
      if (timeout.aborted) {
        throw new HttpProblem(
          503,
          "Agency busy",
          `the process running agency ${id} did not take the event within ${PUBLISH_TIMEOUT_MS / 1000} s; send it again (the same id is stored once)`,
        );
      }
      throw error;
    }
  };
  api.add(
    {
      method: "post",
      path: "/v1/agencies",
      summary: "Start an agency from an agency.yaml under --tasks-root or an (untrusted) agency object",
      body: StartAgencyRequest,
      headers: { "Idempotency-Key": "a retry with the same key and body gets the first response and starts nothing" },
      responses: {
        201: { description: "the agency's record", schema: AgencyRecordSchema },
        400: problem("a field of the body is wrong"),
        403: problem(
          "the agency or an agent sets what an API caller may not, names a path outside --tasks-root, or asks for more than a --ceiling: file and field named",
        ),
        422: problem("the agency's files are not valid: every file and field named"),
        503: problem("Docker or the sandbox image is unusable"),
      },
    },
    async (c, { body }) => {
      const stored = await context.idempotency.run("POST /v1/agencies", c.req.header("idempotency-key"), body, async () => {
        if (context.roots.length === 0) {
          throw new HttpProblem(403, "Agency not allowed", "this server allows no agencies; start it with --tasks-root DIR", {
            errors: [{ field: body.agency_file !== undefined ? "body.agency_file" : "body.agency", message: "no --tasks-root" }],
          });
        }
        if (body.event?.type.startsWith("agency.")) throw orchestratorType("body.event.type");
        const agencyFile = body.agency_file === undefined ? null : resolve(context.roots[0]!, body.agency_file);
        const source = agencyFile === null ? { object: body.agency! } : { file: agencyFile };
        const checked = readUntrustedAgency(source, context.roots, context.ceilings);
        const name = (entry: AgencyTrustProblem) => fieldName(entry, agencyFile === null ? "body.agency" : "body.agency_file");
        if (checked.refused.length) {
          throw new HttpProblem(403, "Agency not allowed", checked.refused.map((entry) => `${name(entry)}: ${entry.message}`).join("; "), {
            errors: checked.refused.map((entry) => ({ field: name(entry), message: entry.message })),
          });
        }
        if (checked.unreadable.length) {
          throw new HttpProblem(422, "Invalid agency", checked.unreadable.map((entry) => `${name(entry)}: ${entry.message}`).join("; "), {
            errors: checked.unreadable.map((entry) => ({ field: name(entry), message: entry.message })),
          });
        }
        const event = body.event ? outsideEvent(body.event) : undefined;
        const handle = await context.runner
          .agency(checked.object, { baseDirectory: checked.baseDirectory, approvals: context.inbox, ...(event ? { event } : {}) })
          .catch((error: unknown) => {
            if (!(error instanceof AgencyFileError)) throw problemOfError(error);
            // The agency labels its object `agency` and inline agents `agency.agents[n]`: name the caller's files instead.
            const where = (file: string): string =>
              file === "agency" ? (agencyFile ?? "body.agency") : (checked.labels[Number(/\[(\d+)\]$/.exec(file)?.[1])] ?? file);
            const errors = error.problems.map((entry) => ({
              field: fieldName({ where: where(entry.file), field: entry.field }, "body.agency"),
              message: entry.message,
            }));
            throw new HttpProblem(422, "Invalid agency", errors.map((entry) => `${entry.field}: ${entry.message}`).join("; "), { errors });
          });
        adoptAgency(context, handle);
        return { status: 201, body: await agencyRecord(context, handle.id) };
      });
      return c.json(AgencyRecordSchema.parse(stored.body), 201, { location: `/v1/agencies/${(stored.body as { id: string }).id}` });
    },
  );

  api.add(
    {
      method: "get",
      path: "/v1/agencies",
      summary: "Agencies, newest first, paged",
      query: ListAgenciesQuery,
      responses: { 200: { description: "a page of agencies and the cursor of the next", schema: AgencyListSchema } },
    },
    async (c, { query }) => {
      const ids = visibleAgencies(context).filter((id) => query.cursor === undefined || id < query.cursor);
      const page = ids.slice(0, query.limit);
      const agencies = await Promise.all(page.map((id) => agencyRecord(context, id)));
      return c.json(AgencyListSchema.parse({ agencies, next_cursor: ids.length > query.limit ? page.at(-1)! : null }));
    },
  );

  api.add(
    {
      method: "get",
      path: "/v1/agencies/:id",
      summary: "An agency's record: status, invocations with their runs, agency-report.json once it ended",
      params: AgencyIdParams,
      responses: { 200: { description: "the agency's record", schema: AgencyRecordSchema }, 404: problem("no such agency") },
    },
    async (c, { params }) => c.json(await agencyRecord(context, params.id)),
  );

  api.add(
    {
      method: "get",
      path: "/v1/agencies/:id/events",
      summary:
        "The agency's bus as Server-Sent Events: id = sequence number, event = CloudEvents type, data = the CloudEvent; ends with `event: end` when the agency ends",
      params: AgencyIdParams,
      query: EventsQuery,
      headers: { "Last-Event-ID": "resume after this sequence number (no gap, no duplicate); wins over ?from=" },
      responses: {
        200: { description: "text/event-stream", mediaType: "text/event-stream" },
        400: problem("a bad from or Last-Event-ID"),
        404: problem("no such agency"),
      },
    },
    (c, { params, query }) => {
      const directory = existingAgency(context, params.id);
      const from = startSequence(c.req.header("last-event-id"), query.from);
      return runEventStream(c, agencyEvents(context, params.id, directory, from), from);
    },
  );

  api.add(
    {
      method: "post",
      path: "/v1/agencies/:id/events",
      summary:
        "Publish an outside event into the agency: a CloudEvent in the HTTP binding's structured mode (Content-Type: application/cloudevents+json) or binary mode (ce-* headers, the body its data)",
      params: AgencyIdParams,
      rawBody: {
        description: "a CloudEvent (HTTP protocol binding 1.0): structured or binary mode; at most 64 KiB, data at most 16 KiB",
        mediaTypes: ["application/cloudevents+json", "application/json"],
      },
      responses: {
        202: {
          description: "stored in the agency's log (a redelivered id: the earlier event's sequence); an agency not running anywhere is resumed to handle it",
          schema: AgencyEventAcceptedSchema,
        },
        400: problem("not a valid CloudEvent (the attribute is named)"),
        403: problem("an agency.* type (the orchestrator's own) or an agent-runner:// source"),
        404: problem("no such agency"),
        413: problem("the body is over 64 KiB, or data over 16 KiB"),
        409: problem("the agency could not be resumed (the detail says why)"),
        415: problem("a batch (application/cloudevents-batch+json), or data that is not JSON or text"),
      },
    },
    async (c, { params }) => {
      const directory = existingAgency(context, params.id);
      const received = await readCloudEvent(c);
      if (received.type.startsWith("agency.")) throw orchestratorType("type");
      if (received.source.startsWith("agent-runner://")) {
        throw new HttpProblem(
          403,
          "Source not allowed",
          "source: agent-runner:// sources are the agency's own; give your system's source, like https://ci.example.com/pipelines",
          {
            errors: [{ field: "source", message: "agent-runner:// is the agency's own" }],
          },
        );
      }
      const record = directory.readRecord();
      // An idle agency is resumed to take the event: refuse before it is stored when that resume would be refused.
      if (!context.agencies.has(params.id) && !agencyRunning(directory.path)) {
        const above = ceilingRefusal(directory);
        if (above) throw above;
      }
      const fields: OutsideEvent & { time?: Date } = {
        type: received.type,
        id: received.id,
        ...(received.subject === undefined ? {} : { subject: received.subject }),
        ...(received.data === undefined ? {} : { data: received.data }),
        ...(typeof received.dataref === "string" ? { dataref: received.dataref } : {}),
        ...(received.time === undefined ? {} : { time: new Date(received.time) }),
      };
      const event = agencyEvent({ agencyId: record.agency_id, traceId: record.trace_id }, { kind: "outside", source: received.source }, fields);
      const stored = await AgencyBus.of(directory, record).count();
      const sequence = await publishOutside(params.id, directory, event);
      // An agency that is not running anywhere is resumed to handle a new event (not a redelivery): so an event starts the pipeline again.
      const resumed = sequence >= stored && (await resumeIdle(params.id, directory));
      return c.json(AgencyEventAcceptedSchema.parse({ agency_id: record.agency_id, id: event.id, type: event.type, sequence, resumed }), 202);
    },
  );
}

/** The agency routes' guard: they serve only agencies a caller could have started, not the user's own agencies elsewhere (403). */
export function visibleAgency(context: ServerContext): MiddlewareHandler {
  return async (c, next) => {
    const id = c.req.param("id");
    if (id && /^[\w.-]+$/.test(id) && existsSync(join(context.runner.home, "agencies", id, "agency.json"))) {
      const refusal = agencyRefusal(context, id);
      if (refusal) throw new HttpProblem(403, "Agency not available", `agency ${id} is not one this server's callers may use: ${refusal} (--tasks-root)`);
    }
    await next();
  };
}

/** Keeps `handle` until its agency ends (what live events and stopping the server need). */
function adoptAgency(context: ServerContext, handle: AgencyHandle): void {
  context.agencies.set(handle.id, handle);
  void handle.result.catch(() => undefined).finally(() => context.agencies.delete(handle.id));
}

/** The agencies of RUNNER_HOME the server's callers may use, newest first (ids begin with their start time). */
function visibleAgencies(context: ServerContext): string[] {
  const root = join(context.runner.home, "agencies");
  if (!existsSync(root)) return [];
  return readdirSync(root)
    .filter((id) => existsSync(join(root, id, "agency.json")) && agencyRefusal(context, id) === null)
    .sort()
    .reverse();
}

function existingAgency(context: ServerContext, id: string): AgencyDirectory {
  try {
    return AgencyDirectory.existing(context.runner.home, id);
  } catch (error) {
    if (error instanceof ConfigError)
      throw new HttpProblem(404, "No such agency", `no agency ${id} in ${context.runner.home}/agencies; GET /v1/agencies lists them`);
    throw error;
  }
}

/** The agency's record (see AgencyRecordSchema); a 404 problem for an unknown agency. */
async function agencyRecord(context: ServerContext, id: string): Promise<AgencyRecordBody> {
  const directory = existingAgency(context, id);
  const record = directory.readRecord();
  const running = context.agencies.has(id) || agencyRunning(directory.path);
  const report = running ? null : directory.readReport();
  return AgencyRecordSchema.parse({
    id: record.agency_id,
    name: record.definition.name,
    status: running ? "running" : (report?.status ?? "unfinished"),
    reason: report?.reason ?? null,
    goal: record.definition.goal,
    branch: record.branch,
    created_at: record.created_at,
    events: report?.events ?? (await AgencyBus.of(directory, record).count()),
    invocations: report ? report.invocations : [...directory.readInvocations().values()],
    report: report as Record<string, unknown> | null,
  });
}

/** The agency's events from `from`: the live handle's when this server runs it; else its log, followed while another process runs it. */
async function* agencyEvents(context: ServerContext, id: string, directory: AgencyDirectory, from: number): AsyncGenerator<AgencyEvent> {
  const handle = context.agencies.get(id);
  if (handle) {
    yield* handle.events({ from });
    return;
  }
  const owner = new AbortController();
  const check = setInterval(() => {
    if (!agencyRunning(directory.path)) owner.abort();
  }, OWNER_CHECK_MS);
  let next = from;
  const bus = AgencyBus.of(directory);
  try {
    if (agencyRunning(directory.path)) {
      for await (const stored of bus.read({ from, follow: true, signal: owner.signal })) {
        next = stored.sequence + 1;
        yield stored.event;
      }
    }
  } finally {
    clearInterval(check);
  }
  for await (const stored of bus.read({ from: next, follow: false })) yield stored.event;
}

/** The request's CloudEvent (structured or binary mode, by the `cloudevents` package), validated; problems name the attribute. */
async function readCloudEvent(c: Context): Promise<CloudEventV1<unknown>> {
  const length = Number(c.req.header("content-length") ?? 0);
  const bytes = length > MAX_EVENT_BODY_BYTES ? null : new Uint8Array(await c.req.arrayBuffer());
  if (!bytes || bytes.length > MAX_EVENT_BODY_BYTES) {
    throw new HttpProblem(413, "Event too large", `the body is over ${MAX_EVENT_BODY_BYTES} bytes; keep data to 16 KiB and name larger data in a dataref`);
  }
  const headers = c.req.header();
  if ((headers["content-type"] ?? "").startsWith("application/cloudevents-batch")) {
    throw new HttpProblem(415, "Batch not accepted", "send one CloudEvent a request (structured or binary mode), not a batch");
  }
  let received: CloudEventV1<unknown> | CloudEventV1<unknown>[];
  try {
    received = HTTP.toEvent({ headers, body: new TextDecoder().decode(bytes) });
    if (Array.isArray(received)) throw new ValidationError("a batch of events; send one CloudEvent a request");
    // The binding builds the event unchecked; validate() checks the attributes against CloudEvents 1.0.
    (received as unknown as { validate(): boolean }).validate();
  } catch (error) {
    if (!(error instanceof ValidationError) && !(error instanceof SyntaxError)) throw error;
    const details = error instanceof ValidationError && Array.isArray(error.errors) ? error.errors.map(String).join("; ") : "";
    throw new HttpProblem(
      400,
      "Invalid CloudEvent",
      `not a CloudEvent: ${error.message}${details ? ` (${details})` : ""}; send Content-Type: application/cloudevents+json with the event as JSON, or ce-specversion, ce-id, ce-source and ce-type headers with the data as the body`,
      { errors: [{ field: "body", message: error.message }] },
    );
  }
  if (received.specversion !== "1.0") {
    throw new HttpProblem(400, "Invalid CloudEvent", `specversion: expected 1.0, got ${JSON.stringify(received.specversion)}`, {
      errors: [{ field: "specversion", message: "expected 1.0" }],
    });
  }
  const data = received.data as unknown;
  if (data instanceof Uint8Array || data instanceof Uint32Array || Buffer.isBuffer(data) || received.data_base64 !== undefined) {
    throw new HttpProblem(415, "Data not accepted", "data: binary data is not accepted; send JSON (datacontenttype application/json) or text", {
      errors: [{ field: "data", message: "binary" }],
    });
  }
  return received;
}

function outsideEvent(event: {
  type: string;
  subject?: string | undefined;
  data?: unknown;
  dataref?: string | undefined;
  id?: string | undefined;
}): OutsideEvent {
  return {
    type: event.type,
    ...(event.subject === undefined ? {} : { subject: event.subject }),
    ...(event.data === undefined ? {} : { data: event.data }),
    ...(event.dataref === undefined ? {} : { dataref: event.dataref }),
    ...(event.id === undefined ? {} : { id: event.id }),
  };
}

function orchestratorType(field: string): HttpProblem {
  return new HttpProblem(403, "Event type not allowed", `${field}: agency.* events are the orchestrator's own; use another prefix, like ci.build.failed`, {
    errors: [{ field, message: "agency.* is the orchestrator's own" }],
  });
}

/** A problem's field for the caller: `body.agency.agents.0.agent.hooks` for objects, `<file>: agent.hooks` for files. */
function fieldName(entry: { where: string; field: string }, fallback: string): string {
  const where = entry.where || fallback;
  if (where.startsWith("body.")) return entry.field ? `${where}.${entry.field}` : where;
  return entry.field ? `${where}: ${entry.field}` : where;
}
