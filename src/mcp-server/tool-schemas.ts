import { z } from "zod";

/**
 * The MCP tools' input and output schemas (docs/mcp-server.md): the single
 * source of their JSON Schemas (the SDK derives `inputSchema` and
 * `outputSchema` from them) and of argument validation (a bad argument is an
 * `isError` result naming the field). Descriptions are written for the model
 * that calls the tools.
 */

const runId = z.string().min(1).describe("The run's id (run_start returns it; runs_list lists them); a unique prefix will do.");

/** Bounds of run_events (docs/mcp-server.md "The tools"). */
const EVENT_LIMITS = { maxEvents: 1000, defaultEvents: 100, maxBytes: 1024 * 1024, defaultBytes: 64 * 1024, maxWaitMs: 50_000, defaultWaitMs: 10_000 };

/** Bounds of run_result's patch page. */
const PATCH_LIMITS = { maxLines: 2000, defaultLines: 200, maxBytes: 256 * 1024, defaultBytes: 32 * 1024 };

/** run_start's input: a task file, or the ad-hoc fields; `policies` are the shipped policy names. */
export function runStartInput(policies: readonly string[]) {
  return z.strictObject({
    task_file: z
      .string()
      .min(1)
      .optional()
      .describe("A task.yaml inside the server's workspace roots (relative paths from the first root). Not with instruction/workspace."),
    instruction: z.string().trim().min(1).optional().describe("Ad-hoc task: what the agent must do, as you would tell a colleague."),
    workspace: z
      .string()
      .min(1)
      .optional()
      .describe("Ad-hoc task: the git repository to work on (its top level, with a commit), inside the server's workspace roots."),
    verify: z
      .string()
      .min(1)
      .optional()
      .describe("Shell command run in a fresh sandbox on the agent's commit; exit 0 means verified (e.g. `npm test`, `python3 -m pytest -q`)."),
    model: z.string().min(1).optional().describe("NAME or PROVIDER:NAME (openai, anthropic, openai-responses); default the server's configuration."),
    policy: z
      .enum(policies as [string, ...string[]])
      .optional()
      .describe("A shipped permission policy (default worker: asks before risky commands such as git push)."),
    allow_hosts: z
      .array(z.string().min(1))
      .max(100)
      .optional()
      .describe("Hosts the sandbox may reach (name, *.domain, name:port); default none: no network at all."),
    max_steps: z.number().int().positive().max(10_000).optional().describe("Most model calls of the agent (default 50)."),
    name: z
      .string()
      .regex(/^[a-z0-9][a-z0-9-]*$/, "expected lowercase letters, digits and dashes, like fix-login")
      .optional()
      .describe("Ad-hoc task: a short name for the run branch (default adhoc)."),
  });
}

export const runStartOutput = z.object({
  run_id: z.string(),
  status: z.string(),
  run_directory: z.string(),
  /** For run_resume: the model call the run goes on from. */
  resumed_at_model_call: z.number().int().optional(),
});

export const runStatusInput = z.strictObject({ run_id: runId });

const pendingApproval = z.object({
  approval_id: z.string(),
  tool: z.string(),
  subject: z.string().nullable(),
  question: z.string(),
  rule: z.string(),
  reason: z.string(),
  /** Whether `allow_always` may answer it (the policy's `remember` list). */
  can_allow_always: z.boolean(),
  /** When the question is answered "deny" by itself (ISO 8601). */
  deadline: z.string(),
});

export const runStatusOutput = z.object({
  run_id: z.string(),
  task: z.string(),
  status: z.string(),
  reason: z.string().nullable(),
  step: z.number().int(),
  cost_usd: z.number().nullable(),
  pending_approvals: z.array(pendingApproval),
  recent_events: z.array(z.object({ sequence: z.number().int(), type: z.string(), time: z.string().optional() })),
  event_count: z.number().int(),
  owned_here: z.boolean(),
});

export const runEventsInput = z.strictObject({
  run_id: runId,
  cursor: z.number().int().min(0).default(0).describe("Sequence number to read from: 0 first, then the next_cursor of the previous call."),
  max_events: z.number().int().min(1).max(EVENT_LIMITS.maxEvents).default(EVENT_LIMITS.defaultEvents).describe("Most events to return."),
  max_bytes: z
    .number()
    .int()
    .min(1024)
    .max(EVENT_LIMITS.maxBytes)
    .default(EVENT_LIMITS.defaultBytes)
    .describe("Most bytes of event JSON to return (the first event is always whole)."),
  wait_ms: z
    .number()
    .int()
    .min(0)
    .max(EVENT_LIMITS.maxWaitMs)
    .default(EVENT_LIMITS.defaultWaitMs)
    .describe("When no event follows the cursor yet, wait up to this long (ms) for one (long-poll); 0 answers at once."),
});

export const runEventsOutput = z.object({
  run_id: z.string(),
  /** CloudEvents envelopes as events.jsonl holds them. */
  events: z.array(z.looseObject({ type: z.string(), id: z.string() })),
  next_cursor: z.number().int(),
  /** The run has ended and every event was returned: stop polling. */
  done: z.boolean(),
});

/** One envelope of run_events' `events`. */
export type EventEnvelope = z.infer<typeof runEventsOutput>["events"][number];

export const runApproveInput = z.strictObject({
  run_id: runId,
  approval_id: z.string().min(1).optional().describe("The question to answer (run_status lists them); may be left out when the run has exactly one."),
  decision: z
    .enum(["allow", "allow_always", "deny"])
    .describe("allow: this call; allow_always: this and like calls for the rest of the run (when the question allows it); deny: refuse it."),
  reason: z.string().max(2000).optional().describe("For deny: why, told to the agent so it can change course."),
});

export const runApproveOutput = z.object({ run_id: z.string(), approval_id: z.string(), decision: z.string(), accepted: z.boolean() });

export const runCancelInput = z.strictObject({ run_id: runId, reason: z.string().max(500).optional().describe("Why, recorded in the report.") });

export const runCancelOutput = z.object({ run_id: z.string(), status: z.string(), reason: z.string().nullable() });

export const runResumeInput = z.strictObject({
  run_id: runId,
  max_steps: z.number().int().positive().max(10_000).optional().describe("This many more model calls (needed for a run stopped at max_steps)."),
  max_cost_usd: z.number().positive().max(1_000_000).optional().describe("This many more USD (needed for a run stopped at its budget)."),
  timeout_sec: z
    .number()
    .positive()
    .max(7 * 24 * 3600)
    .optional()
    .describe("This attempt's wall-clock limit, seconds."),
});

export const runResultInput = z.strictObject({
  run_id: runId,
  patch_offset: z.number().int().min(0).default(0).describe("Line of patch.diff to start the page at: 0, then the previous patch.next_offset."),
  patch_max_lines: z.number().int().min(1).max(PATCH_LIMITS.maxLines).default(PATCH_LIMITS.defaultLines).describe("Most patch lines in this page."),
  patch_max_bytes: z.number().int().min(1024).max(PATCH_LIMITS.maxBytes).default(PATCH_LIMITS.defaultBytes).describe("Most patch bytes in this page."),
});

export const runResultOutput = z.object({
  run_id: z.string(),
  task: z.string(),
  status: z.string(),
  reason: z.string(),
  error: z.string().nullable(),
  verify: z.object({ command: z.string(), passed: z.boolean(), exit_code: z.number().nullable(), ending: z.string(), output_tail: z.string() }).nullable(),
  files: z.array(
    z.object({
      path: z.string(),
      from: z.string().optional(),
      change: z.enum(["added", "deleted", "renamed", "modified"]),
      added: z.number().int(),
      removed: z.number().int(),
      binary: z.boolean(),
    }),
  ),
  diffstat: z.object({ files: z.number().int(), added: z.number().int(), removed: z.number().int() }),
  branch: z.string().nullable(),
  base_commit: z.string().nullable(),
  head_commit: z.string().nullable(),
  how_to_merge: z.string(),
  final_message: z.string().nullable(),
  steps: z.number().int(),
  cost_usd: z.number().nullable(),
  patch: z.object({
    offset: z.number().int(),
    lines: z.number().int(),
    total_lines: z.number().int(),
    next_offset: z.number().int().nullable(),
    text: z.string(),
  }),
});

export const runsListInput = z.strictObject({
  status: z.enum(["running", "succeeded", "failed", "error", "cancelled", "unfinished"]).optional().describe("Only runs with this status."),
  task: z.string().min(1).optional().describe("Only runs whose task name contains this."),
  limit: z.number().int().min(1).max(200).default(20).describe("Most runs to list, newest first."),
});

export const runsListOutput = z.object({
  runs: z.array(z.object({ run_id: z.string(), task: z.string(), status: z.string(), branch: z.string(), started: z.string() })),
});
