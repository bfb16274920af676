import { createHash } from "node:crypto";
import { closeSync, constants, fstatSync, lstatSync, openSync, readlinkSync, readSync } from "node:fs";
import { GitCommandError, rawSafeGit, streamSafeGit, type SafeGitOptions } from "./safe-git.js";

/** Bytes read per call while hashing a staged file. */
const CHUNK_BYTES = 1024 * 1024;
const SLASH = 0x2f;

/** A path host git staged that the worktree, read without following symlinks, does not back up. */
export class StagedContentMismatchError extends Error {
  constructor(
    readonly path: string,
    readonly detail: string,
  ) {
    super(`host git staged ${JSON.stringify(path)}, but ${detail}: the worktree changed while host git read it; nothing was committed`);
    this.name = "StagedContentMismatchError";
  }
}

/**
 * Defence in depth behind the rule that host git reads a worktree only when
 * no process of the agent's can run (docs/security.md "Security model"): after `git
 * add`, every entry staged with new content is read again from the worktree
 * with no-follow semantics and compared with what git staged. Each directory
 * on its path must be a real directory (lstat, not a symlink), a file is
 * opened with O_NOFOLLOW and must be a regular file, a symlink must still be
 * one, and the bytes must hash to the staged blob (git's blob hash, SHA-1 or
 * SHA-256 by the repository's object format; where the raw bytes differ, the
 * same bytes go through `git hash-object --path` so end-of-line attributes
 * apply as they did for `git add`). A path that went through a symlink, or
 * bytes that differ, mean the tree changed under host git (a directory
 * swapped for a symlink to a host directory, CVE-2018-15664's race): throws
 * {@link StagedContentMismatchError} and the caller must not commit.
 *
 * Written here, not taken from a library: it is git's own blob hash and a
 * no-follow walk of the staged paths, a few dozen lines over node:fs.
 */
export async function checkStagedContent(options: SafeGitOptions & { workTree: string }): Promise<void> {
  const format = (await rawSafeGit(options, ["rev-parse", "--show-object-format"])).trim();
  const algorithm = format === "sha256" ? "sha256" : "sha1";
  const raw = await gitRecords(options, ["diff", "--cached", "--raw", "-z", "--no-renames", "--abbrev=40", "--no-ext-diff", "--no-textconv", "HEAD", "--"]);
  const root = Buffer.from(options.workTree);
  const checkedDirectories = new Set<string>();
  for (const entry of parseRawDiff(raw)) {
    if (entry.status === "D" || entry.mode === "160000") continue; // deleted, or a submodule commit
    const shown = entry.path.toString("utf8");
    const absolute = Buffer.concat([root, Buffer.from("/"), entry.path]);
    for (let slash = entry.path.indexOf(SLASH); slash >= 0; slash = entry.path.indexOf(SLASH, slash + 1)) {
      const directory = Buffer.concat([root, Buffer.from("/"), entry.path.subarray(0, slash)]);
      const key = directory.toString("latin1");
      if (checkedDirectories.has(key)) continue;
      const stats = lstatSync(directory, { throwIfNoEntry: false });
      if (!stats?.isDirectory()) {
        throw new StagedContentMismatchError(
          shown,
          `${JSON.stringify(entry.path.subarray(0, slash).toString("utf8"))} is ${stats?.isSymbolicLink() ? "a symlink" : "not a directory"}`,
        );
      }
      checkedDirectories.add(key);
    }
    if (entry.mode === "120000") {
      if (blobHash(algorithm, symlinkTarget(absolute, shown)) !== entry.hash) throw new StagedContentMismatchError(shown, "its symlink target differs");
      continue;
    }
    if (withNoFollow(absolute, shown, (descriptor, size) => fileHash(algorithm, descriptor, size)) === entry.hash) continue;
    // Differs as raw bytes: end-of-line conversion may explain it (filters stay disarmed).
    const bytes = withNoFollow(absolute, shown, readAll);
    const converted = (await gitRecords(options, ["hash-object", "--stdin", `--path=${shown}`], bytes))[0]?.toString("latin1").trim();
    if (converted !== entry.hash) throw new StagedContentMismatchError(shown, "its bytes in the worktree hash differently");
  }
}

interface RawDiffEntry {
  mode: string;
  hash: string;
  status: string;
  path: Buffer;
}

/** git's NUL-terminated output records as bytes (names need not be UTF-8); throws GitCommandError on a non-zero exit. */
async function gitRecords(options: SafeGitOptions, args: string[], input?: Buffer): Promise<Buffer[]> {
  const records: Buffer[] = [];
  const result = await streamSafeGit(options, args, { records: (record) => records.push(record) }, input ? { input } : {});
  if (result.exitCode !== 0) throw new GitCommandError(args, result.exitCode ?? -1, result.stderr);
  return records;
}

/** `git diff --raw -z` records come in pairs: `:<old mode> <new mode> <old hash> <new hash> <status>`, then the path. */
function parseRawDiff(records: Buffer[]): RawDiffEntry[] {
  const entries: RawDiffEntry[] = [];
  for (let index = 0; index + 1 < records.length; index += 2) {
    const [, mode, , hash, status] = records[index]!.toString("latin1").split(" ");
    entries.push({ mode: mode!, hash: hash!, status: status!.charAt(0), path: records[index + 1]! });
  }
  return entries;
}

function symlinkTarget(path: Buffer, shown: string): Buffer {
  const stats = lstatSync(path, { throwIfNoEntry: false });
  if (!stats?.isSymbolicLink()) throw new StagedContentMismatchError(shown, "it is no longer a symlink");
  return readlinkSync(path, { encoding: "buffer" });
}

/** Opens a regular file without following a symlink and hands its descriptor and size to `use`. */
function withNoFollow<T>(path: Buffer, shown: string, use: (descriptor: number, size: number) => T): T {
  let descriptor: number;
  try {
    descriptor = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new StagedContentMismatchError(shown, code === "ELOOP" ? "it is a symlink" : `it cannot be opened (${code})`);
  }
  try {
    const stats = fstatSync(descriptor);
    if (!stats.isFile()) throw new StagedContentMismatchError(shown, "it is not a regular file");
    return use(descriptor, stats.size);
  } finally {
    closeSync(descriptor);
  }
}

/** The blob hash of an open file, read in chunks (a size that changes while reading never matches). */
function fileHash(algorithm: "sha1" | "sha256", descriptor: number, size: number): string {
  const hash = createHash(algorithm).update(`blob ${size}\0`);
  const chunk = Buffer.allocUnsafe(CHUNK_BYTES);
  let total = 0;
  for (let read = readSync(descriptor, chunk, 0, CHUNK_BYTES, null); read > 0; read = readSync(descriptor, chunk, 0, CHUNK_BYTES, null)) {
    hash.update(chunk.subarray(0, read));
    total += read;
  }
  return total === size ? hash.digest("hex") : "";
}

function readAll(descriptor: number): Buffer {
  const chunks: Buffer[] = [];
  const chunk = Buffer.allocUnsafe(CHUNK_BYTES);
  for (let read = readSync(descriptor, chunk, 0, CHUNK_BYTES, null); read > 0; read = readSync(descriptor, chunk, 0, CHUNK_BYTES, null)) {
    chunks.push(Buffer.from(chunk.subarray(0, read)));
  }
  return Buffer.concat(chunks);
}

/** git's object id of a blob: hash of `blob <size>\0<bytes>`. */
function blobHash(algorithm: "sha1" | "sha256", bytes: Buffer): string {
  return createHash(algorithm).update(`blob ${bytes.length}\0`).update(bytes).digest("hex");
}
