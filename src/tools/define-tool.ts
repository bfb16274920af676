import type { z } from "zod";
import type { Sandbox } from "../sandbox/sandbox.js";

/** A validated call as a {@link ToolGuard} sees it. */
export interface GuardedCall {
  name: string;
  /** The arguments after validation. */
  arguments: Record<string, unknown>;
  toolCallId: string;
  agentId: string;
  /** The tool's `readOnly` (for MCP tools: the server's `readOnlyHint`). */
  readOnly: boolean;
}

/**
 * Decides each validated call before it runs (policy, approval, pre-tool
 * hooks) and may add a note after it ran (post-tool hooks). A refusal reaches
 * the model as `[denied] <reason>` (DESIGN.md) and the tool does not run.
 */
export interface ToolGuard {
  check(call: GuardedCall): Promise<{ allowed: true } | { allowed: false; reason: string }>;
  /** A note appended to the result, or null. */
  after?(call: GuardedCall, result: ToolResult): Promise<string | null>;
}

/** What a tool gets besides its arguments. */
export interface ToolContext {
  sandbox: Sandbox;
  /** Aborted when the run is cancelled; long tools must honour it. */
  signal: AbortSignal;
  toolCallId: string;
  /** Which agent makes the call (`main`, `w1`, ...). */
  agentId?: string;
  /** Checks the call before it runs; absent: every valid call runs. */
  guard?: ToolGuard;
  /** Default run_shell timeout from the task, ms. */
  defaultTimeoutMs: number;
  /**
   * Called once by the {@link ToolRegistry} when the call goes ahead: after
   * the guard let it through (policy, approval, hooks), just before the tool
   * runs, or when it fails before reaching the guard (unknown tool, bad
   * arguments). Never for a refused call. The agent loop emits
   * `tool_call.started` here, so a call that waits for approval is started
   * only after the answer (docs/events.md).
   */
  onStarted?: () => void;
  /**
   * Starts work that outlives the tool call (`run_shell` with `background:
   * true`) as a task and returns its id; absent where background work is not
   * available. `body` gets a signal aborted by `task_stop` or the run's end.
   */
  startBackground?: (description: string, body: (signal: AbortSignal) => Promise<{ status: "completed" | "failed"; output: string }>) => string;
}

/** A tool's answer. `content` goes to the model; `details` only to events and the terminal. */
export interface ToolResult {
  content: string;
  /** True when the call failed; `content` then starts with `Error:` so the model can recover. */
  isError?: boolean;
  details?: Record<string, unknown>;
}

export interface Tool<Input extends z.ZodType = z.ZodType> {
  name: string;
  description: string;
  input: Input;
  /**
   * The arguments' JSON Schema as the model sees it, when it comes from
   * elsewhere (an MCP server's `inputSchema`); `input` then only checks the
   * shape loosely and the tool's owner validates. Default: derived from `input`.
   */
  jsonSchema?: Record<string, unknown>;
  /**
   * True when the tool never changes the sandbox. Read-only calls of one turn
   * run concurrently; every other call runs alone, in call order, so two edits
   * of one file in the same turn cannot lose an update.
   */
  readOnly: boolean;
  /**
   * True when calls may run alongside the turn's other concurrent calls even
   * though the tool is not read-only, because it never touches the calling
   * agent's files directly (the `agent` tool: each worker has its own
   * worktree; snapshots and merges are serialized by the runner).
   */
  concurrent?: boolean;
  /** May throw: the registry turns any exception into an `Error:` result. */
  execute(input: z.infer<Input>, context: ToolContext): Promise<ToolResult>;
}

/** Identity helper that keeps the input type flowing into `execute`. */
export function defineTool<Input extends z.ZodType>(tool: Tool<Input>): Tool<Input> {
  return tool;
}

/** An `Error:` result (DESIGN.md: tool failures start with `Error:`). */
export function toolError(message: string, details?: Record<string, unknown>): ToolResult {
  return { content: `Error: ${message}`, isError: true, details };
}
