import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { dirname, join } from "node:path";
import { runAgentLoop, type AgentOutcome } from "../agent/agent-loop.js";
import { contextSettings, type ContextSettings } from "../agent/context-window.js";
import { restoreSession, SessionJournal, type RestoredAgent } from "../agent/session-journal.js";
import { subagentSystemPrompt, workspaceAgentSystemPrompt } from "../agent/system-prompt.js";
import { Mutex } from "async-mutex";
import { agentTool, type SubagentHost, type SubagentMode, type SubagentReport } from "../agents/subagents.js";
import { rawSafeGit } from "../workspace/safe-git.js";
import { TaskManager, taskTools } from "../agents/task-manager.js";
import type { Tool } from "../tools/define-tool.js";
import { mergeIntoUserBranch } from "../workspace/merge.js";
import { loadSkills, loadSkillTool, skillCatalogText, userSkillsDirectory } from "../skills/index.js";
import { loadPolicy } from "../policy/load-policy.js";
import { connectMcpServers, type McpServers } from "../mcp/index.js";
import { PermissionChecker } from "../policy/permission-checker.js";
import type { Policy } from "../policy/policy-schema.js";
import { ToolHooks } from "../hooks/tool-hooks.js";
import { TokenRateLimitedModelClient } from "../model/token-rate-limit.js";
import { PermissionGuard, type AskApproval } from "./permission-guard.js";
import { parseAllowEntry, type AllowRule } from "../config/network-allow-list.js";
import { readToolResultTool, ToolResultStore } from "../agent/tool-result-store.js";
import { describeRule } from "../config/network-allow-list.js";
import type { Task } from "../config/load-task.js";
import { CancelledError, ConfigError, ModelError, RunnerError, errorMessage } from "../errors.js";
import { CloudEventLog, newTraceId } from "../events/cloud-event-log.js";
import { EventFanout, type EventSink, type RunEvent } from "../events/run-events.js";
import { emptyUsage, type ChatMessage } from "../model/messages.js";
import { addLogRedactor } from "../logging/logger.js";
import { redactorFor } from "../redaction/redactor.js";
import type { ModelClient } from "../model/model-client.js";
import type { DiskLimitReached, NetworkEvent, Sandbox, SandboxProvider, SandboxSpec } from "../sandbox/sandbox.js";
import { RecoveringSandbox } from "../sandbox/recovering-sandbox.js";
import { workspaceTools } from "../tools/builtin/index.js";
import { ToolRegistry } from "../tools/tool-registry.js";
import { commitLimitsOf, type CommitLimits } from "../workspace/commit-selection.js";
import {
  CONTAINER_GIT_DIRECTORY,
  checkoutBytes,
  commitRunWorktree,
  containerGitMounts,
  createRunWorktree,
  removeRunWorktree,
  reopenRunWorktree,
  writeRunBranchDiff,
  type RunWorktree,
} from "../workspace/run-worktree.js";
import { closeRunDisk, filesystemUsage, openRunDisk, runPaths, type DiskEnforcementChoice, type RunDisk } from "../workspace/run-disk.js";
import { currentOwner, isOwnerAlive } from "../process/process-owner.js";
import { newRunId } from "./run-id.js";
import { readRunLock, writeRunLock, type RunLock } from "./run-lock.js";
import { verifyCommit } from "./verify-commit.js";
import { runSetupCommands, SetupFailedError } from "./setup-commands.js";
import { exitCodeFor, type RunReport, type RunStatus } from "./run-report.js";
import { MAIN_AGENT, reportCounter } from "./report-counter.js";

export interface RunDependencies {
  sandboxProvider: SandboxProvider;
  /** Opens the task's model (for a scripted task this starts the local server); `close` stops it. */
  openModel(task: Task): Promise<{ client: ModelClient; close(): Promise<void> }>;
  /** `$RUNNER_HOME`; runs go to `<home>/runs/<run-id>/`. */
  runnerHome: string;
  /** How `sandbox.limits.disk` is held: `auto` (default; a filesystem of the run's own when the runner can make one) or `monitor` ($RUNNER_DISK_ENFORCEMENT). */
  diskEnforcement?: DiskEnforcementChoice;
}

export interface RunOptions {
  signal: AbortSignal;
  /** Extra live consumer of run events (the terminal view). */
  events?: EventSink;
  /** Receives every CloudEvents line as written (for `--json`). */
  onEnvelope?: (line: string) => void;
  /** Called as soon as the run id and directory exist. */
  onRunCreated?: (runId: string, runDirectory: string) => void;
  /** Host variables the task may pass in (`sandbox.pass_env`); default process.env. */
  hostEnvironment?: NodeJS.ProcessEnv;
  /** Asks the person at the terminal to approve a call; absent when nobody can be asked (then the policy's `confirmations` decides). */
  askApproval?: AskApproval;
}

export interface RunResult {
  report: RunReport;
  exitCode: number;
  runDirectory: string;
}

/**
 * Runs one task end to end: worktree on `runner/<run-id>`, sandbox, agent
 * loop, host-side commit, verification in the sandbox, patch.diff and
 * report.json. Everything it started (container, model server, worktree
 * directory) is gone when it returns or throws; the branch stays. Fatal
 * problems become the report's `error` status rather than exceptions, except
 * for failures before the run directory exists (bad workspace: ConfigError).
 */
export async function runTask(task: Task, dependencies: RunDependencies, options: RunOptions): Promise<RunResult> {
  const runId = newRunId();
  const runDirectory = join(dependencies.runnerHome, "runs", runId);
  mkdirSync(runDirectory, { recursive: true, mode: 0o700 });
  // What `runner resume` needs to continue the run: the validated task, paths made absolute.
  writeAtomically(join(runDirectory, TASK_RECORD), `${JSON.stringify(task, null, 2)}\n`);
  return executeRun({ task, runId, traceId: newTraceId(), runDirectory, resume: null }, dependencies, options);
}

/** File in the run directory holding the validated task (for resume). */
const TASK_RECORD = "task.json";

/** A run `runner resume` can continue, as found on disk by {@link findResumableRun}. */
export interface ResumableRun {
  task: Task;
  runId: string;
  traceId: string;
  runDirectory: string;
  lock: RunLock;
  restored: RestoredAgent;
  /** Ids of the subagents earlier attempts started (their journal entries). */
  subagentIds: string[];
  /** The subagents an earlier attempt's report listed (kept in the resumed report). */
  previousAgents: SubagentReport[];
}

/**
 * Checks that run `idOrPrefix` under `<home>/runs` can be resumed: it has a
 * task record and a session, no live runner owns it, and it did not end
 * succeeded or failed. Throws ConfigError (exit 2) saying why not.
 */
export function findResumableRun(home: string, idOrPrefix: string): ResumableRun {
  const runs = join(home, "runs");
  const matches = existsSync(runs) ? readdirSync(runs).filter((id) => id.startsWith(idOrPrefix)) : [];
  if (matches.length !== 1) {
    throw new ConfigError(matches.length === 0 ? `no run ${idOrPrefix} in ${runs} (see \`runner runs\`)` : `${idOrPrefix} matches ${matches.length} runs (${matches.slice(0, 5).join(", ")}${matches.length > 5 ? ", ..." : ""}); give more of the id`);
  }
  const runId = matches[0]!;
  const runDirectory = join(runs, runId);
  const lock = readRunLock(runDirectory);
  if (!lock || !existsSync(join(runDirectory, TASK_RECORD))) {
    throw new ConfigError(`run ${runId} has no run.json or task.json (it never started, or an older runner made it); start a new run instead`);
  }
  const previous = readJsonFile(join(runDirectory, "report.json")) as { status?: string; reason?: string } | null;
  if (previous?.status === "succeeded" || previous?.status === "failed") {
    throw new ConfigError(`run ${runId} already ended ${previous.status} (${previous.reason ?? "?"}); only interrupted, crashed or errored runs can be resumed — start a new run`);
  }
  // A run with a report has ended, even when its runner lives on (a library process that cancelled it).
  if (!previous && isOwnerAlive(lock.owner)) throw new ConfigError(`run ${runId} is still running (runner ${lock.owner}); stop it first (Ctrl-C or kill)`);
  const session = restoreSession(join(runDirectory, SESSION_JOURNAL));
  const restored = session.get(MAIN_AGENT);
  if (!restored || restored.messages.length === 0) {
    throw new ConfigError(`run ${runId} ended before its agent started (${previous?.reason ?? "no report"}): there is no conversation to resume; fix the cause and start a new run`);
  }
  const task = JSON.parse(readFileSync(join(runDirectory, TASK_RECORD), "utf8")) as Task;
  const subagentIds = [...session.keys()].filter((id) => id !== MAIN_AGENT);
  const previousAgents = ((previous as { agents?: SubagentReport[] } | null)?.agents ?? []).filter((agent) => typeof agent?.id === "string");
  return { task, runId, traceId: lock.trace_id ?? newTraceId(), runDirectory, lock, restored, subagentIds, previousAgents };
}

/**
 * Continues a run found by {@link findResumableRun}: the same branch and
 * worktree path (the old directory when it is still there, else a new
 * worktree of the branch), a new container, the persisted conversation.
 * Tool calls that finished are not run again; calls that were in flight get
 * an "interrupted" result. Then commit, verification and report as usual.
 */
export async function resumeRun(run: ResumableRun, dependencies: RunDependencies, options: RunOptions & { maxSteps?: number }): Promise<RunResult> {
  claimRun(run.runDirectory, run.runId);
  const task = options.maxSteps ? { ...run.task, max_steps: options.maxSteps } : run.task;
  rmSync(join(run.runDirectory, "report.json"), { force: true });
  return executeRun({ task, runId: run.runId, traceId: run.traceId, runDirectory: run.runDirectory, resume: run }, dependencies, options);
}

/**
 * The final answer of a restored conversation (its last message is an
 * assistant message without tool calls), or undefined when the agent had not
 * answered yet: a resume then needs only commit and verification.
 */
export function finalAnswerOf(restored: RestoredAgent): string | null | undefined {
  const last = restored.messages.at(-1);
  if (restored.unfinishedTurn || last?.role !== "assistant" || last.tool_calls?.length) return undefined;
  return last.content;
}

/**
 * Makes this process the run's owner before anything is touched, atomically
 * (`O_EXCL`), so two `runner resume` of one run cannot both go on. A claim
 * left by a runner that died is taken over. Throws ConfigError when a live
 * runner holds it.
 */
function claimRun(runDirectory: string, runId: string): void {
  const claim = join(runDirectory, "resume.lock");
  for (let attempt = 0; attempt < 2; attempt += 1) {
    try {
      const fd = openSync(claim, "wx", 0o600);
      writeSync(fd, currentOwner());
      closeSync(fd);
      writeRunLock(runDirectory, { ...readRunLock(runDirectory)!, owner: currentOwner() });
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
      const holder = readFileSync(claim, "utf8").trim();
      if (isOwnerAlive(holder)) throw new ConfigError(`run ${runId} is being resumed by another runner (${holder}); wait for it or stop it`);
      rmSync(claim, { force: true });
    }
  }
  throw new ConfigError(`run ${runId}: could not claim it for resume (another runner raced for it); try again`);
}


const SESSION_JOURNAL = "session.jsonl";

interface RunContext {
  task: Task;
  runId: string;
  traceId: string;
  runDirectory: string;
  resume: ResumableRun | null;
}

async function executeRun(run: RunContext, dependencies: RunDependencies, options: RunOptions): Promise<RunResult> {
  const { runId, traceId, runDirectory, resume } = run;
  // The task's policy (a shipped name or a file outside the repository) and the one explore subagents get.
  const policy = loadPolicy(run.task.policy).policy;
  const explorePolicy = loadPolicy(run.task.subagents.explore_policy).policy;
  const workerPolicy = run.task.subagents.worker_policy ? loadPolicy(run.task.subagents.worker_policy).policy : policy;
  const task = withPolicyDefaults(run.task, policy);
  const commitLimits = commitLimitsOf(task.commit);
  const started = Date.now();
  options.onRunCreated?.(runId, runDirectory);
  const hostEnvironment = options.hostEnvironment ?? process.env;
  const redactor = redactorFor(task, hostEnvironment);
  const removeLogRedactor = addLogRedactor(redactor);
  const redactDeep = <T>(value: T): T => redactor.redactDeep(value);
  const log = new CloudEventLog(join(runDirectory, "events.jsonl"), runId, traceId);
  log.onEnvelope = options.onEnvelope ?? null;
  // Every record of an event (events.jsonl, --json, the terminal view that ends up in CI logs)
  // gets it redacted, once; the report's counters read the event as it is.
  const records = new EventFanout().add(log);
  if (options.events) records.add(options.events);
  const events = new EventFanout().add({ emit: (event) => records.emit(redactor.isEmpty ? event : redactDeep(event)) });

  const report: RunReport = {
    run_id: runId,
    trace_id: traceId,
    task: task.name,
    status: "error",
    reason: "not_started",
    error: null,
    verify: null,
    commit: null,
    branch: null,
    base_commit: null,
    head_commit: null,
    patch: null,
    final_message: null,
    steps: 0,
    tool_calls: 0,
    usage: emptyUsage(),
    prefix_stable_ratio: null,
    context: { context_window: task.model.context_window, requests: 0, max_request_tokens: 0, cleared: 0, compactions: 0, compaction_failures: 0, repairs: 0 },
    resumes: (resume?.lock.resumes ?? 0) + (resume ? 1 : 0),
    agents: [...(resume?.previousAgents ?? [])],
    merge: null,
    policy: policy.name,
    denials: {},
    network: {},
    disk: null,
    duration_ms: 0,
  };
  const counter = reportCounter(report);
  // A resumed run reports the whole run: the earlier attempts' events count too.
  if (resume) for (const event of readEarlierEvents(join(runDirectory, "events.jsonl"))) counter.emit(event);
  events.add(counter);
  const journal = new SessionJournal(join(runDirectory, SESSION_JOURNAL), redactDeep);
  const tasks = new TaskManager(events, task.max_parallel);
  let worktree: RunWorktree | null = null;
  let sandbox: Sandbox | null = null;
  let model: { client: ModelClient; close(): Promise<void> } | null = null;
  let mcp: McpServers | null = null;
  // True once no process of the agent's can touch the worktree: the sandbox is closed (or never
  // was) and the backend confirms nothing that mounts the worktree writable can run.
  let workspaceIdle = false;
  let written: RunReport | null = null;
  const closeSandbox = async () => {
    await sandbox?.close();
    if (worktree) await dependencies.sandboxProvider.ensureWorkspaceIdle(worktree.path);
    workspaceIdle = true;
  };
  let disk: RunDisk | null = null;
  // A sandbox over a monitored disk limit stops the run: the agent's doing, so `failed`, not cancelled.
  const diskStop = new AbortController();
  const signal = AbortSignal.any([options.signal, diskStop.signal]);
  const paths = runPaths(runDirectory);

  try {
    disk = await openRunDisk(runDirectory, task.sandbox.limits.disk, dependencies.diskEnforcement);
    report.disk = { limit_bytes: disk.limitBytes, enforcement: disk.enforcement, detail: disk.detail, limit_reached: false, used_bytes: null };
    let reused = false;
    if (resume) {
      const reopened = (await reopenRunWorktree(resume.lock, { create: true }))!;
      worktree = reopened.worktree;
      reused = reopened.reused;
    } else {
      const runDisk = disk;
      worktree = await createRunWorktree(task.workspacePath, runId, paths.worktree).catch(async (error: unknown) => {
        // git says only "unable to write file": a checkout larger than the run's empty filesystem is the task's limit.
        if (runDisk.enforcement === "filesystem") {
          const needed = await checkoutBytes(task.workspacePath).catch(() => 0);
          if (needed >= (await filesystemUsage(runDisk.root)).availableBytes) {
            throw new ConfigError(`sandbox.limits.disk (${mebibytes(runDisk.limitBytes)}) cannot hold the repository's checkout (${mebibytes(needed)} or more); raise it`, { cause: error });
          }
        }
        throw error;
      });
    }
    report.branch = worktree.branch;
    report.base_commit = worktree.baseCommit;
    writeRunLock(runDirectory, {
      run_id: runId,
      trace_id: traceId,
      owner: currentOwner(),
      repository: worktree.repositoryRoot,
      worktree: worktree.path,
      git_directory: worktree.gitDirectory,
      branch: worktree.branch,
      base_commit: worktree.baseCommit,
      resumes: report.resumes,
    });
    if (resume) {
      events.emit({ type: "run.resumed", data: { run_id: runId, resumes: report.resumes, next_step: resume.restored.nextStep, worktree: reused ? "reused" : "recreated" } });
    } else {
      events.emit({
        type: "run.started",
        data: { run_id: runId, task: task.name, workspace: worktree.repositoryRoot, branch: worktree.branch, base_commit: worktree.baseCommit },
      });
    }
    events.emit({ type: "disk.prepared", data: { limit_bytes: disk.limitBytes, enforcement: disk.enforcement, detail: disk.detail } });
    throwIfAborted(signal);
    // The model (a local server for scripted tasks) and the container start side by side.
    const sandboxStarted = Date.now();
    const onDiskLimit = (agentId: string) => (reached: DiskLimitReached) => {
      // Once per run: the sandboxes of a filesystem-held limit share one disk.
      if (report.disk!.limit_reached) return;
      report.disk = { ...report.disk!, limit_reached: true, used_bytes: reached.usedBytes };
      events.emit({
        type: "disk.limit_reached",
        data: { agent_id: agentId, sandbox_id: reached.sandboxId, used_bytes: reached.usedBytes, limit_bytes: reached.limitBytes, enforcement: reached.enforcement, action: reached.action },
      });
      if (reached.action === "stopped") diskStop.abort();
    };
    const specFor = sandboxSpecFactory(task, runId, disk, paths, events, hostEnvironment, onDiskLimit);
    const current = worktree;
    const [openedModel, createdSandbox] = await Promise.allSettled([
      dependencies.openModel(task),
      specFor(MAIN_AGENT, current).then((spec) =>
        RecoveringSandbox.create(dependencies.sandboxProvider, spec, (sandboxId) => events.emit({ type: "sandbox.restarted", data: { sandbox_id: sandboxId } })),
      ),
    ]);
    if (openedModel.status === "fulfilled") model = openedModel.value;
    if (createdSandbox.status === "fulfilled") sandbox = createdSandbox.value;
    if (openedModel.status === "rejected") throw openedModel.reason;
    if (createdSandbox.status === "rejected") throw createdSandbox.reason;
    const activeSandbox = createdSandbox.value;
    const tokensPerMinute = policy.limits.tokens_per_minute;
    const modelClient = tokensPerMinute ? new TokenRateLimitedModelClient(openedModel.value.client, tokensPerMinute) : openedModel.value.client;
    const hooks = new ToolHooks(task.hooks, { cwd: task.file ? dirname(task.file) : process.cwd(), env: hostEnvironment, events, runId });
    const guardFor = async (agentPolicy: Policy) =>
      new PermissionGuard({
        checker: await PermissionChecker.create(agentPolicy, { workdir: task.sandbox.workdir }),
        hooks: hooks.isEmpty ? null : hooks,
        events,
        signal,
        ask: options.askApproval ?? null,
        remembered: new Set(),
        denials: report.denials,
      });
    const [mainGuard, exploreGuard, workerGuard] = await Promise.all([guardFor(policy), guardFor(explorePolicy), workerPolicy === policy ? null : guardFor(workerPolicy)]);
    events.emit({
      type: "sandbox.created",
      data: { sandbox_id: activeSandbox.id, image: task.sandbox.image, ready_ms: Date.now() - sandboxStarted, uid: worktree.sandboxUser.uid },
    });
    // sandbox.setup, once, before anything else runs in the sandbox (a resumed run's new container too).
    const setup = await runSetupCommands(activeSandbox, task.sandbox.setup, { phase: "agent", agentId: MAIN_AGENT, events, signal });
    throwIfAborted(signal);
    if (setup.failed) throw new SetupFailedError(setup.failed);

    // Skills: built-in, the user's directory, and the workspace's skills/ as of the base commit (read in the sandbox).
    const skills = await loadSkills({
      userDirectory: userSkillsDirectory(hostEnvironment),
      workspace: { sandbox: activeSandbox, baseCommit: worktree.baseCommit, gitDirectory: CONTAINER_GIT_DIRECTORY, signal },
    });
    events.emit({
      type: "skills.loaded",
      data: {
        skills: skills.skills.map((skill) => `${skill.source}:${skill.name}`),
        shadowed: skills.shadowed.map((skill) => `${skill.source}:${skill.name} (shadowed by ${skill.shadowedBy})`),
        problems: skills.problems.map((problem) => problem.message),
      },
    });
    // MCP servers: stdio ones inside the sandbox (same files, user, limits and network), unless trusted.
    mcp = await connectMcpServers(task.mcp_servers, {
      sandbox: activeSandbox,
      signal,
      events,
      hostCwd: task.file ? dirname(task.file) : process.cwd(),
      workspaceHostPath: task.workspacePath,
    });
    const mcpTools = mcp.tools;
    const skillCatalog = skillCatalogText(skills);
    const skillTools = skills.skills.length ? [loadSkillTool(skills)] : [];
    const context = contextSettings(task.model.context_window, task.context);
    const results = new ToolResultStore(runDirectory, MAIN_AGENT);
    for (const [callId, file] of resume?.restored.fullOutputs ?? []) results.remember(callId, { file });
    for (const recorded of resume?.restored.results.values() ?? []) results.remember(recorded.callId, { content: recorded.content });
    let outcome: AgentOutcome;
    const finalAnswer = resume ? finalAnswerOf(resume.restored) : undefined;
    if (resume && finalAnswer !== undefined) {
      // The agent had given its final answer; the runner stopped before committing or verifying.
      outcome = { reason: "final_answer", finalMessage: finalAnswer, steps: resume.restored.nextStep, toolCalls: resume.restored.toolCalls, usage: resume.restored.usage, messages: resume.restored.messages };
    } else {
      const allowedHosts = task.sandbox.network.allow.map(describeRule);
      const gate = new Mutex();
      let conversation: readonly ChatMessage[] = [];
      const host: SubagentHost = {
        runId,
        runDirectory,
        workersDirectory: paths.workers,
        model: modelClient,
        provider: dependencies.sandboxProvider,
        specFor: async (agentId, agentWorktree, specOptions) => {
          const spec = await specFor(agentId, agentWorktree);
          return specOptions?.readOnly ? { ...spec, workspace: { ...spec.workspace, readOnly: true } } : spec;
        },
        events,
        journal,
        redact: (text) => redactor.redact(text),
        context,
        tasks,
        parent: { agentId: MAIN_AGENT, worktree, sandbox: activeSandbox, gate, conversation: () => conversation },
        toolsFor: (mode, fork, store) => subagentTools(mode, fork, store, host, context, skillTools, mcpTools),
        systemPromptFor: (mode) => subagentSystemPrompt(mode, { allowedHosts, skillCatalog, workdir: task.sandbox.workdir }),
        verify: task.verify ? { ...task.verify, setup: task.sandbox.setup } : null,
        commitLimits,
        limits: { maxSteps: task.subagents.max_steps, timeoutMs: task.subagents.timeout_sec * 1000, toolTimeoutMs: task.tool_timeout_ms },
        mainChecker: mainGuard.checker,
        guardFor: (mode) => (mode === "explore" ? exploreGuard : (workerGuard ?? mainGuard)),
        maxStepsFor: (mode) => Math.min(task.subagents.max_steps, (mode === "explore" ? explorePolicy : workerPolicy).limits.max_steps ?? Number.POSITIVE_INFINITY),
        reports: report.agents,
        parentGit: new Mutex(),
        firstAgentNumber: await nextSubagentNumber(worktree, runId, [...(resume?.subagentIds ?? []), ...report.agents.map((agent) => agent.id)]),
      };
      outcome = await runAgentLoop({
        agentId: MAIN_AGENT,
        model: modelClient,
        tools: new ToolRegistry(mainAgentTools(results, host, context, skillTools, mcpTools)),
        sandbox: activeSandbox,
        systemPrompt: workspaceAgentSystemPrompt({ allowedHosts, skillCatalog, workdir: task.sandbox.workdir }),
        instruction: task.instruction,
        maxSteps: Math.min(task.max_steps, policy.limits.max_steps ?? Number.POSITIVE_INFINITY),
        guard: mainGuard,
        toolTimeoutMs: task.tool_timeout_ms,
        events,
        signal,
        context,
        journal,
        results,
        onTurnEnd: () => log.sync(),
        redact: (text) => redactor.redact(text),
        background: {
          start: (description, body) => tasks.start({ kind: "shell", description, background: true, parentSignal: signal }, body).record.id,
          drain: () => tasks.drainNotifications(),
          running: () => tasks.hasRunningBackground(),
          wait: () => tasks.waitForBackground(),
        },
        toolGate: gate,
        onConversation: (current) => {
          conversation = current;
        },
        ...(resume ? { resume: resume.restored } : {}),
      });
    }
    // Background commands, subagents and MCP servers end with the agent.
    await tasks.stopAll();
    await mcp?.close();
    report.final_message = outcome.finalMessage;

    // The agent's container goes first: host git reads the worktree only when nothing of the agent's
    // can run any more (a process left behind could swap a directory for a symlink mid-read), and
    // nothing it left running or planted outside /workspace may influence the verdict.
    await closeSandbox();
    await commitAndWritePatch(worktree, redactor.redact(`agent-runner: ${task.name} (run ${runId})\n\n${firstLine(outcome.finalMessage)}`), runDirectory, report, events, commitLimits);
    throwIfAborted(signal);
    // A commit cut short by its time limit holds none of the final work: there is nothing to verify.
    if (task.verify && !report.commit?.timed_out) {
      report.verify = await verifyCommit({ ...task.verify, setup: task.sandbox.setup }, worktree, report.head_commit!, {
        provider: dependencies.sandboxProvider,
        specFor,
        directory: paths.verify,
        baseCommit: worktree.baseCommit,
        events,
        signal,
      });
      throwIfAborted(signal);
    }
    const verified = report.verify === null || report.verify.passed;
    if (report.commit?.timed_out) {
      setOutcome(report, "failed", "commit_timed_out");
    } else if (outcome.reason === "max_steps") {
      setOutcome(report, "failed", "max_steps");
    } else if (!verified) {
      setOutcome(report, "failed", report.verify?.timed_out ? "verify_timed_out" : "verify_failed");
    } else {
      // A success despite refused calls says so: a needed action may have been denied.
      const denied = Object.keys(report.denials).length ? "_with_denials" : "";
      setOutcome(report, "succeeded", `${report.verify ? "verified" : "finished_unverified"}${denied}`);
      if (task.on_success === "merge") {
        report.merge = report.verify?.passed
          ? await mergeIntoUserBranch(worktree.repositoryRoot, worktree.gitConfig, worktree.branch, worktree.baseCommit)
          : { merged: false, branch: null, detail: "only a verified run is merged, and the task has no verify command" };
        events.emit({ type: "workspace.merged", data: { merged: report.merge.merged, branch: report.merge.branch, detail: report.merge.detail } });
      }
    }
  } catch (error) {
    if (diskStop.signal.aborted && !options.signal.aborted) {
      setOutcome(report, "failed", "disk_limit_exceeded");
    } else if (error instanceof CancelledError || options.signal.aborted) {
      setOutcome(report, "cancelled", "interrupted");
      // A reason given to the library's cancel(reason) is kept.
      const reason: unknown = options.signal.reason;
      if (reason instanceof CancelledError && reason.message !== "interrupted") report.error = `cancelled: ${reason.message}`;
    } else {
      setOutcome(report, "error", error instanceof ModelError ? error.reason : error instanceof RunnerError ? error.name : "internal_error");
      report.error = errorMessage(error);
    }
  } finally {
    await cleanUp(() => tasks.stopAll(), "subagents and background tasks", events);
    await cleanUp(async () => mcp?.close(), "MCP servers", events);
    journal.close();
    if (!workspaceIdle) await cleanUp(closeSandbox, "sandbox", events);
    await cleanUp(async () => model?.close(), "model", events);
    if (worktree && !workspaceIdle) {
      // Something of the agent's may still run: the worktree is neither read nor removed by the host.
      // The next start sweeps the container, then commits and removes the worktree.
      events.emit({ type: "cleanup.failed", data: { what: "worktree", error: `left at ${worktree.path} uncommitted: the sandbox could not be confirmed gone` } });
    } else if (worktree && report.head_commit === null) {
      // Interrupted or failed before the normal commit: keep the agent's work on its branch anyway.
      const current = worktree;
      await cleanUp(
        () => commitAndWritePatch(current, redactor.redact(`agent-runner: ${task.name} (run ${runId}, ${report.status}: partial work)`), runDirectory, report, events, commitLimits),
        "commit of partial work",
        events,
      );
    }
    if (worktree && workspaceIdle) {
      const failure = await removeRunWorktree(worktree);
      if (failure) events.emit({ type: "cleanup.failed", data: { what: "worktree", error: failure.message } });
    }
    if (disk && workspaceIdle) {
      const failure = await closeRunDisk(runDirectory);
      if (failure) events.emit({ type: "cleanup.failed", data: { what: "the run's disk", error: failure.message } });
    }
    // The conversation as the journal holds it (already redacted), for readers that want one JSON document.
    const agents = Object.fromEntries([...restoreSession(join(runDirectory, SESSION_JOURNAL))].map(([id, agent]) => [id, { messages: agent.messages }]));
    writeAtomically(join(runDirectory, "session.json"), JSON.stringify({ run_id: runId, trace_id: traceId, task: task.name, agents }, null, 2));
    report.duration_ms = Date.now() - started;
    report.error = report.error === null ? null : redactor.redact(report.error);
    report.final_message = report.final_message === null ? null : redactor.redact(report.final_message);
    // What callers get is what report.json holds: redacted (a summary printed from it must not show a secret).
    written = redactDeep(report);
    writeAtomically(join(runDirectory, "report.json"), `${JSON.stringify(written, null, 2)}\n`);
    events.emit({
      type: "run.finished",
      data: { status: report.status, exit_code: exitCodeFor(report.status), duration_ms: report.duration_ms, ...(report.error ? { error: report.error } : {}) },
    });
    log.close();
    removeLogRedactor();
    if (resume) rmSync(join(runDirectory, "resume.lock"), { force: true });
  }
  return { report: written ?? redactDeep(report), exitCode: exitCodeFor(report.status), runDirectory };
}

/** The events an earlier attempt of this run wrote (for a resumed run's totals); unreadable lines are skipped. */
function readEarlierEvents(path: string): RunEvent[] {
  if (!existsSync(path)) return [];
  const events: RunEvent[] = [];
  for (const line of readFileSync(path, "utf8").split("\n")) {
    try {
      const envelope = JSON.parse(line) as { type?: string; data?: unknown };
      const type = /^dev\.agent-runner\.(.+)\.v\d+$/.exec(envelope.type ?? "")?.[1];
      if (type) events.push({ type, data: envelope.data } as RunEvent);
    } catch {
      // an empty or cut last line
    }
  }
  return events;
}

/** The task with the policy's defaults filled in: its network allow-list when the task names no host. */
function withPolicyDefaults(task: Task, policy: Policy): Task {
  if (task.sandbox.network.allow.length > 0 || policy.network.allow.length === 0) return task;
  const rules = policy.network.allow.map((entry) => parseAllowEntry(entry)).filter((rule): rule is AllowRule => typeof rule !== "string");
  return { ...task, sandbox: { ...task.sandbox, network: { ...task.sandbox.network, allow: rules } } };
}

/**
 * The next free subagent number of a run: past every id earlier attempts used
 * (journal, report) and every worker branch `runner/<run-id>-w<n>` that exists.
 */
async function nextSubagentNumber(worktree: RunWorktree, runId: string, usedIds: string[]): Promise<number> {
  const branches = await rawSafeGit({ baseDirectory: worktree.repositoryRoot }, ["for-each-ref", "--format=%(refname:strip=2)", `refs/heads/runner/${runId}-*`]);
  const ids = [...usedIds, ...branches.split("\n").map((branch) => branch.slice(`runner/${runId}-`.length))];
  const numbers = ids.map((id) => /^[we](\d+)$/.exec(id)?.[1]).filter((number): number is string => number !== undefined).map(Number);
  return Math.max(0, ...numbers) + 1;
}

/** The main agent's tools, in a fixed order (the tool list is part of the prompt-cache prefix). */
function mainAgentTools(results: ToolResultStore, host: SubagentHost, context: ContextSettings, skillTools: Tool[], mcpTools: Tool[]): Tool[] {
  const all = [...workspaceTools(), readToolResultTool(results, context.toolResultMaxTokens * 4), ...skillTools, ...mcpTools, agentTool(host), ...taskTools(host.tasks)];
  // The model sees only what the policy's tool allow-list admits (a call of anything else is refused anyway).
  return all.filter((tool) => host.mainChecker.toolAllowed(tool.name));
}

/** Tools an explore subagent keeps (run_shell runs against a read-only workspace). */
const EXPLORE_TOOLS = new Set(["read_file", "list_dir", "glob", "grep", "run_shell", "read_tool_result", "load_skill"]);
const DELEGATION_DENIED = "subagents cannot start agents or manage tasks (one level of delegation)";

/**
 * A subagent's tools. A fork gets exactly the main agent's list (so its
 * request prefix, tools included, is byte-identical to the parent's) with
 * delegation and, for explore, writing denied; otherwise only its own tools.
 */
function subagentTools(
  mode: SubagentMode,
  fork: boolean,
  results: ToolResultStore,
  host: SubagentHost,
  context: ContextSettings,
  skillTools: Tool[],
  mcpTools: Tool[],
): ToolRegistry {
  const all = mainAgentTools(results, host, context, skillTools, mcpTools);
  const refusal = (tool: Tool): string | null => {
    if (tool.name === "agent" || tool.name.startsWith("task_")) return DELEGATION_DENIED;
    // MCP servers run in the main agent's sandbox, on its files: a subagent must not act there.
    if (tool.name.startsWith("mcp__")) return "MCP tools belong to the main agent (its servers run in its sandbox)";
    if (mode === "explore" && !EXPLORE_TOOLS.has(tool.name)) return "explore agents are read-only";
    return null;
  };
  if (!fork) return new ToolRegistry(all.filter((tool) => refusal(tool) === null));
  const denied: Record<string, string> = {};
  for (const tool of all) {
    const reason = refusal(tool);
    if (reason !== null) denied[tool.name] = reason;
  }
  return new ToolRegistry(all, denied);
}

/**
 * Builds sandbox specs for this run: the task's image, limits, environment
 * and network, the given worktree at the task's workdir and its git metadata read-only,
 * writable directories on the run's disk. Network decisions are emitted as
 * events (the report counts them); a reached disk limit goes to `onDiskLimit`.
 */
function sandboxSpecFactory(
  task: Task,
  runId: string,
  disk: RunDisk,
  paths: ReturnType<typeof runPaths>,
  events: EventSink,
  hostEnvironment: NodeJS.ProcessEnv,
  onDiskLimit: (agentId: string) => (reached: DiskLimitReached) => void,
): (agentId: string, worktree: RunWorktree) => Promise<SandboxSpec> {
  const onNetworkEvent = (event: NetworkEvent) => {
    if (event.decision === "allowed") {
      events.emit({ type: "network.allowed", data: { method: event.method, host: event.host, port: event.port } });
    } else {
      events.emit({ type: "network.denied", data: { method: event.method, host: event.host, port: event.port, reason: event.reason ?? "refused" } });
    }
  };
  return async (agentId, worktree) => ({
    runId,
    agentId,
    image: task.sandbox.image,
    workspace: { hostPath: worktree.path },
    workdir: task.sandbox.workdir,
    readOnlyMounts: await containerGitMounts(worktree, paths.gitView, task.sandbox.workdir),
    env: containerEnvironment(task.sandbox, hostEnvironment),
    user: worktree.sandboxUser,
    network: task.sandbox.network.allow.length ? { rules: task.sandbox.network.allow, allowCidrs: task.sandbox.network.allow_cidrs } : null,
    onNetworkEvent,
    onProxyExit: (detail) => events.emit({ type: "network.proxy_exited", data: { detail: detail.slice(-1000) } }),
    limits: {
      cpus: task.sandbox.limits.cpus,
      memoryBytes: task.sandbox.limits.memory,
      pids: task.sandbox.limits.pids,
      fileSizeBytes: task.sandbox.limits.file_size,
    },
    disk: { limitBytes: disk.limitBytes, enforcement: disk.enforcement, scratchDirectory: paths.sandboxes },
    onDiskLimit: onDiskLimit(agentId),
  });
}

/**
 * Commits the worktree within `limits` and writes patch.diff (streamed, under
 * the same time limit); report.json `commit` and the `workspace.committed`
 * event say what was left out, and whether the commit timed out.
 */
async function commitAndWritePatch(worktree: RunWorktree, message: string, runDirectory: string, report: RunReport, events: EventSink, limits: CommitLimits): Promise<void> {
  const committed = await commitRunWorktree(worktree, message, limits);
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
    data: { branch: worktree.branch, commit: committed.head, changed: committed.changed, left_out: committed.leftOut, left_out_count: committed.leftOutCount, timed_out: committed.timedOut },
  });
  if (await writeRunBranchDiff(worktree, join(runDirectory, "patch.diff"), limits.timeoutMs)) {
    report.patch = "patch.diff";
  } else {
    report.patch = null;
    report.commit.patch_timed_out = true;
  }
}

/** Where Python keeps bytecode in a sandbox: the container's own /tmp, fresh for each container (PYTHONPYCACHEPREFIX). */
export const PYTHON_BYTECODE_CACHE = "/tmp/.pycache";

/**
 * The container's environment: fixed variables, the task's literal `env`, and
 * the host variables it names in `pass_env` and `secret_env`. Nothing else of the host's.
 */
export function containerEnvironment(sandbox: Pick<Task["sandbox"], "env" | "pass_env" | "secret_env">, host: NodeJS.ProcessEnv): Record<string, string> {
  const environment: Record<string, string> = {
    HOME: "/tmp",
    LANG: "C.UTF-8",
    // $HOME/.local/bin first: pip installs scripts there when the read-only image makes it install for the user.
    PATH: "/tmp/.local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    // Read-only git in the container: never write the (read-only) index, trust the mounted repository.
    GIT_OPTIONAL_LOCKS: "0",
    GIT_CONFIG_COUNT: "1",
    GIT_CONFIG_KEY_0: "safe.directory",
    GIT_CONFIG_VALUE_0: "*",
    PIP_DISABLE_PIP_VERSION_CHECK: "1",
    // Bytecode is cached in the container's own scratch space, never in the worktree: each container starts
    // with an empty cache, so a verification never runs a .pyc the agent's container wrote (README "Task images").
    PYTHONPYCACHEPREFIX: PYTHON_BYTECODE_CACHE,
  };
  Object.assign(environment, sandbox.env);
  for (const name of [...sandbox.pass_env, ...sandbox.secret_env]) {
    const value = host[name];
    if (value !== undefined) environment[name] = value;
  }
  return environment;
}

function setOutcome(report: RunReport, status: RunStatus, reason: string): void {
  report.status = status;
  report.reason = reason;
}

function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw new CancelledError();
}

async function cleanUp(action: () => Promise<unknown>, what: string, events: EventSink): Promise<void> {
  try {
    await action();
  } catch (error) {
    events.emit({ type: "cleanup.failed", data: { what, error: errorMessage(error) } });
  }
}

function writeAtomically(path: string, content: string): void {
  const temporary = `${path}.tmp`;
  writeFileSync(temporary, content, { mode: 0o600 });
  renameSync(temporary, path);
}

function readJsonFile(path: string): unknown {
  try {
    return JSON.parse(readFileSync(path, "utf8"));
  } catch {
    return null;
  }
}

function mebibytes(bytes: number): string {
  return `${Math.round(bytes / 1024 ** 2)} MiB`;
}

function firstLine(text: string | null): string {
  return (text ?? "").split("\n")[0]!.slice(0, 200);
}
