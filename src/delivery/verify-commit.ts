import { SandboxError, errorMessage } from "../errors.js";
import { dirname } from "node:path";
import { filesystemUsage } from "../process/filesystem-usage.js";
import { excerptOutput } from "../events/output-excerpt.js";
import type { EventSink } from "../events/run-events.js";
import { createSandbox, type ExecResult, type SandboxProvider, type SandboxSpec } from "../sandbox/sandbox.js";
import { applyProtectedPaths } from "../workspace/protected-paths.js";
import { checkoutSize, createDetachedWorktree, removeRunWorktree, type RunWorktree } from "../workspace/run-worktree.js";
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
 * Docker can still remove the container. The checkout is made on the run's
 * disk: when the agent's worktree leaves no room for it there (ENOSPC, blocks
 * or inodes of `sandbox.limits.disk`), the command does not run and the
 * verdict is "not passed", saying so (issue 20 item 7: the agent's own
 * writes filled the disk, so it is the agent's failure, not the
 * infrastructure's). Throws SandboxError when the sandbox cannot be made or
 * removed (infrastructure); CancelledError via the signal.
 */
export async function verifyCommit(
  verify: { command: string; timeout_sec: number; protect?: string[]; setup?: readonly string[]; python_safe_path?: boolean },
  worktree: RunWorktree,
  commit: string,
  context: VerifyContext,
): Promise<VerifyResult> {
  context.events.emit({ type: "verify.started", data: { agent_id: context.agentId, command: verify.command } });
  const patterns = verify.protect ?? [];
  let checkoutCommit = commit;
  let protectedPaths: ProtectedPaths | null = null;
  const started = Date.now();
  let checkout: RunWorktree;
  try {
    if (patterns.length) {
      const applied = await applyProtectedPaths(worktree, commit, context.baseCommit, patterns, `${context.directory}.protect-index`);
      checkoutCommit = applied.commit;
      protectedPaths = { patterns, from_commit: context.baseCommit, restored: applied.restored, deleted: applied.deleted, omitted: applied.omitted };
      context.events.emit({ type: "verify.protected", data: { agent_id: context.agentId, ...protectedPaths } });
    }
    checkout = await createDetachedWorktree(worktree, checkoutCommit, context.directory);
  } catch (error) {
    if (!(await checkoutDoesNotFit(worktree, checkoutCommit, context.directory))) throw error;
    const tail =
      "[agent-runner] the verification checkout of the commit does not fit on the run's disk (sandbox.limits.disk): " +
      "the worktree the agent left fills it, so the verify command did not run. The checkout needs room for a second copy " +
      "of the committed files: keep the worktree under half of sandbox.limits.disk (blocks and files), or raise the limit. " +
      `(${errorMessage(error).split("\n")[0]})`;
    context.events.emit({
      type: "verify.finished",
      data: {
        agent_id: context.agentId,
        command: verify.command,
        exit_code: null,
        passed: false,
        timed_out: false,
        duration_ms: Date.now() - started,
        output_head: "",
        output_omitted: 0,
        output_tail: tail,
        sandbox_lost: null,
      },
    });
    return {
      command: verify.command,
      exit_code: null,
      passed: false,
      timed_out: false,
      output_head: "",
      output_omitted: 0,
      output_tail: tail,
      sandbox_lost: null,
      protected: protectedPaths,
    };
  }
  try {
    const sandbox = await createSandbox(context.provider, await context.specFor("verify", checkout), context.signal);
    let result: ExecResult | null = null;
    let sandboxLost: string | null = null;
    try {
      const env = verificationEnvironment(verify);
      const setup = await runSetupCommands(sandbox, verify.setup ?? [], {
        phase: "verify",
        agentId: context.agentId,
        events: context.events,
        signal: context.signal,
        env,
      });
      result = setup.failed
        ? setupFailure(setup.failed)
        : await sandbox.exec({ command: verify.command, timeoutMs: verify.timeout_sec * 1000, signal: context.signal, env });
    } catch (error) {
      if (!(error instanceof SandboxError)) throw error;
      sandboxLost = errorMessage(error);
    } finally {
      // Throws when Docker itself is unreachable: then the loss is the infrastructure's, and so is the error.
      await sandbox.close();
    }
    const ran = result ? `${result.stdout}${result.stderr ? `\n${result.stderr}` : ""}` : "";
    const output = result
      ? `${ran}${safePathHint(verify, result.exitCode, ran)}`
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

/**
 * What the verification's commands (setup and verify) get added to their
 * environment: `PYTHONSAFEPATH=1` unless `verify.python_safe_path` is false.
 * Python (3.11 and later; docs.python.org, "PYTHONSAFEPATH") then puts
 * neither the current directory (`python3 -m pytest`) nor a script's
 * directory on `sys.path` at startup, so the checkout's top level is not
 * searched for modules and distributions before the interpreter has loaded
 * its plugins: a `pytest.py`, a `sitecustomize.py` or a `*.dist-info` whose
 * `entry_points.txt` declares a `[pytest11]` plugin there (pytest loads every
 * such plugin it finds on `sys.path` at startup) is not picked up. pytest's
 * own `pythonpath` setting and its rootdir insertion come after the plugins
 * are loaded, so tests still import the code under test (README "Protected
 * paths").
 */
/**
 * A line after a failed verification's output when Python found no module of that name while PYTHONSAFEPATH was on:
 * `python3 -c 'import calc'` and a script importing its siblings stop working under it, and the reason is not
 * in Python's own message.
 */
function safePathHint(verify: { python_safe_path?: boolean }, exitCode: number | null, output: string): string {
  if (exitCode === 0 || verify.python_safe_path === false || !/\bModuleNotFoundError: No module named\b/.test(output)) return "";
  return (
    "\n[agent-runner] verification runs Python with PYTHONSAFEPATH=1 (the checkout's top level is not on sys.path at startup, " +
    "so a planted plugin or sitecustomize is not imported): `python3 -c 'import x'` and scripts importing their siblings need " +
    "verify.python_safe_path: false, or `python3 -m pytest` with pythonpath set in its configuration (docs/security.md)."
  );
}

function verificationEnvironment(verify: { python_safe_path?: boolean }): Record<string, string> {
  return verify.python_safe_path === false ? {} : { PYTHONSAFEPATH: "1" };
}

/**
 * Whether a checkout of `commit` cannot fit in what the disk under `directory`
 * has left (blocks or inodes), as the reason a `git worktree add` there failed.
 * git reports ENOSPC only as "unable to write file" and removes its partial
 * checkout, so the sizes are compared instead: those of the commit's files
 * rounded to 4 KiB blocks ({@link checkoutSize}) against statfs's free space,
 * with 10 % left for directories and git's own files.
 */
async function checkoutDoesNotFit(worktree: RunWorktree, commit: string, directory: string): Promise<boolean> {
  const [needed, disk] = await Promise.all([checkoutSize(worktree.repositoryRoot, commit), filesystemUsage(dirname(directory))]).catch(
    () => [null, null] as const,
  );
  if (!needed || !disk) return false;
  return disk.full || needed.bytes > disk.availableBytes * 0.9 || needed.files > disk.availableFiles * 0.9;
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
