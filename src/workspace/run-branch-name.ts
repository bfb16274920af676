import { basename, dirname } from "node:path";
import { rawSafeGit } from "./safe-git.js";

/** Every run branch lives under this prefix: `runner prune`, the run-lock check and `git branch --list 'runner/*'` find them there. */
export const RUN_BRANCH_PREFIX = "runner/";

/** Longest task-name part of a run branch, characters: the branch stays readable in `git branch` and a terminal line. */
export const MAX_TASK_SLUG_LENGTH = 40;

/** The task-name part when nothing of the name is left (empty, or all punctuation). */
const FALLBACK_SLUG = "task";

/**
 * The task-name part of a run branch: the task's `name`, or when it has
 * none the name of its task file's directory, as a git-ref-safe slug:
 * accents dropped (NFKD, combining marks removed), lower-case, every run of
 * anything but `[a-z0-9]` one `-`, no leading or trailing `-`, at most
 * {@link MAX_TASK_SLUG_LENGTH} characters, and `task` when nothing is left.
 * `[a-z0-9-]` holds none of what git-check-ref-format(1) refuses in a
 * component (`.`, `..`, `.lock`, `@{`, control characters, `~^:?*[\`, space).
 */
export function taskSlug(task: { name?: string | null; file?: string | null }): string {
  const source = task.name?.trim() ? task.name : task.file ? basename(dirname(task.file)) : "";
  const slug = source
    .normalize("NFKD")
    .replace(/\p{M}+/gu, "")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, MAX_TASK_SLUG_LENGTH)
    .replace(/-+$/, "");
  return slug || FALLBACK_SLUG;
}

/** How many numbered names ({@link runBranchCandidates}) follow the whole run id before a run gives up on a branch. */
const NUMBERED_CANDIDATES = 20;

/**
 * The branch names a new run tries, in order, the first one free wins:
 * `runner/<task-name>-<short-id>`, where the short id is the run id's last
 * `-`-separated part (the 4 random hex digits of `YYYYMMDD-HHMMSS-xxxx`,
 * src/run/run-id.ts), then more of the run id (`HHMMSS-xxxx`, then all of
 * it), then the whole run id with `-2`, `-3`, … (a repository shared by
 * several runner homes). Hex, digits and `-` only after the slug, so no
 * candidate ends like a worker branch (`<run branch>-w<n>`).
 */
export function runBranchCandidates(slug: string, runId: string): string[] {
  const parts = runId.split("-").filter(Boolean);
  const suffixes = parts.map((_, index) => parts.slice(parts.length - 1 - index).join("-"));
  const whole = suffixes.at(-1) ?? "run";
  for (let number = 2; number < 2 + NUMBERED_CANDIDATES; number++) suffixes.push(`${whole}-${number}`);
  return suffixes.map((suffix) => `${RUN_BRANCH_PREFIX}${slug}-${suffix}`);
}

/**
 * Whether a run may not be named `branch` in the repository: `branch`
 * exists, or a worker branch of it (`<branch>-w<n>`, src/agents/subagents.ts:
 * the run's workers would take its names, and `runner prune` would count it
 * as the run's), or a branch below it (`<branch>/…`, which git cannot hold
 * beside it). Throws GitCommandError when git cannot list the branches.
 */
export async function runBranchNameTaken(repositoryRoot: string, branch: string): Promise<boolean> {
  const listed = await rawSafeGit({ baseDirectory: repositoryRoot }, [
    "for-each-ref",
    "--format=%(refname:strip=2)",
    `refs/heads/${branch}`,
    `refs/heads/${branch}-w*`,
  ]);
  return listed.split("\n").some((name) => name === branch || name.startsWith(`${branch}/`) || isWorkerBranchOf(name, branch));
}

/**
 * Whether `name` is a worker branch of the run branch `branch`: exactly
 * `<branch>-w<n>` (src/agents/subagents.ts). Not `<branch>-w1-<short-id>`,
 * the branch of another run whose task is named `<task>-<short-id>-w1`.
 */
export function isWorkerBranchOf(name: string, branch: string): boolean {
  return name.startsWith(`${branch}-w`) && /^\d+$/.test(name.slice(branch.length + 2));
}
