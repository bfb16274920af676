/**
 * Paths git refuses to put in a tree because a checkout on another file
 * system would read them as `.git` (or a symlinked `.gitmodules`):
 * CVE-2014-9390 (HFS+ ignores some Unicode code points and case, NTFS
 * trims trailing dots and spaces and has `git~1` short names) and
 * CVE-2019-1353 (NTFS alternate data streams, backslashes).
 *
 * This is a port of git's own checks, so that the host commit can leave such
 * a path out (and report it) instead of letting `git add` fail on it, which
 * would fail the whole commit: `verify_path_internal()` and `verify_dotfile()`
 * in read-cache.c with both `core.protectHFS` and `core.protectNTFS` on (the
 * union `git fsck` applies to every tree entry: `fsck_tree()` in fsck.c,
 * messages `hasDotgit` and `gitmodulesSymlink`), `is_ntfs_dotgit()` and
 * `is_ntfs_dot_generic()` in path.c, `is_hfs_dot_generic()`,
 * `next_hfs_char()` and `pick_one_utf8_char()` in utf8.c (git v2.39 through
 * v2.51 agree). No npm library implements these rules. Paths are bytes:
 * git's rules work on bytes (UTF-8 where HFS+ is concerned), and a file name
 * need not be valid UTF-8.
 *
 * Windows-only parts of those functions (drive prefixes, `is_valid_path`) do
 * not apply to a checkout on this host and are left out.
 */

/** Why git refuses a path: it names `.git` on some file system, or it is a symlinked `.gitmodules`. */
export type RefusedGitPathReason = "dotgit_name" | "gitmodules_symlink" | "invalid_path";

export interface RefusedGitPath {
  reason: RefusedGitPathReason;
  /** Bytes of the path up to the end of the refused component: everything below it is refused too. */
  prefixLength: number;
}

const SLASH = 0x2f;
const BACKSLASH = 0x5c;
const DOT = 0x2e;
const SPACE = 0x20;
const COLON = 0x3a;
const TILDE = 0x7e;

/** Byte at `index`, 0 past the end (git's strings are NUL-terminated). */
function byteAt(bytes: Uint8Array, index: number): number {
  return index < bytes.length ? bytes[index]! : 0;
}

function lowerAscii(byte: number): number {
  return byte >= 0x41 && byte <= 0x5a ? byte + 0x20 : byte;
}

/** `strncasecmp(bytes + at, needle, length) == 0` in the C locale. */
function startsWithIgnoringCase(bytes: Uint8Array, at: number, needle: string, length = needle.length): boolean {
  for (let offset = 0; offset < length; offset += 1) {
    if (lowerAscii(byteAt(bytes, at + offset)) !== needle.charCodeAt(offset)) return false;
  }
  return true;
}

/** path.c `is_ntfs_dotgit()`: `.git` or `git~1`, then only dots and spaces up to a separator, `:` or the end. */
function isNtfsDotGit(bytes: Uint8Array, start = 0): boolean {
  let index = start;
  const first = byteAt(bytes, index++);
  if (first === DOT) {
    if (!startsWithIgnoringCase(bytes, index, "git")) return false;
    index += 3;
  } else if (lowerAscii(first) === 0x67) {
    if (!startsWithIgnoringCase(bytes, index, "it") || byteAt(bytes, index + 2) !== TILDE || byteAt(bytes, index + 3) !== 0x31) return false;
    index += 4;
  } else {
    return false;
  }
  for (;;) {
    const byte = byteAt(bytes, index++);
    if (byte === 0 || byte === SLASH || byte === BACKSLASH || byte === COLON) return true;
    if (byte !== DOT && byte !== SPACE) return false;
  }
}

/** The `only_spaces_and_periods` tail of path.c `is_ntfs_dot_generic()`. */
function onlySpacesAndPeriods(bytes: Uint8Array, index: number): boolean {
  for (;;) {
    const byte = byteAt(bytes, index++);
    if (byte === 0 || byte === COLON) return true;
    if (byte !== SPACE && byte !== DOT) return false;
  }
}

/**
 * path.c `is_ntfs_dot_generic()`: `.<name>` with trailing dots/spaces or an
 * alternate stream, its 6-character short name `<name6>~1..4`, or the hashed
 * fall-back short name (`shortNamePrefix`, e.g. `gi7eba` for `gitmodules`).
 */
function isNtfsDotGeneric(bytes: Uint8Array, start: number, name: string, shortNamePrefix: string): boolean {
  if (byteAt(bytes, start) === DOT && startsWithIgnoringCase(bytes, start + 1, name)) return onlySpacesAndPeriods(bytes, start + 1 + name.length);
  const tildeDigit = byteAt(bytes, start + 7);
  if (startsWithIgnoringCase(bytes, start, name, 6) && byteAt(bytes, start + 6) === TILDE && tildeDigit >= 0x31 && tildeDigit <= 0x34) {
    return onlySpacesAndPeriods(bytes, start + 8);
  }
  let sawTilde = false;
  for (let index = 0; index < 8; index += 1) {
    const byte = byteAt(bytes, start + index);
    if (byte === 0) return false;
    if (sawTilde) {
      if (byte < 0x30 || byte > 0x39) return false;
    } else if (byte === TILDE) {
      index += 1;
      const digit = byteAt(bytes, start + index);
      if (digit < 0x31 || digit > 0x39) return false;
      sawTilde = true;
    } else if (index >= 6) {
      return false;
    } else if (byte & 0x80) {
      return false;
    } else if (lowerAscii(byte) !== shortNamePrefix.charCodeAt(index)) {
      return false;
    }
  }
  return onlySpacesAndPeriods(bytes, start + 8);
}

/** path.c `is_ntfs_dotgitmodules()`. */
function isNtfsDotGitmodules(bytes: Uint8Array, start = 0): boolean {
  return isNtfsDotGeneric(bytes, start, "gitmodules", "gi7eba");
}

/** Code points HFS+ ignores in names (utf8.c `next_hfs_char()`). */
const HFS_IGNORED = new Set([0x200c, 0x200d, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x206a, 0x206b, 0x206c, 0x206d, 0x206e, 0x206f, 0xfeff]);

/** utf8.c `pick_one_utf8_char()`: the code point at `index` and its length, or null for malformed UTF-8. */
function pickUtf8(bytes: Uint8Array, index: number): { codePoint: number; length: number } | null {
  const s0 = byteAt(bytes, index);
  const s1 = byteAt(bytes, index + 1);
  const s2 = byteAt(bytes, index + 2);
  const s3 = byteAt(bytes, index + 3);
  if (s0 < 0x80) return { codePoint: s0, length: 1 };
  if ((s0 & 0xe0) === 0xc0) {
    if ((s1 & 0xc0) !== 0x80 || (s0 & 0xfe) === 0xc0) return null;
    return { codePoint: ((s0 & 0x1f) << 6) | (s1 & 0x3f), length: 2 };
  }
  if ((s0 & 0xf0) === 0xe0) {
    if ((s1 & 0xc0) !== 0x80 || (s2 & 0xc0) !== 0x80) return null;
    if (s0 === 0xe0 && (s1 & 0xe0) === 0x80) return null; // overlong
    if (s0 === 0xed && (s1 & 0xe0) === 0xa0) return null; // surrogate
    if (s0 === 0xef && s1 === 0xbf && (s2 & 0xfe) === 0xbe) return null; // U+FFFE, U+FFFF
    return { codePoint: ((s0 & 0x0f) << 12) | ((s1 & 0x3f) << 6) | (s2 & 0x3f), length: 3 };
  }
  if ((s0 & 0xf8) === 0xf0) {
    if ((s1 & 0xc0) !== 0x80 || (s2 & 0xc0) !== 0x80 || (s3 & 0xc0) !== 0x80) return null;
    if ((s0 === 0xf0 && (s1 & 0xf0) === 0x80) || (s0 === 0xf4 && s1 > 0x8f) || s0 > 0xf4) return null;
    return { codePoint: ((s0 & 0x07) << 18) | ((s1 & 0x3f) << 12) | ((s2 & 0x3f) << 6) | (s3 & 0x3f), length: 4 };
  }
  return null;
}

/** utf8.c `is_hfs_dot_generic()`: `.<needle>` ignoring case and HFS+'s ignored code points, then `/` or the end. */
function isHfsDotGeneric(bytes: Uint8Array, start: number, needle: string): boolean {
  let index = start;
  // next_hfs_char(): malformed UTF-8 reads as 0, like the end of the name.
  const next = (): number => {
    for (;;) {
      const picked = pickUtf8(bytes, index);
      if (!picked) return 0;
      index += picked.length;
      if (!HFS_IGNORED.has(picked.codePoint)) return picked.codePoint;
    }
  };
  if (next() !== DOT) return false;
  for (let offset = 0; offset < needle.length; offset += 1) {
    const codePoint = next();
    if (codePoint > 127 || lowerAscii(codePoint) !== needle.charCodeAt(offset)) return false;
  }
  const after = next();
  return after === 0 || after === SLASH;
}

/** utf8.c `is_hfs_dotgit()`. */
function isHfsDotGit(bytes: Uint8Array, start = 0): boolean {
  return isHfsDotGeneric(bytes, start, "git");
}

/** utf8.c `is_hfs_dotgitmodules()`. */
function isHfsDotGitmodules(bytes: Uint8Array, start = 0): boolean {
  return isHfsDotGeneric(bytes, start, "gitmodules");
}

/**
 * read-cache.c `verify_dotfile()` on the component after a leading `.`
 * (`rest` is its first byte): `.`, `..` and `.git` (any case) are refused
 * everywhere, a symlinked `.gitmodules` too.
 */
function dotfileRefusal(bytes: Uint8Array, rest: number, symlink: boolean): RefusedGitPathReason | null {
  const first = byteAt(bytes, rest);
  if (first === 0 || first === SLASH) return "invalid_path";
  if (lowerAscii(first) === 0x67) {
    if (!startsWithIgnoringCase(bytes, rest + 1, "it")) return null;
    const after = byteAt(bytes, rest + 3);
    if (after === 0 || after === SLASH) return "dotgit_name";
    if (symlink && startsWithIgnoringCase(bytes, rest + 3, "modules")) {
      const end = byteAt(bytes, rest + 10);
      if (end === 0 || end === SLASH) return "gitmodules_symlink";
    }
    return null;
  }
  if (first === DOT) {
    const second = byteAt(bytes, rest + 1);
    if (second === 0 || second === SLASH) return "invalid_path";
  }
  return null;
}

/**
 * Whether git refuses `path` (bytes, `/`-separated, relative) with
 * `core.protectHFS` and `core.protectNTFS` on; `symlink` says whether the
 * path is a symbolic link. Null when git accepts it, else the reason and the
 * refused leading part (e.g. `.GIT` for `.GIT/config`). Port of read-cache.c
 * `verify_path_internal()`.
 */
export function refusedGitPath(path: Uint8Array, symlink: boolean): RefusedGitPath | null {
  const componentEnd = (from: number) => {
    let end = from;
    while (end < path.length && path[end] !== SLASH) end += 1;
    return end;
  };
  const refused = (reason: RefusedGitPathReason, at: number): RefusedGitPath => ({ reason, prefixLength: componentEnd(at) });
  if (path.length === 0) return { reason: "invalid_path", prefixLength: 0 };
  let index = 0;
  let atComponentStart = true;
  for (;;) {
    if (atComponentStart) {
      if (isHfsDotGit(path, index) || isNtfsDotGit(path, index)) return refused("dotgit_name", index);
      if (symlink && (isHfsDotGitmodules(path, index) || isNtfsDotGitmodules(path, index))) return refused("gitmodules_symlink", index);
      const first = byteAt(path, index);
      if (first === SLASH) return refused("invalid_path", index);
      if (first === DOT) {
        const reason = dotfileRefusal(path, index + 1, symlink);
        if (reason) return refused(reason, index);
      }
      if (first === 0) return { reason: "invalid_path", prefixLength: path.length };
      atComponentStart = false;
      index += 1;
      continue;
    }
    const byte = byteAt(path, index);
    if (byte === 0) return null;
    if (byte === SLASH) {
      index += 1;
      atComponentStart = true;
      continue;
    }
    if (byte === BACKSLASH) {
      if (isNtfsDotGit(path, index + 1)) return refused("dotgit_name", index);
      if (symlink && isNtfsDotGitmodules(path, index + 1)) return refused("gitmodules_symlink", index);
    }
    index += 1;
  }
}
