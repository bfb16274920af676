import { z } from "zod";

/**
 * The event catalogue: every event a run writes to events.jsonl, by name
 * (noun-then-verb), with its version and a zod schema of its `data`.
 * docs/events.md describes each one (fields, units, when it is emitted) and
 * tests/unit/event-catalogue.test.ts keeps the two in step.
 *
 * Versioning rule (docs/events.md "Versioning"): within a version an event
 * only gains fields; a field never changes its meaning, type or unit. A change
 * that would (a field removed, renamed, retyped or re-meant) is a new version
 * of the event, so a reader that knows `vN` never misreads another version.
 *
 * The schemas are strict (every field is listed; none is unknown): the e2e
 * test reads a real run's events strictly, so an emit site whose data drifts
 * from its schema fails there. Readers ({@link readEvent}) are lenient about
 * fields they do not know, which a newer runner may have added.
 */

/** Token counts of one model response (as the provider reports them). */
const usage = z.strictObject({
  prompt_tokens: z.number(),
  completion_tokens: z.number(),
  cached_tokens: z.number(),
  /** Absent in logs written before cache writes were counted. */
  cache_write_tokens: z.number().optional(),
});

/** The cost of one model response, USD (price table or `model.prices`); null when the model is not priced; absent in logs written before costs were counted. */
const costUsd = z.number().nullable().optional();

/** Where an MCP server runs: a process in the sandbox, a process on the host (`trusted`), or a streamable HTTP endpoint. */
const mcpTransport = z.enum(["sandbox", "host", "http"]);

/** Why a path was left out of the host commit (docs/runs.md "The host commit"). */
const leftOutPath = z.strictObject({
  path: z.string(),
  reason: z.enum(["dotgit_name", "gitmodules_symlink", "invalid_path", "nested_repository", "unreadable", "file_too_large", "over_total_size"]),
  size: z.number().optional(),
  sparse: z.boolean().optional(),
});

const diskEnforcement = z.enum(["filesystem", "monitor"]);

const hookData = z.strictObject({
  phase: z.enum(["pre_tool_use", "post_tool_use"]),
  command: z.string(),
  tool_name: z.string(),
  tool_call_id: z.string(),
  exit_code: z.number().nullable(),
  timed_out: z.boolean(),
  outcome: z.enum(["allowed", "blocked", "noted", "failed"]),
  error: z.string().optional(),
});

/** One catalogue entry: `data` is strict (see the module comment). */
function event<Shape extends z.core.$ZodLooseShape, Version extends number>(version: Version, shape: Shape) {
  return { version, data: z.strictObject(shape) };
}

/** Every event type, its version and its data. Add an event here and in docs/events.md. */
export const EVENT_CATALOGUE = {
  "run.started": event(1, { run_id: z.string(), task: z.string(), workspace: z.string(), branch: z.string(), base_commit: z.string() }),
  "run.resumed": event(1, {
    run_id: z.string(),
    resumes: z.number(),
    next_step: z.number(),
    worktree: z.enum(["reused", "recreated"]),
    /** The user's message of `runner continue`; absent for a resume. */
    follow_up: z.string().optional(),
  }),
  "run.limit_reached": event(1, {
    limit: z.enum(["max_cost_usd", "timeout_sec"]),
    value: z.number(),
    cost_usd: z.number().nullable(),
    elapsed_ms: z.number(),
  }),
  "model.unpriced": event(1, { model: z.string().nullable(), detail: z.string() }),
  "run.finished": event(1, { status: z.string(), exit_code: z.number(), duration_ms: z.number(), error: z.string().optional() }),
  "disk.prepared": event(1, { limit_bytes: z.number(), enforcement: diskEnforcement, detail: z.string().nullable() }),
  "disk.limit_reached": event(1, {
    agent_id: z.string(),
    sandbox_id: z.string(),
    used_bytes: z.number(),
    limit_bytes: z.number(),
    enforcement: diskEnforcement,
    action: z.enum(["refused", "stopped"]),
    used_inodes: z.number().optional(),
    limit_inodes: z.number().optional(),
  }),
  "sandbox.created": event(1, { sandbox_id: z.string(), image: z.string(), ready_ms: z.number(), uid: z.number() }),
  "sandbox.restarted": event(1, { sandbox_id: z.string() }),
  "skills.loaded": event(1, { skills: z.array(z.string()), shadowed: z.array(z.string()), problems: z.array(z.string()) }),
  "mcp_server.connected": event(1, {
    server: z.string(),
    transport: mcpTransport,
    server_info: z.string(),
    tools: z.array(z.string()),
    skipped_tools: z.array(z.strictObject({ name: z.string(), reason: z.string() })),
    duration_ms: z.number(),
  }),
  "mcp_server.failed": event(1, { server: z.string(), transport: mcpTransport, error: z.string() }),
  "mcp_server.exited": event(1, {
    server: z.string(),
    transport: mcpTransport,
    exit_code: z.number().nullable(),
    signal: z.string().nullable(),
    detail: z.string().nullable(),
    stderr_tail: z.string(),
  }),
  "model_call.started": event(1, {
    agent_id: z.string(),
    step: z.number(),
    messages: z.number(),
    estimated_tokens: z.number(),
    prefix_stable: z.boolean().nullable(),
  }),
  "model_call.retrying": event(1, {
    agent_id: z.string(),
    step: z.number(),
    purpose: z.enum(["turn", "compaction"]),
    attempt: z.number(),
    delay_ms: z.number(),
    reason: z.string(),
    status: z.number().optional(),
  }),
  "model_call.cut": event(1, {
    agent_id: z.string(),
    step: z.number(),
    dropped_tool_calls: z.number(),
    in_a_row: z.number(),
    limit: z.number(),
  }),
  "model_call.finished": event(1, {
    agent_id: z.string(),
    step: z.number(),
    duration_ms: z.number(),
    usage,
    cost_usd: costUsd,
    tool_calls: z.number(),
    content: z.string().nullable(),
  }),
  "tool_call.started": event(1, { agent_id: z.string(), step: z.number(), tool_call_id: z.string(), name: z.string(), arguments: z.string() }),
  "tool_call.denied": event(1, { agent_id: z.string(), tool_call_id: z.string(), name: z.string(), rule: z.string(), reason: z.string() }),
  "tool_call.finished": event(1, {
    agent_id: z.string(),
    step: z.number(),
    tool_call_id: z.string(),
    name: z.string(),
    is_error: z.boolean(),
    duration_ms: z.number(),
    result_preview: z.string(),
    // Each tool's own facts (path, bytes, exit code, MCP server...): shapes per tool, see docs/events.md.
    details: z.record(z.string(), z.unknown()).optional(),
  }),
  "tool_call.replayed": event(1, { agent_id: z.string(), step: z.number(), tool_call_id: z.string(), name: z.string(), key: z.string() }),
  "tool_call.interrupted": event(1, { agent_id: z.string(), step: z.number(), tool_call_id: z.string(), name: z.string() }),
  "approval.requested": event(1, { agent_id: z.string(), tool_call_id: z.string(), name: z.string(), question: z.string(), can_remember: z.boolean() }),
  "approval.resolved": event(1, {
    agent_id: z.string(),
    tool_call_id: z.string(),
    answer: z.enum(["yes", "always", "no"]),
    reason: z.string().nullable(),
    timed_out: z.boolean(),
  }),
  "hook.finished": { version: 1, data: hookData },
  "hook.failed": { version: 1, data: hookData },
  "context.repaired": event(1, { agent_id: z.string(), step: z.number(), repairs: z.array(z.string()) }),
  "context.cleared": event(1, {
    agent_id: z.string(),
    step: z.number(),
    cleared: z.number(),
    kept: z.number(),
    tokens_before: z.number(),
    tokens_after: z.number(),
  }),
  "context.compacted": event(1, {
    agent_id: z.string(),
    step: z.number(),
    summarised_messages: z.number(),
    kept_messages: z.number(),
    tokens_before: z.number(),
    tokens_after: z.number(),
    duration_ms: z.number(),
  }),
  "context.compaction_failed": event(1, { agent_id: z.string(), step: z.number(), error: z.string() }),
  "context.summary_usage": event(1, { agent_id: z.string(), usage, cost_usd: costUsd }),
  "task.started": event(1, {
    task_id: z.string(),
    kind: z.enum(["agent", "shell"]),
    description: z.string(),
    background: z.boolean(),
    agent_id: z.string().nullable(),
  }),
  "task.finished": event(1, {
    task_id: z.string(),
    kind: z.enum(["agent", "shell"]),
    status: z.string(),
    duration_ms: z.number(),
    agent_id: z.string().nullable(),
  }),
  "subagent.started": event(1, {
    agent_id: z.string(),
    parent_id: z.string(),
    mode: z.enum(["explore", "worker"]),
    description: z.string(),
    branch: z.string().nullable(),
    fork: z.boolean(),
    background: z.boolean(),
  }),
  "subagent.finished": event(1, {
    agent_id: z.string(),
    status: z.string(),
    steps: z.number(),
    verify_passed: z.boolean().nullable(),
    merge: z.string().nullable(),
    files: z.array(z.string()),
    // Added within v1: lines of older runners lack it, so readers take it as optional.
    not_merged_reason: z.string().nullable().optional(),
    duration_ms: z.number(),
  }),
  // v2: `reason` gains `budget_exceeded`, `refusal` and `output_limit` (a v1 reader would not know them); v3: `output_invalid`.
  "agent.finished": event(3, {
    agent_id: z.string(),
    reason: z.enum(["final_answer", "max_steps", "refusal", "output_limit", "budget_exceeded", "output_invalid", "cancelled"]),
    steps: z.number(),
    final_message: z.string().nullable(),
  }),
  "agent.output_rejected": event(1, { agent_id: z.string(), step: z.number(), problems: z.array(z.string()), correction: z.boolean() }),
  "workspace.committed": event(1, {
    branch: z.string(),
    commit: z.string(),
    changed: z.boolean(),
    left_out: z.array(leftOutPath),
    left_out_count: z.number(),
    timed_out: z.boolean(),
  }),
  "workspace.uncommitted": event(1, { changed_count: z.number(), changed: z.array(z.string()), ignored_count: z.number(), ignored: z.array(z.string()) }),
  "workspace.merged": event(1, { merged: z.boolean(), branch: z.string().nullable(), detail: z.string() }),
  "setup.started": event(1, { agent_id: z.string(), phase: z.enum(["agent", "verify"]), index: z.number(), command: z.string() }),
  "setup.finished": event(1, {
    agent_id: z.string(),
    phase: z.enum(["agent", "verify"]),
    index: z.number(),
    command: z.string(),
    exit_code: z.number().nullable(),
    timed_out: z.boolean(),
    duration_ms: z.number(),
    output_tail: z.string(),
  }),
  "verify.started": event(1, { agent_id: z.string().optional(), command: z.string() }),
  "verify.protected": event(1, {
    agent_id: z.string().optional(),
    patterns: z.array(z.string()),
    from_commit: z.string(),
    restored: z.array(z.string()),
    deleted: z.array(z.string()),
    omitted: z.number(),
  }),
  "verify.finished": event(1, {
    // Added within v1: lines of older runners lack it, so readers take it as optional.
    agent_id: z.string().optional(),
    command: z.string(),
    exit_code: z.number().nullable(),
    passed: z.boolean(),
    timed_out: z.boolean(),
    duration_ms: z.number(),
    // Added within v1 (older lines hold only the tail), so readers take them as optional.
    output_head: z.string().optional(),
    output_omitted: z.number().optional(),
    output_tail: z.string(),
    sandbox_lost: z.string().nullable(),
  }),
  "network.allowed": event(1, { method: z.string(), host: z.string(), port: z.number() }),
  "network.denied": event(1, { method: z.string(), host: z.string(), port: z.number(), reason: z.string() }),
  "network.proxy_exited": event(1, { detail: z.string() }),
  "cleanup.failed": event(1, { what: z.string(), error: z.string() }),
} as const;

type Catalogue = typeof EVENT_CATALOGUE;

/** An event's name as in the catalogue (`tool_call.finished`). */
export type RunEventName = keyof Catalogue;

/** Every event a run reports: `{ type, data }` with `data` as its catalogue schema infers it (emit sites are checked against it). */
export type RunEvent = { [Name in RunEventName]: { type: Name; data: z.output<Catalogue[Name]["data"]> } }[RunEventName];

/** The `data` of one event type. */
export type RunEventData<Name extends RunEventName> = Extract<RunEvent, { type: Name }>["data"];

/** The producer part of every CloudEvents `type` the runner writes (`dev.agent-runner.<name>.v<version>`). */
const TYPE_PREFIX = "dev.agent-runner.";
const CLOUD_EVENT_TYPE = /^dev\.agent-runner\.(.+)\.v(\d+)$/;

/** The CloudEvents `type` of an event: `dev.agent-runner.<name>.v<version>` (`dev.agent-runner.tool_call.finished.v1`). */
export function cloudEventType(name: RunEventName): string {
  return `${TYPE_PREFIX}${name}.v${EVENT_CATALOGUE[name].version}`;
}

/** A CloudEvents 1.0 envelope exactly as one line of events.jsonl holds it (docs/events.md "The envelope"). */
export interface RunEnvelope {
  specversion: string;
  id: string;
  /** `dev.agent-runner.<event>.v<N>`. */
  type: string;
  source: string;
  time?: string;
  traceparent?: string;
  runid?: string;
  data?: unknown;
  [attribute: string]: unknown;
}

/**
 * The CloudEvents 1.0 required attributes (spec "Context Attributes");
 * extension attributes are kept. Checked here rather than with the
 * cloudevents SDK's parser (`HTTP.toEvent`), which throws on a bad line and
 * hands back a rebuilt CloudEvent object: the replay must hand on each line's
 * object as written, and a reader needs a result, not an exception.
 */
const envelopeSchema = z.looseObject({ specversion: z.literal("1.0"), id: z.string().min(1), source: z.string().min(1), type: z.string().min(1) });

/** One line of events.jsonl as its envelope; null for a line that is not JSON (a crash cut it short) or not a CloudEvents 1.0 envelope. */
export function parseEnvelopeLine(line: string): RunEnvelope | null {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return null;
  }
  return envelopeSchema.safeParse(value).success ? (value as RunEnvelope) : null;
}

/**
 * What a reader makes of one envelope:
 * - `event`: a catalogue event of a version this runner knows, data valid;
 * - `unknown`: a type this runner cannot read (another producer's, an event
 *   name it does not know, or a version it does not know: a newer or older
 *   runner's), kept so the reader can say so or pass it on;
 * - `invalid`: not a CloudEvents envelope, or data that does not match the
 *   schema of its name and version.
 */
export type EventRead =
  | { kind: "event"; event: RunEvent; version: number }
  | { kind: "unknown"; type: string; reason: string }
  | { kind: "invalid"; type: string | null; reason: string };

export interface ReadEventOptions {
  /**
   * Also refuse fields the catalogue does not list (default false: a newer
   * runner may add fields to a version, and the reader keeps them in
   * `data`). The tests read the runner's own events strictly.
   */
  strict?: boolean;
}

/**
 * Reads one envelope (a parsed line of events.jsonl, or what
 * `RunHandle.events()` yields) against the catalogue. Never throws. The
 * event's `data` is the envelope's own object (not a copy), fields unknown
 * to the catalogue included unless `strict`.
 */
export function readEvent(envelope: unknown, options: ReadEventOptions = {}): EventRead {
  const parsed = envelopeSchema.safeParse(envelope);
  if (!parsed.success) {
    const type =
      typeof envelope === "object" && envelope !== null && typeof (envelope as { type?: unknown }).type === "string"
        ? (envelope as { type: string }).type
        : null;
    return { kind: "invalid", type, reason: `not a CloudEvents 1.0 envelope: ${z.prettifyError(parsed.error)}` };
  }
  const { type, data } = parsed.data;
  const match = CLOUD_EVENT_TYPE.exec(type);
  if (!match) return { kind: "unknown", type, reason: `not an agent-runner event type (${TYPE_PREFIX}<name>.v<version>)` };
  const name = match[1]!;
  const version = Number(match[2]);
  if (!Object.hasOwn(EVENT_CATALOGUE, name)) return { kind: "unknown", type, reason: `this runner's event catalogue has no event "${name}"` };
  const definition = EVENT_CATALOGUE[name as RunEventName];
  if (definition.version !== version) return { kind: "unknown", type, reason: `this runner reads ${name} v${definition.version}, not v${version}` };
  const checked = definition.data.safeParse(data);
  const issues = checked.success ? [] : checked.error.issues.filter((issue) => options.strict || issue.code !== "unrecognized_keys");
  if (issues.length > 0) return { kind: "invalid", type, reason: `data does not match ${name} v${version}: ${z.prettifyError(new z.ZodError(issues))}` };
  return { kind: "event", event: { type: name, data } as RunEvent, version };
}
