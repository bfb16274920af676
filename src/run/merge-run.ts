import { basename } from "node:path";
import { ConfigError } from "../errors.js";
import { mergeIntoUserBranch, type UserMergeOutcome } from "../workspace/merge.js";
import { rawSafeGit } from "../workspace/safe-git.js";
import { recordedRepository } from "../workspace/run-worktree.js";
import { readRunLock } from "./run-lock.js";
import type { RunReport } from "./run-report.js";
import { RunStore } from "./run-store.js";

/**
 * The verified fast-forward of an ended run, asked for after the run (the
 * HTTP API's `POST /v1/runs/{id}/merge`): the same fast-forward `--merge`
 * makes at the end of a run ({@link mergeIntoUserBranch}), refusing what it
 * refuses with the same reasons (detached HEAD, your branch moved since the
 * run started, uncommitted tracked changes, git refusing the fast-forward),
 * and first what `--merge` never gets to see: a run that did not succeed, a
 * success with no verify command, a run branch moved since it was verified.
 * A refusal is an outcome (`merged: false` and why), not an error; the
 * outcome of a succeeded run is recorded in report.json `merge`. Throws ConfigError when the run
 * has not ended (no report.json) or its records,
 * repository or branch are gone.
 */
export async function mergeRun(runDirectory: string): Promise<UserMergeOutcome> {
  const store = new RunStore(runDirectory);
  const runId = basename(runDirectory);
  const report = store.readJson("report") as RunReport | null;
  const lock = readRunLock(runDirectory);
  if (!report) {
    throw new ConfigError(`run ${runId} has not ended: only an ended, verified run is merged (wait for it to finish)`, { reason: "run_not_ended" });
  }
  if (!lock) throw new ConfigError(`run ${runId}: run.json is missing; merge its branch yourself`, { reason: "run_records_missing" });
  if (report.merge?.merged) return report.merge;
  const refused = (detail: string): UserMergeOutcome => ({ merged: false, branch: null, detail });
  let outcome: UserMergeOutcome;
  if (report.status !== "succeeded") outcome = refused(`only a verified run is merged, and this run ${report.status} (${report.reason})`);
  else if (!report.verify?.passed) outcome = refused("only a verified run is merged, and the task has no verify command");
  else if (!report.head_commit || !report.branch || !report.base_commit) outcome = refused("the run recorded no commit to merge");
  else {
    const repository = await recordedRepository(lock);
    const branchHead = (
      await rawSafeGit({ baseDirectory: repository.repositoryRoot, config: repository.gitConfig }, ["rev-parse", `refs/heads/${report.branch}`])
    ).trim();
    outcome =
      branchHead === report.head_commit
        ? await mergeIntoUserBranch(repository.repositoryRoot, repository.gitConfig, report.branch, report.base_commit)
        : refused(
            `${report.branch} moved since it was verified (${report.head_commit.slice(0, 12)} → ${branchHead.slice(0, 12)}); only the verified commit is merged`,
          );
  }
  if (report.status === "succeeded") store.writeJson("report", { ...report, merge: outcome });
  return outcome;
}
