import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { rawSafeGit } from "../workspace/safe-git.js";

/**
 * Git bundles carry commits between the submitter and the workers, so a
 * worker never needs the submitter's disk and only the submitter writes the
 * user's repository. Every git command goes through `rawSafeGit` (no hooks,
 * filters, fsmonitor or inherited configuration: docs/architecture.md "Where
 * the host meets the agent").
 */

/**
 * A bundle of `commit` with its history (the run's base commit: your HEAD for a batch, the agency branch's head
 * for an invocation), as bytes: a temporary ref names it, since a bundle carries refs, not bare commits.
 */
export async function bundleCommit(repositoryRoot: string, commit: string, scratch: string): Promise<Uint8Array> {
  const directory = mkdtempSync(join(scratch, "bundle-"));
  const ref = `refs/agent-runner/bundle/${commit}`;
  try {
    const file = join(directory, "base.bundle");
    await rawSafeGit({ baseDirectory: repositoryRoot }, ["update-ref", ref, commit]);
    await rawSafeGit({ baseDirectory: repositoryRoot }, ["bundle", "create", file, ref]);
    return readFileSync(file);
  } finally {
    await rawSafeGit({ baseDirectory: repositoryRoot }, ["update-ref", "-d", ref]).catch(() => undefined);
    rmSync(directory, { recursive: true, force: true });
  }
}

/**
 * A clone of `bundle` checked out at `commit` in `<cache>/<commit>/`, made once
 * per commit (a clone in a temporary directory, then a rename: a reader never
 * sees half a clone) and shared by the runs that start from it (each run
 * makes its own worktree). Returns its path.
 */
export async function checkoutBundle(bundle: Uint8Array, commit: string, cache: string): Promise<string> {
  const target = join(cache, commit);
  if (existsSync(join(target, ".git"))) return target;
  mkdirSync(cache, { recursive: true, mode: 0o700 });
  const scratch = mkdtempSync(join(cache, `.clone-${commit.slice(0, 12)}-`));
  try {
    const file = join(scratch, "base.bundle");
    writeFileSync(file, bundle);
    const clone = join(scratch, "repo");
    await rawSafeGit({ baseDirectory: scratch }, ["clone", "--quiet", "--no-checkout", file, clone]);
    // A commit's bundle ({@link bundleCommit}) names it under refs/agent-runner/, which a clone does not fetch.
    await rawSafeGit({ baseDirectory: clone }, ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", file, "+refs/agent-runner/*:refs/agent-runner/*"]);
    await rawSafeGit({ baseDirectory: clone }, ["checkout", "--quiet", "-B", "main", commit]);
    await rawSafeGit({ baseDirectory: clone }, ["remote", "remove", "origin"]);
    try {
      renameSync(clone, target);
    } catch (error) {
      // Another run of the same commit renamed its clone first: that one is as good.
      if (!existsSync(join(target, ".git"))) throw error;
    }
    return target;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

/** A bundle of `branch` without what `base` already has (the run's commits), as bytes; null when the branch adds no commit. */
export async function bundleBranch(repositoryRoot: string, branch: string, base: string, scratch: string): Promise<Uint8Array | null> {
  const count = Number((await rawSafeGit({ baseDirectory: repositoryRoot }, ["rev-list", "--count", `${base}..refs/heads/${branch}`])).trim());
  if (count === 0) return null;
  mkdirSync(scratch, { recursive: true, mode: 0o700 });
  const directory = mkdtempSync(join(scratch, "bundle-"));
  try {
    const file = join(directory, "branch.bundle");
    await rawSafeGit({ baseDirectory: repositoryRoot }, ["bundle", "create", file, `refs/heads/${branch}`, `^${base}`]);
    return readFileSync(file);
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
}

/**
 * Makes `branch` in the user's repository: fetched from `bundle` (the
 * worker's commits on top of `base`), or at `base` when the run made none.
 * A branch already at the right commit (a result fetched twice) is left as
 * it is. Throws when git refuses (the branch exists at another commit).
 */
export async function landBranch(repositoryRoot: string, branch: string, base: string, bundle: Uint8Array | null, scratch: string): Promise<void> {
  const headOf = () =>
    rawSafeGit({ baseDirectory: repositoryRoot }, ["rev-parse", "--verify", "--quiet", `refs/heads/${branch}`]).then(
      (output) => output.trim(),
      () => null,
    );
  // Two submitters of the same job land the same branch: the one that loses the ref lock finds it made.
  const unlessMade = (target: string) => async (error: unknown) => {
    if ((await headOf()) !== target) throw error;
  };
  const existing = await headOf();
  if (!bundle) {
    if (existing === base) return;
    await rawSafeGit({ baseDirectory: repositoryRoot }, ["branch", "--no-track", branch, base]).catch(unlessMade(base));
    return;
  }
  mkdirSync(scratch, { recursive: true, mode: 0o700 });
  const directory = mkdtempSync(join(scratch, "land-"));
  try {
    const file = join(directory, "branch.bundle");
    writeFileSync(file, bundle);
    const head = (await rawSafeGit({ baseDirectory: repositoryRoot }, ["bundle", "list-heads", file, `refs/heads/${branch}`])).trim().split(" ")[0]!;
    if (existing === head) return;
    const refspec = `refs/heads/${branch}:refs/heads/${branch}`;
    await rawSafeGit({ baseDirectory: repositoryRoot }, ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", file, refspec]).catch(unlessMade(head));
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
}
