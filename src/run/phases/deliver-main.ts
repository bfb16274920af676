import type { AgentOutcome } from "../../agent/agent-loop.js";
import { CancelledError } from "../../errors.js";
import type { SandboxProvider } from "../../sandbox/sandbox.js";
import { UNRUNNABLE_EXIT_CODES } from "../../delivery/setup-commands.js";
import { mergeIntoBranch, mergeIntoUserBranch } from "../../workspace/merge.js";
import { writeRunBranchDiff, type CommitOutcome, type RunWorktree } from "../../workspace/run-worktree.js";
import type { RunReport, RunStatus } from "../run-report.js";
import type { RunScope } from "../run-scope.js";
import { RUN_FILES } from "../run-store.js";
import { MAIN_AGENT } from "../report-counter.js";
import type { RunEnvironment } from "./start-environment.js";
import type { RunWorkspace } from "./open-workspace.js";

/**
 * Phase 4, deliver: the main agent's work through the shared lifecycle
 * (src/delivery/deliver.ts): its container goes first, then the host commit and
 * patch.diff, verification on a clean checkout, and, for a verified success
 * with `on_success: merge`, the fast-forward of the user's branch. Sets the
 * report's outcome: `failed` for a commit past its time limit, the step
 * limit, the spent budget or a failed verification; `succeeded` otherwise. Throws
 * CancelledError when the run was cancelled meanwhile.
 */
export async function deliverMainAgent(
  scope: RunScope,
  workspace: RunWorkspace,
  environment: RunEnvironment,
  outcome: AgentOutcome,
  provider: SandboxProvider,
): Promise<void> {
  const { task, report, events, signal } = scope;
  const { worktree } = workspace;
  const mergeWanted = task.on_success === "merge" && outcome.reason === "final_answer";
  const delivered = await workspace.delivery.deliver({
    // Redacted before the cut: a cut piece of a secret is no longer found by the redactor.
    message: `agent-runner: ${scope.redactor.redact(task.name)} (run ${scope.runId})\n\n${firstLine(scope.redactor.redact(outcome.finalMessage ?? ""))}`,
    onCommitted: async (committed) => {
      await recordMainCommit(scope, worktree, committed);
      throwIfAborted(signal);
    },
    verify: task.verify ? { ...task.verify, setup: task.sandbox.setup } : null,
    verifyContext: {
      agentId: MAIN_AGENT,
      provider,
      specFor: environment.specFor,
      directory: scope.paths.verify,
      baseCommit: worktree.baseCommit,
      events,
      signal,
    },
    merge: mergeWanted
      ? () => {
          throwIfAborted(signal);
          return mergeIntoUserBranch(worktree.repositoryRoot, worktree.gitConfig, worktree.branch, worktree.baseCommit);
        }
      : undefined,
  });
  report.verify = delivered.verify;
  throwIfAborted(signal);
  const verified = report.verify === null || report.verify.passed;
  if (delivered.committed.timedOut) {
    setOutcome(report, "failed", "commit_timed_out");
  } else if (outcome.reason !== "final_answer") {
    // max_steps, refusal, output_limit, a spent budget: the agent did not finish; its partial work is committed, not merged, and `runner resume` continues it.
    setOutcome(report, "failed", outcome.reason);
  } else if (!verified && unrunnable(report.verify)) {
    // Bash could not run the command at all: the task's verify command or its image, not the agent's work.
    setOutcome(report, "error", "verify_unrunnable");
    report.error = `verify.command ${JSON.stringify(report.verify!.command)} could not run (exit ${report.verify!.exit_code}: ${report.verify!.exit_code === 127 ? "command not found" : "not executable"}); fix verify.command in the task file or the image. Its output:\n${report.verify!.output_tail.slice(-1000)}`;
  } else if (!verified) {
    setOutcome(report, "failed", report.verify?.timed_out ? "verify_timed_out" : "verify_failed");
  } else {
    // A success despite refused calls says so: a needed action may have been denied.
    const denied = Object.keys(report.denials).length ? "_with_denials" : "";
    setOutcome(report, "succeeded", `${report.verify ? "verified" : "finished_unverified"}${denied}`);
    if (task.on_success === "merge") {
      report.merge = delivered.merged ?? { merged: false, branch: null, detail: "only a verified run is merged, and the task has no verify command" };
      events.emit({ type: "workspace.merged", data: { merged: report.merge.merged, branch: report.merge.branch, detail: report.merge.detail } });
    } else if (scope.embedding.mergeInto !== undefined) {
      // The front end's branch takes a verified success, or an unverified one when the task has no verify command.
      throwIfAborted(signal);
      const message = `agent-runner: merge ${worktree.branch} (${scope.redactor.redact(task.name)}, run ${scope.runId})`;
      report.merge = await mergeIntoBranch(worktree.repositoryRoot, worktree.gitConfig, worktree.branch, scope.embedding.mergeInto, message);
      events.emit({ type: "workspace.merged", data: { merged: report.merge.merged, branch: report.merge.branch, detail: report.merge.detail } });
    }
  }
}

/**
 * Records a commit of the main agent's worktree: report.json `head_commit`
 * and `commit` (what was left out, whether it timed out), the
 * `workspace.committed` event, and patch.diff (streamed, under the commit's
 * time limit).
 */
export async function recordMainCommit(scope: RunScope, worktree: RunWorktree, committed: CommitOutcome): Promise<void> {
  const { report, events, commitLimits: limits } = scope;
  report.head_commit = committed.head;
  report.commit = {
    limits: { max_file_size: limits.maxFileSize, max_total_size: limits.maxTotalSize, timeout_sec: limits.timeoutMs / 1000 },
    left_out: committed.leftOut,
    left_out_count: committed.leftOutCount,
    timed_out: committed.timedOut,
    patch_timed_out: false,
  };
  events.emit({
    type: "workspace.committed",
    data: {
      branch: worktree.branch,
      commit: committed.head,
      changed: committed.changed,
      left_out: committed.leftOut,
      left_out_count: committed.leftOutCount,
      timed_out: committed.timedOut,
    },
  });
  if (await writeRunBranchDiff(worktree, scope.store.path("patch"), limits.timeoutMs)) {
    report.patch = RUN_FILES.patch;
  } else {
    report.patch = null;
    report.commit.patch_timed_out = true;
  }
}

/** A verification bash could not run: exit 126 or 127 ({@link UNRUNNABLE_EXIT_CODES}), not timed out. */
function unrunnable(verify: RunReport["verify"]): boolean {
  return verify !== null && !verify.timed_out && verify.exit_code !== null && UNRUNNABLE_EXIT_CODES.has(verify.exit_code);
}

export function setOutcome(report: RunReport, status: RunStatus, reason: string): void {
  report.status = status;
  report.reason = reason;
}

export function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw new CancelledError();
}

function firstLine(text: string | null): string {
  return (text ?? "").split("\n")[0]!.slice(0, 200);
}
