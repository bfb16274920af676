import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { readHostSkills } from "./host-skill-source.js";
import { SkillSet } from "./skill-set.js";
import type { SkillSourceResult } from "./skill.js";
import { readWorkspaceSkills, type WorkspaceSkillOptions } from "./workspace-skill-source.js";

/** The project's built-in skills: `skills/` next to package.json (this file is src/skills/ or dist/skills/). */
export const BUILTIN_SKILLS_DIRECTORY = fileURLToPath(new URL("../../skills/", import.meta.url)).replace(/\/$/, "");

/**
 * The user's skills directory, outside any workspace: `$RUNNER_SKILLS_DIR`,
 * else `$RUNNER_HOME/skills` (RUNNER_HOME defaulting to `~/.runner`).
 * `explicit` is true when RUNNER_SKILLS_DIR names it (then it must exist).
 */
export function userSkillsDirectory(environment: NodeJS.ProcessEnv = process.env): { path: string; explicit: boolean } {
  if (environment.RUNNER_SKILLS_DIR) return { path: resolve(environment.RUNNER_SKILLS_DIR), explicit: true };
  return { path: join(resolve(environment.RUNNER_HOME || join(homedir(), ".runner")), "skills"), explicit: false };
}

export interface LoadSkillsOptions {
  /** Built-in skills; default {@link BUILTIN_SKILLS_DIRECTORY}; null for none (tests). */
  builtinDirectory?: string | null;
  /** The user's skills directory (see {@link userSkillsDirectory}); null or absent for none. */
  userDirectory?: { path: string; explicit: boolean } | null;
  /**
   * Real paths of the trees the agent's work can change (the repository,
   * RUNNER_HOME's runs): the user's skills are not read from them, so with
   * RUNNER_HOME inside the repository `$RUNNER_HOME/skills` is skipped. Default none.
   */
  agentTrees?: readonly string[];
  /** The workspace's `skills/` at the base commit, read in the sandbox; null or absent for none. */
  workspace?: WorkspaceSkillOptions | null;
}

/**
 * Loads every skill of a run once, at its start (before the first model
 * call), from the three sources in precedence order, and merges them
 * ({@link SkillSet}). Bodies are read now; `load_skill` later reads only the
 * skills' other files. Invalid skills become `problems`, shadowed ones
 * `shadowed`: neither stops the run. Throws only when the sandbox fails.
 *
 * Load it once per run and give the same set to every agent of the run
 * (subagents included): a worker's worktree starts from its parent's current
 * files, which may hold skills the agent wrote, so never load workspace
 * skills from a worker's base commit.
 */
export async function loadSkills(options: LoadSkillsOptions = {}): Promise<SkillSet> {
  const builtinDirectory = options.builtinDirectory === undefined ? BUILTIN_SKILLS_DIRECTORY : options.builtinDirectory;
  const results: Promise<SkillSourceResult>[] = [];
  if (builtinDirectory) results.push(readHostSkills(builtinDirectory, "builtin", { required: true }));
  if (options.userDirectory)
    results.push(readHostSkills(options.userDirectory.path, "user", { required: options.userDirectory.explicit, agentTrees: options.agentTrees ?? [] }));
  if (options.workspace) results.push(readWorkspaceSkills(options.workspace));
  return SkillSet.fromSources(await Promise.all(results));
}
