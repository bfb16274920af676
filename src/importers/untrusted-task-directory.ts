import { closeSync, constants, fstatSync, lstatSync, openSync, readdirSync, readFileSync, realpathSync } from "node:fs";
import { join, relative } from "node:path";
import { isPathInside } from "../process/path-inside.js";

/** A file of a benchmark task that the importer will not read: it leads out of the task's directory. */
export class OutsideTaskDirectoryError extends Error {}

/**
 * A benchmark task's directory as the importers read it: untrusted input (a
 * download), so nothing is read from outside it. A symlink is followed only
 * when its real path stays inside the directory; a file is then opened at
 * that real path with `O_NOFOLLOW` (a link swapped in meanwhile fails the
 * open instead of being followed). Anything else throws
 * {@link OutsideTaskDirectoryError} naming the file (relative to the
 * directory) and where it leads.
 */
export class UntrustedTaskDirectory {
  /** The directory's real path. */
  readonly root: string;

  constructor(directory: string) {
    this.root = realpathSync(directory);
  }

  /** Whether `path` (absolute, under the directory) exists as a file or directory inside it; a link leading out throws. */
  exists(path: string): boolean {
    return this.realPath(path) !== null;
  }

  /** Whether `path` is a directory inside the directory (through links that stay inside). */
  isDirectory(path: string): boolean {
    const real = this.realPath(path);
    return real !== null && lstatSync(real).isDirectory();
  }

  /** The bytes of the regular file `path`; throws for a link out, a missing file (ENOENT) or a non-file. */
  read(path: string): Buffer {
    const real = this.realPath(path);
    if (real === null) throw Object.assign(new Error(`${this.name(path)}: no such file`), { code: "ENOENT" });
    const descriptor = openSync(real, constants.O_RDONLY | constants.O_NOFOLLOW);
    try {
      if (!fstatSync(descriptor).isFile()) throw new OutsideTaskDirectoryError(`${this.name(path)} is not a regular file: refused`);
      return readFileSync(descriptor);
    } finally {
      closeSync(descriptor);
    }
  }

  readText(path: string): string {
    return this.read(path).toString("utf8");
  }

  /**
   * The regular files below `directory`, relative to it and sorted; a link
   * to a file inside the task directory counts as that file, a link to a
   * directory is not descended (its files are reached by their own path).
   * Throws for any link below that leads out.
   */
  filesBelow(directory: string): string[] {
    const files: string[] = [];
    const walk = (current: string) => {
      for (const entry of readdirSync(current, { withFileTypes: true })) {
        const path = join(current, entry.name);
        if (entry.isDirectory()) walk(path);
        else if (entry.isFile()) files.push(relative(directory, path));
        else if (entry.isSymbolicLink()) {
          const real = this.realPath(path);
          if (real !== null && lstatSync(real).isFile()) files.push(relative(directory, path));
        }
      }
    };
    walk(directory);
    return files.sort();
  }

  /** Checks every link below `directory` (a build context about to be copied): throws for the first that leads out. */
  checkLinksBelow(directory: string, skip: ReadonlySet<string> = new Set()): void {
    for (const entry of readdirSync(directory, { withFileTypes: true })) {
      const path = join(directory, entry.name);
      if (skip.has(path)) continue;
      if (entry.isSymbolicLink()) this.realPath(path);
      else if (entry.isDirectory()) this.checkLinksBelow(path, skip);
    }
  }

  /** `path` relative to the directory, as messages name it. */
  name(path: string): string {
    return relative(this.root, path) || ".";
  }

  /** The real path of `path` when it exists; null when it does not; throws when it (or a link on the way) leads out. */
  private realPath(path: string): string | null {
    let real: string;
    try {
      real = realpathSync(path);
    } catch (error) {
      // A dangling link reads nothing: it is as missing as no file.
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw error;
    }
    if (!isPathInside(real, this.root)) {
      throw new OutsideTaskDirectoryError(
        `${this.name(path)} leads out of the task directory (to ${real}): refused, a benchmark task is untrusted input and only its own files are read`,
      );
    }
    return real;
  }
}
