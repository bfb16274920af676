import { SandboxError, errorMessage } from "../errors.js";
import { excerptOutput } from "../events/output-excerpt.js";
import type { EventSink } from "../events/run-events.js";
import { createSandbox, type ExecResult, type SandboxProvider, type SandboxSpec } from "../sandbox/sandbox.js";
import { applyProtectedPaths } from "../workspace/protected-paths.js";
import { createDetachedWorktree, removeRunWorktree, type RunWorktree } from "../workspace/run-worktree.js";
import { runSetupCommands, type SetupCommandResult } from "./setup-commands.js";

/** report.json `verify`. */
export interface VerifyResult {
  command: string;
  /** Null when the command did not exit by itself (timed out, or its sandbox was lost). */
  exit_code: number | null;
  passed: boolean;
  timed_out: boolean;
  /** The start of stdout-then-stderr that `output_tail` does not hold, up to 4000 characters ("" when the tail holds it all). */
  output_head: string;
  /** Characters left out between `output_head` and `output_tail` (0 when the record holds the whole output). */
  output_omitted: number;
  /** The last 4000 characters of stdout then stderr. */
  output_tail: string;
  /** Why the verification sandbox went away while the command ran (the command killed its helper or container); null otherwise. */
  sandbox_lost: string | null;
  /** What `verify.protect` restored from the base commit in the verification checkout; null without `protect`. */
  protected: ProtectedPaths | null;
}

/** report.json `verify.protected`. */
export interface ProtectedPaths {
  /** The task's `verify.protect` globs. */
  patterns: string[];
  /** The run's base commit the protected paths came from. */
  from_commit: string;
  /** Paths the agent changed or deleted, put back as in `from_commit` (at most 100 listed). */
  restored: string[];
  /** Paths the agent added (or turned into something else) that were removed (at most 100 listed). */
  deleted: string[];
  /** How many changed paths the two lists leave out. */
  omitted: number;
}

/** Characters of the output's start and end kept in report.json (the rest is left out, counted). */
const REPORT_HEAD_CHARACTERS = 4000;
const REPORT_TAIL_CHARACTERS = 4000;
/** The same in the `verify.finished` event, which travels on every event stream. */
const EVENT_HEAD_CHARACTERS = 1000;
const EVENT_TAIL_CHARACTERS = 1000;

/**
 * How a verification that ran ended, for people: `exit 1`, `timed out after
 * 600 s` (a timed-out command has no exit code of its own), or `the sandbox
 * was lost while it ran`. `timeoutSec` is the limit it ran under (task.yaml
 * `verify.timeout_sec`).
 */
export function verifyEnding(verify: Pick<VerifyResult, "exit_code" | "timed_out" | "sandbox_lost">, timeoutSec: number): string {
  if (verify.sandbox_lost !== null) return "the sandbox was lost while it ran";
  if (verify.timed_out) return `timed out after ${timeoutSec} s`;
  return verify.exit_code === null ? "no exit code" : `exit ${verify.exit_code}`;
}

export interface VerifyContext {
  /** Whose work is verified (`main`, `w1`, ...): named in the verify events. */
  agentId: string;
  provider: SandboxProvider;
  specFor: (agentId: string, worktree: RunWorktree) => Promise<SandboxSpec>;
  /** Host path for the verification checkout; removed afterwards. */
  directory: string;
  /** The run's base commit, where `verify.protect` paths come from (never the agent's own commits). */
  baseCommit: string;
  events: EventSink;
  signal: AbortSignal;
}

/**
 * Runs the task's verify command on a clean checkout of `commit` in a fresh
 * sandbox: only what was committed counts, never files the agent left outside
 * the workspace, ignored build output, or processes it left running. The
 * command must therefore set up what it needs (e.g. `npm ci && npm test`).
 * With `protect`, the checkout has those paths as in `context.baseCommit`
 * (see {@link applyProtectedPaths}). The task's `sandbox.setup` commands
 * (`verify.setup`) run first in the same sandbox; one that fails fails the
 * verdict (the committed code could not be set up), with its output.
 *
 * A sandbox that goes away while the command runs (its helper or container
 * killed, e.g. by a test that kills every process) was lost to the agent's
 * code: the verdict is "not passed" with `sandbox_lost` saying why, provided
 * Docker can still remove the container. Throws SandboxError when the sandbox
 * cannot be made or removed (infrastructure); CancelledError via the signal.
 */
export async function verifyCommit(
  verify: { command: string; timeout_sec: number; protect?: string[]; setup?: readonly string[] },
  worktree: RunWorktree,
  commit: string,
  context: VerifyContext,
): Promise<VerifyResult> {
  context.events.emit({ type: "verify.started", data: { agent_id: context.agentId, command: verify.command } });
  const patterns = verify.protect ?? [];
  let checkoutCommit = commit;
  let protectedPaths: ProtectedPaths | null = null;
  if (patterns.length) {
    const applied = await applyProtectedPaths(worktree, commit, context.baseCommit, patterns, `${context.directory}.protect-index`);
    checkoutCommit = applied.commit;
    protectedPaths = { patterns, from_commit: context.baseCommit, restored: applied.restored, deleted: applied.deleted, omitted: applied.omitted };
    context.events.emit({ type: "verify.protected", data: { agent_id: context.agentId, ...protectedPaths } });
  }
  const checkout = await createDetachedWorktree(worktree, checkoutCommit, context.directory);
  try {
    const sandbox = await createSandbox(context.provider, await context.specFor("verify", checkout), context.signal);
    let result: ExecResult | null = null;
    let sandboxLost: string | null = null;
    const started = Date.now();
    try {
      const setup = await runSetupCommands(sandbox, verify.setup ?? [], {
        phase: "verify",
        agentId: context.agentId,
        events: context.events,
        signal: context.signal,
      });
      result = setup.failed
        ? setupFailure(setup.failed)
        : await sandbox.exec({ command: verify.command, timeoutMs: verify.timeout_sec * 1000, signal: context.signal });
    } catch (error) {
      if (!(error instanceof SandboxError)) throw error;
      sandboxLost = errorMessage(error);
    } finally {
      // Throws when Docker itself is unreachable: then the loss is the infrastructure's, and so is the error.
      await sandbox.close();
    }
    const output = result
      ? `${result.stdout}${result.stderr ? `\n${result.stderr}` : ""}`
      : `[agent-runner] the verification sandbox was lost while the command ran (its control process died or stopped answering, e.g. under the out-of-memory killer): ${sandboxLost}`;
    const recorded = excerptOutput(output, REPORT_HEAD_CHARACTERS, REPORT_TAIL_CHARACTERS);
    const announced = excerptOutput(output, EVENT_HEAD_CHARACTERS, EVENT_TAIL_CHARACTERS);
    const exitCode = result?.exitCode ?? null;
    const timedOut = result?.timedOut ?? false;
    const passed = exitCode === 0 && !timedOut && !context.signal.aborted;
    context.events.emit({
      type: "verify.finished",
      data: {
        agent_id: context.agentId,
        command: verify.command,
        exit_code: exitCode,
        passed,
        timed_out: timedOut,
        duration_ms: result?.durationMs ?? Date.now() - started,
        output_head: announced.head,
        output_omitted: announced.omitted,
        output_tail: announced.tail,
        sandbox_lost: sandboxLost,
      },
    });
    return {
      command: verify.command,
      exit_code: exitCode,
      passed,
      timed_out: timedOut,
      output_head: recorded.head,
      output_omitted: recorded.omitted,
      output_tail: recorded.tail,
      sandbox_lost: sandboxLost,
      protected: protectedPaths,
    };
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

/** A failed setup command as the verification's result: the verify command never ran. */
function setupFailure(failed: SetupCommandResult): ExecResult {
  const stderr = `${failed.output_tail}\n[agent-runner] sandbox.setup command ${JSON.stringify(failed.command)} ${failed.timed_out ? "timed out" : `exited ${failed.exit_code}`} on the clean checkout; the verify command did not run.`;
  return {
    exitCode: failed.exit_code === 0 ? 1 : failed.exit_code,
    signal: null,
    stdout: "",
    stderr,
    timedOut: failed.timed_out,
    truncated: false,
    stdoutBytes: 0,
    stderrBytes: stderr.length,
    durationMs: failed.duration_ms,
  };
}
