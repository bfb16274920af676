import { existsSync } from "node:fs";
import { basename } from "node:path";
import type { Task } from "../config/load-task.js";
import { verifyCommit, type VerifyResult } from "../delivery/verify-commit.js";
import { ConfigError, SandboxError } from "../errors.js";
import type { SandboxProvider } from "../sandbox/sandbox.js";
import { closeRunDisk, openRunDisk, runPaths, type DiskEnforcementChoice } from "../workspace/run-disk.js";
import { recordedRepository } from "../workspace/run-worktree.js";
import { sandboxSpecFactory } from "./phases/start-environment.js";
import { readRunLock } from "./run-lock.js";
import type { RunReport } from "./run-report.js";
import { RunStore } from "./run-store.js";

/** What {@link reverifyRun} found: the commit it verified and the verdict, or why there was nothing to verify. */
export interface Reverified {
  runId: string;
  /** The run's head commit, verified on a clean checkout; null when there was none. */
  commit: string | null;
  /** The verdict now; null when the task has no verify command or the run has no commit. */
  verify: VerifyResult | null;
  /** The verdict the run itself recorded (report.json `verify.passed`), null when it had none. */
  before: boolean | null;
}

/**
 * Verifies an ended run's commit again, as the run's own verification did
 * (src/delivery/verify-commit.ts: a clean checkout of the commit, a fresh
 * sandbox, the task's `sandbox.setup` then `verify.command`, `verify.protect`
 * from the base commit), without any model call: for regrading a batch after
 * the verify command or its image changed. The checkout is made on the run's
 * disk, opened again for it and closed after. `task` is the run's task.json
 * with the image its sandbox uses now (the caller pulls or builds it). Throws
 * ConfigError when the run has not ended, has no lock, or its repository or
 * branch is gone; SandboxError when the sandbox cannot be made or the
 * checkout not removed.
 */
export async function reverifyRun(
  runDirectory: string,
  provider: SandboxProvider,
  options: { task: Task; environment: NodeJS.ProcessEnv; enforcement?: DiskEnforcementChoice; signal: AbortSignal },
): Promise<Reverified> {
  const store = new RunStore(runDirectory);
  const runId = basename(runDirectory);
  const report = store.readJson("report") as RunReport | null;
  const task = options.task;
  const lock = readRunLock(runDirectory);
  if (!report) throw new ConfigError(`run ${runId} has no report.json: it has not ended (wait for it, or \`runner resume ${runId}\`)`);
  if (!lock) throw new ConfigError(`run ${runId}: run.json is missing; it cannot be verified again`);
  const before = report.verify ? report.verify.passed : null;
  if (!task.verify || !report.head_commit) return { runId, commit: report.head_commit, verify: null, before };
  const repository = await recordedRepository(lock);
  const paths = runPaths(runDirectory);
  if (existsSync(paths.verify)) throw new ConfigError(`run ${runId}: a verification checkout is already at ${paths.verify} (another verify running?)`);
  const disk = await openRunDisk(runDirectory, task.sandbox.limits.disk, options.enforcement);
  const events = { emit: () => undefined };
  const specFor = sandboxSpecFactory(task, runId, disk, paths, events, options.environment, () => () => undefined);
  const verified = await verifyCommit({ ...task.verify, setup: task.sandbox.setup }, repository, report.head_commit, {
    agentId: "main",
    provider,
    specFor,
    directory: paths.verify,
    baseCommit: repository.baseCommit,
    events,
    signal: options.signal,
  }).then(
    (verify) => ({ verify }),
    (error: unknown) => ({ error }),
  );
  // A checkout its sandbox was not confirmed gone from stays, with the disk, for the next start's sweep.
  if (existsSync(paths.verify))
    throw new SandboxError(`run ${runId}: the verification checkout at ${paths.verify} could not be removed; it is left for the sweep`);
  const closed = await closeRunDisk(runDirectory);
  if ("error" in verified) throw verified.error;
  if (closed) throw closed;
  return { runId, commit: report.head_commit, verify: verified.verify, before };
}
