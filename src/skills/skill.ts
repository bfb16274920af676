import type { Sandbox } from "../sandbox/sandbox.js";

/**
 * Where a skill comes from, in precedence order: when two sources define the
 * same name, the earlier one wins and the later one is reported as shadowed
 * (a repository's skills can never replace the runner's or the user's).
 */
export const SKILL_SOURCES = ["builtin", "user", "workspace"] as const;
export type SkillSource = (typeof SKILL_SOURCES)[number];

/**
 * Largest SKILL.md, bytes. A loaded skill stays in the conversation for the
 * whole run (never cleared, carried verbatim through compaction), so a skill
 * must be a short playbook: put long reference material in other files of
 * the skill, which the model reads on demand.
 */
export const MAX_SKILL_FILE_BYTES = 32 * 1024;
/** Largest other file of a skill that `load_skill` with `file` returns, bytes. */
export const MAX_SKILL_RESOURCE_BYTES = 256 * 1024;
/** Other files listed per skill at most (the rest are counted, not named). */
export const MAX_SKILL_RESOURCES = 50;
/** Skills taken from one source at most. */
export const MAX_SKILLS_PER_SOURCE = 100;

/** One other file of a skill: `path` is relative to the skill's directory, `/`-separated. */
export interface SkillResource {
  path: string;
  /** Bytes. */
  size: number;
}

/** A resource's bytes, or why it cannot be read (a sentence for the model). */
export type SkillResourceContent = { content: Buffer } | { error: string };

/** A valid skill, with its body already read (bodies are small; see {@link MAX_SKILL_FILE_BYTES}). */
export interface Skill {
  name: string;
  /** One paragraph, whitespace collapsed: what the skill is for and when to use it. */
  description: string;
  /** The Markdown after the front matter, line ends normalised to `\n`, trimmed. */
  body: string;
  source: SkillSource;
  /** Where the SKILL.md was read, for messages: a host path, or `<base commit>:skills/<name>/SKILL.md`. */
  location: string;
  /** The skill's other files, sorted by path, at most {@link MAX_SKILL_RESOURCES}. */
  resources: SkillResource[];
  /** Further files that exist but are not listed. */
  resourcesOmitted: number;
  /**
   * Reads one of `resources` (any other path is refused). Host skills read
   * on the host, never through a symlink leaving the skill's directory;
   * workspace skills read the base commit's blob through `sandbox`.
   */
  readResource(path: string, context: { sandbox: Sandbox; signal?: AbortSignal }): Promise<SkillResourceContent>;
}

/** A skill that could not be used. `message` names the file and says what to fix. */
export interface SkillProblem {
  source: SkillSource;
  /** The file or directory at fault (host path, or `<base commit>:skills/...`). */
  location: string;
  message: string;
}

/** A valid skill that lost to an earlier source's skill of the same name. */
export interface ShadowedSkill {
  name: string;
  source: SkillSource;
  location: string;
  /** The source whose skill is used instead. */
  shadowedBy: SkillSource;
}

/** What one source yielded. */
export interface SkillSourceResult {
  skills: Skill[];
  problems: SkillProblem[];
}

/** Human name of a source, for messages. */
export function describeSkillSource(source: SkillSource): string {
  return source === "builtin" ? "built-in" : source === "user" ? "user skills directory" : "workspace (base commit)";
}
