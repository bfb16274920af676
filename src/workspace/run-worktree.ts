import { createHash } from "node:crypto";
import {
  existsSync,
  lchownSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { ConfigError, SandboxError, errorMessage } from "../errors.js";
import { additionPathspecs, DEFAULT_COMMIT_LIMITS, selectCommittablePaths, type CommitLimits, type LeftOutPath } from "./commit-selection.js";
import { driverOverrides, GitCommandError, rawSafeGit, safeGitResult, streamSafeGit, type SafeGitOptions } from "./safe-git.js";
import { checkStagedContent } from "./staged-content-check.js";
import { authorshipConfig, recordedAuthorship, withCoAuthor, type CommitAuthorship } from "./commit-authorship.js";
import { WORKSPACE_ROOT, type Sandbox } from "../sandbox/sandbox.js";
import { runBranchCandidates, runBranchNameTaken } from "./run-branch-name.js";

/** Uid the sandbox falls back to when the workspace belongs to root (the image's `agent` user). */
const FALLBACK_SANDBOX_UID = 1000;

/** A task's own git worktree on its run branch (`runner/<task-name>-<short-id>`, src/workspace/run-branch-name.ts), created from the repository's HEAD. */
export interface RunWorktree {
  /** Top level of the user's repository. */
  repositoryRoot: string;
  /** The repository's common git directory (real path). */
  commonGitDirectory: string;
  /** Host path of the worktree (mounted at the task's `sandbox.workdir`, default /workspace). */
  path: string;
  /** The worktree's own git directory, `<common>/worktrees/<name>`. */
  gitDirectory: string;
  branch: string;
  /** Commit the branch started from. */
  baseCommit: string;
  /** Who the sandbox runs as: the owner, or {@link FALLBACK_SANDBOX_UID} when the owner is root. */
  sandboxUser: { uid: number; gid: number };
  /** `-c` overrides disarming the repository's drivers (and, with {@link withAuthorship}, the commits' identity). */
  gitConfig: string[];
  /** Who its commits are by ({@link withAuthorship}); absent: agent-runner, with no trailer. */
  authorship?: CommitAuthorship;
}

/**
 * The worktree whose commits (and merge commits) are authored and committed
 * as `authorship` says, each commit of the agent's work ending with its
 * co-author trailer; worktrees made from it (workers, verification
 * checkouts) inherit it.
 */
export function withAuthorship(worktree: RunWorktree, authorship: CommitAuthorship): RunWorktree {
  const others = worktree.gitConfig.filter((entry) => !entry.startsWith("user.name=") && !entry.startsWith("user.email="));
  return { ...worktree, gitConfig: [...others, ...authorshipConfig(authorship)], authorship };
}

/**
 * Checks that `directory` is the top level of a git repository with at least
 * one commit. Throws ConfigError (exit 2) naming the fix otherwise.
 */
export async function resolveRepository(directory: string): Promise<{ root: string; commonGitDirectory: string; head: string }> {
  if (!existsSync(directory) || !statSync(directory).isDirectory()) {
    throw new ConfigError(`workspace: ${directory} is not a directory`);
  }
  let root: string;
  try {
    root = (await rawSafeGit({ baseDirectory: directory }, ["rev-parse", "--show-toplevel"])).trim();
  } catch {
    const inside = await rawSafeGit({ baseDirectory: directory }, ["rev-parse", "--is-bare-repository", "--is-inside-git-dir"]).catch(() => "");
    if (/^true/.test(inside)) throw new ConfigError(`workspace: ${directory} is a bare repository; point workspace at a clone with a working tree`);
    if (/true\s*$/.test(inside)) throw new ConfigError(`workspace: ${directory} is a git directory; point workspace at the repository's top level`);
    throw new ConfigError(`workspace: ${directory} is not a git repository; run \`git init && git add -A && git commit -m init\` there first`);
  }
  if (realpathSync(root) !== realpathSync(directory)) {
    throw new ConfigError(`workspace: ${directory} is inside the git repository ${root} but not its top level; point workspace at ${root}`);
  }
  let head: string;
  try {
    head = (await rawSafeGit({ baseDirectory: root }, ["rev-parse", "--verify", "HEAD^{commit}"])).trim();
  } catch {
    throw new ConfigError(`workspace: the repository ${root} has no commits yet; commit the starting state first`);
  }
  // git cannot hold both a branch `runner` and the run branches `runner/<task-name>-<short-id>`.
  const clash = await rawSafeGit({ baseDirectory: root }, ["for-each-ref", "--format=%(refname)", "refs/heads/runner"]);
  if (clash.trim() === "refs/heads/runner") {
    throw new ConfigError(
      `workspace: the repository has a branch named "runner", so git cannot create run branches runner/<task-name>-<short-id>; rename it (git branch -m runner <new-name>)`,
    );
  }
  const common = (await rawSafeGit({ baseDirectory: root }, ["rev-parse", "--path-format=absolute", "--git-common-dir"])).trim();
  return { root: realpathSync(root), commonGitDirectory: realpathSync(common), head };
}

/**
 * Creates the worktree at `worktreePath` on a new run branch from HEAD (or
 * from the head of `baseBranch`), without touching the user's checkout, and
 * hands its files to the sandbox user. The branch is the first of
 * {@link runBranchCandidates} (`runner/<task-name>-<short-id>`) that is free:
 * neither it nor a worker branch of it (`<name>-w<n>`) exists. An existing
 * branch is never reused or moved: `git worktree add -b` refuses a name that
 * is taken, also one taken by a concurrent run since the check, and the next
 * candidate is tried. Throws ConfigError when `baseBranch` does not exist,
 * SandboxError when git fails or every candidate is taken.
 */
export async function createRunWorktree(
  repositoryDirectory: string,
  run: { runId: string; taskSlug: string },
  worktreePath: string,
  baseBranch?: string,
): Promise<RunWorktree> {
  const repository = await resolveRepository(repositoryDirectory);
  const gitConfig = await driverOverrides(repository.root);
  const sandboxUser = sandboxUserFor(repository.root);
  const base = baseBranch === undefined ? repository.head : await branchHead(repository.root, baseBranch);
  for (const branch of runBranchCandidates(run.taskSlug, run.runId)) {
    if (await runBranchNameTaken(repository.root, branch)) continue;
    let added: { path: string; gitDirectory: string };
    try {
      added = await addWorktree(repository.root, gitConfig, ["-b", branch, worktreePath, base], worktreePath, sandboxUser, `the worktree for ${branch}`);
    } catch (error) {
      // Taken since the check (another run of the same task): git created nothing, the next name is tried. Only
      // then: a failure after git made the branch (the path exists, the checkout failed) must not try another.
      const message = errorMessage(error);
      const refused = message.includes(`a branch named '${branch}' already exists`) || message.includes(`cannot lock ref 'refs/heads/${branch}'`);
      if (refused && (await runBranchNameTaken(repository.root, branch))) continue;
      throw error;
    }
    return {
      repositoryRoot: repository.root,
      commonGitDirectory: repository.commonGitDirectory,
      ...added,
      branch,
      baseCommit: base,
      sandboxUser,
      gitConfig,
    };
  }
  throw new SandboxError(
    `could not name the run branch: every name for run ${run.runId} is taken in ${repository.root} (runner prune removes ended runs' branches)`,
    {
      reason: "git_failed",
    },
  );
}

/** Creates branch `branch` at `commit` (host-side safe git; no checkout). Throws SandboxError when git refuses (the name is taken). */
export async function createBranch(repositoryRoot: string, branch: string, commit: string): Promise<void> {
  try {
    await rawSafeGit({ baseDirectory: repositoryRoot }, ["branch", "--no-track", branch, commit]);
  } catch (error) {
    throw new SandboxError(`cannot create branch ${branch} in ${repositoryRoot}: ${errorMessage(error)}`, { reason: "git_failed", cause: error });
  }
}

/**
 * Deletes branch `branch` when it points at `commit` (a run that changed
 * nothing) and no worktree has it checked out (git refuses that). Returns
 * whether it was deleted; never throws for a branch that moved or is in use.
 */
export async function deleteBranchAt(repositoryRoot: string, branch: string, commit: string): Promise<boolean> {
  const head = await rawSafeGit({ baseDirectory: repositoryRoot }, ["rev-parse", "--verify", "--quiet", `refs/heads/${branch}^{commit}`]).catch(() => "");
  if (head.trim() !== commit) return false;
  return (await safeGitResult({ baseDirectory: repositoryRoot }, ["branch", "--delete", "--force", branch])).exitCode === 0;
}

/** The commit branch `branch` points at. Throws ConfigError when there is no such branch. */
export async function branchHead(repositoryRoot: string, branch: string): Promise<string> {
  const head = await rawSafeGit({ baseDirectory: repositoryRoot }, ["rev-parse", "--verify", "--quiet", `refs/heads/${branch}^{commit}`]).catch(() => "");
  if (!head.trim()) throw new ConfigError(`there is no branch ${branch} in ${repositoryRoot}`);
  return head.trim();
}

/**
 * Bytes a checkout of the repository's HEAD takes at least: each blob's size
 * rounded up to whole 4 KiB blocks (ext4's), from `git ls-tree -r -l` of the
 * user's repository (host git, no worktree read). For telling a disk limit too
 * small for the checkout from another failure of `git worktree add`.
 */
export async function checkoutBytes(repositoryDirectory: string): Promise<number> {
  return (await checkoutSize(repositoryDirectory, "HEAD")).bytes;
}

/** {@link checkoutBytes} of any commit, with the number of files (each takes an inode). */
export async function checkoutSize(repositoryDirectory: string, commit: string): Promise<{ bytes: number; files: number }> {
  const listing = await rawSafeGit({ baseDirectory: repositoryDirectory }, ["ls-tree", "-r", "-l", "--full-tree", commit]);
  let bytes = 0;
  let files = 0;
  for (const line of listing.split("\n")) {
    const size = /^\S+ blob \S+\s+(\d+)\t/.exec(line)?.[1];
    if (size === undefined) continue;
    bytes += Math.ceil(Number(size) / 4096) * 4096;
    files += 1;
  }
  return { bytes, files };
}

/** Who the sandbox runs as: the runner's own uid, else the repository's owner, else {@link FALLBACK_SANDBOX_UID} when that is root. */
function sandboxUserFor(root: string): { uid: number; gid: number } {
  const ownerStats = statSync(root);
  const myUid = process.getuid?.() ?? 0;
  if (myUid !== 0) return { uid: myUid, gid: process.getgid?.() ?? myUid };
  if (ownerStats.uid !== 0) return { uid: ownerStats.uid, gid: ownerStats.gid };
  return { uid: FALLBACK_SANDBOX_UID, gid: FALLBACK_SANDBOX_UID };
}

/** What a run records about its worktree (run.json) so that a later start can commit or resume it. */
export interface RecordedWorktree {
  repository: string;
  worktree: string;
  /** The worktree's admin directory, read when it was created (never from the worktree's own `.git` file). */
  git_directory?: string;
  branch: string;
  base_commit?: string;
  /** Who the run's commits are by (src/workspace/commit-authorship.ts); absent in records of older runners. */
  authorship?: CommitAuthorship;
  /** The run changed nothing and its branch was deleted when it ended; a later attempt makes it again at `base_commit`. */
  branch_dropped?: boolean;
}

/**
 * The worktree of an earlier run, for `runner resume` and for committing the
 * work of a run whose runner died. The existing directory is used when it is
 * still registered with git (`reused`: uncommitted changes included);
 * otherwise a new worktree of the run branch is created at the same path.
 * A branch the run dropped (`branch_dropped`) is made again at its base
 * commit. Throws ConfigError when the repository or the branch is gone, or
 * the dropped branch's name is held by a branch with other commits (another
 * run's: names are reused once free, src/workspace/run-branch-name.ts).
 */
export async function reopenRunWorktree(recorded: RecordedWorktree, options: { create: boolean }): Promise<{ worktree: RunWorktree; reused: boolean } | null> {
  const repository = await resolveRepository(recorded.repository);
  const gitConfig = await driverOverrides(repository.root);
  const branchHead = await rawSafeGit({ baseDirectory: repository.root }, ["rev-parse", "--verify", "--quiet", `refs/heads/${recorded.branch}^{commit}`]).catch(
    () => "",
  );
  if (!branchHead.trim() && recorded.branch_dropped && recorded.base_commit && options.create) {
    await createBranch(repository.root, recorded.branch, recorded.base_commit);
  } else if (!branchHead.trim()) {
    throw new ConfigError(`the run branch ${recorded.branch} no longer exists in ${repository.root}`);
  } else if (recorded.branch_dropped && recorded.base_commit && branchHead.trim() !== recorded.base_commit) {
    // Deleted at the run's end, so a later run (of the same task, with the same short id) could take the name:
    // a branch there with commits is not this run's, and its work must not be built on.
    throw new ConfigError(
      `the run's branch ${recorded.branch} was deleted when the run ended (it changed nothing), and another branch of that name holds other commits now; ` +
        `rename that branch (git branch -m ${recorded.branch} <new-name>) to continue this run`,
    );
  }
  const base = {
    repositoryRoot: repository.root,
    commonGitDirectory: repository.commonGitDirectory,
    branch: recorded.branch,
    baseCommit: recorded.base_commit ?? branchHead.trim(),
    sandboxUser: sandboxUserFor(repository.root),
    gitConfig,
  };
  const admin = recorded.git_directory;
  const authorship = recordedAuthorship(recorded.authorship);
  const authored = (worktree: RunWorktree) => (authorship ? withAuthorship(worktree, authorship) : worktree);
  if (admin && existsSync(recorded.worktree) && existsSync(admin) && realpathSync(admin).startsWith(`${repository.commonGitDirectory}/worktrees/`)) {
    return { worktree: authored({ ...base, path: realpathSync(recorded.worktree), gitDirectory: realpathSync(admin) }), reused: true };
  }
  if (!options.create) return null;
  await removeWorktreeDirectory(repository.root, recorded.worktree);
  const added = await addWorktree(
    repository.root,
    gitConfig,
    [recorded.worktree, recorded.branch],
    recorded.worktree,
    base.sandboxUser,
    `the worktree for ${recorded.branch}`,
  );
  return { worktree: authored({ ...base, ...added }), reused: false };
}

/**
 * The repository of an ended run, as a worktree to make checkouts from
 * (`createDetachedWorktree`): for re-verifying a run's commit after its own
 * worktree is gone. `path` and `gitDirectory` are the recorded ones and may no
 * longer exist; nothing here reads them. Throws ConfigError when the
 * repository is gone, or the run branch is and the run did not drop it
 * (`branch_dropped`: it changed nothing, its commit is its base commit).
 */
export async function recordedRepository(recorded: RecordedWorktree): Promise<RunWorktree> {
  const repository = await resolveRepository(recorded.repository);
  const branchHead = await rawSafeGit({ baseDirectory: repository.root }, ["rev-parse", "--verify", "--quiet", `refs/heads/${recorded.branch}^{commit}`]).catch(
    () => "",
  );
  // A run that changed nothing had its branch dropped at its end: its commit is its base commit.
  const dropped = !branchHead.trim() && recorded.branch_dropped === true && recorded.base_commit !== undefined;
  if (!branchHead.trim() && !dropped) throw new ConfigError(`the run branch ${recorded.branch} no longer exists in ${repository.root}`);
  return {
    repositoryRoot: repository.root,
    commonGitDirectory: repository.commonGitDirectory,
    path: recorded.worktree,
    gitDirectory: recorded.git_directory ?? repository.commonGitDirectory,
    branch: recorded.branch,
    baseCommit: recorded.base_commit ?? branchHead.trim(),
    sandboxUser: sandboxUserFor(repository.root),
    gitConfig: await driverOverrides(repository.root),
  };
}

/**
 * `git worktree add <args>`, then the new worktree's real path and git
 * directory, and its files handed to the sandbox user (when we are root).
 */
async function addWorktree(
  root: string,
  gitConfig: string[],
  args: string[],
  path: string,
  sandboxUser: { uid: number; gid: number },
  what: string,
): Promise<{ path: string; gitDirectory: string }> {
  try {
    await rawSafeGit({ baseDirectory: root, config: gitConfig }, ["worktree", "add", "--quiet", ...args]);
  } catch (error) {
    throw new SandboxError(`could not create ${what}: ${errorMessage(error)}`, { cause: error, reason: "git_failed" });
  }
  const real = realpathSync(path);
  // Read once, now, while the `.git` file is still the one git just wrote;
  // from here on the worktree is the agent's and its `.git` file is never trusted.
  const gitDirectory = realpathSync((await rawSafeGit({ baseDirectory: real, config: gitConfig }, ["rev-parse", "--absolute-git-dir"])).trim());
  if ((process.getuid?.() ?? 0) === 0) changeOwnerRecursively(real, sandboxUser.uid, sandboxUser.gid);
  return { path: real, gitDirectory };
}

/**
 * A second, detached worktree of the repository at `commit` (for
 * verification on exactly what was committed), handed to the sandbox user
 * like the run's own. Throws SandboxError when git fails.
 */
export async function createDetachedWorktree(worktree: RunWorktree, commit: string, path: string): Promise<RunWorktree> {
  const added = await addWorktree(
    worktree.repositoryRoot,
    worktree.gitConfig,
    ["--detach", path, commit],
    path,
    worktree.sandboxUser,
    `a checkout of ${commit} for verification`,
  );
  return { ...worktree, ...added, baseCommit: commit };
}

/**
 * A worktree on a new branch `branch` from `commit` of the same repository
 * (a worker subagent's), handed to the sandbox user like the run's own.
 * Throws SandboxError when git fails.
 */
export async function createBranchWorktree(parent: RunWorktree, branch: string, path: string, commit: string): Promise<RunWorktree> {
  const added = await addWorktree(
    parent.repositoryRoot,
    parent.gitConfig,
    ["-b", branch, path, commit],
    path,
    parent.sandboxUser,
    `the worktree for ${branch}`,
  );
  return { ...parent, ...added, branch, baseCommit: commit };
}

/** What {@link commitRunWorktree} did. */
export interface CommitOutcome {
  /** The branch's head afterwards (unchanged when nothing was committed). */
  head: string;
  /** Whether the head differs from the worktree's base commit. */
  changed: boolean;
  /** Paths left out of the commit (the first `LEFT_OUT_LISTED` of commit-selection.ts) and how many in all. */
  leftOut: LeftOutPath[];
  leftOutCount: number;
  /** The commit ran past `limits.timeoutMs`: nothing of this commit was recorded. */
  timedOut: boolean;
}

/**
 * Commits everything in the worktree (including deletions and new files) on
 * the run branch, except what {@link selectCommittablePaths} leaves out:
 * names git refuses (`.GIT`, NTFS/HFS+ aliases of `.git`) and files past
 * `limits`; those are reported, the rest is committed. The caller must make
 * sure no sandbox process runs meanwhile (`Sandbox.stopAllProcesses` or a
 * closed sandbox): git reads the tree on the host. Throws SandboxError when
 * git fails for another reason.
 */
export async function commitRunWorktree(worktree: RunWorktree, message: string, limits: CommitLimits = DEFAULT_COMMIT_LIMITS): Promise<CommitOutcome> {
  const deadline = Date.now() + limits.timeoutMs;
  const options = {
    baseDirectory: worktree.path,
    gitDirectory: worktree.gitDirectory,
    workTree: worktree.path,
    // git refuses the HFS+ aliases of .git too (it does the NTFS ones by default): a name the selection missed fails the add, it is never committed.
    config: [...worktree.gitConfig, "core.protectHFS=true", "core.protectNTFS=true", "advice.addEmbeddedRepo=false"],
  };
  try {
    // Stat information first (handing the files to the sandbox user changed every ctime): the listing then
    // hashes nothing, and each unchanged file is read once, here. Exit 1 just means "needs update".
    if ((await untilDeadline(worktree, options, ["update-index", "-q", "--refresh"], deadline, { mayExitOne: true })) === null) {
      return { ...(await currentHead(worktree, options)), leftOut: [], leftOutCount: 0, timedOut: true };
    }
    const selection = await selectCommittablePaths(options, worktree.path, limits, deadline);
    const notCommitted = { leftOut: selection.leftOut, leftOutCount: selection.leftOutCount };
    if (selection.timedOut || !(await stageWorktree(worktree, options, selection.excluded, deadline))) {
      return { ...(await currentHead(worktree, options)), ...notCommitted, timedOut: true };
    }
    await checkStagedContent(options).catch(async (error: unknown) => {
      // Nothing of a raced read stays staged (its blobs remain unreachable loose objects until git gc).
      await rawSafeGit(options, ["reset", "--quiet"]).catch(() => undefined);
      throw error;
    });
    const staged = await untilDeadline(worktree, options, ["diff", "--cached", "--quiet", "--no-ext-diff", "--no-textconv"], deadline, { mayExitOne: true });
    if (staged === null) return { ...(await currentHead(worktree, options)), ...notCommitted, timedOut: true };
    const authoredMessage = worktree.authorship ? withCoAuthor(message, worktree.authorship) : message;
    if (
      staged === 1 &&
      (await untilDeadline(worktree, options, ["commit", "--quiet", "--no-verify", "--no-gpg-sign", "-m", authoredMessage], deadline)) === null
    ) {
      return { ...(await currentHead(worktree, options)), ...notCommitted, timedOut: true };
    }
    return { ...(await currentHead(worktree, options)), ...notCommitted, timedOut: false };
  } catch (error) {
    throw new SandboxError(`could not commit the worktree on ${worktree.branch}: ${errorMessage(error)}`, { cause: error, reason: "git_failed" });
  }
}

/** `git add --all` of the worktree but the excluded leading paths; false when it ran past the deadline (the index is as before). */
async function stageWorktree(worktree: RunWorktree, options: SafeGitOptions, excluded: Buffer[], deadline: number): Promise<boolean> {
  const args = excluded.length ? ["add", "--all", "--pathspec-from-file=-", "--pathspec-file-nul"] : ["add", "--all", "--", "."];
  return (await untilDeadline(worktree, options, args, deadline, excluded.length ? { input: additionPathspecs(excluded) } : {})) !== null;
}

/**
 * Runs a commit step with what is left of the deadline: its exit code (0, or
 * 1 when `mayExitOne`), or null when it was killed at the deadline, after
 * which the index lock it held is removed (the runner's own git was its only
 * writer). Throws GitCommandError for any other exit.
 */
async function untilDeadline(
  worktree: RunWorktree,
  options: SafeGitOptions,
  args: string[],
  deadline: number,
  step: { input?: Buffer; mayExitOne?: boolean } = {},
): Promise<0 | 1 | null> {
  const result = await streamSafeGit(options, args, { discard: true }, { timeoutMs: deadline - Date.now(), ...(step.input ? { input: step.input } : {}) });
  if (result.timedOut) {
    rmSync(join(worktree.gitDirectory, "index.lock"), { force: true });
    return null;
  }
  if (result.exitCode === 0 || (result.exitCode === 1 && step.mayExitOne)) return result.exitCode;
  throw new GitCommandError(args, result.exitCode ?? -1, result.stderr);
}

async function currentHead(worktree: RunWorktree, options: SafeGitOptions): Promise<{ head: string; changed: boolean }> {
  const head = (await rawSafeGit(options, ["rev-parse", "HEAD"])).trim();
  return { head, changed: head !== worktree.baseCommit };
}

/**
 * Writes `git diff --binary base..branch` to `path` (patch.diff), streamed:
 * a diff of any size never passes through memory. Returns false when it ran
 * past `timeoutMs` (the partial file is removed). Throws SandboxError when git fails.
 */
export async function writeRunBranchDiff(worktree: RunWorktree, path: string, timeoutMs: number): Promise<boolean> {
  const args = ["diff", "--binary", "--no-ext-diff", "--no-textconv", "--no-color", `${worktree.baseCommit}..${worktree.branch}`, "--"];
  const result = await streamSafeGit({ baseDirectory: worktree.repositoryRoot, config: worktree.gitConfig }, args, { file: path }, { timeoutMs });
  if (result.timedOut) {
    rmSync(path, { force: true });
    return false;
  }
  if (result.exitCode !== 0) throw new SandboxError(`could not write the diff of ${worktree.branch}: ${result.stderr.trim()}`, { reason: "git_failed" });
  return true;
}

/**
 * Removes the worktree directory (without following symlinks) and prunes its
 * git admin entry; the branch stays. Errors are returned, not thrown: cleanup
 * must go on.
 */
export function removeRunWorktree(worktree: RunWorktree): Promise<Error | null> {
  return removeWorktreeDirectory(worktree.repositoryRoot, worktree.path);
}

/** {@link removeRunWorktree} from just the two paths (for runs found on disk). */
export async function removeWorktreeDirectory(repositoryRoot: string, worktreePath: string): Promise<Error | null> {
  try {
    rmSync(worktreePath, { recursive: true, force: true });
    if (existsSync(repositoryRoot)) {
      await rawSafeGit({ baseDirectory: repositoryRoot, config: await driverOverrides(repositoryRoot) }, ["worktree", "prune"]);
    }
    return null;
  } catch (error) {
    return error as Error;
  }
}

/**
 * Where a container sees its git directory: a fixed path that names nothing
 * of the host's (not the repository's real git directory).
 */
export const CONTAINER_GIT_DIRECTORY = "/run/agent-runner/git";
/**
 * Where a container sees a read-only git directory of the repository: its
 * object store, a sanitized config, no refs. The runner's own reads in the
 * sandbox (workspace skills, project instructions: objects of the base
 * commit) use it, never the container's own git directory, which the agent
 * can write; its `objects` is the alternate of the container's own.
 */
export const CONTAINER_REPOSITORY_DIRECTORY = "/run/agent-runner/repository";
const CONTAINER_REPOSITORY_OBJECTS = `${CONTAINER_REPOSITORY_DIRECTORY}/objects`;

/** What a container gets of the repository's git: {@link containerGitView}. */
export interface ContainerGitView {
  /** The read-only repository view ({@link CONTAINER_REPOSITORY_DIRECTORY}), its object store and the worktree's `.git` file. */
  readOnlyMounts: { hostPath: string; containerPath: string }[];
  /** The seed of the container's own git directory (SandboxSpec `privateGit`). */
  privateGit: { seed: string; containerPath: string };
}

/**
 * The git a container gets: a git directory of its own, writable, so the
 * agent's `git checkout FILE`, `restore`, `stash`, `add`, `commit` and
 * branches work as in any clone — index, refs, HEAD, config and new objects
 * its own, the repository's objects a read-only alternate — thrown away with
 * the container. The host never reads it: the runner keeps committing the
 * worktree's files with its own index (`commitRunWorktree`), so nothing the
 * agent writes to git (hooks, fsmonitor, filters, a config) reaches host git.
 *
 * The seed, built here under `viewDirectory` (the run's disk) from what the
 * host's git holds, is copied by the sandbox provider into the container's
 * scratch space and owned by the sandbox user, so git of any version finds
 * the repository safe by ownership (git < 2.31 ignores the
 * `GIT_CONFIG_COUNT` trust the environment also gives): `HEAD` (the
 * worktree's branch), `index` (a copy of the worktree's), `packed-refs`
 * (every ref of the repository), `shallow` and `info/exclude` when the
 * repository has them, `objects/info/alternates`, and a config holding only
 * the repository format and a placeholder identity (not the real config:
 * remotes, credentials, helpers, hooks). The worktree's `.git` file is
 * covered by one naming {@link CONTAINER_GIT_DIRECTORY}; the host's own files
 * stay as git wrote them.
 */
export async function containerGitView(worktree: RunWorktree, viewDirectory: string, workdir: string = WORKSPACE_ROOT): Promise<ContainerGitView> {
  const git = (args: string[]) => rawSafeGit({ baseDirectory: worktree.repositoryRoot }, args);
  const read = async (key: string) => {
    try {
      return (await git(["config", "--get", key])).trim();
    } catch {
      return "";
    }
  };
  const lines = ["[core]", `\trepositoryformatversion = ${(await read("core.repositoryformatversion")) || "0"}`, "\tbare = false"];
  const objectFormat = await read("extensions.objectformat");
  if (objectFormat) lines.push("[extensions]", `\tobjectformat = ${objectFormat}`);
  // Commits and stashes need an identity; the agent may set its own.
  lines.push("[user]", "\tname = agent", "\temail = agent@sandbox.invalid");
  const refs = await git(["for-each-ref", "--format=%(objectname) %(refname)"]);
  mkdirSync(viewDirectory, { recursive: true });
  const seed = join(viewDirectory, `seed-${createHash("sha256").update(worktree.path).digest("hex").slice(0, 16)}`);
  // Built aside and renamed into place: a provider copying the previous seed never sees half of this one.
  const building = mkdtempSync(`${seed}.`);
  const file = (name: string, content: string | Buffer) => writeFileSync(join(building, name), content, { mode: 0o644 });
  for (const directory of ["objects/info", "objects/pack", "refs/heads", "refs/tags", "info"]) mkdirSync(join(building, directory), { recursive: true });
  file("HEAD", readRegularFile(join(worktree.gitDirectory, "HEAD")) ?? `${worktree.baseCommit}\n`);
  file("config", `${lines.join("\n")}\n`);
  file("packed-refs", refs.endsWith("\n") || refs === "" ? refs : `${refs}\n`);
  file("objects/info/alternates", `${CONTAINER_REPOSITORY_OBJECTS}\n`);
  const common = worktree.commonGitDirectory;
  for (const [from, to] of [
    [join(worktree.gitDirectory, "index"), "index"],
    [join(common, "shallow"), "shallow"],
    [join(common, "info", "exclude"), "info/exclude"],
  ] as const) {
    const content = readRegularFile(from);
    if (content !== null) file(to, content);
  }
  rmSync(seed, { recursive: true, force: true });
  renameSync(building, seed);
  // A new inode renamed into place: a running container has the old one bind-mounted.
  const view = (name: string, content: string) => {
    const path = join(viewDirectory, name);
    writeFileSync(`${path}.new`, content, { mode: 0o644 });
    renameSync(`${path}.new`, path);
    return path;
  };
  const dotGit = view("dot-git", `gitdir: ${CONTAINER_GIT_DIRECTORY}\n`);
  // The read-only repository: an unborn HEAD (readers name their commit), no refs, the objects mounted over `objects`.
  const repository = join(viewDirectory, "repository");
  for (const directory of ["objects", "refs"]) mkdirSync(join(repository, directory), { recursive: true });
  view("repository/HEAD", "ref: refs/heads/unborn\n");
  view("repository/config", `${lines.slice(0, objectFormat ? 5 : 3).join("\n")}\n`);
  return {
    readOnlyMounts: [
      { hostPath: repository, containerPath: CONTAINER_REPOSITORY_DIRECTORY },
      { hostPath: join(common, "objects"), containerPath: CONTAINER_REPOSITORY_OBJECTS },
      { hostPath: dotGit, containerPath: `${workdir}/.git` },
    ],
    privateGit: { seed, containerPath: CONTAINER_GIT_DIRECTORY },
  };
}

/**
 * Brings a running container's own git directory ({@link containerGitView})
 * up to what the runner committed on the host: `refs/heads/<branch>` of each
 * entry at its branch's head in the repository (the objects are there through
 * the read-only alternate), and, when the container's HEAD is on
 * `worktree.branch`, its index reset to that head (`git reset -q`: the files
 * untouched). So after the runner committed the worktree (a worker's
 * snapshot, a merge of a worker) `git status` shows no phantom changes, a
 * `git stash -u` or `git clean` cannot drop merged work as untracked, and
 * `git show <worker branch>:<path>` works. Runs in the container as the
 * sandbox user with hooks and fsmonitor off; the host reads nothing back.
 * Returns git's complaint (the agent's git is its own to break), never throws
 * but for a lost sandbox.
 */
export async function syncContainerGit(sandbox: Sandbox, worktree: RunWorktree, branches: string[], signal?: AbortSignal): Promise<string | null> {
  const heads = await Promise.all(branches.map(async (branch) => ({ branch, head: await branchHead(worktree.repositoryRoot, branch).catch(() => null) })));
  const updates = heads.filter((entry): entry is { branch: string; head: string } => entry.head !== null);
  if (!updates.length) return null;
  const quote = (text: string) => `'${text.replaceAll("'", "'\\''")}'`;
  const git = "git -c core.hooksPath=/dev/null -c core.fsmonitor=false";
  const command = [
    "set -e",
    ...updates.map(({ branch, head }) => `${git} update-ref ${quote(`refs/heads/${branch}`)} ${head}`),
    `if [ "$(git symbolic-ref -q HEAD || true)" = ${quote(`refs/heads/${worktree.branch}`)} ]; then ${git} reset -q; fi`,
  ].join("\n");
  const result = await sandbox.exec({ command, timeoutMs: 60_000, ...(signal ? { signal } : {}) });
  return result.exitCode === 0 ? null : `${result.stderr || result.stdout}`.trim().slice(0, 500) || `exit ${result.exitCode}`;
}

/** The content of `path` when it is a regular file (never through a link), else null. */
function readRegularFile(path: string): Buffer | null {
  try {
    return lstatSync(path).isFile() ? readFileSync(path) : null;
  } catch {
    return null;
  }
}

/**
 * lchown every entry below `root`, never following a symlink. Names are
 * walked as bytes: a file name need not be valid UTF-8, and a decoded one
 * would name another file (or none).
 */
function changeOwnerRecursively(root: string, uid: number, gid: number): void {
  const pending = [Buffer.from(root)];
  const separator = Buffer.from("/");
  while (pending.length) {
    const current = pending.pop()!;
    lchownSync(current, uid, gid);
    if (!lstatSync(current).isDirectory()) continue;
    for (const name of readdirSync(current, { encoding: "buffer" })) pending.push(Buffer.concat([current, separator, name]));
  }
}
