import { z } from "zod";
import { parseNatsServers } from "../bus/nats-connection.js";
import { taskSchema } from "../config/task-schema.js";

/** An event type: dot-separated lower-case words, like `coding.task.ready` (CloudEvents `type`, reverse-DNS style). */
export const EVENT_TYPE = /^[a-z0-9][a-z0-9_-]*(\.[a-z0-9_-]+)*$/;

const eventType = z.string().regex(EVENT_TYPE, "expected an event type of dot-separated lower-case words, like coding.task.ready");

/** A trigger: an exact event type, or a prefix ending in `.*` (`coding.*` matches `coding.task.ready`), or `*` for every event. */
const eventPattern = z.string().refine((pattern) => pattern === "*" || EVENT_TYPE.test(pattern.endsWith(".*") ? pattern.slice(0, -2) : pattern), {
  message: "expected an event type like coding.task.ready, or a prefix with a trailing .* like coding.review.*",
});

/** The event types the orchestrator publishes itself; no agent may emit them. */
export const ORCHESTRATOR_EVENT_PREFIX = "agency.";

/**
 * The tools an agent may be given (`capabilities`), the workspace tools of
 * DESIGN.md plus skills and subagents. `emit_event` and `read_context` are
 * the agency's own and need no capability: `emit_event` comes with `emits`,
 * `read_context` with every agent.
 */
const CAPABILITY_TOOLS = ["read_file", "list_dir", "glob", "grep", "write_file", "edit_file", "run_shell", "load_skill", "agent"] as const;

/**
 * Capabilities that make an agent a writer (its change is committed, verified and merged into the
 * agency branch). An agent with none of them runs on a read-only mount: its `run_shell` too, so a
 * tester runs the tests without changing what it tests.
 */
export const WRITE_CAPABILITIES: readonly string[] = ["write_file", "edit_file", "agent"];

const pathGlob = z
  .string()
  .min(1, "expected a glob relative to the repository, like src/** or deploy/**")
  .refine((glob) => !glob.startsWith("/") && !glob.split("/").includes(".."), { message: "expected a glob relative to the repository (no leading /, no ..)" });

/** `agents/<name>.yaml`: one agent of an agency (docs/agency.md "Agent files"). */
const agentName = z.string().regex(/^[a-z0-9][a-z0-9-]*$/, "expected a slug of lower-case letters, digits and dashes, like code-executor");

/** A tool's name as the model sees it (`run_shell`, `write_file`, `emit_event`, an MCP tool's `server__tool`). */
const toolName = z.string().regex(/^[a-zA-Z0-9_.-]+$/, "expected a tool name like run_shell or write_file");

const perMinute = z.number().positive("expected a rate above 0 per minute, like 30");

const conditionValue = z.union([z.string(), z.number(), z.boolean(), z.null()]);

/**
 * A trigger's condition on the event's `data` (docs/agency.md "Structured output"): each key a dotted path into
 * `data` (`agent`, `output.verdict`), each value the JSON scalar it must equal, or a list of scalars it must be one of.
 */
const triggerCondition = z.record(
  z.string().regex(/^[^.\s]+(\.[^.\s]+)*$/, "expected a dotted path into the event's data, like output.verdict"),
  z.union([conditionValue, z.array(conditionValue).min(1, "expected at least one value")], {
    message: "expected a value (text, number, true, false, null) or a list of them",
  }),
);

export const agentFileSchema = z.strictObject({
  agent: z.strictObject({
    name: agentName,
    description: z.string().trim().min(1, "expected a sentence saying what the agent does"),
    /** task.yaml's `model`; `script` relative to the agent file. */
    model: taskSchema.shape.model,
    instructions: z.string().trim().min(1, "expected the role's instructions as text"),
    triggers: z
      .array(z.strictObject({ event: eventPattern, when: triggerCondition.optional() }))
      .min(1, "expected at least one trigger, like - event: coding.task.ready"),
    capabilities: z
      .array(
        z.strictObject({
          tool: z.enum(CAPABILITY_TOOLS, {
            message: `expected one of ${CAPABILITY_TOOLS.join(", ")} (emit_event comes with emits, read_context with every agent)`,
          }),
        }),
      )
      .default([]),
    emits: z
      .array(
        eventType.refine((type) => !type.startsWith(ORCHESTRATOR_EVENT_PREFIX), {
          message: `agency.* events are the orchestrator's own; give your event another prefix, like coding.code.ready`,
        }),
      )
      .default([]),
    /** task.yaml's `verify`: the change merges into the agency branch only if it passes. */
    verify: taskSchema.shape.verify,
    policies: z
      .strictObject({
        max_concurrency: z.number().int("expected a whole number").min(1).max(64).default(1),
        timeout_seconds: z
          .number()
          .int("expected a whole number of seconds")
          .positive()
          .max(24 * 3600)
          .default(600),
        /** Token buckets per agent, across its invocations (docs/agency.md "Guards"): capacity = the per-minute rate. */
        rate_limit: z
          .strictObject({
            tool_calls_per_minute: perMinute.optional(),
            tokens_per_minute: perMinute.optional(),
            events_per_minute: perMinute.optional(),
          })
          .optional(),
        /** The agent's circuit breaker (docs/agency.md "Guards"): a fold over its `agency.invocation.finished` events. */
        circuit_breaker: z
          .strictObject({
            window_seconds: z.number().int("expected a whole number of seconds").positive().default(300),
            min_invocations: z.number().int("expected a whole number").min(1).default(4),
            failure_rate: z.number().gt(0, "expected a rate above 0, like 0.5").max(1, "expected a rate of at most 1").default(0.5),
            cooldown_seconds: z.number().int("expected a whole number of seconds").positive().default(120),
            /** Another agent of the agency that takes this one's events while the breaker is open; absent: they wait. */
            fallback: agentName.optional(),
          })
          .optional(),
      })
      .default({ max_concurrency: 1, timeout_seconds: 600 }),
    /**
     * A JSON Schema the agent's final answer must satisfy (docs/agency.md "Guards"): a JSON object, checked after
     * redaction; one correction turn, then `failed/output_invalid`. The valid object is the invocation's `output`.
     */
    output_schema: z.record(z.string(), z.unknown()).optional(),
    /** Tools whose every call a person approves (docs/agency.md "Guards"), on top of the agency's `confirm`. */
    confirm: z.array(toolName).default([]),
    permissions: z
      .strictObject({
        allowed_paths: z.array(pathGlob).default(["**"]),
        denied_paths: z.array(pathGlob).default([]),
      })
      .default({ allowed_paths: ["**"], denied_paths: [] }),
    /** task.yaml's `sandbox` (image, limits, network, setup); default the task default. */
    sandbox: taskSchema.shape.sandbox.optional(),
    /** Model calls of one invocation (task.yaml `max_steps`). */
    max_steps: z.number().int().positive().max(10_000).default(50),
  }),
});

export type AgentFile = z.infer<typeof agentFileSchema>;

const startEvent = z.strictObject({
  type: eventType,
  subject: z.string().min(1).optional(),
  data: z.unknown().optional(),
  /** The event's id (dedupe key); default one derived from the agency id and the event's position. */
  id: z.string().min(1).optional(),
});

/** `agency.yaml` (docs/agency.md "The agency file"). */
export const agencyFileSchema = z.strictObject({
  name: z.string().regex(/^[a-z0-9][a-z0-9-]*$/, "expected a slug of lower-case letters, digits and dashes, like fix-pipeline"),
  /** A git repository (its top level); relative to agency.yaml. */
  workspace: z.string().min(1).default("."),
  /** A directory of agent files (every *.yaml / *.yml), relative to agency.yaml; or, from the library, the agent files' objects. */
  agents: z.union([z.string().min(1), z.array(z.record(z.string(), z.unknown())).min(1)]).default("./agents"),
  /**
   * `file` (the embedded bus in the agency's records) or `nats://host:port[,host:port…]` (a JetStream stream per
   * agency; the agents' invocations then run on the `runner worker`s of `pool`, docs/scale-out.md).
   */
  bus: z
    .string()
    .superRefine((bus, context) => {
      if (bus === "file") return;
      if (!/^(nats|tls):\/\//.test(bus)) {
        context.addIssue({ code: "custom", message: "expected file (the embedded bus) or nats://host:port[,host:port…] (a NATS JetStream cluster)" });
        return;
      }
      // Every seed as `runner worker --nats` takes it, so a bad one stops the agency before anything is created.
      try {
        parseNatsServers(bus, "bus");
      } catch (error) {
        context.addIssue({ code: "custom", message: (error as Error).message.replace(/^bus: /, "") });
      }
    })
    .default("file"),
  /** With a `nats://` bus: the pool of `runner worker --pool NAME` whose workers run the invocations. */
  pool: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/, "expected a pool name of letters, digits, _ and - (like `runner worker --pool NAME`)")
    .default("default"),
  /** Global project context every agent reads with `read_context`. */
  context: z.record(z.string(), z.unknown()).default({}),
  start: z.array(startEvent).default([]),
  /** The event type that means "done". */
  goal: eventType,
  /** The longest chain of events agents may cause (docs/agency.md "Guards"): an event past it is not delivered and the chain stops. */
  max_hops: z.number().int("expected a whole number").min(1).max(1000).default(8),
  /** `conservative`: every agent is read-only whatever its capabilities say (docs/agency.md "Guards"). */
  mode: z.enum(["normal", "conservative"], { message: "expected normal or conservative" }).default("normal"),
  /** Tools whose every call a person approves, for every agent (docs/agency.md "Guards"). */
  confirm: z.array(toolName).default([]),
  /** The agency's total spend (docs/agency.md "Guards"): no invocation starts once it is spent. */
  budget: z
    .strictObject({
      max_cost_usd: z.number().positive("expected an amount above 0 in USD, like 5.00").max(1_000_000, "expected at most 1000000 USD (task.yaml's limit)"),
    })
    .optional(),
});

export type AgencyFile = z.infer<typeof agencyFileSchema>;
