import { isAbsolute, resolve } from "node:path";
import type { TaskDefaults } from "../config/defaults-file.js";
import type { Task } from "../config/load-task.js";
import { modelFlag } from "../config/model-flag.js";
import { ConfigError } from "../errors.js";
import { loadUntrustedTaskFile, validateUntrustedTask } from "../runner/untrusted-task.js";
import { CeilingExceededError, resumeCeilingProblems, type Ceilings } from "../runner/operator-ceilings.js";

/**
 * The task run_start describes: the task file, or the ad-hoc fields, trust-checked (src/runner/untrusted-task.ts) and
 * within `ceilings` (CeilingExceededError naming each field above its ceiling).
 */
export function taskOf(
  input: {
    task_file?: string;
    instruction?: string;
    workspace?: string;
    verify?: string;
    model?: string;
    policy?: string;
    allow_hosts?: string[];
    max_steps?: number;
    name?: string;
  },
  roots: string[],
  defaults: ((workspacePath: string) => TaskDefaults) | undefined,
  ceilings: Ceilings,
): Task {
  const base = roots[0]!;
  if (input.task_file) {
    const adHoc = (["instruction", "workspace", "verify", "model", "policy", "allow_hosts", "name"] as const).filter((field) => input[field] !== undefined);
    if (adHoc.length)
      throw new ConfigError(`${adHoc.join(", ")}: ad-hoc fields, not with task_file (set them in the task file; only max_steps applies to both)`);
    const task = loadUntrustedTaskFile(isAbsolute(input.task_file) ? input.task_file : resolve(base, input.task_file), roots, { defaults, ceilings });
    if (!input.max_steps) return task;
    const above = resumeCeilingProblems({ max_steps: input.max_steps }, ceilings);
    if (above.length) throw new CeilingExceededError("run_start", above);
    return { ...task, max_steps: input.max_steps };
  }
  if (!input.instruction) throw new ConfigError("instruction: give the task as task_file, or instruction (what to do) with workspace (the repository)");
  if (!input.workspace) throw new ConfigError(`workspace: an ad-hoc task needs the git repository to work on (an absolute path inside ${roots.join(", ")})`);
  const raw: Record<string, unknown> = { name: input.name ?? "adhoc", instruction: input.instruction, workspace: input.workspace };
  if (input.verify) raw.verify = { command: input.verify };
  if (input.model) raw.model = modelFlag(input.model, "model");
  if (input.policy) raw.policy = input.policy;
  if (input.allow_hosts?.length) raw.sandbox = { network: { allow: input.allow_hosts } };
  if (input.max_steps) raw.max_steps = input.max_steps;
  return validateUntrustedTask(raw, { roots, baseDirectory: base }, { label: "run_start", defaults, ceilings });
}
