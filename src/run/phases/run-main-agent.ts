import { offlineHintFor, packageIndexHosts } from "../../process/package-index-hosts.js";
import { Mutex } from "async-mutex";
import { runAgentLoop, type AgentOutcome } from "../../agent/agent-loop.js";
import { contextSettings, type ContextSettings } from "../../agent/context-window.js";
import { subagentSystemPrompt, workspaceAgentSystemPrompt } from "../../agent/system-prompt.js";
import { readToolResultTool, ToolResultStore } from "../../agent/tool-result-store.js";
import { agentTool, type SubagentHost, type SubagentMode } from "../../agents/subagents.js";
import { TaskManager, taskTools } from "../../agents/task-manager.js";
import { describeRule } from "../../sandbox/network-allow-list.js";
import type { ChatMessage, Usage } from "../../model/messages.js";
import { costOf } from "../../model/pricing.js";
import type { SandboxProvider } from "../../sandbox/sandbox.js";
import { loadSkillTool, skillCatalogText } from "../../skills/index.js";
import type { Tool } from "../../tools/define-tool.js";
import { workspaceTools } from "../../tools/builtin/index.js";
import { ToolRegistry } from "../../tools/tool-registry.js";
import { rawSafeGit } from "../../workspace/safe-git.js";
import type { RunWorktree } from "../../workspace/run-worktree.js";
import { MAIN_AGENT } from "../report-counter.js";
import { finalAnswerOf } from "../resumable-run.js";
import type { RunScope } from "../run-scope.js";
import type { RunEnvironment } from "./start-environment.js";
import type { RunWorkspace } from "./open-workspace.js";

/**
 * Phase 3, run the agent: the main agent's loop with its tools (workspace
 * tools, skills, MCP, the `agent` tool for subagents, background tasks), from
 * the journal when resuming. A resumed run whose agent had already given its
 * final answer goes straight on to delivery (unless the embedding checks
 * final answers: then the loop judges it first). Background commands and
 * subagents end with the agent; stopping them (and the MCP servers) is
 * deferred too, for a run that ends by an exception.
 */
export async function runMainAgent(scope: RunScope, workspace: RunWorkspace, environment: RunEnvironment, provider: SandboxProvider): Promise<AgentOutcome> {
  const { task, events, report, resume, signal, journal } = scope;
  const tasks = new TaskManager(events, task.max_parallel);
  scope.cleanup.defer("subagents and background tasks", () => tasks.stopAll());
  const { sandbox, skills, mcp, guards } = environment;
  const { worktree } = workspace;
  const skillCatalog = skillCatalogText(skills);
  const skillTools = skills.skills.length ? [loadSkillTool(skills)] : [];
  const context = contextSettings(task.model.context_window, task.context);
  const results = new ToolResultStore(scope.store.directory, MAIN_AGENT);
  for (const [callId, file] of resume?.restored.fullOutputs ?? []) results.remember(callId, { file });
  for (const recorded of resume?.restored.results.values() ?? []) results.remember(recorded.callId, { content: recorded.content });
  let outcome: AgentOutcome;
  // `runner continue` adds a message after the final answer: the agent goes on.
  const finalAnswer = resume && resume.followUp === null ? finalAnswerOf(resume.restored) : undefined;
  // An answer a front end checks (RunEmbedding.checkFinalAnswer) is judged by the loop, which resumes without a model call.
  if (resume && finalAnswer !== undefined && !scope.embedding.checkFinalAnswer) {
    // The agent had given its final answer; the runner stopped before committing or verifying.
    outcome = {
      reason: "final_answer",
      finalMessage: finalAnswer,
      steps: resume.restored.nextStep,
      toolCalls: resume.restored.toolCalls,
      usage: resume.restored.usage,
      messages: resume.restored.messages,
    };
  } else {
    const allowedHosts = task.sandbox.network.allow.map(describeRule);
    const prices = scope.pricing.prices;
    const pricedCost = prices ? (usage: Usage) => costOf(usage, prices) : undefined;
    if (!prices) events.emit({ type: "model.unpriced", data: { model: scope.pricing.model, detail: scope.pricing.unpriced ?? "not priced" } });
    const gate = new Mutex();
    let conversation: readonly ChatMessage[] = [];
    const { explore: explorePolicy, worker: workerPolicy } = scope.policies;
    const host: SubagentHost = {
      runId: scope.runId,
      runDirectory: scope.store.directory,
      workersDirectory: scope.paths.workers,
      model: environment.model,
      provider,
      specFor: async (agentId, agentWorktree, specOptions) => {
        const spec = await environment.specFor(agentId, agentWorktree);
        return specOptions?.readOnly ? { ...spec, workspace: { ...spec.workspace, readOnly: true } } : spec;
      },
      events,
      journal,
      redact: (text) => scope.redactor.redact(text),
      context,
      tasks,
      parent: { agentId: MAIN_AGENT, worktree, sandbox, gate, conversation: () => conversation },
      toolsFor: (mode, fork, store) => subagentTools(mode, fork, store, host, context, skillTools, mcp.tools),
      systemPromptFor: (mode) =>
        subagentSystemPrompt(mode, { allowedHosts, skillCatalog, workdir: task.sandbox.workdir, projectInstructions: environment.instructions?.text }),
      verify: task.verify ? { ...task.verify, setup: task.sandbox.setup } : null,
      commitLimits: scope.commitLimits,
      limits: { maxSteps: task.subagents.max_steps, timeoutMs: task.subagents.timeout_sec * 1000, toolTimeoutMs: task.tool_timeout_ms },
      networkHint: offlineHintFor(task.sandbox.network.allow, () => packageIndexHosts({ env: scope.hostEnvironment, home: scope.hostEnvironment.HOME })),
      mainChecker: guards.main.checker,
      guardFor: (mode) => (mode === "explore" ? guards.explore : guards.worker),
      maxStepsFor: (mode) =>
        Math.min(task.subagents.max_steps, (mode === "explore" ? explorePolicy : workerPolicy).limits.max_steps ?? Number.POSITIVE_INFINITY),
      reports: report.agents,
      ...(pricedCost ? { costOf: pricedCost } : {}),
      budget: scope.budget,
      parentGit: new Mutex(),
      firstAgentNumber: await nextSubagentNumber(worktree, [...(resume?.subagentIds ?? []), ...report.agents.map((agent) => agent.id)]),
    };
    outcome = await runAgentLoop({
      agentId: MAIN_AGENT,
      model: environment.model,
      tools: new ToolRegistry(mainAgentTools(results, host, context, skillTools, mcp.tools, scope.embedding.hostTools ?? [])),
      sandbox,
      systemPrompt: workspaceAgentSystemPrompt({
        allowedHosts,
        skillCatalog,
        workdir: task.sandbox.workdir,
        projectInstructions: environment.instructions?.text,
      }),
      instruction: task.instruction,
      maxSteps: Math.min(task.max_steps, scope.policies.main.limits.max_steps ?? Number.POSITIVE_INFINITY),
      guard: guards.main,
      toolTimeoutMs: task.tool_timeout_ms,
      networkHint: host.networkHint,
      events,
      signal,
      context,
      journal,
      results,
      onTurnEnd: () => scope.log.sync(),
      redact: (text) => scope.redactor.redact(text),
      background: {
        start: (description, body) => tasks.start({ kind: "shell", description, background: true, parentSignal: signal }, body).record.id,
        drain: () => tasks.drainNotifications(),
        running: () => tasks.hasRunningBackground(),
        wait: () => tasks.waitForBackground(),
      },
      toolGate: gate,
      ...(pricedCost ? { costOf: pricedCost } : {}),
      budget: scope.budget,
      ...(scope.embedding.gate ? { gate: scope.embedding.gate } : {}),
      onConversation: (current) => {
        conversation = current;
      },
      ...(resume ? { resume: resume.restored } : {}),
      ...(scope.embedding.checkFinalAnswer ? { checkFinalAnswer: scope.embedding.checkFinalAnswer } : {}),
      ...(resume?.followUp ? { followUp: resume.followUp } : {}),
    });
  }
  // Background commands, subagents and MCP servers end with the agent.
  await tasks.stopAll();
  await mcp.close();
  report.final_message = outcome.finalMessage;
  return outcome;
}

/**
 * The next free subagent number of a run: past every id earlier attempts used
 * (journal, report) and every worker branch `<run branch>-w<n>` that exists.
 */
async function nextSubagentNumber(worktree: RunWorktree, usedIds: string[]): Promise<number> {
  const branches = await rawSafeGit({ baseDirectory: worktree.repositoryRoot }, [
    "for-each-ref",
    "--format=%(refname:strip=2)",
    `refs/heads/${worktree.branch}-*`,
  ]);
  const ids = [...usedIds, ...branches.split("\n").map((branch) => branch.slice(`${worktree.branch}-`.length))];
  const numbers = ids
    .map((id) => /^[we](\d+)$/.exec(id)?.[1])
    .filter((number): number is string => number !== undefined)
    .map(Number);
  return Math.max(0, ...numbers) + 1;
}

/** The main agent's tools, in a fixed order (the tool list is part of the prompt-cache prefix). */
function mainAgentTools(
  results: ToolResultStore,
  host: SubagentHost,
  context: ContextSettings,
  skillTools: Tool[],
  mcpTools: Tool[],
  hostTools: Tool[] = [],
): Tool[] {
  const all = [
    ...workspaceTools(),
    ...hostTools,
    readToolResultTool(results, context.toolResultMaxTokens * 4),
    ...skillTools,
    ...mcpTools,
    agentTool(host),
    ...taskTools(host.tasks),
  ];
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
