import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
  type Stats,
} from "node:fs";
import { dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { isPathInside } from "../process/path-inside.js";

/** A file of a benchmark task that the importer will not read: it leads out of the task's directory. */
export class OutsideTaskDirectoryError extends Error {}

/**
 * Where the symlink `link` leads by its text alone, resolved against the
 * link's directory without touching the file system (`..` undoes the name
 * before it, whatever that name is), and whether it stays inside `tree`
 * (never when the text is absolute). Links in an untrusted tree must pass this
 * whether or not they resolve now: a dangling link can resolve later, once
 * it is copied elsewhere or something is created next to it.
 */
function lexicalTarget(link: string, tree: string): { target: string; inside: boolean } {
  const text = readlinkSync(link);
  if (isAbsolute(text)) return { target: text, inside: false };
  const target = resolve(dirname(link), text);
  return { target, inside: isPathInside(target, tree) };
}

/**
 * Refuses an opened regular file with more than one link: `O_NOFOLLOW` does
 * nothing against a hard link, which may be a host file under the task's name.
 */
function refuseHardLink(stat: Stats, name: string): void {
  if (stat.nlink > 1) throw new OutsideTaskDirectoryError(`${name} is a hard link: a benchmark download's files must be its own; refused`);
}

/**
 * Copies `source` (a real path: a directory or a regular file) to
 * `destination` without following any link: a regular file is read with
 * `O_NOFOLLOW` and written with `O_NOFOLLOW` (an existing link at the
 * destination fails instead of being written through); a directory's links
 * are copied as links, verbatim, only when their text's lexical resolution
 * stays inside `source` (else {@link OutsideTaskDirectoryError}, naming the
 * link by `name`); other entries (devices, sockets, FIFOs) are skipped.
 * `destination`'s own directories must not be links (see
 * {@link makeDirectoriesNoFollow}). `skip` leaves out those source paths.
 */
export function copyWithoutFollowing(source: string, destination: string, name: (path: string) => string, skip: ReadonlySet<string> = new Set()): void {
  const copyFile = (from: string, to: string) => {
    const input = openSync(from, constants.O_RDONLY | constants.O_NOFOLLOW);
    try {
      const stat = fstatSync(input);
      if (!stat.isFile()) return;
      refuseHardLink(stat, name(from));
      const output = openSync(to, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW, stat.mode & 0o777);
      try {
        writeFileSync(output, readFileSync(input));
      } finally {
        closeSync(output);
      }
    } finally {
      closeSync(input);
    }
  };
  const stat = lstatSync(source);
  if (stat.isFile()) return copyFile(source, destination);
  if (!stat.isDirectory()) throw new OutsideTaskDirectoryError(`${name(source)} is not a regular file or directory: refused`);
  const walk = (from: string, to: string) => {
    makeDirectoriesNoFollow(dirname(to), to);
    for (const entry of readdirSync(from, { withFileTypes: true })) {
      const path = join(from, entry.name);
      if (skip.has(path)) continue;
      const target = join(to, entry.name);
      if (entry.isDirectory()) walk(path, target);
      else if (entry.isFile()) copyFile(path, target);
      else if (entry.isSymbolicLink()) {
        const lexical = lexicalTarget(path, source);
        if (!lexical.inside) {
          throw new OutsideTaskDirectoryError(
            `${name(path)} leads out of the copied directory ${name(source)} (to ${lexical.target}): refused, a link is copied only when it stays inside what is copied`,
          );
        }
        rmSync(target, { force: true });
        symlinkSync(readlinkSync(path), target);
      }
    }
  };
  walk(source, destination);
}

/**
 * Makes `path` and the directories between `base` (which must exist) and it,
 * refusing any that exists as something other than a directory (a link
 * copied there earlier is never gone through).
 */
export function makeDirectoriesNoFollow(base: string, path: string): void {
  let current = base;
  for (const part of relative(base, path).split(sep).filter(Boolean)) {
    current = join(current, part);
    let stat;
    try {
      stat = lstatSync(current);
    } catch {
      mkdirSync(current);
      continue;
    }
    if (!stat.isDirectory()) throw new OutsideTaskDirectoryError(`${current} is not a directory (a link?): refused, nothing is written through a link`);
  }
}

/**
 * A benchmark task's directory as the importers read it: untrusted input (a
 * download), so nothing is read from outside it. Every symlink in it is
 * checked when this is constructed: one whose text is absolute, or whose lexical
 * resolution (against its own directory) leaves the directory, refuses the
 * task, dangling or not, and so does one that resolves to a real path
 * outside. A symlink is followed only
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
    this.root = realpathSync.native(directory);
    this.checkEveryLink(this.root);
  }

  /** Every link below `directory` (none followed): absolute, lexically out, or resolving out throws. */
  private checkEveryLink(directory: string): void {
    const entries = readdirSync(directory, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const entry of entries) {
      const path = join(directory, entry.name);
      if (entry.isDirectory()) this.checkEveryLink(path);
      else if (entry.isSymbolicLink()) {
        const lexical = lexicalTarget(path, this.root);
        if (!lexical.inside) throw this.outside(path, lexical.target);
        this.realPath(path);
      }
    }
  }

  private outside(path: string, target: string): OutsideTaskDirectoryError {
    return new OutsideTaskDirectoryError(
      `${this.name(path)} leads out of the task directory (to ${target}): refused, a benchmark task is untrusted input and only its own files are read`,
    );
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
      const stat = fstatSync(descriptor);
      if (!stat.isFile()) throw new OutsideTaskDirectoryError(`${this.name(path)} is not a regular file: refused`);
      refuseHardLink(stat, this.name(path));
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

  /** `path` relative to the directory, as messages name it. */
  name(path: string): string {
    return relative(this.root, path) || ".";
  }

  /** The real path of `path` when it exists; null when it does not; throws when it (or a link on the way) leads out. */
  private realPath(path: string): string | null {
    let real: string;
    try {
      real = realpathSync.native(path);
    } catch (error) {
      // A dangling link reads nothing: it is as missing as no file (its text was checked to stay inside when the directory was opened).
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw error;
    }
    if (!isPathInside(real, this.root)) throw this.outside(path, real);
    return real;
  }
}
