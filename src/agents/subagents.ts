import { join } from "node:path";
import { z } from "zod";
import { runAgentLoop, type AgentEndReason, type AgentOutcome } from "../agent/agent-loop.js";
import type { ContextSettings } from "../agent/context-window.js";
import type { SessionJournal } from "../agent/session-journal.js";
import { ToolResultStore } from "../agent/tool-result-store.js";
import { CancelledError, errorMessage } from "../errors.js";
import { joinExcerpt } from "../events/output-excerpt.js";
import type { EventSink } from "../events/run-events.js";
import { emptyUsage, type ChatMessage, type Usage } from "../model/messages.js";
import type { ModelClient } from "../model/model-client.js";
import { RecoveringSandbox } from "../sandbox/recovering-sandbox.js";
import type { Sandbox, SandboxProvider, SandboxSpec } from "../sandbox/sandbox.js";
import { defineTool, toolError, type Tool, type ToolGuard } from "../tools/define-tool.js";
import { ToolRegistry } from "../tools/tool-registry.js";
import { mergeBranchInto, type MergeOutcome } from "../workspace/merge.js";
import type { CommitLimits, LeftOutPath } from "../workspace/commit-selection.js";
import { commitRunWorktree, createBranchWorktree, syncContainerGit, type CommitOutcome, type RunWorktree } from "../workspace/run-worktree.js";
import { WorkDelivery } from "../delivery/deliver.js";
import { verifyEnding } from "../delivery/verify-ending.js";
import type { TaskManager, TaskResult } from "./task-manager.js";

/** How a report says an agent stopped without finishing, by its end reason. */
const UNFINISHED: Partial<Record<AgentEndReason, string>> = {
  max_steps: "stopped at its step limit",
  refusal: "stopped: the model refused to answer",
  output_limit: "stopped: its replies kept being cut at the output-token limit",
  budget_exceeded: "stopped: the run's cost budget (model.max_cost_usd) is spent",
};

export type SubagentMode = "explore" | "worker";

/** A subagent as report.json shows it (the tree of agents under `main`). */
export interface SubagentReport {
  id: string;
  parent: string;
  mode: SubagentMode;
  description: string;
  task_id: string | null;
  background: boolean;
  fork: boolean;
  /** Worker branch `<run branch>-w<n>` (`runner/<task-name>-<short-id>-w<n>`), kept whatever the outcome. */
  branch: string | null;
  status: "pending" | "running" | "merged" | "not_merged" | "finished" | "failed" | "cancelled";
  steps: number;
  tool_calls: number;
  usage: Usage;
  /** What its model calls cost, USD; null when the model is not priced. */
  cost_usd: number | null;
  verify: { command: string; exit_code: number | null; passed: boolean; timed_out: boolean; sandbox_lost: string | null } | null;
  /** A worker's commit: what it left out (first 100 paths, and how many in all) and whether it ran past its time limit. */
  commit: { left_out: LeftOutPath[]; left_out_count: number; timed_out: boolean } | null;
  merge: { status: MergeOutcome["status"] | "skipped"; files: string[]; detail: string } | null;
  /**
   * Why a worker's work was not merged (status `not_merged`), as the terminal
   * and the summary show it: what failed and how, e.g. ``verification `pytest -q`
   * timed out after 600 s``; whole up to {@link NOT_MERGED_REASON_LIMIT}
   * characters. Null otherwise.
   */
  not_merged_reason: string | null;
  final_message: string | null;
  error: string | null;
  duration_ms: number;
}

/** What subagents need from the run that starts them. */
export interface SubagentHost {
  runId: string;
  runDirectory: string;
  /** Where worker worktrees and their verification checkouts go (the run's disk, so `sandbox.limits.disk` counts them). */
  workersDirectory: string;
  model: ModelClient;
  provider: SandboxProvider;
  /** Sandbox spec for an agent on a worktree (`readOnly`: the workspace mounted read-only). */
  specFor(agentId: string, worktree: RunWorktree, options?: { readOnly?: boolean }): Promise<SandboxSpec>;
  events: EventSink;
  journal: SessionJournal;
  redact(text: string): string;
  context: ContextSettings;
  tasks: TaskManager;
  /** The parent agent: its worktree, sandbox and the gate held while its tool calls run. */
  parent: {
    agentId: string;
    worktree: RunWorktree;
    sandbox: Sandbox;
    gate: { runExclusive<T>(callback: () => Promise<T>): Promise<T> };
    /** The parent's conversation so far (for `fork`). */
    conversation(): readonly ChatMessage[];
  };
  /** Tools of a subagent, in the parent's order. `fork`: the parent's full list, with delegation (and, for explore, writing) denied. */
  toolsFor(mode: SubagentMode, fork: boolean, results: ToolResultStore): ToolRegistry;
  systemPromptFor(mode: SubagentMode): string;
  /** Verification command, timeout and protected paths of the task (a worker's default command; protect always applies). */
  verify: { command: string; timeout_sec: number; protect?: string[]; setup?: readonly string[]; python_safe_path?: boolean } | null;
  /** Bounds of every host commit of a worktree (task.yaml `commit`). */
  commitLimits: CommitLimits;
  limits: { maxSteps: number; timeoutMs: number; toolTimeoutMs: number };
  /** The offline hint for a failed call's output (the agent loop's `networkHint`). */
  networkHint: (output: string) => string | null;
  /** The cost of a model call's usage, USD; absent when the model is not priced. */
  costOf?: (usage: Usage) => number;
  /** The run's cost budget, shared with the main agent (see AgentLoopOptions.budget). */
  budget?: { spent(): boolean };
  /** Where each subagent's report goes (report.json `agents`). */
  reports: SubagentReport[];
  /** Policy, approval and hooks of a subagent (explore agents get the `explore` policy). */
  guardFor(mode: SubagentMode): ToolGuard;
  /** The main agent's policy checker (which tools its list, and a fork's, may show). */
  mainChecker: { toolAllowed(name: string): boolean };
  /** A subagent's step limit (the task's, lowered by its policy's). */
  maxStepsFor(mode: SubagentMode): number;
  /** Number of the run's next subagent (`w<n>`/`e<n>`): after a resume, past every id the run used. */
  firstAgentNumber: number;
  /** Serializes host-side git on the parent's worktree (snapshots, merges) across concurrent subagents. */
  parentGit: { runExclusive<T>(callback: () => Promise<T>): Promise<T> };
}

/** The `agent` tool's arguments (also what src/runner/check-script.ts checks a script's calls against). */
export const agentToolInput = z.strictObject({
  description: z.string().min(1).max(200).describe("A short name for the subagent's job (3-8 words)"),
  prompt: z.string().min(1).describe("The subagent's brief: everything it needs to know, since it does not see this conversation (unless fork)"),
  mode: z.enum(["explore", "worker"]),
  background: z.boolean().optional().describe("Return a task id at once; the outcome arrives as a message when it ends"),
  verify: z.string().min(1).optional().describe("Worker only: shell command that must pass before its work is merged"),
  fork: z.boolean().optional().describe("Start from a copy of this conversation"),
});

/**
 * The `agent` tool (DESIGN.md): starts a subagent with its own context.
 * `explore` investigates read-only (the parent's workspace mounted read-only,
 * read-only tools plus run_shell) and returns its report; `worker` gets a
 * snapshot of the parent's worktree as a commit, its own worktree and branch
 * `runner/<task-name>-<short-id>-w<n>`, its own container, and the writer's tools; when it
 * ends its work is committed, verified on a clean checkout and, only if that
 * passes, merged into the parent's branch with a real git merge. One level of
 * delegation: subagents get no `agent` tool.
 */
export function agentTool(host: SubagentHost): Tool {
  let counter = host.firstAgentNumber - 1;
  return defineTool({
    name: "agent",
    readOnly: false,
    concurrent: true,
    description:
      "Start a subagent with its own context and container. mode explore: a read-only investigator that returns a report " +
      "(several may run at once). mode worker: works on its own branch made from your current files; when it ends, its work " +
      "is verified (verify, or the task's verify command) and only then merged into your branch; you get the outcome " +
      "(merged with the files changed, verification failed with the output, or a conflict with the hunks). " +
      "background: true returns a task id at once and delivers the result as a message later. " +
      "fork: true starts it with a copy of this conversation instead of only the prompt.",
    input: agentToolInput,
    async execute(input, context) {
      if (input.verify !== undefined && input.mode !== "worker") return toolError("verify applies to worker agents only");
      counter += 1;
      const agentId = `${input.mode === "worker" ? "w" : "e"}${counter}`;
      const started = Date.now();
      const report: SubagentReport = {
        id: agentId,
        parent: host.parent.agentId,
        mode: input.mode,
        description: input.description,
        task_id: null,
        background: input.background ?? false,
        fork: input.fork ?? false,
        branch: null,
        status: "pending",
        steps: 0,
        tool_calls: 0,
        usage: emptyUsage(),
        cost_usd: host.costOf ? 0 : null,
        verify: null,
        commit: null,
        merge: null,
        not_merged_reason: null,
        final_message: null,
        error: null,
        duration_ms: 0,
      };
      host.reports.push(report);
      // The parent's last message is the assistant message making this call: a fork starts from what preceded it.
      const forkFrom = input.fork ? host.parent.conversation().slice(0, -1) : undefined;
      let worktree: RunWorktree | null = null;
      if (input.mode === "worker") {
        // Taken now, while the parent waits for this call: the worker starts from exactly the parent's current files.
        try {
          worktree = await prepareWorkerWorktree(host, agentId);
        } catch (error) {
          report.status = "failed";
          report.error = errorMessage(error);
          return toolError(`could not start worker ${agentId}: ${errorMessage(error)}`);
        }
        report.branch = worktree.branch;
      }
      const { record, done } = host.tasks.start(
        { kind: "agent", description: input.description, background: report.background, agentId, parentSignal: context.signal },
        (signal, _record, releaseSlot) =>
          runSubagent(host, { ...input, agentId, forkFrom, worktree, holdsGate: !report.background, releaseSlot }, report, signal, started),
      );
      report.task_id = record.id;
      if (report.background) {
        return {
          content: `started ${input.mode} subagent ${agentId} as background task ${record.id}; its outcome arrives as a message when it ends (task_get, task_stop)`,
        };
      }
      const ended = await done;
      if (ended.status === "cancelled") throw new CancelledError();
      return { content: ended.output, isError: ended.status === "failed" };
    },
  });
}

async function prepareWorkerWorktree(host: SubagentHost, agentId: string): Promise<RunWorktree> {
  const parent = host.parent.worktree;
  // Frozen, not stopped: the parent's background commands survive, but nothing races host git.
  const snapshot = await host.parentGit.runExclusive(() =>
    host.parent.sandbox.freeze(async () => {
      await host.provider.ensureWorkspaceIdle(parent.path);
      return commitRunWorktree(parent, `agent-runner: snapshot for worker ${agentId}`, host.commitLimits);
    }),
  );
  if (snapshot.timedOut)
    throw new Error(
      `committing your worktree as the worker's starting point ran past the commit time limit (${host.commitLimits.timeoutMs / 1000} s); remove large or numerous generated files first`,
    );
  // Named after the run's branch as recorded (one level of subagents: the parent is the main agent).
  const created = await createBranchWorktree(parent, `${parent.branch}-${agentId}`, join(host.workersDirectory, agentId), snapshot.head);
  // The parent's git in its container follows the snapshot commit and knows the worker's branch.
  await syncContainerGit(host.parent.sandbox, parent, [parent.branch, created.branch]);
  return created;
}

interface SubagentRequest {
  agentId: string;
  description: string;
  prompt: string;
  mode: SubagentMode;
  verify?: string;
  fork?: boolean;
  forkFrom: ChatMessage[] | undefined;
  worktree: RunWorktree | null;
  /** True when the caller holds the parent's gate (a blocking call): the merge must not wait for it. */
  holdsGate: boolean;
  /** Gives back the max_parallel slot: a worker waiting to merge must not hold one (a blocking call holding the gate may wait for it). */
  releaseSlot: () => void;
}

/** Runs one subagent to its end and returns the text its caller gets. Throws only when cancelled. */
async function runSubagent(
  host: SubagentHost,
  request: SubagentRequest,
  report: SubagentReport,
  taskSignal: AbortSignal,
  started: number,
): Promise<TaskResult> {
  const signal = AbortSignal.any([taskSignal, AbortSignal.timeout(host.limits.timeoutMs)]);
  const { agentId } = request;
  report.status = "running";
  host.events.emit({
    type: "subagent.started",
    data: {
      agent_id: agentId,
      parent_id: host.parent.agentId,
      mode: request.mode,
      description: request.description,
      branch: report.branch,
      fork: report.fork,
      background: report.background,
    },
  });
  let sandbox: Sandbox | null = null;
  // A worker's work goes through the same stop → commit → verify → merge as the main agent's.
  const work = request.worktree
    ? new WorkDelivery({
        agentId,
        worktree: request.worktree,
        provider: host.provider,
        commitLimits: host.commitLimits,
        events: host.events,
        sandbox: () => sandbox,
      })
    : null;
  try {
    const worktree = request.worktree ?? host.parent.worktree;
    const spec = await host.specFor(agentId, worktree, { readOnly: request.mode === "explore" });
    sandbox = await RecoveringSandbox.create(
      host.provider,
      spec,
      (sandboxId) => host.events.emit({ type: "sandbox.restarted", data: { sandbox_id: sandboxId } }),
      signal,
    );
    const results = new ToolResultStore(host.runDirectory, agentId);
    const outcome: AgentOutcome = await runAgentLoop({
      agentId,
      description: request.description,
      model: host.model,
      tools: host.toolsFor(request.mode, request.fork ?? false, results),
      sandbox,
      systemPrompt: host.systemPromptFor(request.mode),
      instruction: request.prompt,
      maxSteps: host.maxStepsFor(request.mode),
      toolTimeoutMs: host.limits.toolTimeoutMs,
      networkHint: host.networkHint,
      guard: host.guardFor(request.mode),
      events: host.events,
      signal,
      context: host.context,
      journal: host.journal,
      results,
      redact: (text) => host.redact(text),
      ...(host.costOf ? { costOf: host.costOf } : {}),
      ...(host.budget ? { budget: host.budget } : {}),
      ...(request.forkFrom ? { forkFrom: request.forkFrom } : {}),
    });
    report.final_message = outcome.finalMessage;
    if (!work) {
      report.status = "finished";
      return finish(host, report, started, {
        status: "completed",
        output: `Explore subagent ${agentId} (${request.description}) ${UNFINISHED[outcome.reason] ?? "finished"}. Its report:\n${outcome.finalMessage ?? "(no report)"}`,
      });
    }
    return await finishWorker(host, request, report, work, outcome, signal, started);
  } catch (error) {
    if (taskSignal.aborted) {
      report.status = "cancelled";
      finish(host, report, started, { status: "failed", output: "" });
      throw new CancelledError();
    }
    report.status = "failed";
    report.error = signal.aborted ? `timed out after ${host.limits.timeoutMs} ms` : errorMessage(error);
    return finish(host, report, started, {
      status: "failed",
      output: `Error: subagent ${agentId} (${request.description}) failed: ${report.error}${report.branch ? `. Its branch ${report.branch} keeps its work (committed as it stopped).` : ""}`,
    });
  } finally {
    if (work) {
      // A worker that failed, timed out or was stopped keeps its edits on its branch.
      await work.close({
        partialMessage: host.redact(`agent-runner: worker ${agentId}: ${request.description} (${report.status}: partial work)`),
        removeWorktree: true,
      });
    } else {
      await sandbox
        ?.close()
        .catch((error: unknown) => host.events.emit({ type: "cleanup.failed", data: { what: `sandbox of ${agentId}`, error: errorMessage(error) } }));
    }
  }
}

/** Delivers a worker's work (commit, verify on a clean checkout, merge only when verified); the text tells the parent what happened. */
async function finishWorker(
  host: SubagentHost,
  request: SubagentRequest,
  report: SubagentReport,
  work: WorkDelivery,
  outcome: AgentOutcome,
  signal: AbortSignal,
  started: number,
): Promise<TaskResult> {
  const { worktree } = work;
  const { agentId } = request;
  const parent = host.parent;
  const command = request.verify ?? host.verify?.command;
  const mergeIntoParent = () =>
    host.parentGit
      .runExclusive(() =>
        parent.sandbox.freeze(async () => {
          await host.provider.ensureWorkspaceIdle(parent.worktree.path);
          // The parent's own changes are committed first: nothing of its work is lost, stashed or half-merged.
          const own = await commitRunWorktree(parent.worktree, `agent-runner: ${parent.agentId}'s work before merging worker ${agentId}`, host.commitLimits);
          if (own.timedOut)
            throw new Error(
              `committing your own changes before the merge ran past the commit time limit (${host.commitLimits.timeoutMs / 1000} s); the worker's branch ${worktree.branch} keeps its verified work`,
            );
          return mergeBranchInto(parent.worktree, worktree.branch, host.redact(`agent-runner: merge worker ${agentId} (${request.description})`));
        }),
      )
      .then(async (merged) => {
        // The parent's git in its container follows its branch (its own commit, the merge) and knows the worker's.
        await syncContainerGit(parent.sandbox, parent.worktree, [parent.worktree.branch, worktree.branch]);
        return merged;
      });
  const delivered = await work.deliver({
    message: host.redact(`agent-runner: worker ${agentId}: ${request.description}`),
    skipVerify: (committed) => (outcome.reason !== "final_answer" ? outcome.reason : !committed.changed ? "no_changes" : !command ? "no_verify_command" : null),
    verify: command
      ? {
          command,
          timeout_sec: host.verify?.timeout_sec ?? DEFAULT_VERIFY_TIMEOUT_SEC,
          protect: host.verify?.protect ?? [],
          setup: host.verify?.setup ?? [],
          python_safe_path: host.verify?.python_safe_path ?? true,
        }
      : null,
    verifyContext: {
      agentId,
      provider: host.provider,
      specFor: (_verifyId, checkout) => host.specFor(`${agentId}-verify`, checkout),
      directory: join(host.workersDirectory, `${agentId}-verify`),
      // The parent is the main agent: its worktree's base is the run's base commit, never a snapshot of agent work.
      baseCommit: parent.worktree.baseCommit,
      events: host.events,
      signal,
    },
    merge: () => {
      // A worker waiting to merge must not hold a max_parallel slot (a blocking call holding the gate may wait for it).
      request.releaseSlot();
      return request.holdsGate ? mergeIntoParent() : parent.gate.runExclusive(mergeIntoParent);
    },
  });
  const { committed, verify, merged } = delivered;
  const said = `${leftOutNote(committed)}Its final report:\n${outcome.finalMessage ?? "(none)"}`;
  report.commit = { left_out: committed.leftOut, left_out_count: committed.leftOutCount, timed_out: committed.timedOut };
  if (verify)
    report.verify = {
      command: verify.command,
      exit_code: verify.exit_code,
      passed: verify.passed,
      timed_out: verify.timed_out,
      sandbox_lost: verify.sandbox_lost,
    };
  const notMerged = (detail: string, reason: string, output: string): TaskResult => {
    report.status = "not_merged";
    report.merge = { status: "skipped", files: [], detail };
    report.not_merged_reason = boundedReason(reason);
    return finish(host, report, started, { status: "failed", output });
  };
  switch (delivered.skipped) {
    case "commit_timed_out": {
      const reason = `committing its files ran past the commit time limit (${host.commitLimits.timeoutMs / 1000} s), so none of its last changes were committed`;
      return notMerged("commit_timed_out", reason, `Worker ${agentId}'s work was NOT merged: ${reason}. ${said}`);
    }
    case "max_steps": {
      const reason = `it stopped at its step limit (${host.limits.maxSteps}) without finishing`;
      return notMerged("max_steps", reason, `Worker ${agentId} was NOT merged: ${reason}. Its branch ${worktree.branch} keeps its work.`);
    }
    case "refusal":
    case "output_limit": {
      const reason = `it ${UNFINISHED[delivered.skipped]} without finishing`;
      return notMerged(delivered.skipped, reason, `Worker ${agentId} was NOT merged: ${reason}. Its branch ${worktree.branch} keeps its work.`);
    }
    case "budget_exceeded": {
      const reason = "it stopped without finishing: the run's cost budget (model.max_cost_usd) is spent";
      return notMerged("budget_exceeded", reason, `Worker ${agentId} was NOT merged: ${reason}. Its branch ${worktree.branch} keeps its work.`);
    }
    case "no_changes":
      report.status = "finished";
      report.merge = { status: "up_to_date", files: [], detail: "no changes" };
      return finish(host, report, started, { status: "completed", output: `Worker ${agentId} finished without changing any file; nothing to merge. ${said}` });
    case "no_verify_command": {
      const reason = "there is no verification command (give verify in the agent call, or verify.command in the task)";
      return notMerged(
        "no_verify_command",
        reason,
        `Worker ${agentId}'s work was NOT merged: ${reason}. Its branch ${worktree.branch} keeps the work. ${said}`,
      );
    }
  }
  if (!verify?.passed || merged === null) {
    const reason = verify
      ? `verification \`${command}\` failed (${verifyEnding(verify, host.verify?.timeout_sec ?? DEFAULT_VERIFY_TIMEOUT_SEC)})`
      : `verification \`${command}\` did not run`;
    return notMerged(
      "verify_failed",
      reason,
      `Worker ${agentId}'s work was NOT merged: ${reason}. ` +
        `Its branch ${worktree.branch} keeps the work; your files are unchanged.\nIts output:\n${verify ? joinExcerpt(verify) : ""}\n${said}`,
    );
  }
  if (merged.status === "conflict") {
    report.status = "not_merged";
    report.merge = { status: "conflict", files: merged.files, detail: "conflict" };
    report.not_merged_reason = boundedReason(`it passed verification but conflicts with your branch in ${merged.files.join(", ")}`);
    return finish(host, report, started, {
      status: "failed",
      output:
        `Worker ${agentId}'s work passed verification but was NOT merged: it conflicts with your branch in ${merged.files.join(", ")}. ` +
        `Your files are unchanged; its branch ${worktree.branch} is kept (read its version with \`git show ${worktree.branch}:<path>\`). ` +
        `Resolve it yourself or ask another worker to.\nConflicts (yours between <<<<<<< and =======, the worker's after):\n${merged.hunks}\n${said}`,
    });
  }
  if (merged.status === "blocked") {
    report.status = "not_merged";
    report.merge = { status: "blocked", files: [], detail: merged.detail };
    report.not_merged_reason = boundedReason(`it passed verification but files of yours that git does not track stand in the way (git: ${merged.detail})`);
    return finish(host, report, started, {
      status: "failed",
      output:
        `Worker ${agentId}'s work passed verification but was NOT merged: files of yours that git does not track stand in the way ` +
        `(git: ${merged.detail}). Your files are unchanged; its branch ${worktree.branch} is kept. Move or delete those files and ask again, ` +
        `or take its changes with \`git show ${worktree.branch}:<path>\`.\n${said}`,
    });
  }
  report.status = "merged";
  report.merge =
    merged.status === "merged"
      ? { status: "merged", files: merged.files, detail: merged.commit }
      : { status: "up_to_date", files: [], detail: "already merged" };
  return finish(host, report, started, {
    status: "completed",
    output:
      `Worker ${agentId}'s work passed verification (\`${command}\`) and was merged into your branch; ` +
      `files changed: ${merged.status === "merged" ? merged.files.join(", ") : "(none)"}. Your workspace already has them. ${said}`,
  });
}

/** Tells the parent which of the worker's files its commit left out, and why. */
function leftOutNote(committed: CommitOutcome): string {
  if (committed.leftOutCount === 0) return "";
  const shown = committed.leftOut.slice(0, 20).map((entry) => `${entry.path} (${entry.reason})`);
  const more = committed.leftOutCount - shown.length;
  return `Not committed (left out of its commit; reasons in parentheses): ${shown.join(", ")}${more > 0 ? ` and ${more} more` : ""}.\n`;
}

/** A worker's verify time limit when the task has no verify section (task.yaml's `verify.timeout_sec` default). */
const DEFAULT_VERIFY_TIMEOUT_SEC = 600;

/** Longest {@link SubagentReport.not_merged_reason}, characters: room for a long file list or git's message, not for a whole log. */
const NOT_MERGED_REASON_LIMIT = 4096;

function boundedReason(reason: string): string {
  return reason.length <= NOT_MERGED_REASON_LIMIT
    ? reason
    : `${reason.slice(0, NOT_MERGED_REASON_LIMIT - 40)} [... ${reason.length - NOT_MERGED_REASON_LIMIT + 40} characters cut]`;
}

function finish(host: SubagentHost, report: SubagentReport, started: number, result: TaskResult): TaskResult {
  report.duration_ms = Date.now() - started;
  host.events.emit({
    type: "subagent.finished",
    data: {
      agent_id: report.id,
      status: report.status,
      steps: report.steps,
      verify_passed: report.verify?.passed ?? null,
      merge: report.merge?.status ?? null,
      files: report.merge?.files ?? [],
      not_merged_reason: report.not_merged_reason,
      duration_ms: report.duration_ms,
    },
  });
  return result;
}
