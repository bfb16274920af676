/**
 * The HTTP API's request and response bodies (docs/http-api.md), as zod
 * schemas: requests are parsed with them, responses checked against them,
 * and /v1/openapi.json is generated from them (src/server/openapi.ts).
 */
import { z } from "zod";

/** RFC 9457 problem details, with `errors` naming each bad field. */
export const ProblemSchema = z
  .object({
    type: z.string(),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    instance: z.string(),
    errors: z.array(z.object({ field: z.string(), message: z.string() })).optional(),
    reason: z.string().optional(),
  })
  .loose();
export type Problem = z.infer<typeof ProblemSchema>;

const runId = z.string().regex(/^[\w.-]+$/, "a run id as POST /v1/runs or `runner runs` gives it");

export const RunIdParams = z.object({ id: runId });
export const ApprovalParams = z.object({ id: runId, approval_id: z.string().min(1) });
export const BatchIdParams = z.object({ id: z.string().regex(/^[\w.-]+$/, "a batch id as POST /v1/batches gives it") });

/** `status` of a run record: report.json's, or `running` (its runner lives) / `unfinished` (it died; `…/resume` continues it). */
const RunStatusSchema = z.enum(["running", "unfinished", "succeeded", "failed", "error", "cancelled"]);

export const StartRunRequest = z
  .object({
    task_file: z.string().min(1).optional().describe("a task.yaml under one of the server's --tasks-root directories"),
    task: z
      .record(z.string(), z.unknown())
      .optional()
      .describe("a task object (task.yaml's schema); untrusted: no hooks, MCP servers or policy, paths only under --tasks-root"),
    merge: z.boolean().optional().describe("fast-forward your branch after a verified success (as --merge)"),
  })
  .strict()
  .refine((body) => (body.task_file === undefined) !== (body.task === undefined), {
    message: "give exactly one of task_file (a path under --tasks-root) or task (a task object)",
  });

export const ResumeRunRequest = z
  .object({
    max_steps: z.number().int().positive().optional().describe("that many more model calls"),
    max_cost_usd: z.number().positive().optional().describe("that many more USD"),
    timeout_sec: z.number().int().positive().optional().describe("this attempt's wall-clock limit, seconds"),
  })
  .strict();

export const CancelRunRequest = z.object({ reason: z.string().max(500).optional() }).strict();

export const RunRecordSchema = z.object({
  id: z.string(),
  task: z.string(),
  status: RunStatusSchema,
  branch: z
    .string()
    .describe(
      "the run branch, `runner/<task-name>-<short-id>` (runs of older versions: `runner/<run-id>`); `-` before it existed or when the run changed nothing",
    ),
  started_at: z.string().describe("ISO 8601"),
  steps: z.number().int().nullable().describe("model calls (from report.json; null while running)"),
  cost_usd: z.number().nullable().describe("USD (from report.json; null while running or unpriced)"),
  pending_approvals: z.number().int(),
  report: z.record(z.string(), z.unknown()).nullable().describe("report.json once the run ended"),
});
export type RunRecordBody = z.infer<typeof RunRecordSchema>;

export const ListRunsQuery = z
  .object({
    status: RunStatusSchema.optional(),
    cursor: z.string().optional().describe("next_cursor of the previous page"),
    limit: z.coerce.number().int().min(1).max(200).default(50),
  })
  .strict();

export const RunListSchema = z.object({ runs: z.array(RunRecordSchema), next_cursor: z.string().nullable() });

export const EventsQuery = z
  .object({ from: z.coerce.number().int().min(0).optional().describe("sequence number to start from (the Last-Event-ID header wins: it resumes after it)") })
  .strict();

export const ApprovalSchema = z.object({
  id: z.string(),
  run_id: z.string(),
  agent_id: z.string(),
  tool_call_id: z.string(),
  tool: z.string(),
  subject: z.string().nullable().describe("the command or path the rule matched"),
  rule: z.string(),
  reason: z.string(),
  question: z.string(),
  can_remember: z.boolean().describe("whether allow_always is accepted"),
  asked_at: z.string(),
  deadline: z.string().describe("when the policy's non-interactive answer applies"),
  agency: z
    .object({ id: z.string(), agent: z.string(), invocation_id: z.string() })
    .nullable()
    .describe("the agency invocation that asks (its run is run_id); null for a run started on its own"),
});
export type ApprovalBody = z.infer<typeof ApprovalSchema>;

export const ApprovalListSchema = z.object({ approvals: z.array(ApprovalSchema) });

export const ApprovalDecisionRequest = z.object({ decision: z.enum(["allow", "allow_always", "deny"]), reason: z.string().max(2000).optional() }).strict();

export const ApprovalAnsweredSchema = z.object({ id: z.string(), run_id: z.string(), decision: z.string() });

export const CancelledSchema = z.object({ id: z.string(), status: z.literal("cancelled") });

export const MergeOutcomeSchema = z.object({ merged: z.boolean(), branch: z.string().nullable(), detail: z.string() });

export const StartBatchRequest = z
  .object({
    path: z.string().min(1).describe("a directory of tasks (or a task list) under one of the server's --tasks-root directories"),
    jobs: z.number().int().min(1).max(64).default(1),
    attempts: z.number().int().min(1).max(20).default(1),
    retries: z.number().int().min(0).max(10).default(0),
    min_pass_rate: z.number().min(0).max(1).default(1),
    max_errors: z.number().int().min(0).default(0),
    filter: z.string().optional(),
    limit: z.number().int().min(1).optional(),
  })
  .strict();

export const BatchSummarySchema = z.object({
  id: z.string(),
  status: z.string().describe("passed | failed | error | interrupted, or running"),
  created_at: z.string().nullable(),
  tasks: z.number().int(),
  report: z.record(z.string(), z.unknown()).nullable().describe("batch-report.json (on GET /v1/batches/{id})"),
});

export const BatchListSchema = z.object({ batches: z.array(BatchSummarySchema) });

export const HealthSchema = z.object({ status: z.literal("ok"), version: z.string() });

export const EventPageQuery = z
  .object({
    before: z.coerce.number().int().min(0).optional().describe("sequence number the page ends before (default: the end of the log)"),
    limit: z.coerce.number().int().min(1).max(2000).default(500),
  })
  .strict();

export const EventPageSchema = z.object({
  events: z.array(z.object({ sequence: z.number().int(), event: z.record(z.string(), z.unknown()) })),
  total: z.number().int().describe("events in the log so far"),
});

export const AgencyIdParams = z.object({ id: z.string().regex(/^[\w.-]+$/, "an agency id as POST /v1/agencies gives it") });

/** An outside event given when an agency starts (`runner agency run --event`). */
const StartEventSchema = z
  .object({
    type: z.string().min(1).describe("an event type of dot-separated lower-case words, like coding.task.received; not agency.*"),
    subject: z.string().min(1).optional(),
    data: z.unknown().optional().describe("any JSON, at most 16 KiB"),
    dataref: z.string().min(1).optional(),
    id: z.string().min(1).optional().describe("your own id: a retried start publishes it once"),
  })
  .strict();

export const StartAgencyRequest = z
  .object({
    agency_file: z.string().min(1).optional().describe("an agency.yaml under one of the server's --tasks-root directories"),
    agency: z
      .record(z.string(), z.unknown())
      .optional()
      .describe("an agency object (agency.yaml's fields, agents as a directory or a list of agent-file objects); untrusted: each agent as a task object"),
    event: StartEventSchema.optional().describe("published when the agency starts, after its start events"),
  })
  .strict()
  .refine((body) => (body.agency_file === undefined) !== (body.agency === undefined), {
    message: "give exactly one of agency_file (a path under --tasks-root) or agency (an agency object)",
  });

const AgencyStatusSchema = z.enum(["running", "unfinished", "succeeded", "failed", "error", "cancelled"]);

export const AgencyRecordSchema = z.object({
  id: z.string(),
  name: z.string(),
  status: AgencyStatusSchema.describe("agency-report.json's, or running (a process runs it) / unfinished (it stopped without a report; runner agency resume)"),
  reason: z.string().nullable().describe("goal_reached, quiescent, cancelled, or what failed; null while running"),
  goal: z.string(),
  branch: z.string().describe("agency/<id>: where its work lands"),
  created_at: z.string().describe("ISO 8601"),
  events: z.number().int().describe("events in its bus log"),
  invocations: z.array(z.record(z.string(), z.unknown())).describe("each invocation with its agent, event, run id and outcome (docs/agency.md)"),
  report: z.record(z.string(), z.unknown()).nullable().describe("agency-report.json once it ended"),
});
export type AgencyRecordBody = z.infer<typeof AgencyRecordSchema>;

export const AgencyListSchema = z.object({ agencies: z.array(AgencyRecordSchema), next_cursor: z.string().nullable() });

export const ListAgenciesQuery = z
  .object({
    cursor: z.string().optional().describe("next_cursor of the previous page"),
    limit: z.coerce.number().int().min(1).max(200).default(50),
  })
  .strict();

export const AgencyEventAcceptedSchema = z.object({
  agency_id: z.string(),
  id: z.string().describe("the event's id (the CloudEvent's own: a redelivery with the same id is stored once)"),
  type: z.string(),
  sequence: z.number().int().describe("its place in the agency's log"),
  resumed: z.boolean().describe("true: the agency was not running anywhere and this server resumed it to handle the event"),
});
