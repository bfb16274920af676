import { lstatSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SandboxError } from "../errors.js";

/**
 * `$TMPDIR/<name>-<uid>`: a directory of this user's, made once and reused by
 * every runner process (so nothing piles up in /tmp). Refuses one that is a
 * symlink, not a directory, or owned by someone else, since /tmp is shared.
 */
export function privateDirectory(name: string, mode = 0o700): string {
  const uid = process.getuid?.() ?? 0;
  const path = join(tmpdir(), `${name}-${uid}`);
  mkdirSync(path, { recursive: true, mode });
  const stats = lstatSync(path);
  if (!stats.isDirectory() || stats.uid !== uid) {
    throw new SandboxError(`${path} is not a directory owned by uid ${uid}; remove it and retry`);
  }
  return path;
}
