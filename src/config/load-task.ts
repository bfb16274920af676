import { existsSync, readFileSync, realpathSync, statSync } from "node:fs";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { parseDocument } from "yaml";
import { ConfigError } from "../errors.js";
import { describeIssue, describeYamlError, yamlDocumentValue } from "../describe-issue.js";
import { loadPolicy, PolicyValidationError, shippedPolicyNames } from "../policy/load-policy.js";
import { applyDefaults, type TaskDefaults } from "./defaults-file.js";
import { taskSchema, type TaskFile } from "./task-schema.js";
import type { ImageBuild } from "../sandbox/task-image.js";
import { isPathInside } from "../process/path-inside.js";
import { repositoryTopLevel } from "../process/repository-top-level.js";
import { hookProblems } from "../hooks/tool-hooks.js";
import { trustedServerProblems } from "../mcp/index.js";

/** A validated task with every path made absolute. */
export interface Task extends TaskFile {
  /** `sandbox.build`, when given, has absolute paths and its Dockerfile named. */
  sandbox: TaskFile["sandbox"] & { build?: ImageBuild };
  /** Absolute path of task.yaml, or null for an ad-hoc task. */
  file: string | null;
  /** Absolute workspace directory. */
  workspacePath: string;
  /** Absolute script path when the model is scripted. */
  scriptPath: string | null;
}

/** One problem in a task file: where, and what is expected. */
export interface TaskProblem {
  /** Dotted field path, e.g. `sandbox.limits.memory`; empty for the file itself. */
  path: string;
  message: string;
}

/** Thrown with *all* problems of a task file, so the user fixes them in one go. Exit 2. */
export class TaskValidationError extends ConfigError {
  constructor(
    readonly file: string,
    readonly problems: TaskProblem[],
  ) {
    super(
      `${file}: ${problems.length} problem${problems.length === 1 ? "" : "s"}:\n${problems.map((problem) => `  - ${problem.path || "(file)"}: ${problem.message}`).join("\n")}`,
    );
  }
}

/**
 * Reads, parses and validates a task file. Throws {@link TaskValidationError}
 * listing every problem (YAML syntax, schema, and cross-field checks such as
 * a missing workspace or script) with its field path. `defaults`, given the
 * task's absolute workspace path, returns the defaults that go under the
 * file's fields (src/config/defaults-file.ts; docs/command-line.md "Defaults file").
 */
export function loadTaskFile(file: string, options: { defaults?: (workspacePath: string) => TaskDefaults } = {}): Task {
  const absolute = resolve(file);
  if (!existsSync(absolute)) throw new TaskValidationError(absolute, [{ path: "", message: "file not found" }]);
  if (!statSync(absolute).isFile()) throw new TaskValidationError(absolute, [{ path: "", message: "not a file; give the path of a task.yaml" }]);
  const source = readFileSync(absolute, "utf8");
  const document = parseDocument(source, { prettyErrors: true });
  if (document.errors.length) {
    throw new TaskValidationError(
      absolute,
      document.errors.map((error) => ({ path: "", message: describeYamlError(error, source) })),
    );
  }
  const built = yamlDocumentValue(document);
  if ("problem" in built) throw new TaskValidationError(absolute, [{ path: "", message: built.problem }]);
  const raw = built.value;
  if (options.defaults && typeof raw === "object" && raw !== null && !Array.isArray(raw)) {
    const workspace = (raw as { workspace?: unknown }).workspace;
    const workspacePath = resolve(dirname(absolute), typeof workspace === "string" && workspace ? workspace : ".");
    return validateTask(applyDefaults(raw as Record<string, unknown>, options.defaults(workspacePath)), absolute, dirname(absolute));
  }
  return validateTask(raw, absolute, dirname(absolute));
}

/** Validates an already-parsed task object; paths resolve against `baseDirectory`. */
export function validateTask(raw: unknown, file: string | null, baseDirectory: string): Task {
  const label = file ?? "task";
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw new TaskValidationError(label, [{ path: "", message: "expected a mapping of task fields (name, instruction, workspace, ...)" }]);
  }
  const parsed = taskSchema.safeParse(raw, { reportInput: true });
  const problems: TaskProblem[] = parsed.success ? [] : parsed.error.issues.map((issue) => describeIssue(issue, "docs/task-yaml.md", taskSchema));
  if (!parsed.success) throw new TaskValidationError(label, problems);
  const task = parsed.data;
  const workspacePath = isAbsolute(task.workspace) ? task.workspace : resolve(baseDirectory, task.workspace);
  if (!existsSync(workspacePath)) {
    problems.push({ path: "workspace", message: `directory ${workspacePath} does not exist` });
  }
  let scriptPath: string | null = null;
  if (task.model.provider === "scripted") {
    if (!task.model.script) {
      problems.push({ path: "model.script", message: "required when model.provider is scripted (path to the script YAML)" });
    } else {
      scriptPath = isAbsolute(task.model.script) ? task.model.script : resolve(baseDirectory, task.model.script);
      if (!existsSync(scriptPath)) problems.push({ path: "model.script", message: `file ${scriptPath} does not exist` });
    }
  } else if (task.model.script) {
    problems.push({ path: "model.script", message: "only used with model.provider: scripted" });
  }
  const sandbox = resolveImageBuild(raw as Record<string, unknown>, task.sandbox, baseDirectory, problems);
  if (task.sandbox.network.allow_cidrs.length > 0 && task.sandbox.network.allow.length === 0) {
    problems.push({
      path: "sandbox.network.allow_cidrs",
      message: "only used together with sandbox.network.allow (which hosts may resolve into these ranges)",
    });
  }
  // A shipped policy by name, or a file relative to the task file, never one inside the repository:
  // nothing an agent could have written is loaded as configuration (issue 6, "Trust").
  const policyField = (field: string, value: string): string => {
    if (SHIPPED_NAME.test(value)) {
      checkPolicy(field, value);
      return value;
    }
    const path = isAbsolute(value) ? value : resolve(baseDirectory, value);
    if (existsSync(workspacePath) && isPathInside(realpathIfExists(path), realpathIfExists(workspacePath))) {
      problems.push({
        path: field,
        message: `${path} is inside the workspace repository; keep policy files outside it (or use a shipped policy: ${shippedPolicyNames().join(", ")})`,
      });
    } else {
      checkPolicy(field, path);
    }
    return path;
  };
  const checkPolicy = (field: string, source: string) => {
    try {
      loadPolicy(source);
    } catch (error) {
      if (!(error instanceof PolicyValidationError)) throw error;
      for (const problem of error.problems)
        problems.push({ path: `${field}${problem.path ? ` (${problem.path})` : ""}`, message: `${error.file}: ${problem.message}` });
    }
  };
  // Hooks and trusted MCP servers run on the host: never from the repository the agent's work can change.
  const agentTrees = existsSync(workspacePath) ? [repositoryTopLevel(workspacePath) ?? realpathIfExists(workspacePath)] : [];
  problems.push(
    ...hookProblems(task.hooks, { cwd: baseDirectory, searchPath: process.env.PATH, agentTrees }),
    ...trustedServerProblems(task.mcp_servers, { cwd: baseDirectory, agentTrees }),
  );
  const policy = policyField("policy", task.policy);
  const subagents = {
    ...task.subagents,
    explore_policy: policyField("subagents.explore_policy", task.subagents.explore_policy),
    ...(task.subagents.worker_policy ? { worker_policy: policyField("subagents.worker_policy", task.subagents.worker_policy) } : {}),
  };
  if (problems.length) throw new TaskValidationError(label, problems);
  return { ...task, sandbox, policy, subagents, file, workspacePath, scriptPath };
}

/**
 * `sandbox.build` with its paths made absolute against the task file's
 * directory (`dockerfile` default `<context>/Dockerfile`), each checked to
 * exist. `image` and `build` together are refused: which one a run uses
 * would be a guess (the built image is tagged by its inputs' hash, see
 * src/sandbox/task-image.ts).
 */
function resolveImageBuild(raw: Record<string, unknown>, sandbox: TaskFile["sandbox"], baseDirectory: string, problems: TaskProblem[]): Task["sandbox"] {
  if (!sandbox.build) return { ...sandbox, build: undefined };
  const rawSandbox = raw.sandbox as Record<string, unknown> | undefined;
  if (rawSandbox?.image !== undefined) {
    problems.push({
      path: "sandbox.image",
      message: "give either sandbox.image (an existing image) or sandbox.build (the runner builds and tags it), not both",
    });
  }
  const context = resolve(baseDirectory, sandbox.build.context);
  const dockerfile = sandbox.build.dockerfile ? resolve(baseDirectory, sandbox.build.dockerfile) : join(context, "Dockerfile");
  if (!existsSync(context) || !statSync(context).isDirectory()) {
    problems.push({ path: "sandbox.build.context", message: `directory ${context} does not exist (paths are relative to the task file)` });
  } else if (!existsSync(dockerfile) || !statSync(dockerfile).isFile()) {
    problems.push({
      path: sandbox.build.dockerfile ? "sandbox.build.dockerfile" : "sandbox.build",
      message: `no Dockerfile at ${dockerfile}; give sandbox.build.dockerfile (relative to the task file)`,
    });
  }
  return { ...sandbox, build: { context, dockerfile, args: sandbox.build.args } };
}

/** A shipped policy's name (a bare word); anything else is a path. */
const SHIPPED_NAME = /^[a-z0-9][a-z0-9-]*$/;

function realpathIfExists(path: string): string {
  return existsSync(path) ? realpathSync(path) : resolve(path);
}
