import { z } from "zod";
import { checkCidr, parseAllowEntry, type AllowRule } from "../sandbox/network-allow-list.js";
import { hooksSchema } from "../hooks/tool-hooks.js";
import { mcpServersSchema } from "../mcp/mcp-servers-schema.js";
import { DEFAULT_SANDBOX_IMAGE } from "../sandbox/task-image.js";
import { workdirProblem } from "../sandbox/workdir.js";
import { WORKSPACE_ROOT } from "../sandbox/sandbox.js";
import { DEFAULT_ANTHROPIC_MAX_TOKENS } from "../model/anthropic-model-client.js";

/** Parses "512m", "1g", "1.5G", "1048576" into bytes; units are binary (k = 1024). */
export function parseMemory(value: string | number): number | null {
  if (typeof value === "number") return Number.isFinite(value) && value > 0 ? Math.floor(value) : null;
  const match = /^\s*(\d+(?:\.\d+)?)\s*([kmg]?)i?b?\s*$/i.exec(value);
  if (!match) return null;
  const scale = { "": 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[match[2]!.toLowerCase() as "" | "k" | "m" | "g"];
  return Math.floor(Number(match[1]) * scale);
}

/** A size in the syntax of {@link parseMemory}, in bytes, of at least `minimum` (same syntax). */
function sizeOfAtLeast(minimum: string) {
  const minimumBytes = parseMemory(minimum)!;
  return z.union([z.string(), z.number()]).transform((value, context) => {
    const bytes = parseMemory(value);
    if (bytes === null || bytes < minimumBytes) {
      context.addIssue({ code: "custom", message: `expected a size of at least ${minimum} such as "512m" or "2g", got ${JSON.stringify(value)}` });
      return z.NEVER;
    }
    return bytes;
  });
}

const memory = sizeOfAtLeast("16m");

/** Bytes a task may write, by default (10 GiB): room for a large checkout, its dependencies and build output. */
const DEFAULT_DISK_BYTES = 10 * 1024 ** 3;
const DEFAULT_LIMITS = { cpus: 1, memory: 1024 ** 3, pids: 256, file_size: 1024 ** 3, disk: DEFAULT_DISK_BYTES };

/** A price, USD per million tokens. */
const usdPerMillion = z.number().nonnegative().max(10_000);

/**
 * `model.prices`: the model's prices, USD per million tokens, instead of the
 * runner's price table (src/model/price-table.ts). A missing `cached_input` or
 * `cache_write` is billed as `input` (never below what a provider may charge).
 */
const pricesSchema = z
  .strictObject({
    input: usdPerMillion,
    cached_input: usdPerMillion.optional(),
    cache_write: usdPerMillion.optional(),
    output: usdPerMillion,
  })
  .transform((prices) => ({
    input: prices.input,
    cached_input: prices.cached_input ?? prices.input,
    cache_write: prices.cache_write ?? prices.input,
    output: prices.output,
  }));

const environmentName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "expected an environment variable name like API_TOKEN");

/** task.yaml `model`'s fields, before the rules that tie them together ({@link modelSchema}); the defaults file takes them too. */
export const modelFields = z.strictObject({
  /**
   * Which API the model is reached through: `openai` (chat completions, any
   * OpenAI-compatible server), `anthropic` (Messages API), `openai-responses`
   * (Responses API), `scripted` (the offline scripted model).
   */
  provider: z.enum(["openai", "anthropic", "openai-responses", "scripted"]).default("openai"),
  /** Scripted only: path of the script, relative to task.yaml. */
  script: z.string().min(1).optional(),
  /** Scripted only: which provider's wire format the scripted model speaks, with that provider's client. */
  wire: z.enum(["openai-chat", "anthropic", "openai-responses"]).default("openai-chat"),
  /**
   * Stream replies (server-sent events). Then `request_timeout_sec` is the
   * longest silence (no bytes) before an attempt is given up, not its total time.
   */
  stream: z.boolean().default(true),
  /** OpenAI-compatible model name. */
  name: z.string().min(1).optional(),
  /** Overrides OPENAI_BASE_URL. */
  base_url: z.url().optional(),
  temperature: z.number().min(0).max(2).optional(),
  /** Per-attempt timeout, seconds: with `stream`, the longest time without a byte; without, the whole attempt. */
  request_timeout_sec: z.number().int().positive().max(3600).default(300),
  /**
   * Total time of one model request, seconds: all its attempts, backoff and rate-limit waits together. Past it the
   * request fails (`deadline_exceeded`), whatever the stream still sends: a server that trickles empty pieces never
   * lets the idle timeout fire.
   */
  request_deadline_sec: z
    .number()
    .int()
    .positive()
    .max(24 * 3600)
    .default(1800),
  /** Retries of a failed request (429, 5xx, timeouts, resets), with backoff honouring retry-after. */
  max_retries: z.number().int().min(0).max(20).default(4),
  /** The model's context window, tokens: every request is kept under it (see `context`). */
  context_window: z.number().int().min(2048).max(10_000_000).default(128_000),
  /**
   * Most tokens the model may write in one reply. Anthropic requires it
   * (`max_tokens`; default 8192 there); other providers get it only when set.
   */
  max_output_tokens: z.number().int().positive().max(1_000_000).optional(),
  /**
   * Anthropic only: turns on extended thinking with this `budget_tokens`
   * (at least 1024, docs.anthropic.com "Extended thinking"), which must be
   * below `max_output_tokens`.
   */
  thinking_budget_tokens: z.number().int().min(1024).max(1_000_000).optional(),
  /** USD per million tokens (input, cached_input, cache_write, output), overriding the price table. */
  prices: pricesSchema.optional(),
  /**
   * The run's budget, USD: once its model calls (subagents' and compactions' included) have cost this
   * much, no model call starts and the run ends `failed` / `budget_exceeded`. Needs a priced model.
   */
  max_cost_usd: z.number().positive().max(1_000_000).optional(),
});

const modelSchema = modelFields.superRefine((model, context) => {
  if (model.thinking_budget_tokens === undefined) return;
  if (model.provider !== "anthropic" && !(model.provider === "scripted" && model.wire === "anthropic")) {
    context.addIssue({
      code: "custom",
      path: ["thinking_budget_tokens"],
      message: "extended thinking is Anthropic's: set model.provider: anthropic, or remove thinking_budget_tokens",
    });
  }
  const maxTokens = model.max_output_tokens ?? DEFAULT_ANTHROPIC_MAX_TOKENS;
  if (model.thinking_budget_tokens >= maxTokens) {
    context.addIssue({
      code: "custom",
      path: ["thinking_budget_tokens"],
      message: `must be below max_output_tokens (${maxTokens}${model.max_output_tokens === undefined ? ", the default" : ""}); raise model.max_output_tokens or lower the budget`,
    });
  }
});

/** When and how the conversation is shrunk to stay inside `model.context_window`. */
export const contextSchema = z
  .strictObject({
    /** Above this share of the window, older tool results are replaced by a placeholder. */
    clear_at: z.number().gt(0).lt(1).default(0.6),
    /** Above this share, the older part of the conversation is summarised by the model (compaction). */
    compact_at: z.number().gt(0).lt(1).default(0.85),
    /** Latest tool results kept verbatim by clearing. */
    keep_tool_results: z.number().int().min(0).max(1000).default(6),
    /** Latest turns (an assistant message and its tool results) kept verbatim by compaction. */
    keep_turns: z.number().int().min(1).max(1000).default(4),
    /** Largest tool result the model receives, tokens (default: the smaller of 12500 and 1/8 of the window). */
    tool_result_max_tokens: z.number().int().min(100).max(1_000_000).optional(),
  })
  .refine((context) => context.clear_at < context.compact_at, { message: "clear_at must be below compact_at", path: ["clear_at"] });

const DEFAULT_WORKDIR = WORKSPACE_ROOT;

/** A Docker image reference (`sandbox.image`, and `image` of the defaults file). */
export const imageReference = z
  .string()
  .regex(
    /^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(\/[a-z0-9]+([._-][a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$/,
    'expected a Docker image reference like "agent-runner/sandbox:bookworm" (lower-case repository, optional :tag)',
  );

/** `sandbox.limits` (and `limits` of the defaults file): what a task's sandboxes may use. */
export const limitsSchema = z.strictObject({
  cpus: z.number().positive().max(64).default(1),
  memory: memory.default(1024 ** 3),
  pids: z.number().int().min(16).max(32768).default(256),
  /** Largest file a sandbox process may write (RLIMIT_FSIZE). */
  file_size: memory.default(1024 ** 3),
  /**
   * Bytes the task may occupy on disk: its worktrees and every sandbox's writable directories
   * (/tmp, /var/tmp, /run/lock; the image is read-only, so `pip install` lands in $HOME=/tmp/.local),
   * allocated blocks counted (docs/security.md "Security model").
   * The minimum leaves room for a small checkout next to the filesystem's own metadata.
   */
  disk: sizeOfAtLeast("64m").default(DEFAULT_DISK_BYTES),
});

const sandboxSchema = z.strictObject({
  image: imageReference.default(DEFAULT_SANDBOX_IMAGE),
  /**
   * An image the runner builds before the run (docs/images.md "Task images"): `context` and
   * `dockerfile` are relative to the task file (default `<context>/Dockerfile`), `args`
   * are build arguments. Tagged by a hash of its inputs and reused while they are unchanged.
   * Not together with `image`.
   */
  build: z
    .strictObject({
      context: z.string().min(1, "expected the build context directory, relative to the task file"),
      dockerfile: z.string().min(1).optional(),
      args: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "expected a build argument name like PYTHON_VERSION"), z.string()).default({}),
    })
    .optional(),
  /** Where the repository is mounted in the container; tool paths are relative to it. */
  workdir: z
    .string()
    .default(DEFAULT_WORKDIR)
    .superRefine((workdir, context) => {
      const problem = workdirProblem(workdir);
      if (problem) context.addIssue({ code: "custom", message: problem });
    }),
  /** Commands run once in the sandbox, in the workdir, before the agent's first step, and again before `verify.command`. */
  setup: z.array(z.string().trim().min(1, 'expected a shell command like "pip install -e ."')).default([]),
  network: z
    .strictObject({
      /** Hosts the task may reach through its egress proxy: `name`, `*.domain`, `name:port`. */
      allow: z
        .array(z.string().min(1))
        .default([])
        .transform((entries, context) => {
          const rules: AllowRule[] = [];
          entries.forEach((entry, index) => {
            const parsed = parseAllowEntry(entry);
            if (typeof parsed === "string") context.addIssue({ code: "custom", path: [index], message: parsed });
            else rules.push(parsed);
          });
          return rules;
        }),
      /** Private address ranges allowed names may resolve into (the task's own test hosts). */
      allow_cidrs: z.array(z.string().refine((cidr) => checkCidr(cidr) === null, { message: 'expected a CIDR range like "172.28.0.0/16"' })).default([]),
    })
    .default({ allow: [], allow_cidrs: [] }),
  limits: limitsSchema.default(DEFAULT_LIMITS),
  /** Literal variables set in the container. */
  env: z.record(environmentName, z.string()).default({}),
  /** Host variables passed through by name (the only way host environment reaches the container). */
  pass_env: z.array(environmentName).default([]),
  /** Host variables passed through like `pass_env` whose values are secret: redacted in every record of the run. */
  secret_env: z.array(environmentName).default([]),
});

/** A verify.protect entry: a git pathspec glob relative to the repository's top level. */
const protectPattern = z
  .string()
  .min(1)
  .refine((pattern) => !pattern.startsWith("/") && !pattern.startsWith(":") && !pattern.includes("\0") && !pattern.split("/").includes(".."), {
    message: 'expected a glob relative to the repository\'s top level, like "tests/**" or "**/conftest.py" (no leading "/" or ":", no "..")',
  });

const verifySchema = z.strictObject({
  command: z.string().min(1),
  timeout_sec: z
    .number()
    .int()
    .positive()
    .max(24 * 3600)
    .default(600),
  /**
   * Paths restored from the run's base commit in the verification checkout
   * (files the agent added that match are deleted) before the command runs:
   * the tests and test configuration the agent must not change.
   */
  protect: z.array(protectPattern).default([]),
  /**
   * Python's safe path in the verification (`PYTHONSAFEPATH=1`, Python 3.11+): neither the current directory nor
   * a script's directory is put on `sys.path`, so nothing at the checkout's top level (a `*.dist-info` declaring a
   * pytest plugin, a `pytest.py`, a `sitecustomize.py`) is imported before the tests run. `false` turns it off for a
   * command that needs a script's directory on `sys.path` (docs/runs.md "Protected paths").
   */
  python_safe_path: z.boolean().default(true),
});

/** A byte size for the host commit's limits, e.g. "100m"; at least 1 KiB. */
const commitSize = z.union([z.string(), z.number()]).transform((value, context) => {
  const bytes = parseMemory(value);
  if (bytes === null || bytes < 1024) {
    context.addIssue({ code: "custom", message: `expected a size of at least 1k such as "100m" or "1g", got ${JSON.stringify(value)}` });
    return z.NEVER;
  }
  return bytes;
});

/** Bounds of the host-side commit of the agent's work (docs/runs.md "What a run produces"). */
const commitSchema = z.strictObject({
  /** Larger files are left out of the commit and reported (apparent size: sparse files count in full). */
  max_file_size: commitSize.default(100 * 1024 ** 2),
  /** New or changed content past this total is left out and reported. */
  max_total_size: commitSize.default(1024 ** 3),
  /** Wall-clock limit of the commit; past it nothing is committed and the run ends failed (commit_timed_out). */
  timeout_sec: z
    .number()
    .int()
    .positive()
    .max(24 * 3600)
    .default(300),
});

export const taskSchema = z.strictObject({
  name: z.string().regex(/^[a-z0-9][a-z0-9-]*$/, "expected lowercase letters, digits and dashes, like fix-add"),
  instruction: z.string().trim().min(1, "expected the agent's instruction as text"),
  workspace: z.string().min(1).default("."),
  model: modelSchema.default({
    provider: "openai",
    wire: "openai-chat",
    stream: true,
    request_timeout_sec: 300,
    request_deadline_sec: 1800,
    max_retries: 4,
    context_window: 128_000,
  }),
  context: contextSchema.default({ clear_at: 0.6, compact_at: 0.85, keep_tool_results: 6, keep_turns: 4 }),
  sandbox: sandboxSchema.default({
    image: DEFAULT_SANDBOX_IMAGE,
    workdir: DEFAULT_WORKDIR,
    setup: [],
    network: { allow: [], allow_cidrs: [] },
    limits: DEFAULT_LIMITS,
    env: {},
    pass_env: [],
    secret_env: [],
  }),
  verify: verifySchema.optional(),
  commit: commitSchema.default({ max_file_size: 100 * 1024 ** 2, max_total_size: 1024 ** 3, timeout_sec: 300 }),
  max_steps: z.number().int().positive().max(10_000).default(50),
  /**
   * The run's wall-clock limit, seconds (each attempt's: a resume starts it again): past it whatever runs is
   * stopped and the run ends `failed` / `timed_out`, its work so far committed. `runner exec --timeout` sets it.
   */
  timeout_sec: z
    .number()
    .positive()
    .max(7 * 24 * 3600)
    .optional(),
  /** Per tool call default timeout for run_shell, ms. */
  tool_timeout_ms: z
    .number()
    .int()
    .positive()
    .max(24 * 3600 * 1000, "at most 86400000 (24 h)")
    .default(120_000),
  policy: z.string().min(1).default("worker"),
  /** Subagents that may run at once. */
  max_parallel: z.number().int().min(1).max(16).default(4),
  /** Limits of each subagent. */
  subagents: z
    .strictObject({
      max_steps: z.number().int().positive().max(10_000).default(30),
      timeout_sec: z
        .number()
        .int()
        .positive()
        .max(24 * 3600)
        .default(1800),
      /** Policy of explore subagents: a shipped name or a file (like `policy`). */
      explore_policy: z.string().min(1).default("explore"),
      /** Policy of worker subagents; default the task's `policy`. */
      worker_policy: z.string().min(1).optional(),
    })
    .default({ max_steps: 30, timeout_sec: 1800, explore_policy: "explore" }),
  /** MCP servers whose tools the main agent gets (`mcp__<server>__<tool>`); stdio ones run inside the sandbox unless `trusted`. */
  mcp_servers: mcpServersSchema,
  /** Host-side hooks around tool calls (the user's own code; see docs/policies.md "Hooks"). */
  hooks: hooksSchema,
  /**
   * Put the repository's AGENTS.md files (CLAUDE.md or GEMINI.md where a directory has none), as of the
   * base commit, into every agent's system prompt (docs/skills.md "Project instructions"); false turns it off.
   */
  instructions_files: z.boolean().default(true),
  /** `merge`: after a verified success, fast-forward your checked-out branch to the run branch (when it has not moved and is clean). */
  on_success: z.enum(["none", "merge"]).default("none"),
});

export type TaskFile = z.infer<typeof taskSchema>;
