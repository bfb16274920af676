import { existsSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { errorMessage } from "../errors.js";
import { isOwnerAlive } from "../process/process-owner.js";
import { rawSafeGit, safeGitResult } from "../workspace/safe-git.js";
import { runPaths } from "../workspace/run-disk.js";
import { isWorkerBranchOf, RUN_BRANCH_PREFIX } from "../workspace/run-branch-name.js";
import { readRunLock, runLockProblem, type RunLock } from "./run-lock.js";
import { RunStore } from "./run-store.js";

export interface PruneOptions {
  /** Only runs whose branches are all merged into the checked-out branch of their repository (HEAD), as `git branch --merged`. */
  merged?: boolean;
  /** Only runs that ended at least this long ago (their report.json's time), ms. */
  olderThanMs?: number;
  /** Decide, and remove nothing. */
  dryRun?: boolean;
  /** Also remove runs whose branches hold commits that no other branch, tag or remote-tracking branch holds. */
  force?: boolean;
  /** Also remove runs a batch's or an agency's records name (their reports link them; `batch verify` and `agency show` read them). */
  referenced?: boolean;
  /** The present, ms since the epoch (tests). Default Date.now(). */
  now?: number;
}

/** What `runner prune` did (or, with `dryRun`, would do) with one run. */
export interface PruneDecision {
  runId: string;
  /** The run's branches that exist: its own and its workers' (`<branch>-w<n>`). */
  branches: string[];
  /** `remove` with `dryRun`, `removed` once done; `kept` says why in `reason`. */
  action: "remove" | "removed" | "kept";
  reason: string;
  /** Commits on the run's branches that no other ref holds (what `--force` would lose). */
  unmergedCommits: number;
}

/**
 * Removes ended runs from `<home>/runs`: their branches (the run's and its
 * workers') in their repository, then their run directories. Safe by the run-lock
 * rules (src/run/run-lock.ts): a run without report.json (running, or
 * unfinished: `runner resume` or the next start's sweep deals with it), one
 * being resumed or continued (its `resume.lock` is held: it is claimed here,
 * O_EXCL, for the removal), one whose worktree or disk is still there (the
 * sweep's), and one whose run.json the runner did not write
 * ({@link runLockProblem}) are kept. A run whose branches hold commits that
 * no other ref holds (`git rev-list <branch> --not --all` but the run's own)
 * is kept unless `force`, and so is one whose branch git will not delete (checked
 * out somewhere). Runs outside the filters (`merged`, `olderThanMs`) are not
 * listed. Returns a decision per run listed, oldest first. Git failures of
 * one run are that run's `kept` reason; never throws for a run.
 */
export async function pruneRuns(home: string, options: PruneOptions = {}): Promise<PruneDecision[]> {
  const runs = join(home, "runs");
  if (!existsSync(runs)) return [];
  const now = options.now ?? Date.now();
  const decisions: PruneDecision[] = [];
  let referrers: Map<string, string> | undefined;
  for (const runId of readdirSync(runs).sort()) {
    const directory = join(runs, runId);
    const store = new RunStore(directory);
    if (!store.has("report")) {
      const lock = readRunLock(directory);
      if (!options.merged && options.olderThanMs === undefined) {
        const running = lock && isOwnerAlive(lock.owner);
        decisions.push(kept(runId, [], running ? "still running" : "unfinished: `runner resume` continues it, or the next start's sweep ends it"));
      }
      continue;
    }
    if (options.olderThanMs !== undefined && now - statSync(store.path("report")).mtimeMs < options.olderThanMs) continue;
    const referrer = options.referenced ? undefined : (referrers ??= runReferrers(home)).get(runId);
    if (referrer) {
      decisions.push(kept(runId, [], `${referrer} names it (its reports link the run); --referenced removes it too`));
      continue;
    }
    const decision = await decide(runId, directory, options);
    if (decision) decisions.push(decision);
  }
  return decisions;
}

/**
 * Run ids the records of batches (`batches/<id>/batch.jsonl`) and agencies
 * (`agencies/<id>/invocations.jsonl`) name, each with who names it
 * (`batch <id>`, `agency <id>`). Unreadable files and lines are skipped:
 * they name nothing.
 */
function runReferrers(home: string): Map<string, string> {
  const referrers = new Map<string, string>();
  for (const [folder, file, kind] of [
    ["batches", "batch.jsonl", "batch"],
    ["agencies", "invocations.jsonl", "agency"],
  ] as const) {
    const root = join(home, folder);
    if (!existsSync(root)) continue;
    for (const id of readdirSync(root)) {
      let text: string;
      try {
        text = readFileSync(join(root, id, file), "utf8");
      } catch {
        continue;
      }
      for (const line of text.split("\n")) {
        const runId = /"run_id":"([^"]+)"/.exec(line)?.[1];
        if (runId && !referrers.has(runId)) referrers.set(runId, `${kind} ${id}`);
      }
    }
  }
  return referrers;
}

/** A run branch that no run record of this RUNNER_HOME accounts for ({@link unrecordedRunBranches}). */
export interface UnrecordedBranch {
  /** The repository it is in (one a run record of this home names). */
  repository: string;
  /** Its short name, `runner/...`. */
  branch: string;
}

/** The repositories the run records under `<home>/runs` name (run.json `repository`), sorted, each once. */
export function recordedRepositories(home: string): string[] {
  return [...new Set(recordedBranches(home).map((recorded) => recorded.repository))].sort();
}

/**
 * The `runner/...` branches in `repositories` (default: those the run
 * records under `<home>/runs` name; pass the ones named before a prune to
 * look where the removed runs were too) that no record accounts for (as a
 * run's branch, or a worker branch `<branch>-w<n>` of one): left by a run
 * directory removed by hand, a RUNNER_HOME that is gone, or runs of another
 * RUNNER_HOME. `runner prune` lists them and never removes them: without a
 * record it cannot tell an abandoned branch from another home's run that
 * still needs it. Old (`runner/<run-id>`) and new
 * (`runner/<task-name>-<short-id>`) names alike; sorted by repository, then
 * name. A repository that is gone or git cannot read is skipped.
 */
export async function unrecordedRunBranches(home: string, repositories: string[] = recordedRepositories(home)): Promise<UnrecordedBranch[]> {
  const recorded = recordedBranches(home);
  const found: UnrecordedBranch[] = [];
  for (const repository of [...new Set(repositories)].sort()) {
    if (!existsSync(repository)) continue;
    const listed = await rawSafeGit({ baseDirectory: repository }, ["for-each-ref", "--format=%(refname:strip=2)", `refs/heads/${RUN_BRANCH_PREFIX}`]).catch(
      () => null,
    );
    if (listed === null) continue;
    const branches = recorded.filter((entry) => entry.repository === repository).map((entry) => entry.branch);
    const known = (name: string) => branches.some((branch) => name === branch || isWorkerBranchOf(name, branch));
    for (const name of listed.split("\n").filter(Boolean).sort()) if (!known(name)) found.push({ repository, branch: name });
  }
  return found;
}

/** Every run record's repository and branch (runs without run.json, or with one missing either, have none). */
function recordedBranches(home: string): UnrecordedBranch[] {
  const runs = join(home, "runs");
  if (!existsSync(runs)) return [];
  return readdirSync(runs).flatMap((runId) => {
    const lock = readRunLock(join(runs, runId));
    return typeof lock?.repository === "string" && typeof lock.branch === "string" ? [{ repository: lock.repository, branch: lock.branch }] : [];
  });
}

async function decide(runId: string, directory: string, options: PruneOptions): Promise<PruneDecision | null> {
  const lock = readRunLock(directory);
  // A run that failed before it had a worktree has no branch: only its directory goes.
  if (!lock) return options.merged ? null : await removeRun(runId, directory, null, [], 0, options, "no branch");
  const problem = runLockProblem(directory, lock);
  if (problem) return kept(runId, [], `its run.json was not written by a runner (${problem}); remove it by hand if it is yours`);
  if (existsSync(lock.worktree) || existsSync(runPaths(directory).disk)) {
    return kept(runId, [], "its worktree is still there; the next `runner exec` or `runner resume` sweeps it");
  }
  if (!existsSync(lock.repository)) return options.merged ? null : await removeRun(runId, directory, null, [], 0, options, "its repository is gone");
  let branches: string[];
  let unmerged: number;
  try {
    branches = await runBranches(lock);
    if (options.merged && !(await allMergedIntoHead(lock.repository, branches))) return null;
    unmerged = branches.length ? await unmergedCommits(lock, branches) : 0;
  } catch (error) {
    return kept(runId, [], `git could not read its branches: ${errorMessage(error)}`);
  }
  if (unmerged > 0 && !options.force) {
    return {
      ...kept(runId, branches, `${unmerged} commit${unmerged === 1 ? "" : "s"} on no other branch (merge it, or --force removes it)`),
      unmergedCommits: unmerged,
    };
  }
  const why = branches.length === 0 ? "no branch" : unmerged > 0 ? `forced: ${unmerged} unmerged commits dropped` : "merged";
  return removeRun(runId, directory, lock, branches, unmerged, options, why);
}

async function removeRun(
  runId: string,
  directory: string,
  lock: RunLock | null,
  branches: string[],
  unmerged: number,
  options: PruneOptions,
  why: string,
): Promise<PruneDecision> {
  if (options.dryRun) return { runId, branches, action: "remove", reason: why, unmergedCommits: unmerged };
  const store = new RunStore(directory);
  // Claimed while it is removed: a `runner resume` or `runner continue` of it waits or is refused.
  const holder = store.claimResumeLock();
  if (holder !== null) return kept(runId, branches, `being resumed or continued (${holder})`);
  try {
    if (!store.has("report")) return kept(runId, branches, "a resume or continue started meanwhile");
    for (const branch of branches) {
      const deleted = await safeGitResult({ baseDirectory: lock!.repository }, ["branch", "--delete", "--force", branch]);
      if (deleted.exitCode !== 0) return { ...kept(runId, branches, `git kept ${branch}: ${deleted.stderr.trim()}`), unmergedCommits: unmerged };
    }
  } catch (error) {
    store.remove("resumeLock");
    return kept(runId, branches, `git failed: ${errorMessage(error)}`);
  }
  rmSync(directory, { recursive: true, force: true });
  return { runId, branches, action: "removed", reason: why, unmergedCommits: unmerged };
}

function kept(runId: string, branches: string[], reason: string): PruneDecision {
  return { runId, branches, action: "kept", reason, unmergedCommits: 0 };
}

/** The run's branch and its workers' (`<branch>-w<n>`) that exist, as short names. */
async function runBranches(lock: RunLock): Promise<string[]> {
  const listed = await rawSafeGit({ baseDirectory: lock.repository }, [
    "for-each-ref",
    "--format=%(refname:strip=2)",
    `refs/heads/${lock.branch}`,
    `refs/heads/${lock.branch}-w*`,
  ]);
  return listed.split("\n").filter((name) => name === lock.branch || isWorkerBranchOf(name, lock.branch));
}

/** Commits of `branches` that no ref but the run's own branches holds (other branches, tags, remote-tracking branches, HEAD). */
async function unmergedCommits(lock: RunLock, branches: string[]): Promise<number> {
  const own = branches.flatMap((branch) => [`--exclude=refs/heads/${branch}`]);
  const counted = await rawSafeGit({ baseDirectory: lock.repository }, [
    "rev-list",
    "--count",
    ...branches.map((branch) => `refs/heads/${branch}`),
    "--not",
    ...own,
    "--all",
  ]);
  return Number(counted.trim());
}

async function allMergedIntoHead(repository: string, branches: string[]): Promise<boolean> {
  for (const branch of branches) {
    const ancestor = await safeGitResult({ baseDirectory: repository }, ["merge-base", "--is-ancestor", `refs/heads/${branch}`, "HEAD"]);
    if (ancestor.exitCode !== 0) return false;
  }
  return true;
}
