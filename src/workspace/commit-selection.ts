import { accessSync, constants, lstatSync, type Stats } from "node:fs";
import { refusedGitPath, type RefusedGitPathReason } from "./git-path-names.js";
import { streamSafeGit, type SafeGitOptions } from "./safe-git.js";

/** Bounds of one host commit of a worktree (task.yaml `commit`). */
export interface CommitLimits {
  /** A file larger than this (bytes, apparent size) is not committed. */
  maxFileSize: number;
  /** Files that would take the commit's new or changed content past this (bytes, apparent size) are not committed. */
  maxTotalSize: number;
  /** Wall-clock limit of the whole commit (listing, `git add`, `git commit`), ms. */
  timeoutMs: number;
}

/**
 * Defaults: 100 MiB per file (GitHub refuses larger files), 1 GiB in all (host git
 * hashes ~7 s of CPU per GiB, sparse files included: measured on the 2-core CI machine), 300 s.
 */
export const DEFAULT_COMMIT_LIMITS: CommitLimits = { maxFileSize: 100 * 1024 ** 2, maxTotalSize: 1024 ** 3, timeoutMs: 300_000 };

/** The limits of a task's `commit` section (bytes, bytes, seconds); a task recorded by an older runner has none. */
export function commitLimitsOf(section: { max_file_size?: number; max_total_size?: number; timeout_sec?: number } | undefined): CommitLimits {
  return {
    maxFileSize: section?.max_file_size ?? DEFAULT_COMMIT_LIMITS.maxFileSize,
    maxTotalSize: section?.max_total_size ?? DEFAULT_COMMIT_LIMITS.maxTotalSize,
    timeoutMs: (section?.timeout_sec ?? DEFAULT_COMMIT_LIMITS.timeoutMs / 1000) * 1000,
  };
}

/** Why a path of the worktree is not in the commit. */
export type LeftOutReason = RefusedGitPathReason | "nested_repository" | "unreadable" | "file_too_large" | "over_total_size";

/** A path left out of a commit, as report.json `commit.left_out` shows it. */
export interface LeftOutPath {
  /** Worktree-relative path (bytes that are not UTF-8 shown as U+FFFD); for a refused name, the refused leading part. */
  path: string;
  reason: LeftOutReason;
  /** Apparent size, bytes (size reasons only). */
  size?: number;
  /** The file has holes: fewer bytes allocated than its size (size reasons only). */
  sparse?: boolean;
}

/** Left-out paths a report lists; the count covers the rest. */
const LEFT_OUT_LISTED = 100;

export interface CommitSelection {
  /** Leading paths (bytes) `git add` must skip, as `:(exclude,literal)` pathspecs. */
  excluded: Buffer[];
  /** The first {@link LEFT_OUT_LISTED} left-out paths, in git's order. */
  leftOut: LeftOutPath[];
  leftOutCount: number;
  /** True when listing the candidates ran past the deadline. */
  timedOut: boolean;
}

/**
 * Decides what of the worktree `git add --all` may take: every path git
 * would add (untracked and not ignored, or tracked and modified; listed by
 * `git ls-files -z --others --modified --exclude-standard`, streamed) is
 * checked by name ({@link refusedGitPath}: names git refuses, which would fail
 * the whole `git add`), for being a nested repository (left out, with
 * everything below it: host git must never start in a repository the agent
 * configured; every gitlink of the index is left out of `git add` as well,
 * reported when a repository now sits at its path), for being readable (likewise), and by apparent size against `limits` (a sparse file
 * costs the agent no disk but host git its full size in hashing). Sizes come
 * from `lstat` below directories that are real directories, never through
 * a symlink. No sandbox process may run meanwhile.
 */
export async function selectCommittablePaths(options: SafeGitOptions, root: string, limits: CommitLimits, deadline: number): Promise<CommitSelection> {
  const selection: CommitSelection = { excluded: [], leftOut: [], leftOutCount: 0, timedOut: false };
  const excludedPrefixes = new Set<string>();
  const realDirectories = new Map<string, boolean>();
  const rootBytes = Buffer.from(`${root}/`);
  let total = 0;
  const leaveOut = (entry: LeftOutPath) => {
    selection.leftOutCount += 1;
    if (selection.leftOut.length < LEFT_OUT_LISTED) selection.leftOut.push(entry);
  };
  /** lstat of `path` (relative bytes), or null when it is gone or lies below something that is not a real directory. */
  const lstatInside = (path: Buffer): Stats | null => {
    for (let slash = path.indexOf(0x2f); slash !== -1; slash = path.indexOf(0x2f, slash + 1)) {
      const parent = path.subarray(0, slash);
      const key = parent.toString("latin1");
      let real = realDirectories.get(key);
      if (real === undefined) {
        real = lstatOrNull(Buffer.concat([rootBytes, parent]))?.isDirectory() ?? false;
        realDirectories.set(key, real);
      }
      if (!real) return null;
    }
    return lstatOrNull(Buffer.concat([rootBytes, path]));
  };
  const consider = (record: Buffer) => {
    // A nested repository is listed as `dir/`: git adds it as a gitlink, without hashing its files.
    const path = record.at(-1) === 0x2f ? record.subarray(0, -1) : record;
    if (path.length === 0 || isBelowExcluded(path, excludedPrefixes)) return;
    const stats = lstatInside(path);
    if (!stats) return;
    const refused = refusedGitPath(path, stats.isSymbolicLink());
    if (refused) {
      const prefix = Buffer.from(path.subarray(0, refused.prefixLength));
      excludedPrefixes.add(prefix.toString("latin1"));
      selection.excluded.push(prefix);
      leaveOut({ path: prefix.toString("utf8"), reason: refused.reason });
      return;
    }
    // A nested repository (a directory holding a `.git` entry: a repository, or a gitfile naming any
    // repository on the host) is never given to `git add`: adding or refreshing a gitlink makes git read
    // that repository, and run `git status` in it with its own config, whose filters and drivers are the agent's.
    if (stats.isDirectory()) {
      if (lstatOrNull(Buffer.concat([rootBytes, path, Buffer.from("/.git")]))) {
        excludedPrefixes.add(path.toString("latin1"));
        selection.excluded.push(Buffer.from(path));
        leaveOut({ path: path.toString("utf8"), reason: "nested_repository" });
      }
      return;
    }
    if (!stats.isFile()) return;
    // A runner that is not root shares its uid with the sandbox: a `chmod 000` file would fail the whole `git add`.
    if (!isReadable(Buffer.concat([rootBytes, path]))) {
      selection.excluded.push(Buffer.from(path));
      leaveOut({ path: path.toString("utf8"), reason: "unreadable" });
      return;
    }
    const tooLarge = stats.size > limits.maxFileSize;
    if (!tooLarge && total + stats.size <= limits.maxTotalSize) {
      total += stats.size;
      return;
    }
    selection.excluded.push(Buffer.from(path));
    leaveOut({
      path: path.toString("utf8"),
      reason: tooLarge ? "file_too_large" : "over_total_size",
      size: stats.size,
      sparse: stats.blocks * 512 < stats.size,
    });
  };
  // Every gitlink of the index (a submodule of the base commit) is kept out of `git add` too, changed or not:
  // for an unchanged one git still runs `git status` inside whatever repository now sits at its path.
  const gitlinks = await streamSafeGit(
    options,
    ["ls-files", "-z", "--stage"],
    {
      records: (record) => {
        if (!record.subarray(0, 7).equals(GITLINK_MODE)) return;
        const path = record.subarray(record.indexOf(0x09) + 1);
        excludedPrefixes.add(path.toString("latin1"));
        selection.excluded.push(Buffer.from(path));
        if (lstatInside(Buffer.concat([path, Buffer.from("/.git")]))) leaveOut({ path: path.toString("utf8"), reason: "nested_repository" });
      },
    },
    { timeoutMs: deadline - Date.now() },
  );
  if (gitlinks.timedOut) return { ...selection, timedOut: true };
  if (gitlinks.exitCode !== 0) throw new Error(`git ls-files --stage failed: ${gitlinks.stderr.trim()}`);
  const listed = await streamSafeGit(
    options,
    ["ls-files", "-z", "--others", "--modified", "--exclude-standard"],
    { records: consider },
    { timeoutMs: deadline - Date.now() },
  );
  if (listed.timedOut) return { ...selection, timedOut: true };
  if (listed.exitCode !== 0) throw new Error(`git ls-files failed: ${listed.stderr.trim()}`);
  return selection;
}

/** `git ls-files --stage` mode of a gitlink (a submodule's commit), followed by its space. */
const GITLINK_MODE = Buffer.from("160000 ");

/**
 * The pathspecs for `git add --all --pathspec-from-file=- --pathspec-file-nul`:
 * everything (`.`) except the excluded leading paths, taken literally (no glob).
 */
export function additionPathspecs(excluded: Buffer[]): Buffer {
  return Buffer.concat([Buffer.from(".\0"), ...excluded.flatMap((path) => [Buffer.from(":(exclude,literal)"), path, Buffer.from([0])])]);
}

function isBelowExcluded(path: Buffer, prefixes: Set<string>): boolean {
  if (prefixes.size === 0) return false;
  for (let slash = path.indexOf(0x2f); slash !== -1; slash = path.indexOf(0x2f, slash + 1)) {
    if (prefixes.has(path.subarray(0, slash).toString("latin1"))) return true;
  }
  return prefixes.has(path.toString("latin1"));
}

function isReadable(path: Buffer): boolean {
  try {
    accessSync(path, constants.R_OK);
    return true;
  } catch {
    return false;
  }
}

function lstatOrNull(path: Buffer): Stats | null {
  try {
    return lstatSync(path);
  } catch {
    return null;
  }
}
