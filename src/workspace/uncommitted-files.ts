import { safeGitResult } from "./safe-git.js";

/** How many paths {@link uncommittedFiles} names of each kind. */
const NAMED = 5;

/** What the user's checkout holds that a run's worktree (made from HEAD) does not. */
export interface UncommittedFiles {
  /** Tracked files changed or staged, and untracked files (directories count once, as git lists them). */
  changedCount: number;
  /** The first {@link NAMED} of them. */
  changed: string[];
  /** Git-ignored paths (directories count once). */
  ignoredCount: number;
  ignored: string[];
}

/**
 * Git-ignored names that are never what an agent should see, so their
 * absence from the worktree is not worth a note: tools' caches (pytest,
 * Python bytecode, mypy, ruff, hypothesis, coverage, eslint, generic
 * `.cache`) and installed environments, which `sandbox.setup` makes (npm's
 * node_modules, Python virtual environments, tox and nox). Matched against a
 * path's last component (a directory as git lists it, `dir/`).
 */
const NOT_WORTH_A_NOTE = new Set([
  ".pytest_cache",
  "__pycache__",
  ".mypy_cache",
  ".ruff_cache",
  ".hypothesis",
  ".coverage",
  ".nyc_output",
  ".eslintcache",
  ".cache",
  ".DS_Store",
  "node_modules",
  ".venv",
  "venv",
  ".tox",
  ".nox",
]);

/** Whether an ignored path is a cache or an installed environment ({@link NOT_WORTH_A_NOTE}), or a compiled Python file. */
function notWorthANote(path: string): boolean {
  const name = path.replace(/\/$/, "").split("/").at(-1) ?? "";
  return NOT_WORTH_A_NOTE.has(name) || /\.py[co]$/.test(name);
}

/**
 * Lists what the user's checkout has besides HEAD: uncommitted changes,
 * untracked and git-ignored files, none of which a run's worktree gets (it is
 * a checkout of HEAD); ignored caches and installed environments are left
 * out ({@link NOT_WORTH_A_NOTE}). Host git on the user's own repository (safe git:
 * hooks and fsmonitor disarmed; `--no-optional-locks`, so the index is not
 * rewritten). Returns null when git cannot tell (the run goes on without the
 * warning).
 */
export async function uncommittedFiles(repositoryRoot: string, gitConfig: string[]): Promise<UncommittedFiles | null> {
  const status = await safeGitResult({ baseDirectory: repositoryRoot, config: gitConfig }, [
    "--no-optional-locks",
    "status",
    "--porcelain=v1",
    "-z",
    "--ignored=matching",
    "--untracked-files=normal",
  ]).catch(() => null);
  if (!status || status.exitCode !== 0) return null;
  const changed: string[] = [];
  const ignored: string[] = [];
  const entries = status.stdout.split("\0");
  for (let index = 0; index < entries.length; index += 1) {
    const entry = entries[index]!;
    if (entry.length < 4) continue;
    const code = entry.slice(0, 2);
    // A rename or copy is followed by its source path: skip that.
    if (code[0] === "R" || code[0] === "C") index += 1;
    const path = entry.slice(3);
    if (code !== "!!") changed.push(path);
    else if (!notWorthANote(path)) ignored.push(path);
  }
  return { changedCount: changed.length, changed: changed.slice(0, NAMED), ignoredCount: ignored.length, ignored: ignored.slice(0, NAMED) };
}
