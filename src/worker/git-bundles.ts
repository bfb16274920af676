import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { runBranchNameTaken } from "../workspace/run-branch-name.js";
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
 * for an invocation), as bytes: a temporary ref of this call names it, since a bundle carries refs, not bare commits.
 */
export async function bundleCommit(repositoryRoot: string, commit: string, scratch: string): Promise<Uint8Array> {
  const directory = mkdtempSync(join(scratch, "bundle-"));
  // One ref per call: two submitters bundling the same commit of one repository at once must not delete each other's.
  const ref = `refs/agent-runner/bundle/${commit}-${basename(directory)}`;
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
 * Makes the run's branch in the user's repository at the worker's commit:
 * fetched from `bundle` (the worker's commits on top of `base`, on `branch`
 * there), or at `base` when the run made none. `candidates` are the run's
 * names (runBranchCandidates of its task and run id,
 * src/workspace/run-branch-name.ts) and `branch`, the worker's name, must be
 * one of them (a worker's report naming `main` or another run's branch is
 * refused: Error). It is named `branch` when that name is free here, else
 * the first free one of `candidates`, so a branch of another run of the same
 * task is never moved or reused; a name is taken as {@link runBranchNameTaken}
 * says. `recorded` is the branch this run's own records name (its report.json
 * from an earlier landing of the same result): when that branch is at the
 * worker's commit it is the one returned, and no other existing branch is
 * ever taken for this run's, even at the same commit (another run's branch
 * of the same task at the same base). The commits come in under a private
 * ref, and the branch is created with `update-ref` only if it does not exist,
 * so a branch made meanwhile is not fast-forwarded. Returns the branch's name
 * here. Throws when git fails or every name is taken.
 */
export async function landBranch(
  repositoryRoot: string,
  branch: string,
  candidates: string[],
  base: string,
  bundle: Uint8Array | null,
  scratch: string,
  recorded: string | null,
): Promise<string> {
  if (!candidates.includes(branch))
    throw new Error(`the worker named the run's branch ${JSON.stringify(branch)}, which is not one of the run's names (${candidates[0]} …)`);
  const git = (args: string[]) => rawSafeGit({ baseDirectory: repositoryRoot }, args);
  const headOf = (name: string) =>
    git(["rev-parse", "--verify", "--quiet", `refs/heads/${name}`]).then(
      (output) => output.trim(),
      () => null,
    );
  const names = [branch, ...candidates.filter((name) => name !== branch)];
  mkdirSync(scratch, { recursive: true, mode: 0o700 });
  const directory = mkdtempSync(join(scratch, "land-"));
  const landing = `refs/agent-runner/landing/${basename(directory)}`;
  try {
    let target = base;
    if (bundle) {
      const file = join(directory, "branch.bundle");
      writeFileSync(file, bundle);
      target = (await git(["bundle", "list-heads", file, `refs/heads/${branch}`])).trim().split(" ")[0]!;
    }
    if (recorded !== null && names.includes(recorded) && (await headOf(recorded)) === target) return recorded;
    if (bundle) await git(["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", join(directory, "branch.bundle"), `+refs/heads/${branch}:${landing}`]);
    for (const name of names) {
      if (await runBranchNameTaken(repositoryRoot, name)) continue;
      try {
        // The empty old value: create, never move an existing branch.
        await git(["update-ref", "-m", "agent-runner: land a worker's run", `refs/heads/${name}`, target, ""]);
        return name;
      } catch (error) {
        // Made meanwhile by another process: not this run's record, so the next name (even at the same commit).
        if ((await headOf(name)) === null) throw error;
      }
    }
    throw new Error(`every name for the run's branch is taken (${names[0]} … ${names.at(-1)}); runner prune removes ended runs' branches`);
  } finally {
    if (bundle) await git(["update-ref", "-d", landing]).catch(() => undefined);
    rmSync(directory, { recursive: true, force: true });
  }
}
