import { rmSync } from "node:fs";
import { rawSafeGit, streamSafeGit, type SafeGitOptions } from "./safe-git.js";
import type { RunWorktree } from "./run-worktree.js";

/** Paths a protected-paths report lists per kind; `omitted` counts the rest. */
const LISTED = 100;

/** A verification checkout's commit with `verify.protect` applied, and what that changed. */
export interface ProtectedCommit {
  /** The commit to check out: `commit` itself when nothing matched a changed path. */
  commit: string;
  /** Paths the agent changed or deleted, put back as in the base (first {@link LISTED}). */
  restored: string[];
  /** Paths the agent added that were removed (first {@link LISTED}). */
  deleted: string[];
  /** Changed paths the two lists leave out. */
  omitted: number;
}

/**
 * Builds the tree verification runs on: `commit`'s tree in which every path
 * matching one of `patterns` (git pathspec globs, `:(glob)` magic: `*` stops
 * at `/`, `**` spans directories, a plain name matches a directory and
 * everything below it) is as in `base`: changed or deleted ones restored,
 * added ones removed. A path of `base` replaces whatever the agent put in
 * its way (a symlink or file where `base` has a directory, and the reverse).
 *
 * Done entirely in git's object store with plumbing, on a private index file
 * (`read-tree`, `diff-tree`, `update-index --index-info`, `write-tree`,
 * `commit-tree`): no file is written or read in any worktree, so a symlink
 * the agent committed cannot carry a write outside, and nothing of the
 * agent's runs. The result is a new commit on top of `commit`, referenced by
 * no branch. Throws GitCommandError when git fails.
 */
export async function applyProtectedPaths(
  worktree: RunWorktree,
  commit: string,
  base: string,
  patterns: string[],
  indexFile: string,
): Promise<ProtectedCommit> {
  const options: SafeGitOptions = { baseDirectory: worktree.repositoryRoot, config: worktree.gitConfig, indexFile };
  const pathspecs = patterns.map((pattern) => `:(glob)${pattern}`);
  try {
    await rawSafeGit(options, ["read-tree", commit]);
    const updates: Buffer[] = [];
    let pendingMeta: string | null = null;
    const differences = await streamSafeGit(options, ["diff-tree", "-r", "-z", "--raw", "--no-renames", "--no-abbrev", commit, base, "--", ...pathspecs], {
      records: (record) => {
        if (pendingMeta === null) {
          pendingMeta = record.toString("latin1");
          return;
        }
        // ":<mode in commit> <mode in base> <object in commit> <object in base> <status>"
        const [, baseMode, , baseObject, status] = pendingMeta.slice(1).split(" ");
        pendingMeta = null;
        const entry = status === "D" ? `0 ${"0".repeat(baseObject!.length)}\t` : `${baseMode} ${baseObject}\t`;
        updates.push(Buffer.from(entry), record, Buffer.from([0]));
      },
    });
    if (differences.exitCode !== 0) throw new Error(`git diff-tree failed: ${differences.stderr.trim()}`);
    if (updates.length === 0) return { commit, restored: [], deleted: [], omitted: 0 };
    const updated = await streamSafeGit(options, ["update-index", "-z", "--index-info"], { discard: true }, { input: Buffer.concat(updates) });
    if (updated.exitCode !== 0) throw new Error(`git update-index failed: ${updated.stderr.trim()}`);
    const tree = (await rawSafeGit(options, ["write-tree"])).trim();
    const protectedCommit = (
      await rawSafeGit(options, [
        "commit-tree",
        tree,
        "-p",
        commit,
        "-m",
        `agent-runner: verification checkout of ${commit} with verify.protect paths from ${base}`,
      ])
    ).trim();
    return { commit: protectedCommit, ...(await describeChanges(options, commit, protectedCommit)) };
  } finally {
    rmSync(indexFile, { force: true });
  }
}

/** What changed from `from` to `to`: added, modified or retyped paths are restored ones, deleted ones deleted. */
async function describeChanges(options: SafeGitOptions, from: string, to: string): Promise<Omit<ProtectedCommit, "commit">> {
  const changes = { restored: [] as string[], deleted: [] as string[], omitted: 0 };
  let status: string | null = null;
  const listed = await streamSafeGit(options, ["diff-tree", "-r", "-z", "--name-status", "--no-renames", from, to], {
    records: (record) => {
      if (status === null) {
        status = record.toString("latin1");
        return;
      }
      const list = status === "D" ? changes.deleted : changes.restored;
      status = null;
      if (list.length < LISTED) list.push(record.toString("utf8"));
      else changes.omitted += 1;
    },
  });
  if (listed.exitCode !== 0) throw new Error(`git diff-tree failed: ${listed.stderr.trim()}`);
  return changes;
}
