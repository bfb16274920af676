import { constants, type Dirent } from "node:fs";
import { lstat, open, readdir, realpath, stat } from "node:fs/promises";
import { join, relative, sep } from "node:path";
import { errorMessage } from "../errors.js";
import { isPathInside } from "../process/path-inside.js";
import { isValidSkillName, parseSkillFile } from "./parse-skill-file.js";
import {
  MAX_SKILL_FILE_BYTES,
  MAX_SKILL_RESOURCE_BYTES,
  MAX_SKILL_RESOURCES,
  MAX_SKILLS_PER_SOURCE,
  type Skill,
  type SkillProblem,
  type SkillResource,
  type SkillResourceContent,
  type SkillSourceResult,
} from "./skill.js";

/** Directory levels below a skill's directory that are searched for its other files. */
const MAX_RESOURCE_DEPTH = 4;

/**
 * Reads the skills of a host directory (the built-in `skills/` or the user's
 * skills directory): each `<root>/<name>/SKILL.md`. Directories without a
 * SKILL.md and hidden entries are ignored; an invalid SKILL.md is a problem.
 *
 * The root and each skill directory may themselves be symlinks (the user's
 * own arrangement); inside a skill directory nothing is read through a
 * symlink whose target leaves that directory: such a SKILL.md is a problem,
 * such a file is not listed. A missing root yields nothing, or a problem when
 * `required` (a directory the user named explicitly). A root or skill
 * directory whose real path lies inside one of `agentTrees` (real paths the
 * agent's work can change) is not read: a problem says so.
 */
export async function readHostSkills(
  root: string,
  source: "builtin" | "user",
  options: { required?: boolean; agentTrees?: readonly string[] } = {},
): Promise<SkillSourceResult> {
  const problems: SkillProblem[] = [];
  const skills: Skill[] = [];
  // Skills are configuration: none is read from where the agent's work can write (README "Trust").
  const agentTreeOf = (path: string) => options.agentTrees?.find((tree) => isPathInside(path, tree)) ?? null;
  const notRead = (location: string, tree: string) => ({
    source,
    location,
    message: `${location}: not read: it is inside ${tree}, which the agent's work can change (the task's repository, or RUNNER_HOME's runs); keep your skills outside it (README "Trust")`,
  });
  const rootTree = agentTreeOf(await realpath(root).catch(() => root));
  if (rootTree) return { skills, problems: [notRead(root, rootTree)] };
  const rootInfo = await stat(root).catch((error: NodeJS.ErrnoException) => error);
  if (rootInfo instanceof Error) {
    if (rootInfo.code === "ENOENT" && !options.required) return { skills, problems };
    problems.push({
      source,
      location: root,
      message: `${root}: cannot read the skills directory (${rootInfo.code === "ENOENT" ? "it does not exist" : errorMessage(rootInfo)})`,
    });
    return { skills, problems };
  }
  if (!rootInfo.isDirectory()) {
    problems.push({ source, location: root, message: `${root}: the skills directory is not a directory` });
    return { skills, problems };
  }
  let entries: Dirent[];
  try {
    entries = (await readdir(root, { withFileTypes: true })).filter((entry) => !entry.name.startsWith(".")).sort(byName);
  } catch (error) {
    problems.push({ source, location: root, message: `${root}: cannot read the skills directory (${errorMessage(error)})` });
    return { skills, problems };
  }
  for (const entry of entries) {
    const directory = join(root, entry.name);
    const directoryInfo = await stat(directory).catch(() => null);
    if (!directoryInfo?.isDirectory()) continue;
    const skillDirectory = await realpath(directory).catch(() => null);
    if (!skillDirectory) continue;
    const skillTree = agentTreeOf(skillDirectory);
    if (skillTree) {
      problems.push(notRead(directory, skillTree));
      continue;
    }
    const skillFile = join(directory, "SKILL.md");
    const read = await readInside(skillDirectory, "SKILL.md", MAX_SKILL_FILE_BYTES);
    if (read === "missing") continue;
    if (skills.length >= MAX_SKILLS_PER_SOURCE) {
      problems.push({
        source,
        location: root,
        message: `${root}: more than ${MAX_SKILLS_PER_SOURCE} skills; ${entry.name} and the ones after it (by name) are ignored`,
      });
      break;
    }
    if (typeof read === "string") {
      problems.push({ source, location: skillFile, message: `${skillFile}: ${read}` });
      continue;
    }
    if (!isValidSkillName(entry.name)) {
      problems.push({
        source,
        location: directory,
        message: `${directory}: "${entry.name}" is not a valid skill name (a-z, 0-9 and single hyphens between them, at most 64 characters); rename the directory`,
      });
      continue;
    }
    const parsed = parseSkillFile(read.content, skillFile, entry.name, read.size);
    if ("error" in parsed) {
      problems.push({ source, location: skillFile, message: parsed.error });
      continue;
    }
    const listed = await listResources(skillDirectory);
    skills.push({
      ...parsed,
      source,
      location: skillFile,
      resources: listed.resources.slice(0, MAX_SKILL_RESOURCES),
      resourcesOmitted: Math.max(0, listed.resources.length - MAX_SKILL_RESOURCES),
      readResource: (path) => readResource(skillDirectory, listed.resources, path),
    });
  }
  return { skills, problems };
}

async function readResource(skillDirectory: string, resources: SkillResource[], path: string): Promise<SkillResourceContent> {
  if (!resources.some((resource) => resource.path === path)) return { error: "not one of the skill's files" };
  const read = await readInside(skillDirectory, path, MAX_SKILL_RESOURCE_BYTES);
  if (read === "missing") return { error: "the file no longer exists" };
  if (typeof read === "string") return { error: read };
  if (read.size > MAX_SKILL_RESOURCE_BYTES) return { error: `the file is ${read.size} bytes; at most ${MAX_SKILL_RESOURCE_BYTES} are returned` };
  return { content: read.content };
}

/**
 * Reads `relativePath` below `directory` (a real path) as a regular file, at
 * most `maxBytes` of it, following a symlink only when its target stays
 * inside `directory`. The final open refuses symlinks (O_NOFOLLOW) and the
 * opened file's path is checked again, so a swap after the first check cannot
 * lead outside. Returns the bytes and the file's size, "missing", or why it was refused.
 */
async function readInside(directory: string, relativePath: string, maxBytes: number): Promise<{ content: Buffer; size: number } | "missing" | string> {
  const requested = join(directory, relativePath);
  let resolved: string;
  try {
    resolved = await realpath(requested);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") {
      // A dangling symlink is refused like any other link, not reported missing.
      return (await lstat(requested).catch(() => null))?.isSymbolicLink() ? `${relativePath} is a symlink to a missing file` : "missing";
    }
    return `cannot read ${relativePath}: ${errorMessage(error)}`;
  }
  const outside = `${relativePath} is a symlink that leads outside the skill's directory; it is not read`;
  if (!isInside(directory, resolved)) return outside;
  let handle;
  try {
    handle = await open(resolved, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    return `cannot read ${relativePath}: ${errorMessage(error)}`;
  }
  try {
    const opened = await realpath(`/proc/self/fd/${handle.fd}`).catch(() => resolved);
    if (!isInside(directory, opened)) return outside;
    const info = await handle.stat();
    if (!info.isFile()) return `${relativePath} is not a regular file`;
    const buffer = Buffer.alloc(Math.min(info.size, maxBytes));
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
    return { content: buffer.subarray(0, bytesRead), size: info.size };
  } finally {
    await handle.close();
  }
}

/** The regular files below `skillDirectory` except SKILL.md, sorted by path; symlinks only when they resolve to a file inside. */
async function listResources(skillDirectory: string): Promise<{ resources: SkillResource[] }> {
  const resources: SkillResource[] = [];
  const limit = MAX_SKILL_RESOURCES * 20;
  const walk = async (directory: string, depth: number): Promise<void> => {
    let entries: Dirent[];
    try {
      entries = await readdir(directory, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries.sort(byName)) {
      if (entry.name.startsWith(".") || resources.length >= limit) continue;
      const path = join(directory, entry.name);
      const relativePath = relative(skillDirectory, path).split(sep).join("/");
      if (relativePath === "SKILL.md") continue;
      if (entry.isDirectory()) {
        if (depth < MAX_RESOURCE_DEPTH) await walk(path, depth + 1);
      } else if (entry.isFile()) {
        resources.push({ path: relativePath, size: (await lstat(path)).size });
      } else if (entry.isSymbolicLink()) {
        const target = await realpath(path).catch(() => null);
        if (!target || !isInside(skillDirectory, target)) continue;
        const info = await stat(target).catch(() => null);
        if (info?.isFile()) resources.push({ path: relativePath, size: info.size });
      }
    }
  };
  await walk(skillDirectory, 0);
  resources.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return { resources };
}

function isInside(directory: string, path: string): boolean {
  return path.startsWith(directory.endsWith(sep) ? directory : `${directory}${sep}`);
}

function byName(a: Dirent, b: Dirent): number {
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}
