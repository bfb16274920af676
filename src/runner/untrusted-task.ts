import { existsSync, lstatSync, readFileSync, realpathSync, statSync } from "node:fs";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { parseDocument } from "yaml";
import { yamlDocumentValue } from "../describe-issue.js";
import { applyDefaults, type TaskDefaults } from "../config/defaults-file.js";
import { loadTaskFile, TaskValidationError, validateTask, type Task, type TaskProblem } from "../config/load-task.js";
import { shippedPolicyNames } from "../policy/load-policy.js";
import { isPathInside } from "../process/path-inside.js";

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
 * limits) acts inside the sandbox and is the caller's to choose.
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
 * The git directories a repository at `workspace` uses when they are not its own `.git` directory: the target of a
 * `.git` link, the `gitdir:` of a `.git` file (a linked worktree, a submodule) and that directory's `commondir`.
 * Read as plain files, never through git (no config of the repository is interpreted).
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
  if (!stats.isFile()) return [];
  const gitDirectory = /^gitdir:\s*(.+?)\s*$/m.exec(readFileSync(dotGit, "utf8"))?.[1];
  if (!gitDirectory) return [];
  const absolute = resolve(workspace, gitDirectory);
  const commonFile = join(absolute, "commondir");
  const common = existsSync(commonFile) ? resolve(absolute, readFileSync(commonFile, "utf8").trim()) : null;
  return common ? [absolute, common] : [absolute];
}

/**
 * A task object from an untrusted caller, checked by
 * {@link untrustedTaskProblems} and then validated like a task file
 * ({@link validateTask}: relative paths against `trust.baseDirectory`), with
 * `defaults` (the server's own defaults files, trusted) under the caller's
 * fields. Throws {@link TaskValidationError} (exit 2) listing every problem,
 * labelled `label` (e.g. "run_start", "POST /v1/runs").
 */
export function validateUntrustedTask(raw: unknown, trust: TrustRoots, options: { label: string; defaults?: (workspacePath: string) => TaskDefaults }): Task {
  const problems = untrustedTaskProblems(raw, trust);
  if (problems.length) throw new TaskValidationError(options.label, problems);
  return validateTask(withDefaults(raw, trust.baseDirectory, options.defaults), null, trust.baseDirectory);
}

/**
 * A task file an untrusted caller names: the file must lie inside
 * `roots` and its fields pass {@link untrustedTaskProblems} (its relative
 * paths against its own directory), as a task object would. Throws
 * {@link TaskValidationError} naming the file and every problem.
 */
export function loadUntrustedTaskFile(
  file: string,
  roots: readonly string[],
  options: { defaults?: (workspacePath: string) => TaskDefaults; rootsOption?: string } = {},
): Task {
  const absolute = resolve(file);
  const real = realRoots(roots);
  if (!real.some((root) => isPathInside(realpathOrSelf(absolute), root)))
    throw new TaskValidationError(absolute, [{ path: "", message: outsideRoots(absolute, real, options.rootsOption) }]);
  if (!existsSync(absolute) || !statSync(absolute).isFile()) return loadTaskFile(absolute); // its own message: not found, not a file
  // Read once: the fields checked are the fields run (loadTaskFile, reading it again, only words a YAML error).
  const document = parseDocument(readFileSync(absolute, "utf8"), { prettyErrors: true });
  const built = document.errors.length ? null : yamlDocumentValue(document);
  if (!built || "problem" in built) return loadTaskFile(absolute);
  const raw = built.value;
  const problems = untrustedTaskProblems(raw, { roots, baseDirectory: dirname(absolute), rootsOption: options.rootsOption });
  if (problems.length) throw new TaskValidationError(absolute, problems);
  return validateTask(withDefaults(raw, dirname(absolute), options.defaults), absolute, dirname(absolute));
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
