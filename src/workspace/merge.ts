import { lchownSync, lstatSync } from "node:fs";
import { SandboxError } from "../errors.js";
import { rawSafeGit, safeGitResult, streamSafeGit } from "./safe-git.js";
import type { RunWorktree } from "./run-worktree.js";
import { withCoAuthor } from "./commit-authorship.js";

/** Longest conflict excerpt a merge outcome carries, characters. */
const HUNKS_CHARACTERS = 6000;

/** What merging a branch into a worktree did. */
export type MergeOutcome =
  | { status: "merged"; commit: string; files: string[] }
  | { status: "conflict"; files: string[]; hunks: string }
  /** The trees merge cleanly, but files of the target's outside git (untracked, ignored) stand in the way; nothing changed. */
  | { status: "blocked"; detail: string }
  | { status: "up_to_date" };

/**
 * Merges `branch` into the branch checked out in `target` with a real
 * `git merge --no-ff` (host-side safe git: hooks, drivers and filters
 * disarmed). The merge is computed first with `git merge-tree --write-tree`,
 * which touches no file: on a conflict nothing in the worktree changes and
 * the outcome names the conflicting files with their conflict hunks. The
 * worktree must be clean (commit it first) and no sandbox process may write
 * it meanwhile. When files of the target that git does not track stand in the
 * way, git refuses and the outcome is `blocked` (nothing changed). git 2.39's
 * merge (ort) replaces *ignored* files despite `--no-overwrite-ignore`, and
 * replaces an ignored symlink by unlinking it, never writing through it.
 * Files the merge creates are handed to the sandbox user.
 * Throws SandboxError when git fails otherwise.
 */
export async function mergeBranchInto(target: RunWorktree, branch: string, message: string): Promise<MergeOutcome> {
  const options = { baseDirectory: target.path, gitDirectory: target.gitDirectory, workTree: target.path, config: target.gitConfig };
  const head = (await rawSafeGit(options, ["rev-parse", "HEAD"])).trim();
  const theirs = (await rawSafeGit(options, ["rev-parse", "--verify", `refs/heads/${branch}^{commit}`])).trim();
  if ((await safeGitResult(options, ["merge-base", "--is-ancestor", theirs, head])).exitCode === 0) return { status: "up_to_date" };
  // -z: paths come unquoted (git quotes non-ASCII paths otherwise).
  const trial = await safeGitResult(options, ["merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", head, theirs]);
  if (trial.exitCode === 1) {
    const [tree, ...rest] = trial.stdout.split("\0");
    const end = rest.indexOf("");
    const files = [...new Set(end === -1 ? rest : rest.slice(0, end))];
    return { status: "conflict", files, hunks: await conflictHunks(options, tree!.trim(), files) };
  }
  if (trial.exitCode !== 0) throw new SandboxError(`git merge-tree failed for ${branch}: ${trial.stderr.trim()}`, { reason: "git_failed" });
  // --no-overwrite-ignore: asked for, though merge-ort in git 2.39 does not honour it (see above).
  const authored = target.authorship ? withCoAuthor(message, target.authorship) : message;
  const merged = await safeGitResult(options, ["merge", "--no-ff", "--no-edit", "--no-verify", "--no-overwrite-ignore", "-m", authored, theirs]);
  if (merged.exitCode !== 0) {
    await safeGitResult(options, ["merge", "--abort"]);
    const detail = (merged.stderr || merged.stdout).trim();
    // The trees merged cleanly, so what git refuses now is the worktree's own files in the way.
    if (/would (be overwritten|lose)|untracked working tree files/i.test(detail)) return { status: "blocked", detail: detail.slice(0, 2000) };
    throw new SandboxError(`git merge of ${branch} failed after a clean trial merge: ${detail}`, { reason: "git_failed" });
  }
  const commit = (await rawSafeGit(options, ["rev-parse", "HEAD"])).trim();
  // Streamed, as bytes: the worker decides how many files there are and what they are called.
  const changed: Buffer[] = [];
  const listed = await streamSafeGit(options, ["diff", "--name-only", "--no-renames", "-z", head, commit], {
    records: (path) => changed.push(Buffer.from(path)),
  });
  if (listed.exitCode !== 0) throw new SandboxError(`git diff after merging ${branch} failed: ${listed.stderr.trim()}`, { reason: "git_failed" });
  handToSandboxUser(target, changed);
  return { status: "merged", commit, files: changed.map((path) => path.toString("utf8")) };
}

/**
 * The conflict regions (`<<<<<<<` … `>>>>>>>`) of each file in a merge-tree
 * result, capped at {@link HUNKS_CHARACTERS}: files are read only until the
 * cap is reached, and none larger than {@link CONFLICT_FILE_BYTES}.
 */
async function conflictHunks(options: Parameters<typeof rawSafeGit>[0], tree: string, files: string[]): Promise<string> {
  const parts: string[] = [];
  let length = 0;
  for (const [position, file] of files.entries()) {
    if (length >= HUNKS_CHARACTERS) {
      parts.push(`[... and ${files.length - position} more conflicting files]`);
      break;
    }
    const part = await conflictRegionsOf(options, tree, file);
    parts.push(part);
    length += part.length + 1;
  }
  const text = parts.join("\n");
  return text.length > HUNKS_CHARACTERS ? `${text.slice(0, HUNKS_CHARACTERS)}\n[... conflict excerpt cut at ${HUNKS_CHARACTERS} characters]` : text;
}

/** Largest conflicted file whose conflict regions are shown, bytes. */
const CONFLICT_FILE_BYTES = 1024 * 1024;

async function conflictRegionsOf(options: Parameters<typeof rawSafeGit>[0], tree: string, file: string): Promise<string> {
  const size = await safeGitResult(options, ["cat-file", "-s", `${tree}:${file}`]);
  if (size.exitCode !== 0) return `--- ${file}: (no text: deleted on one side, or binary)`;
  if (Number(size.stdout.trim()) > CONFLICT_FILE_BYTES) return `--- ${file}: (not shown: ${size.stdout.trim()} bytes)`;
  const shown = await safeGitResult(options, ["cat-file", "-p", `${tree}:${file}`]);
  if (shown.exitCode !== 0) return `--- ${file}: (no text: deleted on one side, or binary)`;
  const lines = shown.stdout.split("\n");
  const regions: string[] = [];
  for (let index = 0; index < lines.length; index += 1) {
    if (!lines[index]!.startsWith("<<<<<<<")) continue;
    const end = lines.findIndex((line, at) => at > index && line.startsWith(">>>>>>>"));
    regions.push(`@@ line ${index + 1}\n${lines.slice(index, end === -1 ? lines.length : end + 1).join("\n")}`);
    if (end === -1) break;
    index = end;
  }
  return `--- ${file}\n${regions.join("\n") || "(conflict without text markers: e.g. modified on one side, deleted on the other)"}`;
}

/**
 * lchown merged files (and directories the merge created) to the sandbox
 * user when we run as root; paths are bytes. Every directory on a path must
 * be a real directory (lstat): a symlink there, e.g. where the merge put a
 * link in place of a deleted directory, would carry lchown to a host path,
 * so such a path is skipped; a path that no longer exists is skipped too.
 */
function handToSandboxUser(target: RunWorktree, files: Buffer[]): void {
  if ((process.getuid?.() ?? 0) !== 0) return;
  const { uid, gid } = target.sandboxUser;
  const done = new Set<string>();
  const root = Buffer.from(`${target.path}/`);
  for (const file of files) {
    const parts: Buffer[] = [];
    let inside = true;
    for (let slash = file.indexOf(0x2f); slash !== -1; slash = file.indexOf(0x2f, slash + 1)) {
      const directory = file.subarray(0, slash);
      if (!lstatSync(Buffer.concat([root, directory]), { throwIfNoEntry: false })?.isDirectory()) {
        inside = false;
        break;
      }
      parts.push(directory);
    }
    if (!inside) continue;
    for (const part of [...parts, file]) {
      const key = part.toString("latin1");
      if (done.has(key)) continue;
      done.add(key);
      const path = Buffer.concat([root, part]);
      if (lstatSync(path, { throwIfNoEntry: false })) lchownSync(path, uid, gid);
    }
  }
}

/** Result of `runner exec --merge` (or of a merge into a named branch): whether the run branch landed, and why not. */
export interface UserMergeOutcome {
  merged: boolean;
  /** The user's branch (`refs/heads/...`), when one is checked out; the target branch of a merge into a named branch. */
  branch: string | null;
  /** Why nothing was merged, or what was done. */
  detail: string;
  /** A merge into a named branch that conflicted: the conflicting files (nothing was merged). */
  conflicts?: string[];
}

/** Times a merge into a named branch is computed again when the branch moved under it (another run merged meanwhile). */
const BRANCH_MERGE_ATTEMPTS = 5;

/**
 * Merges `runBranch` into the branch `target` of the repository without
 * checking anything out (the branch is a ref the runner owns, e.g. an
 * agency's `agency/<id>`): a fast-forward when `target` is an ancestor,
 * otherwise a two-parent merge commit whose tree `git merge-tree
 * --write-tree` computes (host-side safe git; no worktree file is read or
 * written). The ref moves with `git update-ref <new> <old>`, a
 * compare-and-swap: when another merge moved it meanwhile, the merge is
 * computed again on the new head (up to {@link BRANCH_MERGE_ATTEMPTS} times).
 * A conflict changes nothing and names the files. Throws SandboxError when
 * git fails otherwise.
 */
export async function mergeIntoBranch(
  repositoryRoot: string,
  gitConfig: string[],
  runBranch: string,
  target: string,
  message: string,
): Promise<UserMergeOutcome> {
  const options = { baseDirectory: repositoryRoot, config: gitConfig };
  const ref = `refs/heads/${target}`;
  const theirs = (await rawSafeGit(options, ["rev-parse", "--verify", `refs/heads/${runBranch}^{commit}`])).trim();
  for (let attempt = 1; attempt <= BRANCH_MERGE_ATTEMPTS; attempt += 1) {
    const head = (await rawSafeGit(options, ["rev-parse", "--verify", `${ref}^{commit}`])).trim();
    if ((await safeGitResult(options, ["merge-base", "--is-ancestor", theirs, head])).exitCode === 0) {
      return { merged: true, branch: ref, detail: `${target} already holds ${runBranch}` };
    }
    let next: string;
    let how: string;
    if ((await safeGitResult(options, ["merge-base", "--is-ancestor", head, theirs])).exitCode === 0) {
      next = theirs;
      how = "fast-forwarded";
    } else {
      const trial = await safeGitResult(options, ["merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", head, theirs]);
      if (trial.exitCode === 1) {
        const [, ...rest] = trial.stdout.split("\0");
        const end = rest.indexOf("");
        const files = [...new Set(end === -1 ? rest : rest.slice(0, end))];
        return {
          merged: false,
          branch: ref,
          detail: `${runBranch} conflicts with ${target} in ${files.join(", ")}; nothing was merged and ${runBranch} keeps the work`,
          conflicts: files,
        };
      }
      if (trial.exitCode !== 0) throw new SandboxError(`git merge-tree failed for ${runBranch}: ${trial.stderr.trim()}`, { reason: "git_failed" });
      const tree = trial.stdout.split("\0")[0]!.trim();
      next = (await rawSafeGit(options, ["commit-tree", tree, "-p", head, "-p", theirs, "-m", message])).trim();
      how = "merged";
    }
    const moved = await safeGitResult(options, ["update-ref", "-m", `agent-runner: ${how} ${runBranch}`, ref, next, head]);
    if (moved.exitCode === 0) return { merged: true, branch: ref, detail: `${how} ${runBranch} into ${target}` };
  }
  throw new SandboxError(`${target} kept moving while ${runBranch} was merged into it (${BRANCH_MERGE_ATTEMPTS} attempts)`, { reason: "git_failed" });
}

/**
 * Fast-forwards the user's checked-out branch to `runBranch`, only when that
 * branch still points at `baseCommit` (it has not moved since the run
 * started) and no tracked file has uncommitted changes. Untracked and ignored
 * files are never touched: git refuses a fast-forward that would overwrite
 * one, and the outcome says so. Nothing is changed when any check fails.
 */
export async function mergeIntoUserBranch(repositoryRoot: string, gitConfig: string[], runBranch: string, baseCommit: string): Promise<UserMergeOutcome> {
  const options = { baseDirectory: repositoryRoot, config: gitConfig };
  const symbolic = await safeGitResult(options, ["symbolic-ref", "-q", "HEAD"]);
  if (symbolic.exitCode !== 0)
    return { merged: false, branch: null, detail: "your checkout has a detached HEAD; check out a branch and merge the run branch yourself" };
  const branch = symbolic.stdout.trim();
  const head = (await rawSafeGit(options, ["rev-parse", "HEAD"])).trim();
  if (head !== baseCommit) {
    return {
      merged: false,
      branch,
      detail: `${branch} moved since the run started (${baseCommit.slice(0, 12)} → ${head.slice(0, 12)}); merge ${runBranch} yourself`,
    };
  }
  const status = await rawSafeGit(options, ["status", "--porcelain", "--untracked-files=no", "--ignore-submodules=all"]);
  if (status.trim()) {
    const files = status
      .split("\n")
      .filter(Boolean)
      .slice(0, 10)
      .map((line) => line.slice(3));
    return { merged: false, branch, detail: `tracked files have uncommitted changes (${files.join(", ")}); commit or stash them, then merge ${runBranch}` };
  }
  // --no-overwrite-ignore: git then refuses rather than replace an ignored file of yours.
  const merged = await safeGitResult(options, ["merge", "--ff-only", "--no-edit", "--no-verify", "--no-overwrite-ignore", runBranch]);
  if (merged.exitCode !== 0) {
    return { merged: false, branch, detail: `git refused the fast-forward: ${(merged.stderr || merged.stdout).trim().split("\n").slice(0, 6).join(" ")}` };
  }
  return { merged: true, branch, detail: `fast-forwarded ${branch} to ${runBranch}` };
}
