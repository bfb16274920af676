import { isAbsolute, relative, sep } from "node:path";

/**
 * Whether `path` is `directory` or below it; both absolute and already
 * resolved (real paths where links matter). A name that merely starts with
 * two dots (`<dir>/..cfg`) is inside: only a `..` path segment leaves.
 */
export function isPathInside(path: string, directory: string): boolean {
  const relation = relative(directory, path);
  return relation === "" || (relation !== ".." && !relation.startsWith(`..${sep}`) && !isAbsolute(relation));
}
