import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { ConfigError } from "../../errors.js";
import { currentOwner } from "../../process/process-owner.js";
import type { SandboxProvider } from "../../sandbox/sandbox.js";
import { filesystemUsage } from "../../process/filesystem-usage.js";
import { closeRunDisk, openRunDisk, type DiskEnforcementChoice, type RunDisk } from "../../workspace/run-disk.js";
import { checkoutBytes, createRunWorktree, reopenRunWorktree, withAuthorship, type RunWorktree } from "../../workspace/run-worktree.js";
import { taskSlug } from "../../workspace/run-branch-name.js";
import { commitAuthorship } from "../../workspace/commit-authorship.js";
import { configuredModelId } from "../../model/pricing.js";
import { writeRunLock } from "../run-lock.js";
import { uncommittedFiles } from "../../workspace/uncommitted-files.js";
import type { RunScope } from "../run-scope.js";
import { WorkDelivery } from "../../delivery/deliver.js";
import { recordMainCommit } from "./deliver-main.js";

/** What the open-workspace phase made: the run's disk, its worktree on its run branch (`runner/<task-name>-<short-id>`), and the delivery of the main agent's work. */
export interface RunWorkspace {
  disk: RunDisk;
  worktree: RunWorktree;
  /** Stop → commit → verify → merge of the main agent's work (its sandbox is attached by the start-environment phase). */
  delivery: WorkDelivery;
  /** Attaches the main agent's sandbox: the delivery closes it before host git reads the worktree. */
  attachSandbox(sandbox: { close(): Promise<void> } | null): void;
}

/**
 * Phase 1, open the workspace: the run's disk (`sandbox.limits.disk`), the
 * worktree (new, or the earlier attempt's reopened on resume), run.json, and
 * the `run.started` / `run.resumed` and `disk.prepared` events. Defers the
 * disk's removal (only once the worktree is idle). Throws ConfigError when the
 * disk limit cannot hold the checkout, SandboxError when git fails.
 */
export async function openWorkspace(scope: RunScope, provider: SandboxProvider, enforcement: DiskEnforcementChoice | undefined): Promise<RunWorkspace> {
  const { task, report, events, resume, runId } = scope;
  const disk = await openRunDisk(scope.store.directory, task.sandbox.limits.disk, enforcement);
  // The main agent's delivery, once its worktree exists.
  let delivery: WorkDelivery | null = null;
  scope.cleanup.defer("the run's disk", async () => {
    // Only once every worktree on it is gone: one a sandbox could still write (the main one, a worker's, a
    // verification checkout whose container was not confirmed removed) stays, with the disk, for the sweep.
    if (delivery && !delivery.isIdle) return;
    const left = worktreesLeftOn(scope.paths);
    if (left.length) {
      events.emit({
        type: "cleanup.failed",
        data: {
          what: "the run's disk",
          error: `kept: ${left.join(", ")} could not be removed (a sandbox on it was not confirmed gone); the next start's sweep commits and removes them`,
        },
      });
      return;
    }
    const failure = await closeRunDisk(scope.store.directory);
    if (failure) throw failure;
  });
  report.disk = { limit_bytes: disk.limitBytes, enforcement: disk.enforcement, detail: disk.detail, limit_reached: false, used_bytes: null };
  let reused = false;
  let worktree: RunWorktree;
  if (resume) {
    const reopened = (await reopenRunWorktree(resume.lock, { create: true }))!;
    worktree = reopened.worktree;
    reused = reopened.reused;
  } else {
    worktree = await createRunWorktree(task.workspacePath, { runId, taskSlug: taskSlug(task) }, scope.paths.worktree, scope.embedding.baseBranch).catch(
      async (error: unknown) => {
        // git says only "unable to write file": a checkout larger than the run's empty filesystem is the task's limit.
        if (disk.enforcement === "filesystem") {
          const needed = await checkoutBytes(task.workspacePath).catch(() => 0);
          if (needed >= (await filesystemUsage(disk.root)).availableBytes) {
            throw new ConfigError(
              `sandbox.limits.disk (${mebibytes(disk.limitBytes)}) cannot hold the repository's checkout (${mebibytes(needed)} or more); raise it`,
              { cause: error },
            );
          }
        }
        throw error;
      },
    );
  }
  // The user's identity authors the commits, agent-runner and the model co-author them (read again each attempt).
  const model = configuredModelId(task.model, scope.hostEnvironment) ?? task.model.provider;
  worktree = withAuthorship(worktree, await commitAuthorship(worktree.repositoryRoot, scope.hostEnvironment, model));
  let sandbox: { close(): Promise<void> } | null = null;
  const created = new WorkDelivery({ agentId: "main", worktree, provider, commitLimits: scope.commitLimits, events, sandbox: () => sandbox });
  delivery = created; // `created` keeps the non-null type for the closures below
  // After everything of the agent's has stopped (deferred later, so undone earlier): an interrupted or failed run
  // keeps its work on its branch; a worktree that cannot be confirmed idle is left for the next start's sweep.
  scope.cleanup.defer("worktree", () =>
    created.close({
      partialMessage: scope.redactor.redact(`agent-runner: ${task.name} (run ${runId}, ${report.status}: partial work)`),
      removeWorktree: true,
      onPartialCommit: (committed) => recordMainCommit(scope, worktree, committed),
    }),
  );
  report.branch = worktree.branch;
  report.base_commit = worktree.baseCommit;
  writeRunLock(scope.store.directory, {
    run_id: runId,
    trace_id: scope.traceId,
    ...(scope.parentSpanId ? { parent_span_id: scope.parentSpanId } : {}),
    owner: currentOwner(),
    repository: worktree.repositoryRoot,
    worktree: worktree.path,
    git_directory: worktree.gitDirectory,
    branch: worktree.branch,
    base_commit: worktree.baseCommit,
    ...(worktree.authorship ? { authorship: worktree.authorship } : {}),
    resumes: report.resumes,
  });
  if (resume) {
    events.emit({
      type: "run.resumed",
      data: {
        run_id: runId,
        resumes: report.resumes,
        next_step: resume.restored.nextStep,
        worktree: reused ? "reused" : "recreated",
        ...(resume.followUp === null ? {} : { follow_up: resume.followUp }),
      },
    });
  } else {
    events.emit({
      type: "run.started",
      data: { run_id: runId, task: task.name, workspace: worktree.repositoryRoot, branch: worktree.branch, base_commit: worktree.baseCommit },
    });
  }
  if (!resume) {
    // The worktree is HEAD: say once what of the user's checkout the agent will not see.
    const missing = await uncommittedFiles(worktree.repositoryRoot, worktree.gitConfig);
    if (missing && missing.changedCount + missing.ignoredCount > 0) {
      events.emit({
        type: "workspace.uncommitted",
        data: { changed_count: missing.changedCount, changed: missing.changed, ignored_count: missing.ignoredCount, ignored: missing.ignored },
      });
    }
  }
  events.emit({ type: "disk.prepared", data: { limit_bytes: disk.limitBytes, enforcement: disk.enforcement, detail: disk.detail } });
  return {
    disk,
    worktree,
    delivery: created,
    attachSandbox: (attached) => {
      sandbox = attached;
    },
  };
}

/** Worktree directories still on the run's disk: a worker's or a verification checkout that was not removed. */
function worktreesLeftOn(paths: RunScope["paths"]): string[] {
  const workers = existsSync(paths.workers) ? readdirSync(paths.workers).map((name) => join(paths.workers, name)) : [];
  return [...workers, ...(existsSync(paths.verify) ? [paths.verify] : [])];
}

function mebibytes(bytes: number): string {
  return `${Math.round(bytes / 1024 ** 2)} MiB`;
}
