import { closeSync, constants, existsSync, fstatSync, lstatSync, openSync, readdirSync, readFileSync, realpathSync } from "node:fs";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { parseDocument } from "yaml";
import { describeYamlError, yamlDocumentValue } from "../describe-issue.js";
import { applyDefaults, type TaskDefaults } from "../config/defaults-file.js";
import { TaskValidationError, validateTask, type Task, type TaskProblem } from "../config/load-task.js";
import { shippedPolicyNames } from "../policy/load-policy.js";
import { isPathInside } from "../process/path-inside.js";
import { capTask, CeilingExceededError, modelBudget, type Ceilings } from "./operator-ceilings.js";

/**
 * Where an untrusted caller's paths may point: `roots` are directories
 * (absolute or relative to the current directory; resolved through
 * symlinks), `baseDirectory` is what a relative path in a task object is
 * resolved against (a task file's own paths resolve against its directory).
 */
export interface TrustRoots {
  roots: readonly string[];
  baseDirectory: string;
  /** The server option that names the roots, for the message of a path outside them (default `--workspace-root`, `runner mcp`'s; `runner serve` has `--tasks-root`). */
  rootsOption?: string;
}

/**
 * What an untrusted caller (a task object or ad-hoc fields sent to `runner
 * serve` or `runner mcp`, and a task file such a caller names) may not set,
 * and why: each of these makes the host run, read or send something the
 * caller picks, outside the sandbox.
 *
 * - `hooks`: commands the host runs as the user around tool calls;
 * - `mcp_servers`: server commands (`trusted` ones run on the host) and endpoints;
 * - `policy`, `subagents.explore_policy`, `subagents.worker_policy`: only a
 *   shipped policy's name, never a file (a policy decides what needs asking);
 * - `model.base_url`: the runner would send the host's API key there;
 * - `model.prices`: prices of 0 make every run free, so the operator's
 *   `model.max_cost_usd` ceiling is never reached;
 * - `sandbox.pass_env`, `sandbox.secret_env`: host environment variables into the sandbox;
 * - `sandbox.network.allow_cidrs`: lets allowed names resolve into private and
 *   link-local ranges (a cloud's metadata address);
 * - `on_success`: a merge into the user's checkout, which later runs read as
 *   configuration (the HTTP API's own merge, a person's choice, stays);
 * - `workspace`, `model.script`, `sandbox.build.context`,
 *   `sandbox.build.dockerfile` (also the default `<context>/Dockerfile`), and
 *   the git directories a linked worktree's `.git` file names: paths outside
 *   the roots.
 *
 * Everything else (instruction, verify, image, setup, network allow-list,
 * limits) acts inside the sandbox and is the caller's to choose, the limits,
 * steps, time and budget within the operator's ceilings (src/runner/operator-ceilings.ts).
 * The rules are docs/mcp-server.md "Trust" (and the HTTP API's docs).
 */
const REFUSED_FIELDS: readonly { path: string[]; why: string }[] = [
  { path: ["hooks"], why: "hooks run commands on the host as you; a caller of the API cannot set them (put them in a task file you run with `runner exec`)" },
  {
    path: ["mcp_servers"],
    why: "MCP servers are commands or endpoints the runner starts or reaches for the agent; a caller of the API cannot set them (put them in a task file you run with `runner exec`)",
  },
  { path: ["model", "base_url"], why: "the runner would send the host's model API key to it; set OPENAI_BASE_URL where the server starts instead" },
  { path: ["sandbox", "pass_env"], why: "it passes the host's environment variables into the sandbox; a caller of the API cannot choose them" },
  { path: ["sandbox", "secret_env"], why: "it passes the host's environment variables into the sandbox; a caller of the API cannot choose them" },
  {
    path: ["sandbox", "network", "allow_cidrs"],
    why: "it lets allowed names resolve to private and link-local addresses (a cloud's metadata service); set it in a task file you run with `runner exec`",
  },
  {
    path: ["model", "prices"],
    why: "prices decide what a run costs, which this server's model.max_cost_usd ceiling bounds; name a model the price table knows (model.name), or ask the operator to price it in the server's defaults file",
  },
  {
    path: ["on_success"],
    why: "a merge changes your checkout, which later runs read as configuration; merge a verified run yourself (runner serve: POST /v1/runs/{id}/merge; or git merge its branch)",
  },
];

const POLICY_FIELDS: readonly string[][] = [["policy"], ["subagents", "explore_policy"], ["subagents", "worker_policy"]];

/** Path fields, relative ones resolved against the base directory (as {@link validateTask} does). */
const PATH_FIELDS: readonly string[][] = [["workspace"], ["model", "script"], ["sandbox", "build", "context"], ["sandbox", "build", "dockerfile"]];

/**
 * The problems of a task object from an untrusted caller, each naming the
 * field and the fix (empty: nothing refused). Only the trust rules of
 * {@link REFUSED_FIELDS} are checked here; the task's schema is
 * {@link validateTask}'s. An absent `workspace` means the base directory
 * (the task schema's default "."), which must lie inside a root too.
 */
export function untrustedTaskProblems(raw: unknown, trust: TrustRoots): TaskProblem[] {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return [];
  const problems: TaskProblem[] = [];
  for (const { path, why } of REFUSED_FIELDS) {
    if (valueAt(raw, path) !== undefined) problems.push({ path: path.join("."), message: `not allowed here: ${why}` });
  }
  const shipped = shippedPolicyNames();
  for (const path of POLICY_FIELDS) {
    const value = valueAt(raw, path);
    if (value !== undefined && !(typeof value === "string" && shipped.includes(value))) {
      problems.push({
        path: path.join("."),
        message: `only a shipped policy's name is allowed here (${shipped.join(", ")}), not ${JSON.stringify(value)}: a policy file decides what the agent may do without asking`,
      });
    }
  }
  const roots = realRoots(trust.roots);
  const inside = (absolute: string) => roots.some((root) => isPathInside(realpathOrSelf(absolute), root));
  const absoluteOf = (value: string) => (isAbsolute(value) ? value : resolve(trust.baseDirectory, value));
  for (const path of PATH_FIELDS) {
    const value = path.length === 1 && path[0] === "workspace" ? (valueAt(raw, path) ?? ".") : valueAt(raw, path);
    if (typeof value !== "string" || value === "") continue;
    const absolute = absoluteOf(value);
    if (!inside(absolute)) problems.push({ path: path.join("."), message: outsideRoots(absolute, roots, trust.rootsOption) });
  }
  // The Dockerfile a build reads when none is named: `<context>/Dockerfile`, which may be a link out of the roots.
  const context = valueAt(raw, ["sandbox", "build", "context"]);
  if (typeof context === "string" && context !== "" && valueAt(raw, ["sandbox", "build", "dockerfile"]) === undefined) {
    const dockerfile = join(absoluteOf(context), "Dockerfile");
    if (!inside(dockerfile)) problems.push({ path: "sandbox.build", message: `its Dockerfile: ${outsideRoots(dockerfile, roots, trust.rootsOption)}` });
  }
  // A linked worktree (or a repository whose .git is a link or a gitdir file) keeps its git directory elsewhere: the
  // run mounts that into the sandbox and writes branches there, so it must lie inside the roots too.
  const workspace = valueAt(raw, ["workspace"]) ?? ".";
  if (typeof workspace === "string" && workspace !== "") {
    for (const gitDirectory of gitDirectoriesOf(absoluteOf(workspace))) {
      if (!inside(gitDirectory)) problems.push({ path: "workspace", message: `its git directory: ${outsideRoots(gitDirectory, roots, trust.rootsOption)}` });
    }
  }
  return problems;
}

/**
 * Every place outside its own `.git` that a repository at `workspace` reads or writes git data through: the target
 * of a `.git` link; the `gitdir:` of a `.git` file (a linked worktree, a submodule); in each git directory, its
 * `commondir`, the paths `objects/info/alternates` lists, and the target of every symlink inside it. Read as plain
 * files, never through git (no configuration of the repository is interpreted). A git directory of more than
 * {@link MAX_GIT_ENTRIES} entries is returned as itself with a note, so the caller refuses it rather than guess.
 */
function gitDirectoriesOf(workspace: string): string[] {
  const dotGit = join(workspace, ".git");
  let stats;
  try {
    stats = lstatSync(dotGit);
  } catch {
    return [];
  }
  if (stats.isSymbolicLink()) return [dotGit];
  const found: string[] = [];
  let gitDirectory = dotGit;
  if (stats.isFile()) {
    const named = /^gitdir:\s*(.+?)\s*$/m.exec(readFileSync(dotGit, "utf8"))?.[1];
    if (!named) return [];
    gitDirectory = resolve(workspace, named);
    found.push(gitDirectory);
  } else if (!stats.isDirectory()) {
    return [];
  }
  const commonFile = join(gitDirectory, "commondir");
  const common = existsSync(commonFile) ? resolve(gitDirectory, readFileSync(commonFile, "utf8").trim()) : null;
  if (common) found.push(common);
  for (const directory of common ? [gitDirectory, common] : [gitDirectory]) {
    const alternates = join(directory, "objects", "info", "alternates");
    if (existsSync(alternates)) {
      for (const line of readFileSync(alternates, "utf8").split("\n")) {
        if (line.trim() && !line.startsWith("#")) found.push(resolve(join(directory, "objects"), line.trim()));
      }
    }
    found.push(...linksBelow(directory));
  }
  return found;
}

const MAX_GIT_ENTRIES = 200_000;

/** The symlinks below `directory` (not followed), as the paths they name; over {@link MAX_GIT_ENTRIES} entries, the directory itself marked. */
function linksBelow(directory: string): string[] {
  const links: string[] = [];
  const pending = [directory];
  let entries = 0;
  while (pending.length) {
    const current = pending.pop()!;
    let names: string[];
    try {
      names = readdirSync(current);
    } catch {
      continue;
    }
    for (const name of names) {
      if (++entries > MAX_GIT_ENTRIES) return [`${directory} (more than ${MAX_GIT_ENTRIES} entries to check for links)`];
      const path = join(current, name);
      const stats = lstatSync(path, { throwIfNoEntry: false });
      if (stats?.isSymbolicLink()) links.push(path);
      else if (stats?.isDirectory()) pending.push(path);
    }
  }
  return links;
}

/**
 * A task object from an untrusted caller, checked by
 * {@link untrustedTaskProblems} and then validated like a task file
 * ({@link validateTask}: relative paths against `trust.baseDirectory`), with
 * `defaults` (the server's own defaults files, trusted) under the caller's
 * fields, and within `ceilings` when given ({@link validateCapped}). Throws
 * {@link TaskValidationError} (exit 2) listing every problem, labelled `label`
 * (e.g. "run_start", "POST /v1/runs"); {@link CeilingExceededError} for fields above a ceiling.
 */
export function validateUntrustedTask(
  raw: unknown,
  trust: TrustRoots,
  options: { label: string; defaults?: (workspacePath: string) => TaskDefaults; ceilings?: Ceilings },
): Task {
  const problems = untrustedTaskProblems(raw, trust);
  if (problems.length) throw new TaskValidationError(options.label, problems);
  return validateCapped(raw, withDefaults(raw, trust.baseDirectory, options.defaults), options.label, null, trust.baseDirectory, options.ceilings);
}

/**
 * `merged` validated as a task after the operator's `ceilings` (none: as it
 * is): a field `raw` sets above its ceiling throws {@link CeilingExceededError}
 * (every such field named, with the asked value and the ceiling); an unset one
 * gets the ceiling where its default is higher; an unset `model.max_cost_usd`
 * gets its ceiling when the model's prices are known (a budget needs them: the
 * runner refuses one over an unpriced model), from this process's environment
 * as the Runner reads it (`OPENAI_MODEL`, …); an unpriced model of a real
 * provider throws {@link CeilingExceededError} at `model.name` ({@link modelBudget}).
 */
function validateCapped(raw: unknown, merged: unknown, label: string, file: string | null, baseDirectory: string, ceilings: Ceilings | undefined): Task {
  if (!ceilings) return validateTask(merged, file, baseDirectory);
  const capped = capTask(raw, merged, ceilings);
  if (capped.problems.length) throw new CeilingExceededError(label, capped.problems);
  const task = validateTask(capped.task, file, baseDirectory);
  const budget = modelBudget(task.model, ceilings, process.env);
  if (budget.problems.length) throw new CeilingExceededError(label, budget.problems);
  return budget.fill === undefined ? task : { ...task, model: { ...task.model, max_cost_usd: budget.fill } };
}

/**
 * A task file an untrusted caller names: the file must lie inside
 * `roots` and its fields pass {@link untrustedTaskProblems} (its relative
 * paths against its own directory), as a task object would, within
 * `ceilings` when given. The file is read once ({@link readTaskFileOnce}): the
 * fields checked are the fields run, and no error path reads it again.
 * Throws {@link TaskValidationError} naming the file and every problem (not
 * found, not a file, outside the roots, a YAML error; {@link CeilingExceededError}
 * for fields above a ceiling).
 */
export function loadUntrustedTaskFile(
  file: string,
  roots: readonly string[],
  options: { defaults?: (workspacePath: string) => TaskDefaults; rootsOption?: string; ceilings?: Ceilings } = {},
): Task {
  const absolute = resolve(file);
  const real = realRoots(roots);
  if (!real.some((root) => isPathInside(realpathOrSelf(absolute), root)))
    throw new TaskValidationError(absolute, [{ path: "", message: outsideRoots(absolute, real, options.rootsOption) }]);
  const source = readTaskFileOnce(absolute, real, options.rootsOption);
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
  const problems = untrustedTaskProblems(raw, { roots, baseDirectory: dirname(absolute), rootsOption: options.rootsOption });
  if (problems.length) throw new TaskValidationError(absolute, problems);
  return validateCapped(raw, withDefaults(raw, dirname(absolute), options.defaults), absolute, absolute, dirname(absolute), options.ceilings);
}

/**
 * The text of task file `absolute`, read through one descriptor: opened at
 * its real path with `O_NOFOLLOW` (a link swapped in after the path was
 * resolved fails the open) and `O_NONBLOCK` (a FIFO cannot hang the server),
 * a regular file by `fstat`, and inside `realRoots` by the descriptor's own
 * real path (`/proc/self/fd/N`, as src/skills/host-skill-source.ts reads
 * skill files). Throws {@link TaskValidationError}: "file not found", "not a
 * file", outside the roots, or the open's error.
 */
function readTaskFileOnce(absolute: string, realRoots: string[], rootsOption: string | undefined): string {
  const refuse = (message: string) => new TaskValidationError(absolute, [{ path: "", message }]);
  let descriptor: number;
  try {
    descriptor = openSync(realpathSync.native(absolute), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT") throw refuse("file not found");
    if (code === "ELOOP") throw refuse("it was replaced by a link while it was read; give the path of a task.yaml, not a link");
    throw refuse(`cannot read it: ${(error as Error).message}`);
  }
  try {
    if (!fstatSync(descriptor).isFile()) throw refuse("not a file; give the path of a task.yaml");
    const opened = realpathOrSelf(`/proc/self/fd/${descriptor}`);
    if (!realRoots.some((root) => isPathInside(opened, root))) throw refuse(outsideRoots(opened, realRoots, rootsOption));
    return readFileSync(descriptor, "utf8");
  } finally {
    closeSync(descriptor);
  }
}

/** `raw` with the trusted defaults under its fields (the defaults see the task's absolute workspace). */
function withDefaults(raw: unknown, baseDirectory: string, defaults: ((workspacePath: string) => TaskDefaults) | undefined): unknown {
  if (!defaults || typeof raw !== "object" || raw === null || Array.isArray(raw)) return raw;
  const record = raw as Record<string, unknown>;
  return applyDefaults(record, defaults(resolve(baseDirectory, typeof record.workspace === "string" && record.workspace ? record.workspace : ".")));
}

function outsideRoots(given: string, roots: string[], option = "--workspace-root"): string {
  const real = realpathOrSelf(given);
  const path = real === given ? given : `${given} (a link to ${real})`;
  return roots.length === 0
    ? `${path} is outside every allowed root (none given); start the server with ${option} DIR for the directories its callers may use`
    : `${path} is outside the allowed roots (${roots.join(", ")}); use a path inside one, or start the server with ${option} for its directory`;
}

function valueAt(raw: object, path: readonly string[]): unknown {
  let value: unknown = raw;
  for (const key of path) {
    if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
    value = (value as Record<string, unknown>)[key];
  }
  return value;
}

function realRoots(roots: readonly string[]): string[] {
  return roots.map((root) => realpathOrSelf(resolve(root)));
}

/**
 * The real path of `path`, or of its nearest existing ancestor with the rest
 * appended: a path that does not exist yet cannot escape through a symlink
 * below that ancestor, and a symlinked ancestor is followed.
 */
function realpathOrSelf(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    const parent = dirname(path);
    return parent === path ? path : join(realpathOrSelf(parent), path.slice(parent.length + (parent.endsWith("/") ? 0 : 1)));
  }
}

/**
 * Why an untrusted caller (`runner mcp`, `runner serve`) may not see or act on the run recorded in `runDirectory`
 * (its events, result, patch, resume, merge, cancel); null when it may. A caller may act on a run only if it could
 * have started that run itself: the recorded task (task.json) has its workspace and the workspace's git directories
 * inside the roots, no hooks, MCP servers, merge on success, base URL, host variables or policy file. So the user's
 * own `runner exec` runs elsewhere stay out of reach (their records, their checkouts, their hooks on resume).
 * `allowMerge`: a recorded merge on success is no reason (the HTTP API lets its callers merge). `vouchedPolicy`: policy
 * files the caller vouches for (`runner serve`: the policies an agency it may use generated for its invocations).
 */
export function recordedRunRefusal(
  runDirectory: string,
  trust: { roots: readonly string[]; allowMerge?: boolean; vouchedPolicy?: (file: string) => boolean },
): string | null {
  let task: Record<string, unknown>;
  try {
    task = JSON.parse(readFileSync(join(runDirectory, "task.json"), "utf8")) as Record<string, unknown>;
  } catch {
    return "its task record (task.json) cannot be read";
  }
  const roots = realRoots(trust.roots);
  const inside = (path: string) => roots.some((root) => isPathInside(realpathOrSelf(path), root));
  const workspace = typeof task.workspacePath === "string" ? task.workspacePath : null;
  if (!workspace) return "its task record names no workspace";
  if (!inside(workspace)) return `its workspace ${workspace} is outside the allowed roots`;
  for (const gitDirectory of gitDirectoriesOf(workspace)) if (!inside(gitDirectory)) return `its git directory ${gitDirectory} is outside the allowed roots`;
  if (hasEntries(task.hooks)) return "its task has hooks";
  if (hasEntries(task.mcp_servers)) return "its task has MCP servers";
  // `runner serve`'s callers may merge verified runs (its merge route, a start's `merge`); `runner mcp`'s may not.
  if (task.on_success === "merge" && !trust.allowMerge) return "its task merges into your checkout on success";
  const model = task.model as Record<string, unknown> | undefined;
  if (model?.base_url) return "its task sets model.base_url";
  const sandbox = task.sandbox as Record<string, unknown> | undefined;
  if (hasEntries(sandbox?.pass_env) || hasEntries(sandbox?.secret_env)) return "its task passes host environment variables";
  const subagents = task.subagents as Record<string, unknown> | undefined;
  for (const policy of [task.policy, subagents?.explore_policy, subagents?.worker_policy]) {
    if (typeof policy === "string" && !shippedPolicyNames().includes(policy) && !trust.vouchedPolicy?.(policy)) return "its task has a policy file";
  }
  return null;
}

/** A non-empty array, or an object with a non-empty value (hooks: `{ pre_tool_use: [] }` is empty). */
function hasEntries(value: unknown): boolean {
  if (Array.isArray(value)) return value.length > 0;
  if (typeof value === "object" && value !== null)
    return Object.values(value).some((entry) => (typeof entry === "object" && entry !== null ? hasEntries(entry) : Boolean(entry)));
  return false;
}
