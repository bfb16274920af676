import { z } from "zod";
import { errorMessage } from "../errors.js";
import type { ToolDefinition } from "../model/messages.js";
import { PathOutsideWorkspaceError } from "../sandbox/sandbox.js";
import { toolError, type Tool, type ToolContext, type ToolResult } from "./define-tool.js";

/**
 * Holds the tools of one agent. `definitions()` gives the JSON Schemas the
 * model sees (stable order: registration order); `execute()` parses the
 * model's raw JSON arguments, validates them with the tool's zod schema,
 * asks the context's guard (policy, approval, hooks) and runs the tool. Unknown tools, malformed JSON, invalid arguments and tool
 * exceptions all come back as `Error:` results; the only thing it throws is a
 * `RunnerError` (e.g. SandboxError: the container is gone), which ends the run.
 */
export class ToolRegistry {
  private readonly tools = new Map<string, Tool>();

  /**
   * `denied`: tools that are listed (so the tool list stays byte-identical
   * with another agent's, for a forked subagent's prompt cache) but refused
   * with `[denied] <reason>` when called.
   */
  constructor(
    tools: Tool[] = [],
    private readonly denied: Record<string, string> = {},
  ) {
    for (const tool of tools) this.register(tool);
  }

  register(tool: Tool): void {
    if (this.tools.has(tool.name)) throw new Error(`tool ${tool.name} registered twice`);
    this.tools.set(tool.name, tool);
  }

  /** Whether a call of `name` may run concurrently with the turn's other such calls (read-only or `concurrent` tools; unknown tools: yes, they do nothing). */
  runsConcurrently(name: string): boolean {
    const tool = this.tools.get(name);
    return tool ? tool.readOnly || (tool.concurrent ?? false) : true;
  }

  names(): string[] {
    return [...this.tools.keys()];
  }

  definitions(): ToolDefinition[] {
    return [...this.tools.values()].map((tool) => {
      const { $schema: _ignored, ...parameters } = tool.jsonSchema ?? (z.toJSONSchema(tool.input, { io: "input" }) as Record<string, unknown>);
      return { type: "function", function: { name: tool.name, description: tool.description, parameters } };
    });
  }

  async execute(name: string, rawArguments: string, context: ToolContext): Promise<ToolResult> {
    const tool = this.tools.get(name);
    const refusal = Object.hasOwn(this.denied, name) ? this.denied[name] : undefined;
    if (tool && refusal !== undefined) return { content: `[denied] ${refusal}`, isError: true, details: { denied: true } };
    // A call that never reaches the guard still starts (and fails at once): its arguments are worth seeing.
    const failedEarly = (message: string) => {
      context.onStarted?.();
      return toolError(message);
    };
    if (!tool) return failedEarly(`unknown tool "${name}". Available tools: ${this.names().join(", ")}`);
    let parsedJson: unknown;
    try {
      parsedJson = rawArguments.trim() === "" ? {} : JSON.parse(rawArguments);
    } catch (error) {
      return failedEarly(`arguments for ${name} are not valid JSON (${errorMessage(error)}); received ${rawArguments.length} characters. Send a JSON object.`);
    }
    const parsed = tool.input.safeParse(parsedJson);
    if (!parsed.success) {
      const problems = parsed.error.issues.map((issue) => `- ${issue.path.join(".") || "(arguments)"}: ${issue.message}`);
      return failedEarly(`invalid arguments for ${name}:\n${problems.join("\n")}`);
    }
    const call = {
      name,
      arguments: parsed.data as Record<string, unknown>,
      toolCallId: context.toolCallId,
      agentId: context.agentId ?? "main",
      readOnly: tool.readOnly,
    };
    if (context.guard) {
      const verdict = await context.guard.check(call);
      if (!verdict.allowed) return { content: `[denied] ${verdict.reason}`, isError: true, details: { denied: true } };
    }
    context.onStarted?.();
    try {
      // Uncapped: the agent loop caps results to its context budget and keeps the whole text.
      const result = await tool.execute(parsed.data, context);
      const note = context.guard?.after ? await context.guard.after(call, result) : null;
      return note ? { ...result, content: `${result.content}\n[hook note] ${note}` } : result;
    } catch (error) {
      if (error instanceof PathOutsideWorkspaceError) return toolError(error.message);
      // Infrastructure failures (the sandbox is gone) must end the run, not loop.
      if ((error as { exitCode?: number }).exitCode !== undefined) throw error;
      return toolError(`${name} failed: ${errorMessage(error)}`);
    }
  }
}

/** Keeps the first and last halves of `text` with a marker giving the omitted size. */
export function capText(text: string, limit: number): string {
  if (text.length <= limit) return text;
  const half = Math.floor(limit / 2);
  const omitted = text.length - 2 * half;
  return `${text.slice(0, half)}\n[... ${omitted} characters omitted ...]\n${text.slice(text.length - half)}`;
}
