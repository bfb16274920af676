import { mkdirSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runAgentLoop, type AgentOutcome } from "../agent/agent-loop.js";
import { workspaceAgentSystemPrompt } from "../agent/system-prompt.js";
import { describeRule } from "../config/network-allow-list.js";
import type { Task } from "../config/load-task.js";
import { CancelledError, ModelError, RunnerError, errorMessage } from "../errors.js";
import { CloudEventLog, newTraceId } from "../events/cloud-event-log.js";
import { EventFanout, type EventSink } from "../events/run-events.js";
import { addUsage, emptyUsage, type ChatMessage } from "../model/messages.js";
import type { ModelClient } from "../model/model-client.js";
import type { NetworkEvent, Sandbox, SandboxProvider, SandboxSpec } from "../sandbox/sandbox.js";
import { RecoveringSandbox } from "../sandbox/recovering-sandbox.js";
import { workspaceTools } from "../tools/builtin/index.js";
import { ToolRegistry } from "../tools/tool-registry.js";
import { commitRunWorktree, containerGitMounts, createRunWorktree, diffRunBranch, removeRunWorktree, type RunWorktree } from "../workspace/run-worktree.js";
import { currentOwner } from "../process/process-owner.js";
import { newRunId } from "./run-id.js";
import { writeRunLock } from "./run-lock.js";
import { verifyCommit } from "./verify-commit.js";
import { exitCodeFor, type RunReport, type RunStatus } from "./run-report.js";

export interface RunDependencies {
  sandboxProvider: SandboxProvider;
  /** Opens the task's model (for a scripted task this starts the local server); `close` stops it. */
  openModel(task: Task): Promise<{ client: ModelClient; close(): Promise<void> }>;
  /** `$RUNNER_HOME`; runs go to `<home>/runs/<run-id>/`. */
  runnerHome: string;
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
  const started = Date.now();
  const runId = newRunId();
  const traceId = newTraceId();
  const runDirectory = join(dependencies.runnerHome, "runs", runId);
  mkdirSync(runDirectory, { recursive: true, mode: 0o700 });
  options.onRunCreated?.(runId, runDirectory);
  const log = new CloudEventLog(join(runDirectory, "events.jsonl"), runId, traceId);
  log.onEnvelope = options.onEnvelope ?? null;
  const events = new EventFanout().add(log);
  if (options.events) events.add(options.events);

  const report: RunReport = {
    run_id: runId,
    trace_id: traceId,
    task: task.name,
    status: "error",
    reason: "not_started",
    error: null,
    verify: null,
    branch: null,
    base_commit: null,
    head_commit: null,
    patch: null,
    final_message: null,
    steps: 0,
    tool_calls: 0,
    usage: emptyUsage(),
    network: {},
    duration_ms: 0,
  };
  // Counted as they happen, so an interrupted or failed run still reports its work.
  events.add({
    emit(event) {
      if (event.type === "model_call.finished") {
        report.steps += 1;
        report.usage = addUsage(report.usage, event.data.usage);
      } else if (event.type === "tool_call.finished") {
        report.tool_calls += 1;
      }
    },
  });
  let worktree: RunWorktree | null = null;
  let sandbox: Sandbox | null = null;
  let model: { client: ModelClient; close(): Promise<void> } | null = null;
  let messages: readonly ChatMessage[] = [];
  const saveSession = () =>
    writeAtomically(join(runDirectory, "session.json"), JSON.stringify({ run_id: runId, trace_id: traceId, task: task.name, agents: { main: { messages } } }, null, 2));

  try {
    worktree = await createRunWorktree(task.workspacePath, runId, join(runDirectory, "worktree"));
    report.branch = worktree.branch;
    report.base_commit = worktree.baseCommit;
    writeRunLock(runDirectory, { run_id: runId, owner: currentOwner(), repository: worktree.repositoryRoot, worktree: worktree.path, branch: worktree.branch });
    events.emit({
      type: "run.started",
      data: { run_id: runId, task: task.name, workspace: worktree.repositoryRoot, branch: worktree.branch, base_commit: worktree.baseCommit },
    });
    throwIfAborted(options.signal);
    // The model (a local server for scripted tasks) and the container start side by side.
    const sandboxStarted = Date.now();
    const specFor = sandboxSpecFactory(task, runId, runDirectory, report, events, options.hostEnvironment ?? process.env);
    const [openedModel, createdSandbox] = await Promise.allSettled([
      dependencies.openModel(task),
      specFor("main", worktree).then((spec) =>
        RecoveringSandbox.create(dependencies.sandboxProvider, spec, (sandboxId) => events.emit({ type: "sandbox.restarted", data: { sandbox_id: sandboxId } })),
      ),
    ]);
    if (openedModel.status === "fulfilled") model = openedModel.value;
    if (createdSandbox.status === "fulfilled") sandbox = createdSandbox.value;
    if (openedModel.status === "rejected") throw openedModel.reason;
    if (createdSandbox.status === "rejected") throw createdSandbox.reason;
    const activeSandbox = createdSandbox.value;
    const modelClient = openedModel.value.client;
    events.emit({
      type: "sandbox.created",
      data: { sandbox_id: activeSandbox.id, image: task.sandbox.image, ready_ms: Date.now() - sandboxStarted, uid: worktree.sandboxUser.uid },
    });

    let outcome: AgentOutcome;
    try {
      outcome = await runAgentLoop({
        agentId: "main",
        model: modelClient,
        tools: new ToolRegistry(workspaceTools()),
        sandbox: activeSandbox,
        systemPrompt: workspaceAgentSystemPrompt({ allowedHosts: task.sandbox.network.allow.map(describeRule) }),
        instruction: task.instruction,
        maxSteps: task.max_steps,
        toolTimeoutMs: task.tool_timeout_ms,
        events,
        signal: options.signal,
        onTurn: (current) => {
          messages = current;
          saveSession();
          log.sync();
        },
      });
    } finally {
      saveSession();
    }
    report.final_message = outcome.finalMessage;

    // Nothing the agent started may run while host git reads the worktree.
    await activeSandbox.stopAllProcesses();
    await commitAndWritePatch(worktree, `agent-runner: ${task.name} (run ${runId})\n\n${firstLine(outcome.finalMessage)}`, runDirectory, report, events);

    // The agent's container goes before verification: nothing it left running
    // or planted outside /workspace may influence the verdict.
    await activeSandbox.close();
    throwIfAborted(options.signal);
    if (task.verify) {
      report.verify = await verifyCommit(task.verify, worktree, report.head_commit!, {
        provider: dependencies.sandboxProvider,
        specFor,
        directory: join(runDirectory, "verify"),
        events,
        signal: options.signal,
      });
      throwIfAborted(options.signal);
    }
    const verified = report.verify === null || report.verify.passed;
    if (outcome.reason === "max_steps") {
      setOutcome(report, "failed", "max_steps");
    } else if (!verified) {
      setOutcome(report, "failed", report.verify?.timed_out ? "verify_timed_out" : "verify_failed");
    } else {
      setOutcome(report, "succeeded", report.verify ? "verified" : "finished_unverified");
    }
  } catch (error) {
    if (error instanceof CancelledError || options.signal.aborted) {
      setOutcome(report, "cancelled", "interrupted");
    } else {
      setOutcome(report, "error", error instanceof ModelError ? error.reason : error instanceof RunnerError ? error.name : "internal_error");
      report.error = errorMessage(error);
    }
  } finally {
    await cleanUp(async () => sandbox?.close(), "sandbox", events);
    await cleanUp(async () => model?.close(), "model", events);
    if (worktree && report.head_commit === null) {
      // Interrupted or failed before the normal commit: keep the agent's work on its branch anyway.
      const current = worktree;
      await cleanUp(
        () => commitAndWritePatch(current, `agent-runner: ${task.name} (run ${runId}, ${report.status}: partial work)`, runDirectory, report, events),
        "commit of partial work",
        events,
      );
    }
    if (worktree) {
      const failure = await removeRunWorktree(worktree);
      if (failure) events.emit({ type: "cleanup.failed", data: { what: "worktree", error: failure.message } });
    }
    report.duration_ms = Date.now() - started;
    writeAtomically(join(runDirectory, "report.json"), `${JSON.stringify(report, null, 2)}\n`);
    events.emit({
      type: "run.finished",
      data: { status: report.status, exit_code: exitCodeFor(report.status), duration_ms: report.duration_ms, ...(report.error ? { error: report.error } : {}) },
    });
    log.close();
  }
  return { report, exitCode: exitCodeFor(report.status), runDirectory };
}

/**
 * Builds sandbox specs for this run: the task's image, limits, environment
 * and network, the given worktree at /workspace and its git metadata read-only.
 * Network decisions are counted in the report and emitted as events.
 */
function sandboxSpecFactory(
  task: Task,
  runId: string,
  runDirectory: string,
  report: RunReport,
  events: EventSink,
  hostEnvironment: NodeJS.ProcessEnv,
): (agentId: string, worktree: RunWorktree) => Promise<SandboxSpec> {
  const onNetworkEvent = (event: NetworkEvent) => {
    const counts = (report.network[`${event.host}:${event.port}`] ??= { allowed: 0, denied: 0 });
    if (event.decision === "allowed") {
      counts.allowed += 1;
      events.emit({ type: "network.allowed", data: { method: event.method, host: event.host, port: event.port } });
    } else {
      counts.denied += 1;
      events.emit({ type: "network.denied", data: { method: event.method, host: event.host, port: event.port, reason: event.reason ?? "refused" } });
    }
  };
  return async (agentId, worktree) => ({
    runId,
    agentId,
    image: task.sandbox.image,
    workspace: { hostPath: worktree.path },
    readOnlyMounts: await containerGitMounts(worktree, runDirectory),
    env: containerEnvironment(task, hostEnvironment),
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
  });
}

async function commitAndWritePatch(worktree: RunWorktree, message: string, runDirectory: string, report: RunReport, events: EventSink): Promise<void> {
  const committed = await commitRunWorktree(worktree, message);
  report.head_commit = committed.head;
  events.emit({ type: "workspace.committed", data: { branch: worktree.branch, commit: committed.head, changed: committed.changed } });
  writeFileSync(join(runDirectory, "patch.diff"), await diffRunBranch(worktree));
  report.patch = "patch.diff";
}

/**
 * The container's environment: fixed variables, the task's literal `env`, and
 * the host variables it names in `pass_env` and `secret_env`. Nothing else of the host's.
 */
export function containerEnvironment(task: Task, host: NodeJS.ProcessEnv): Record<string, string> {
  const environment: Record<string, string> = {
    HOME: "/tmp",
    LANG: "C.UTF-8",
    PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    // Read-only git in the container: never write the (read-only) index, trust the mounted repository.
    GIT_OPTIONAL_LOCKS: "0",
    GIT_CONFIG_COUNT: "1",
    GIT_CONFIG_KEY_0: "safe.directory",
    GIT_CONFIG_VALUE_0: "*",
    PIP_DISABLE_PIP_VERSION_CHECK: "1",
    PYTHONDONTWRITEBYTECODE: "1",
  };
  Object.assign(environment, task.sandbox.env);
  for (const name of [...task.sandbox.pass_env, ...task.sandbox.secret_env]) {
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

function firstLine(text: string | null): string {
  return (text ?? "").split("\n")[0]!.slice(0, 200);
}
