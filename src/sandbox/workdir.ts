import { posix } from "node:path";
import { WORKSPACE_ROOT } from "./sandbox.js";

/**
 * Directories a task's `sandbox.workdir` may not be, nor lie inside: the
 * worktree bind-mounted there would shadow what the container needs to run
 * (its programs, libraries, /etc, the kernel's /proc and /sys), or the
 * places the runner mounts itself (/tmp, /var/tmp and /run/lock are the
 * sandbox's scratch space; /run/agent-runner holds the read-only git
 * metadata). `/` is refused on its own: it would shadow all of them.
 */
const RESERVED_DIRECTORIES = ["/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin", "/sys", "/tmp", "/usr", "/var"];

/**
 * Why `workdir` cannot hold the repository in the container, or null when it
 * can: it must be an absolute, normalized path (no `..`, no trailing `/`),
 * not `/`, and neither one of {@link RESERVED_DIRECTORIES} nor inside one.
 * The message names the fix (e.g. `/workspace`, `/app`, `/testbed`).
 */
export function workdirProblem(workdir: string): string | null {
  const fix = `use a directory of its own such as ${WORKSPACE_ROOT} (the default), /app or /testbed`;
  if (!workdir.startsWith("/") || workdir.includes("\0")) return `expected an absolute path like ${WORKSPACE_ROOT} or /app, got ${JSON.stringify(workdir)}`;
  if (posix.normalize(workdir) !== workdir || (workdir.endsWith("/") && workdir !== "/")) {
    return `expected a normalized path (no "..", "." or doubled or trailing "/"), like ${JSON.stringify(posix.normalize(workdir).replace(/(.)\/+$/, "$1"))}`;
  }
  if (workdir === "/") return `the repository mounted at / would shadow the whole image; ${fix}`;
  const reserved = RESERVED_DIRECTORIES.find((directory) => workdir === directory || workdir.startsWith(`${directory}/`));
  if (reserved) return `${workdir} would shadow ${reserved}, which the container needs (system files, or the runner's own mounts); ${fix}`;
  return null;
}
