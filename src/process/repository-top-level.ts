import { existsSync, realpathSync } from "node:fs";
import { dirname, join, resolve } from "node:path";

/**
 * The real path of the git repository `path` lies in (the nearest directory
 * at or above it holding `.git`), or null outside any repository. A merge
 * of agent work changes this whole tree, not only the task's workspace.
 */
export function repositoryTopLevel(path: string): string | null {
  for (let directory = existsSync(path) ? realpathSync(path) : resolve(path); ; directory = dirname(directory)) {
    if (existsSync(join(directory, ".git"))) return directory;
    if (dirname(directory) === directory) return null;
  }
}
