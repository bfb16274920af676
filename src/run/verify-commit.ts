import { errorMessage } from "../errors.js";
import type { EventSink } from "../events/run-events.js";
import type { SandboxProvider, SandboxSpec } from "../sandbox/sandbox.js";
import { createDetachedWorktree, removeRunWorktree, type RunWorktree } from "../workspace/run-worktree.js";
import type { RunReport } from "./run-report.js";

const OUTPUT_TAIL_CHARACTERS = 4000;

export interface VerifyContext {
  provider: SandboxProvider;
  specFor: (agentId: string, worktree: RunWorktree) => Promise<SandboxSpec>;
  /** Host path for the verification checkout; removed afterwards. */
  directory: string;
  events: EventSink;
  signal: AbortSignal;
}

/**
 * Runs the task's verify command on a clean checkout of `commit` in a fresh
 * sandbox: only what was committed counts, never files the agent left outside
 * the workspace, ignored build output, or processes it left running. The
 * command must therefore set up what it needs (e.g. `npm ci && npm test`).
 * Throws SandboxError when the sandbox cannot be made; CancelledError via the signal.
 */
export async function verifyCommit(
  verify: { command: string; timeout_sec: number },
  worktree: RunWorktree,
  commit: string,
  context: VerifyContext,
): Promise<NonNullable<RunReport["verify"]>> {
  context.events.emit({ type: "verify.started", data: { command: verify.command } });
  const checkout = await createDetachedWorktree(worktree, commit, context.directory);
  try {
    await using sandbox = await context.provider.create(await context.specFor("verify", checkout));
    const result = await sandbox.exec({ command: verify.command, timeoutMs: verify.timeout_sec * 1000, signal: context.signal });
    const tail = `${result.stdout}${result.stderr ? `\n${result.stderr}` : ""}`.slice(-OUTPUT_TAIL_CHARACTERS);
    const passed = result.exitCode === 0 && !result.timedOut && !context.signal.aborted;
    context.events.emit({
      type: "verify.finished",
      data: { command: verify.command, exit_code: result.exitCode, passed, timed_out: result.timedOut, duration_ms: result.durationMs, output_tail: tail.slice(-1000) },
    });
    return { command: verify.command, exit_code: result.exitCode, passed, timed_out: result.timedOut, output_tail: tail };
  } finally {
    // Removing it is host code walking a tree the agent's committed code ran in: only once no process of it is left.
    const removable = await context.provider.ensureWorkspaceIdle(checkout.path).then(
      () => true,
      (error: unknown) => {
        context.events.emit({ type: "cleanup.failed", data: { what: `verification checkout (left at ${checkout.path})`, error: errorMessage(error) } });
        return false;
      },
    );
    if (removable) await removeRunWorktree(checkout);
  }
}
