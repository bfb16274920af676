import { offlineHintFor, packageIndexHosts } from "../../process/package-index-hosts.js";
import { realpathSync } from "node:fs";
import { dirname } from "node:path";
import type { Task } from "../../config/load-task.js";
import { connectMcpServers, type McpServers } from "../../mcp/index.js";
import type { EventSink } from "../../events/run-events.js";
import type { ModelClient } from "../../model/model-client.js";
import { TokenRateLimitedModelClient } from "../../model/token-rate-limit.js";
import { ToolHooks } from "../../hooks/tool-hooks.js";
import { PermissionChecker } from "../../policy/permission-checker.js";
import type { Policy } from "../../policy/policy-schema.js";
import { RecoveringSandbox } from "../../sandbox/recovering-sandbox.js";
import type { DiskLimitReached, NetworkEvent, SandboxProvider, SandboxSpec } from "../../sandbox/sandbox.js";
import { readProjectInstructions, type ProjectInstructions } from "../../skills/project-instructions.js";
import { loadSkills, userSkillsDirectory, type SkillSet } from "../../skills/index.js";
import type { RunDisk } from "../../workspace/run-disk.js";
import { repositoryTopLevel } from "../../process/repository-top-level.js";
import { CONTAINER_REPOSITORY_DIRECTORY, containerGitView, type RunWorktree } from "../../workspace/run-worktree.js";
import { PermissionGuard, type AskApproval } from "../permission-guard.js";
import { MAIN_AGENT } from "../report-counter.js";
import { checkVerifyProgram } from "../../delivery/command-program.js";
import { runSetupCommands, setupFailure } from "../../delivery/setup-commands.js";
import { throwIfAborted } from "./deliver-main.js";
import type { RunScope } from "../run-scope.js";
import type { RunWorkspace } from "./open-workspace.js";

/** What the start-environment phase opened for the agents. */
export interface RunEnvironment {
  /** The task's model, behind the policy's token rate limit when it has one. */
  model: ModelClient;
  /** The main agent's sandbox (restarted when it dies). */
  sandbox: RecoveringSandbox;
  /** Sandbox specs for an agent of this run on a worktree (image, limits, network, mounts). */
  specFor(agentId: string, worktree: RunWorktree): Promise<SandboxSpec>;
  guards: { main: PermissionGuard; explore: PermissionGuard; worker: PermissionGuard };
  skills: SkillSet;
  /** The project instructions (AGENTS.md, ...) of the base commit, as the prompts carry them; null when none or turned off. */
  instructions: ProjectInstructions | null;
  mcp: McpServers;
}

/** How the start-environment phase reaches outside the run: sandboxes, the model, approvals. */
export interface EnvironmentDependencies {
  sandboxProvider: SandboxProvider;
  openModel(task: Task): Promise<{ client: ModelClient; close(): Promise<void> }>;
  askApproval: AskApproval | null;
}

/**
 * Phase 2, start the environment: the model (a local server for scripted
 * tasks) and the main agent's container side by side, the permission guards
 * (policy, hooks, approvals), then skills (the workspace's as of the base
 * commit, read in the sandbox) and MCP servers. Defers closing the model and
 * MCP servers; the sandbox is closed by the workspace's delivery. Throws what
 * opening them throws (SandboxError, ModelError, ConfigError).
 */
export async function startEnvironment(scope: RunScope, workspace: RunWorkspace, dependencies: EnvironmentDependencies): Promise<RunEnvironment> {
  const { task, events, report, signal } = scope;
  const onDiskLimit = (agentId: string) => (reached: DiskLimitReached) => {
    // Once per run: the sandboxes of a filesystem-held limit share one disk.
    if (report.disk!.limit_reached) return;
    report.disk = { ...report.disk!, limit_reached: true, used_bytes: reached.usedBytes };
    events.emit({
      type: "disk.limit_reached",
      data: {
        agent_id: agentId,
        sandbox_id: reached.sandboxId,
        used_bytes: reached.usedBytes,
        limit_bytes: reached.limitBytes,
        enforcement: reached.enforcement,
        action: reached.action,
        ...(reached.inodes ? { used_inodes: reached.inodes.used, limit_inodes: reached.inodes.limit } : {}),
      },
    });
    if (reached.action === "stopped") scope.diskStop.abort();
  };
  const specFor = sandboxSpecFactory(task, scope.runId, workspace.disk, scope.paths, events, scope.hostEnvironment, onDiskLimit);
  const sandboxStarted = Date.now();
  const [openedModel, createdSandbox] = await Promise.allSettled([
    dependencies.openModel(task),
    specFor(MAIN_AGENT, workspace.worktree).then((spec) =>
      RecoveringSandbox.create(
        dependencies.sandboxProvider,
        scope.embedding.readOnlyWorkspace ? { ...spec, workspace: { ...spec.workspace, readOnly: true } } : spec,
        (sandboxId) => events.emit({ type: "sandbox.restarted", data: { sandbox_id: sandboxId } }),
        signal,
      ),
    ),
  ]);
  if (openedModel.status === "fulfilled") scope.cleanup.defer("model", () => openedModel.value.close());
  if (createdSandbox.status === "fulfilled") workspace.attachSandbox(createdSandbox.value);
  if (openedModel.status === "rejected") throw openedModel.reason;
  if (createdSandbox.status === "rejected") throw createdSandbox.reason;
  const sandbox = createdSandbox.value;
  const tokensPerMinute = scope.policies.main.limits.tokens_per_minute;
  const model = tokensPerMinute ? new TokenRateLimitedModelClient(openedModel.value.client, tokensPerMinute) : openedModel.value.client;
  const hostCwd = task.file ? dirname(task.file) : process.cwd();
  const agentTrees = agentWritableTrees(task, scope);
  const hooks = new ToolHooks(task.hooks, { cwd: hostCwd, env: scope.hostEnvironment, agentTrees, events, runId: scope.runId });
  const guardFor = async (policy: Policy) =>
    new PermissionGuard({
      checker: await PermissionChecker.create(policy, { workdir: task.sandbox.workdir }),
      hooks: hooks.isEmpty ? null : hooks,
      events,
      signal,
      ask: dependencies.askApproval,
      remembered: new Set(),
      denials: report.denials,
      redact: (text) => scope.redactor.redact(text),
    });
  const { main: mainPolicy, explore: explorePolicy, worker: workerPolicy } = scope.policies;
  const [main, explore, worker] = await Promise.all([
    guardFor(mainPolicy),
    guardFor(explorePolicy),
    workerPolicy === mainPolicy ? null : guardFor(workerPolicy),
  ]);
  events.emit({
    type: "sandbox.created",
    data: { sandbox_id: sandbox.id, image: task.sandbox.image, ready_ms: Date.now() - sandboxStarted, uid: workspace.worktree.sandboxUser.uid },
  });

  // sandbox.setup, once, before anything else runs in the sandbox (a resumed run's new container too).
  const setup = await runSetupCommands(sandbox, task.sandbox.setup, { phase: "agent", agentId: MAIN_AGENT, events, signal });
  throwIfAborted(signal);
  if (setup.failed)
    throw setupFailure(
      setup.results,
      offlineHintFor(task.sandbox.network.allow, () => packageIndexHosts({ env: scope.hostEnvironment, home: scope.hostEnvironment.HOME })),
    );
  // A verify command whose program is not there would be found out only after the paid run, and blamed on the agent.
  if (task.verify) await checkVerifyProgram(sandbox, task.verify.command, task.sandbox.image, signal);
  throwIfAborted(signal);

  // Skills: built-in, the user's directory, and the workspace's skills/ as of the base commit (read in the sandbox).
  const skills = await loadSkills({
    userDirectory: userSkillsDirectory(scope.hostEnvironment),
    agentTrees,
    workspace: { sandbox, baseCommit: workspace.worktree.baseCommit, gitDirectory: CONTAINER_REPOSITORY_DIRECTORY, signal },
  });
  events.emit({
    type: "skills.loaded",
    data: {
      skills: skills.skills.map((skill) => `${skill.source}:${skill.name}`),
      shadowed: skills.shadowed.map((skill) => `${skill.source}:${skill.name} (shadowed by ${skill.shadowedBy})`),
      problems: skills.problems.map((problem) => problem.message),
    },
  });
  // Project instructions: the AGENTS.md files of the base commit (read in the sandbox), once per run.
  const instructions = task.instructions_files
    ? await readProjectInstructions({ sandbox, baseCommit: workspace.worktree.baseCommit, gitDirectory: CONTAINER_REPOSITORY_DIRECTORY, signal })
    : null;
  report.instructions_files = instructions?.files ?? null;
  for (const problem of instructions?.problems ?? []) scope.logger.warn({ component: "instructions" }, problem);
  // MCP servers: stdio ones inside the sandbox (same files, user, limits and network), unless trusted.
  const mcp = await connectMcpServers(task.mcp_servers, { sandbox, signal, events, hostCwd, agentTrees });
  scope.cleanup.defer("MCP servers", () => mcp.close());
  return { model, sandbox, specFor, guards: { main, explore, worker: worker ?? main }, skills, instructions, mcp };
}

/**
 * Builds sandbox specs for this run: the task's image, limits, environment
 * and network, the given worktree at the task's workdir and its git metadata read-only,
 * writable directories on the run's disk. Network decisions are emitted as
 * events (the report counts them); a reached disk limit goes to `onDiskLimit`.
 */
export function sandboxSpecFactory(
  task: Task,
  runId: string,
  disk: RunDisk,
  paths: RunScope["paths"],
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
    ...(await containerGitView(worktree, paths.gitView, task.sandbox.workdir)),
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

/** Where Python keeps bytecode in a sandbox: the container's own /tmp, fresh for each container (PYTHONPYCACHEPREFIX). */
const PYTHON_BYTECODE_CACHE = "/tmp/.pycache";

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
    // The container's own git directory is the sandbox user's, which git of any version trusts; git >= 2.31
    // also reads this, for a workdir of the image's that the sandbox user does not own.
    GIT_CONFIG_COUNT: "1",
    GIT_CONFIG_KEY_0: "safe.directory",
    GIT_CONFIG_VALUE_0: "*",
    PIP_DISABLE_PIP_VERSION_CHECK: "1",
    // Bytecode is cached in the container's own scratch space, never in the worktree: each container starts
    // with an empty cache, so a verification never runs a .pyc the agent's container wrote (docs/images.md "Task images").
    PYTHONPYCACHEPREFIX: PYTHON_BYTECODE_CACHE,
  };
  Object.assign(environment, sandbox.env);
  for (const name of [...sandbox.pass_env, ...sandbox.secret_env]) {
    const value = host[name];
    if (value !== undefined) environment[name] = value;
  }
  return environment;
}

/**
 * The trees the agent's work can change, as real paths: the task's
 * repository (a merge brings the agent's files into it) and RUNNER_HOME's
 * `runs/` (every run's worktrees). Host programs (hooks, trusted MCP
 * servers) may not run from them, whatever the task file's check saw.
 */
function agentWritableTrees(task: Task, scope: RunScope): string[] {
  return [repositoryTopLevel(task.workspacePath) ?? realpathSync(task.workspacePath), realpathSync(dirname(scope.store.directory))];
}
