import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { z } from "zod";
import type { Task } from "../config/load-task.js";
import { ConfigError } from "../errors.js";
import { invocationJobSchema, type InvocationJob } from "./invocation-job.js";

/**
 * A task as it travels to a worker: the task document with every path the
 * submitter's disk gave it taken out (the workspace comes as a git bundle of
 * its base commit, the scripted model's script as text), and the names, never
 * the values, of its host variables (`sandbox.pass_env`, `sandbox.secret_env`:
 * each worker takes them from its own environment).
 */
const taskJobSchema = z.object({
  kind: z.literal("task"),
  version: z.literal(1),
  /** The job's identity ({@link taskKey}): the JetStream message id, the lease's and the result's key. */
  key: z.string().regex(/^[a-f0-9]{32}$/),
  /** The task's name (task.yaml `name`), for logs and the lease. */
  name: z.string(),
  /** The task document (task.yaml's fields, validated on the submitter) without `workspace` and `model.script`. */
  task: z.record(z.string(), z.unknown()),
  /** The scripted model's script (YAML text) when `model.provider` is `scripted`. */
  script: z.string().nullable(),
  /** The commit the run starts from, and the object holding a git bundle with it (`bundle/<commit>/<submitter process>`). */
  base_commit: z.string().regex(/^[a-f0-9]{40,64}$/),
  bundle: z.string(),
  /** The submitting host and process, for the lease and the logs. */
  submitter: z.string(),
});

/**
 * What a pool's queue carries: a discriminated union on `kind`: a batch's
 * task, or an agency's agent invocation (`bus: nats://…`, invocation-job.ts);
 * a worker refuses (terminates) a kind it does not know, naming it.
 */
export const jobSchema = z.discriminatedUnion("kind", [taskJobSchema, invocationJobSchema]);

export type TaskJob = z.infer<typeof taskJobSchema>;

/** Any job of the pool's queue. */
export type Job = TaskJob | InvocationJob;

/**
 * The job's key: a hash of what decides the run (the task document, the
 * script, the base commit, the batch attempt number). The same task at the
 * same commit is the same job within the queue's retention: a resubmitted
 * batch publishes the same message ids (JetStream drops the duplicates) and
 * finds the results its first submission produced. `--attempts k` gives k
 * keys (pass@k needs k independent runs).
 */
export function taskKey(wire: { task: Record<string, unknown>; script: string | null; base_commit: string }, attempt: number): string {
  const hash = createHash("sha256");
  hash.update(JSON.stringify(canonical({ task: wire.task, script: wire.script, base_commit: wire.base_commit, attempt })));
  return hash.digest("hex").slice(0, 32);
}

/** JSON with object keys sorted at every depth, so equal documents hash alike. */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value && typeof value === "object") {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((key) => [key, canonical((value as Record<string, unknown>)[key])]),
    );
  }
  return value;
}

/**
 * The task's document and script for the wire. Throws ConfigError (the
 * task's `task_invalid` outcome) for what a worker on another machine cannot
 * have: host-side hooks and MCP servers (programs of the submitter's host),
 * `sandbox.build` (a build context on the submitter's disk), a policy file
 * instead of a shipped policy, and `on_success: merge` (only the submitter
 * writes your repository: merge the run branch with `runner batch merge` or git).
 * `policyFile: "carry"` (an agency's invocation, whose policy the orchestrator
 * generates): the policy file's text travels instead (`policy`), the document
 * has no `policy`; a worker writes it beside the task.
 */
export function wireTask(
  task: Task,
  policyFile: "refuse" | "carry" = "refuse",
): { task: Record<string, unknown>; script: string | null; policy: string | null } {
  const refuse = (field: string, why: string) => {
    throw new ConfigError(`${field}: ${why}; a task for NATS workers (--nats) cannot use it (docs/scale-out.md "What a task may use")`);
  };
  if (task.hooks.pre_tool_use.length > 0 || task.hooks.post_tool_use.length > 0) refuse("hooks", "hooks are programs of the submitting host");
  if (Object.keys(task.mcp_servers).length > 0) refuse("mcp_servers", "MCP servers are started from the submitting host's disk");
  if (task.sandbox.build)
    refuse("sandbox.build", "the build context is on the submitting host's disk; build and push the image, then name it in sandbox.image");
  const carried = policyFile === "carry" && !/^[a-z0-9-]+$/.test(task.policy);
  if (!carried && !/^[a-z0-9-]+$/.test(task.policy)) refuse("policy", `${task.policy} is a file on the submitting host; use a shipped policy name`);
  if (!/^[a-z0-9-]+$/.test(task.subagents.explore_policy))
    refuse("subagents.explore_policy", "a policy file on the submitting host; use a shipped policy name");
  if (task.on_success === "merge") refuse("on_success", "merge writes your checkout, which only the submitter may touch");
  const { file: _file, workspacePath: _workspace, scriptPath, ...document } = task;
  const model = { ...document.model } as Record<string, unknown>;
  delete model.script;
  const wire = { ...document, model } as Record<string, unknown>;
  delete wire.workspace;
  if (carried) delete wire.policy;
  return { task: wire, script: scriptPath ? readFileSync(scriptPath, "utf8") : null, policy: carried ? readFileSync(task.policy, "utf8") : null };
}
