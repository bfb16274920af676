import type { z } from "zod";
import { readToolResultInput } from "../agent/tool-result-store.js";
import { agentToolInput } from "../agents/subagents.js";
import { taskToolInputs } from "../agents/task-manager.js";
import { ConfigError } from "../errors.js";
import { MAX_TOOL_NAME_LENGTH, sanitizeToolNamePart } from "../mcp/mcp-tool-names.js";
import type { Task } from "../config/load-task.js";
import { loadScript, type Script, type ScriptedTurn } from "../model/scripted-model-server.js";
import { loadSkillInput } from "../skills/load-skill-tool.js";
import { workspaceTools } from "../tools/builtin/index.js";
import type { Tool } from "../tools/define-tool.js";
import { checkModelSettings } from "./open-model.js";

/**
 * The part of the pre-flight that needs no sandbox, for every provider: a
 * real model's settings ({@link checkModelSettings}), or the scripted model's
 * script, loaded and its tool calls checked against the runner's tools
 * ({@link checkScriptToolCalls}; `hostTools`: the run's embedding's, which a
 * script may call too). Throws ConfigError (exit 2) naming the problem.
 */
export function checkTaskModel(task: Task, environment: NodeJS.ProcessEnv = process.env, hostTools: readonly Tool[] = []): void {
  if (task.model.provider !== "scripted") {
    checkModelSettings(task, environment);
    return;
  }
  checkScriptToolCalls(loadScript(task.scriptPath!), task.scriptPath!, Object.keys(task.mcp_servers), hostTools);
}

/** One problem of a scripted tool call: where it is (`turns[3].tool_calls[0].arguments.path`) and what is wrong. */
export interface ScriptProblem {
  path: string;
  message: string;
}

/**
 * The arguments schema of every tool the runner itself defines, by name: the
 * workspace tools, `read_tool_result`, `load_skill`, `agent` and the task
 * tools. These are the zod schemas ToolRegistry validates a model's call
 * with, so a call that passes here passes there.
 */
function runnerToolInputs(hostTools: readonly Tool[]): Map<string, z.ZodType> {
  return new Map<string, z.ZodType>([
    ...hostTools.map((tool): [string, z.ZodType] => [tool.name, tool.input]),
    ...workspaceTools().map((tool): [string, z.ZodType] => [tool.name, tool.input]),
    ["read_tool_result", readToolResultInput],
    ["load_skill", loadSkillInput],
    ["agent", agentToolInput],
    ...Object.entries(taskToolInputs),
  ]);
}

/** Length of the hash suffix an MCP tool name gets when it is cut (`_` and 8 hex digits; src/mcp/mcp-tool-names.ts). */
const CUT_NAME_SUFFIX = 9;

/**
 * Checks the tool calls of a loaded script against the tools a run can
 * offer, before anything of the run exists, so a typo fails the task
 * (ConfigError, exit 2) instead of running and "succeeding" on a model that
 * only ever saw `Error: unknown tool`. What is checked (docs/scripted-model.md "Scripted model"):
 * - a call's `name` must be a tool the runner defines ({@link runnerToolInputs}) or a host tool of the run's embedding (`hostTools`),
 *   or `mcp__<server>__<tool>` for a server of the task's `mcp_servers`
 *   (`mcpServers`, its names as in task.yaml). The tool part of an MCP name is
 *   not checked: the server says which tools it has only once it runs.
 * - its `arguments` must fit that tool's schema (MCP tools: not checked, the
 *   server validates).
 * - a call with `arguments_raw` is sent as written and never checked, name
 *   included: that is how a script sends a call that is wrong on purpose.
 * Which of these tools a given agent is offered (the policy's tool list, an
 * explore subagent's read-only set) is not checked: calling a tool the agent
 * is not given is a valid script, answered `Error: unknown tool` at run time.
 * Throws ConfigError naming `file` and listing every problem with its path
 * and step (1-based, as the terminal shows it: `turns[3]` is step 4).
 */
export function checkScriptToolCalls(script: Script, file: string, mcpServers: readonly string[], hostTools: readonly Tool[] = []): void {
  const problems = scriptToolCallProblems(script, mcpServers, hostTools);
  if (problems.length === 0) return;
  const lines = problems.map((problem) => `  - ${problem.path}: ${problem.message}`);
  throw new ConfigError(
    `model.script ${file}: ${problems.length} problem(s) in its tool calls (a call that is wrong on purpose is given as arguments_raw, which is sent unchecked):\n${lines.join("\n")}`,
  );
}

/** The problems {@link checkScriptToolCalls} reports, in script order; empty when there are none. */
export function scriptToolCallProblems(script: Script, mcpServers: readonly string[], hostTools: readonly Tool[] = []): ScriptProblem[] {
  const inputs = runnerToolInputs(hostTools);
  // A name cut to the length limit keeps at least this much of its `mcp__<server>__` start.
  const mcpPrefixes = mcpServers.map((server) => `mcp__${sanitizeToolNamePart(server)}__`.slice(0, MAX_TOOL_NAME_LENGTH - CUT_NAME_SUFFIX));
  const turnLists: [string, ScriptedTurn[]][] = [
    ["turns", script.turns],
    ...Object.entries(script.subagents ?? {}).map(([description, entry]): [string, ScriptedTurn[]] => [
      `subagents[${JSON.stringify(description)}].turns`,
      entry.turns,
    ]),
  ];
  const problems: ScriptProblem[] = [];
  for (const [where, turns] of turnLists) {
    for (const [turnIndex, turn] of turns.entries()) {
      for (const [callIndex, call] of (turn.tool_calls ?? []).entries()) {
        if (call.arguments_raw !== undefined) continue;
        const at = `${where}[${turnIndex}].tool_calls[${callIndex}]`;
        const step = `step ${turnIndex + 1}`;
        if (call.name.startsWith("mcp__")) {
          if (!mcpPrefixes.some((prefix) => call.name.startsWith(prefix))) {
            const known = mcpServers.length ? `it has ${mcpServers.map((server) => JSON.stringify(server)).join(", ")}` : "it has none";
            problems.push({ path: `${at}.name (${step})`, message: `"${call.name}" names no server of the task's mcp_servers (${known})` });
          }
          continue;
        }
        const input = inputs.get(call.name);
        if (!input) {
          problems.push({
            path: `${at}.name (${step})`,
            message: `no tool "${call.name}"; the runner's tools are ${[...inputs.keys()].join(", ")}, and mcp__<server>__<tool> for the task's mcp_servers`,
          });
          continue;
        }
        // What the registry will parse: the arguments as the scripted server sends them, through JSON.
        const sent: unknown = JSON.parse(JSON.stringify(call.arguments ?? {}));
        const parsed = input.safeParse(sent);
        if (parsed.success) continue;
        for (const issue of parsed.error.issues) {
          const field = issue.path.map((key) => (typeof key === "number" ? `[${key}]` : `.${String(key)}`)).join("");
          problems.push({ path: `${at}.arguments${field} (${step}, ${call.name})`, message: issue.message });
        }
      }
    }
  }
  return problems;
}
