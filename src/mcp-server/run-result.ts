import { parse as parseDiff } from "diff2html/lib/diff-parser.js";
import type { RunReport } from "../run/run-report.js";

/** One file a run's patch changes, as `git diff --numstat` would count it. */
export interface ChangedFile {
  path: string;
  /** The path before a rename, else absent. */
  from?: string;
  change: "added" | "deleted" | "renamed" | "modified";
  /** Lines added and removed; 0 and 0 for a binary file. */
  added: number;
  removed: number;
  binary: boolean;
}

/**
 * The files of a patch (patch.diff, `git diff` of the run branch against its
 * base), parsed with diff2html's parser rather than by hand: renames, binary
 * files, modes and quoted names are its job.
 */
export function changedFiles(patch: string): ChangedFile[] {
  if (!patch.trim()) return [];
  return parseDiff(patch).map((file) => {
    const deleted = file.isDeleted === true || file.newName === "/dev/null";
    const added = file.isNew === true || file.oldName === "/dev/null";
    const renamed = !added && !deleted && (file.isRename === true || file.oldName !== file.newName);
    return {
      path: deleted ? file.oldName : file.newName,
      ...(renamed ? { from: file.oldName } : {}),
      change: added ? "added" : deleted ? "deleted" : renamed ? "renamed" : "modified",
      added: file.addedLines,
      removed: file.deletedLines,
      binary: file.isBinary === true,
    };
  });
}

/** A page of a patch's lines. */
export interface PatchPage {
  /** The 0-based line this page starts at. */
  offset: number;
  /** The lines of the page, newline-joined (each line whole). */
  text: string;
  /** Lines in this page. */
  lines: number;
  totalLines: number;
  /** Where the next page starts; null at the end. */
  nextOffset: number | null;
}

/**
 * Lines `offset`.. of `patch`: at most `maxLines`, and no more than
 * `maxBytes` of UTF-8 (a page always holds its first line, cut to `maxBytes`
 * with a marker when that one line is longer), so a large patch never floods
 * the caller's context: it pages through with `nextOffset`.
 */
export function pagePatch(patch: string, offset: number, maxLines: number, maxBytes: number): PatchPage {
  const all = patch === "" ? [] : patch.replace(/\n$/, "").split("\n");
  const start = Math.min(offset, all.length);
  const taken: string[] = [];
  let bytes = 0;
  let next = start;
  while (next < all.length && taken.length < maxLines) {
    let line = all[next]!;
    const size = Buffer.byteLength(line) + 1;
    if (taken.length > 0 && bytes + size > maxBytes) break;
    if (size > maxBytes) line = `${Buffer.from(line).subarray(0, maxBytes).toString("utf8")}… [line cut: ${size - 1} bytes]`;
    taken.push(line);
    bytes += size;
    next += 1;
  }
  return { offset: start, text: taken.join("\n"), lines: taken.length, totalLines: all.length, nextOffset: next < all.length ? next : null };
}

/**
 * What the caller can do with an ended run's work, in words an agent can act
 * on: take a verified branch (fast-forward, or review first), look at an
 * unverified one before taking anything, or continue the run.
 */
export function mergeAdvice(report: RunReport, workspace: string | null): string {
  const repository = workspace ? `git -C ${shellQuote(workspace)}` : "git";
  if (!report.branch || !report.head_commit || report.head_commit === report.base_commit) {
    return report.status === "succeeded" ? "Nothing to merge: the run changed no file." : `Nothing to merge: the run left no commit (${report.reason}).`;
  }
  if (report.merge?.merged) return `Already merged: ${report.merge.detail}`;
  const review = `${repository} diff ${report.base_commit}..${report.branch}`;
  if (report.status === "succeeded") {
    return `The work is verified and on branch ${report.branch}. Take it with \`${repository} merge --ff-only ${report.branch}\` (or \`${repository} merge ${report.branch}\` if your branch moved); review it first with \`${review}\`.`;
  }
  return `The work is NOT verified (${report.status}: ${report.reason}); it is on branch ${report.branch} for review only: \`${review}\`. Do not merge it as is; run_resume continues the run where that is possible.`;
}

function shellQuote(word: string): string {
  return /^[\w./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}
