import { errorMessage } from "../errors.js";
import type { EventSink } from "../events/run-events.js";
import type { Sandbox, SandboxProvider } from "../sandbox/sandbox.js";
import type { CommitLimits } from "../workspace/commit-selection.js";
import { commitRunWorktree, removeRunWorktree, type CommitOutcome, type RunWorktree } from "../workspace/run-worktree.js";
import { verifyCommit, type VerifyContext, type VerifyResult } from "./verify-commit.js";

/** The verification of a delivery: the command, its time limit (s), the protected paths (task.yaml `verify`) and the setup commands. */
export interface VerifySpec {
  command: string;
  timeout_sec: number;
  protect?: string[];
  /** `sandbox.setup`: run again on the clean checkout before the command. */
  setup?: readonly string[];
  /** `verify.python_safe_path` (default true): `PYTHONSAFEPATH=1` for the setup and verify commands. */
  python_safe_path?: boolean;
}

/** One {@link WorkDelivery.deliver}: what to commit, whether and how to verify, where to merge. */
export interface DeliverRequest<Merged> {
  /** Commit message (already redacted). */
  message: string;
  /** Runs right after the commit, before verification (the main agent writes patch.diff here). */
  onCommitted?: (committed: CommitOutcome) => Promise<void>;
  /**
   * Why the commit is not verified, or null to verify it with `verify`. A
   * commit cut short by its time limit is never verified (it holds none of the
   * final work) and need not be named here.
   */
  skipVerify?: (committed: CommitOutcome) => string | null;
  verify: VerifySpec | null;
  /** Where verification runs (provider, checkout directory, base commit, events, signal). */
  verifyContext: VerifyContext;
  /** Merges a verified commit into its target; absent: the work stays on its branch. */
  merge?: (committed: CommitOutcome, verify: VerifyResult) => Promise<Merged>;
}

/** What {@link WorkDelivery.deliver} did: each step's outcome, null for a step that did not run. */
export interface Delivery<Merged> {
  committed: CommitOutcome;
  /** Why verification did not run (`commit_timed_out`, or the request's `skipVerify` reason); null when it ran or there is none. */
  skipped: string | null;
  verify: VerifyResult | null;
  merged: Merged | null;
}

/**
 * The lifecycle of an agent's work, shared by the main agent and worker
 * subagents: **stop** (its sandbox closed, and the provider confirming that
 * nothing can still write the worktree) → **commit** on its branch (host git)
 * → **verify** the commit on a clean checkout → **merge** only when verified.
 * Host git never reads the worktree before the stop succeeded (DESIGN.md's
 * idle-worktree rule: a process left behind could swap a directory for a
 * symlink mid-read).
 *
 * {@link close} ends it whatever happened: a worktree whose work was not
 * committed (a failure, a cancellation) gets a partial-work commit, then the
 * directory is removed; when the stop could not be confirmed, neither
 * happens and the next start's sweep does both once the container is gone.
 */
export class WorkDelivery {
  private idle = false;
  private committed: CommitOutcome | null = null;

  constructor(
    private readonly options: {
      agentId: string;
      worktree: RunWorktree;
      provider: Pick<SandboxProvider, "ensureWorkspaceIdle">;
      commitLimits: CommitLimits;
      events: EventSink;
      /** The agent's sandbox, once it exists. */
      sandbox?: () => Pick<Sandbox, "close"> | null;
    },
  ) {}

  get worktree(): RunWorktree {
    return this.options.worktree;
  }

  /** True once nothing of the agent's can touch the worktree (the sandbox closed and the provider confirmed it). */
  get isIdle(): boolean {
    return this.idle;
  }

  /** Closes the agent's sandbox and confirms the worktree idle. Throws (SandboxError) when that cannot be confirmed. */
  async stop(): Promise<void> {
    if (this.idle) return;
    await this.options.sandbox?.()?.close();
    await this.options.provider.ensureWorkspaceIdle(this.options.worktree.path);
    this.idle = true;
  }

  /**
   * Stop → commit → verify → merge. Throws what the steps throw
   * (SandboxError when the stop cannot be confirmed or git fails,
   * CancelledError through the verify signal); a failed verification is a
   * result, not an exception.
   */
  async deliver<Merged>(request: DeliverRequest<Merged>): Promise<Delivery<Merged>> {
    await this.stop();
    const committed = await commitRunWorktree(this.options.worktree, request.message, this.options.commitLimits);
    this.committed = committed;
    await request.onCommitted?.(committed);
    const skipped = committed.timedOut ? "commit_timed_out" : (request.skipVerify?.(committed) ?? null);
    if (skipped !== null || request.verify === null) return { committed, skipped, verify: null, merged: null };
    const verify = await verifyCommit(request.verify, this.options.worktree, committed.head, request.verifyContext);
    const merged = verify.passed && request.merge ? await request.merge(committed, verify) : null;
    return { committed, skipped: null, verify, merged };
  }

  /**
   * Ends the delivery: stops the agent if {@link deliver} did not, commits
   * partial work with `partialMessage` when nothing was committed yet (null:
   * never), and removes the worktree directory (`removeWorktree`). Never
   * throws: problems become `cleanup.failed` events. Returns whether the
   * worktree was idle (false: it was left in place for the sweep).
   */
  async close(options: {
    partialMessage: string | null;
    removeWorktree: boolean;
    onPartialCommit?: (committed: CommitOutcome) => Promise<void>;
  }): Promise<boolean> {
    const { agentId, worktree, events } = this.options;
    try {
      await this.stop();
    } catch (error) {
      events.emit({
        type: "cleanup.failed",
        data: {
          what: `sandbox of ${agentId} (worktree left at ${worktree.path} uncommitted: the sandbox could not be confirmed gone)`,
          error: errorMessage(error),
        },
      });
      return false;
    }
    if (this.committed === null && options.partialMessage !== null) {
      try {
        this.committed = await commitRunWorktree(worktree, options.partialMessage, this.options.commitLimits);
        await options.onPartialCommit?.(this.committed);
      } catch (error) {
        events.emit({ type: "cleanup.failed", data: { what: `commit of ${agentId}'s partial work`, error: errorMessage(error) } });
      }
    }
    if (options.removeWorktree) {
      const failure = await removeRunWorktree(worktree);
      if (failure) events.emit({ type: "cleanup.failed", data: { what: `worktree of ${agentId}`, error: failure.message } });
    }
    return true;
  }
}
