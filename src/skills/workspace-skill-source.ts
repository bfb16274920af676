import { posix } from "node:path";
import type { Sandbox } from "../sandbox/sandbox.js";
import { isValidSkillName, parseSkillFile } from "./parse-skill-file.js";
import { shellWord } from "../process/shell-word.js";
import {
  MAX_SKILL_FILE_BYTES,
  MAX_SKILL_RESOURCE_BYTES,
  MAX_SKILL_RESOURCES,
  MAX_SKILLS_PER_SOURCE,
  type Skill,
  type SkillProblem,
  type SkillSourceResult,
} from "./skill.js";

/** The workspace's skills directory, relative to the repository's top level. */
const WORKSPACE_SKILLS_DIRECTORY = "skills";
/** Most bytes of `git ls-tree` output read (about 10 000 entries). */
export const MAX_TREE_LISTING_BYTES = 1024 * 1024;
/** Time limit of each git command in the sandbox, ms. */
export const GIT_TIMEOUT_MS = 30_000;

export interface WorkspaceSkillOptions {
  /** The task's sandbox; everything is read through `exec`, nothing from the host. */
  sandbox: Sandbox;
  /** The commit the run started from (full object id). Only its tree is read, never the working tree. */
  baseCommit: string;
  /**
   * A git directory of the repository as the container sees it, mounted
   * read-only: for a run, the read-only repository view (its objects, no
   * refs; `CONTAINER_REPOSITORY_DIRECTORY`, see `containerGitView`). Never a
   * path in the workspace (the agent can rewrite `<workdir>/.git` to point
   * git at objects it forged), nor the container's own git directory, which
   * the agent can write.
   */
  gitDirectory: string;
  signal?: AbortSignal;
}

/** One blob of the base commit's `skills/` tree. */
interface TreeBlob {
  objectId: string;
  size: number;
}

/**
 * Reads the workspace's own skills, `skills/<name>/SKILL.md`, from the base
 * commit only, inside the sandbox, with read-only git on the read-only git
 * directory: `git ls-tree` of the commit, then `git cat-file blob` of the
 * object ids it listed. Files the agent wrote or changed during the run are
 * never seen, a symlink in the tree is never followed (only regular blobs
 * count), and nothing outside the repository's objects can be read. Sizes
 * are capped before anything is read. Git's own failures (unknown commit,
 * missing git) are problems; only a sandbox failure throws (SandboxError).
 */
export async function readWorkspaceSkills(options: WorkspaceSkillOptions): Promise<SkillSourceResult> {
  const source = "workspace" as const;
  const { baseCommit } = options;
  const problems: SkillProblem[] = [];
  const skills: Skill[] = [];
  const where = `${baseCommit}:${WORKSPACE_SKILLS_DIRECTORY}/`;
  if (!/^[0-9a-f]{40}(?:[0-9a-f]{24})?$/.test(baseCommit)) {
    throw new Error(`readWorkspaceSkills: baseCommit must be a full object id, got ${JSON.stringify(baseCommit)}`);
  }
  const gitDirectory = posix.normalize(options.gitDirectory);
  const workdir = options.sandbox.workdir;
  if (!posix.isAbsolute(gitDirectory) || gitDirectory === workdir || gitDirectory.startsWith(`${workdir}/`)) {
    throw new Error(
      `readWorkspaceSkills: gitDirectory must be an absolute path outside ${workdir} (the workspace; give the read-only git directory), got ${JSON.stringify(options.gitDirectory)}`,
    );
  }
  const git = gitCommand(gitDirectory);
  const listing = await options.sandbox.exec({
    command: `${SHELL_PRELUDE} ${git} ls-tree -r -l -z --full-tree ${baseCommit} -- ${WORKSPACE_SKILLS_DIRECTORY}/`,
    env: GIT_ENVIRONMENT,
    timeoutMs: GIT_TIMEOUT_MS,
    maxOutputBytes: MAX_TREE_LISTING_BYTES,
    signal: options.signal,
  });
  if (listing.exitCode !== 0) {
    problems.push({
      source,
      location: where,
      message: `${where}: cannot list the base commit's skills (git exit ${listing.exitCode ?? listing.signal}): ${listing.stderr.trim().slice(0, 500)}`,
    });
    return { skills, problems };
  }
  if (listing.truncated) {
    problems.push({
      source,
      location: where,
      message: `${where}: the skills tree lists more than ${MAX_TREE_LISTING_BYTES} bytes of entries; workspace skills are not loaded`,
    });
    return { skills, problems };
  }
  const directories = new Map<string, Map<string, TreeBlob>>();
  for (const record of listing.stdout.split("\0")) {
    const match = /^(\d{6}) (\w+) ([0-9a-f]+) +(-|\d+)\t(.+)$/s.exec(record);
    if (!match) continue;
    const [, mode, type, objectId, size, path] = match;
    const parts = path!.split("/");
    if (parts.length < 3 || parts[0] !== WORKSPACE_SKILLS_DIRECTORY) continue;
    const [, name, ...rest] = parts;
    const files = directories.get(name!) ?? new Map<string, TreeBlob>();
    directories.set(name!, files);
    // Regular files only: a symlink blob holds a path (never followed), a gitlink a commit.
    if (type === "blob" && (mode === "100644" || mode === "100755")) files.set(rest.join("/"), { objectId: objectId!, size: Number(size) });
    else if (rest.join("/") === "SKILL.md") files.set("SKILL.md", { objectId: "", size: -1 });
  }
  const candidates: { name: string; location: string; blob: TreeBlob; files: Map<string, TreeBlob> }[] = [];
  for (const name of [...directories.keys()].sort(compare)) {
    const files = directories.get(name)!;
    const blob = files.get("SKILL.md");
    if (!blob) continue;
    const location = `${where}${name}/SKILL.md`;
    if (candidates.length >= MAX_SKILLS_PER_SOURCE) {
      problems.push({
        source,
        location: where,
        message: `${where}: more than ${MAX_SKILLS_PER_SOURCE} skills; ${name} and the ones after it (by name) are ignored`,
      });
      break;
    }
    if (!isValidSkillName(name)) {
      problems.push({
        source,
        location,
        message: `${location}: "${name}" is not a valid skill name (a-z, 0-9 and single hyphens between them, at most 64 characters); rename the directory`,
      });
    } else if (blob.size < 0) {
      problems.push({ source, location, message: `${location}: is not a regular file (a symlink or a submodule); it is not read` });
    } else if (blob.size > MAX_SKILL_FILE_BYTES) {
      problems.push({
        source,
        location,
        message: `${location}: is ${blob.size} bytes; a SKILL.md may have at most ${MAX_SKILL_FILE_BYTES} (loaded skills stay in the context for the whole run: keep the body short and move reference material to other files of the skill)`,
      });
    } else {
      candidates.push({ name, location, blob, files });
    }
  }
  const contents = await readBlobs(
    options,
    git,
    candidates.map((candidate) => candidate.blob),
  );
  if ("error" in contents) {
    problems.push({ source, location: where, message: `${where}: cannot read the skills from the base commit: ${contents.error}` });
    return { skills, problems };
  }
  candidates.forEach((candidate, index) => {
    const parsed = parseSkillFile(contents.blobs[index]!, candidate.location, candidate.name);
    if ("error" in parsed) {
      problems.push({ source, location: candidate.location, message: parsed.error });
      return;
    }
    const resources = [...candidate.files]
      .filter(([path, blob]) => path !== "SKILL.md" && blob.size >= 0 && !path.split("/").some((part) => part.startsWith(".")))
      .map(([path, blob]) => ({ path, size: blob.size, objectId: blob.objectId }))
      .sort((a, b) => compare(a.path, b.path));
    skills.push({
      ...parsed,
      source,
      location: candidate.location,
      resources: resources.slice(0, MAX_SKILL_RESOURCES).map(({ path, size }) => ({ path, size })),
      resourcesOmitted: Math.max(0, resources.length - MAX_SKILL_RESOURCES),
      async readResource(path, context) {
        const resource = resources.find((entry) => entry.path === path);
        if (!resource) return { error: "not one of the skill's files" };
        if (resource.size > MAX_SKILL_RESOURCE_BYTES) return { error: `the file is ${resource.size} bytes; at most ${MAX_SKILL_RESOURCE_BYTES} are returned` };
        const read = await readBlobs({ sandbox: context.sandbox, signal: context.signal }, git, [resource]);
        return "error" in read ? { error: `cannot read it from the base commit: ${read.error}` } : { content: read.blobs[0]! };
      },
    });
  });
  return { skills, problems };
}

/**
 * Environment of the git commands: no system or global config (the agent can
 * write `$HOME/.gitconfig`, HOME being /tmp), no replace refs, no locks, no
 * prompts, no lazy fetch, and a PATH of the image's system directories only:
 * the container's PATH starts with `/tmp/.local/bin`, where the agent can put
 * a `git` or `base64` of its own that answers with forged text.
 */
export const GIT_ENVIRONMENT: Record<string, string> = {
  PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_CONFIG_COUNT: "0",
  GIT_NO_REPLACE_OBJECTS: "1",
  GIT_OPTIONAL_LOCKS: "0",
  GIT_TERMINAL_PROMPT: "0",
  GIT_NO_LAZY_FETCH: "1",
};

/** Variables that could point git somewhere else, e.g. from the task's `sandbox.env`. */
export const GIT_LOCATION_VARIABLES = [
  "GIT_DIR",
  "GIT_WORK_TREE",
  "GIT_COMMON_DIR",
  "GIT_INDEX_FILE",
  "GIT_OBJECT_DIRECTORY",
  "GIT_ALTERNATE_OBJECT_DIRECTORIES",
  "GIT_NAMESPACE",
  "GIT_REPLACE_REF_BASE",
  "GIT_CONFIG_PARAMETERS",
  "GIT_CONFIG",
  "GIT_CEILING_DIRECTORIES",
  "GIT_DISCOVERY_ACROSS_FILESYSTEM",
];

/** Shell lines run before git: no inherited location variables, and a failing git fails its pipeline. */
const SHELL_PRELUDE = `unset ${GIT_LOCATION_VARIABLES.join(" ")}; set -o pipefail;`;

/** The git invocation: explicit git directory, so nothing is discovered through /workspace. */
export function gitCommand(gitDirectory: string): string {
  return `git --git-dir=${shellWord(gitDirectory)} -c safe.directory='*' -c core.fsmonitor=false`;
}

/** The exact bytes of `blobs` (by object id), base64 on the wire so no byte is lost to text decoding. */
async function readBlobs(
  options: { sandbox: Sandbox; signal?: AbortSignal },
  git: string,
  blobs: TreeBlob[],
): Promise<{ blobs: Buffer[] } | { error: string }> {
  if (!blobs.length) return { blobs: [] };
  for (const blob of blobs) if (!/^[0-9a-f]{40}(?:[0-9a-f]{24})?$/.test(blob.objectId)) return { error: `bad object id ${JSON.stringify(blob.objectId)}` };
  const expected = blobs.reduce((total, blob) => total + Math.ceil(blob.size / 3) * 4 + 1, 0);
  const result = await options.sandbox.exec({
    command: `${SHELL_PRELUDE} for object in ${blobs.map((blob) => blob.objectId).join(" ")}; do ${git} cat-file blob "$object" | base64 -w 0 || exit 3; echo; done`,
    env: GIT_ENVIRONMENT,
    timeoutMs: GIT_TIMEOUT_MS,
    maxOutputBytes: expected + 1024,
    signal: options.signal,
  });
  if (result.exitCode !== 0 || result.truncated) {
    return {
      error: `git exit ${result.exitCode ?? result.signal}${result.truncated ? ", output larger than the sizes listed" : ""}: ${result.stderr.trim().slice(0, 500)}`,
    };
  }
  const lines = result.stdout.split("\n");
  const decoded = blobs.map((_, index) => Buffer.from(lines[index] ?? "", "base64"));
  const mismatch = decoded.findIndex((content, index) => content.length !== blobs[index]!.size);
  if (mismatch !== -1) return { error: `object ${blobs[mismatch]!.objectId} read as ${decoded[mismatch]!.length} bytes, listed as ${blobs[mismatch]!.size}` };
  return { blobs: decoded };
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
