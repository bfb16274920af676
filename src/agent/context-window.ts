import type { ChatMessage, ToolCall, ToolDefinition } from "../model/messages.js";

/**
 * Characters per token of the size estimate: OpenAI's rule of thumb for
 * English text ("one token is about 4 characters", help.openai.com, "What are
 * tokens and how to count them"). The estimate is calibrated against the
 * provider's reported `prompt_tokens` as the run goes ({@link TokenEstimator}).
 */
const CHARACTERS_PER_TOKEN = 4;
/** Framing tokens per message (role, separators), from OpenAI's cookbook "How to count tokens with tiktoken". */
const TOKENS_PER_MESSAGE = 4;

/** Context management of one agent (task.yaml `model.context_window` and `context`). */
export interface ContextSettings {
  /** The model's context window, tokens. */
  contextWindow: number;
  /** Share of the window above which older tool results are cleared. */
  clearAt: number;
  /** Share of the window above which older turns are summarised. */
  compactAt: number;
  /** Latest tool results clearing keeps. */
  keepToolResults: number;
  /** Latest turns compaction keeps verbatim. */
  keepTurns: number;
  /** Largest tool result the model receives, tokens; longer ones keep head and tail. */
  toolResultMaxTokens: number;
}

/** Default per-result cap, tokens (50 000 characters), unless 1/8 of the window is smaller. */
const DEFAULT_TOOL_RESULT_MAX_TOKENS = 12_500;

/** Settings from task.yaml's `model.context_window` and `context` block. */
export function contextSettings(
  contextWindow: number,
  context: { clear_at: number; compact_at: number; keep_tool_results: number; keep_turns: number; tool_result_max_tokens?: number },
): ContextSettings {
  return {
    contextWindow,
    clearAt: context.clear_at,
    compactAt: context.compact_at,
    keepToolResults: context.keep_tool_results,
    keepTurns: context.keep_turns,
    toolResultMaxTokens: context.tool_result_max_tokens ?? Math.min(DEFAULT_TOOL_RESULT_MAX_TOKENS, Math.floor(contextWindow / 8)),
  };
}

/** Tokens of one message by the character heuristic. */
export function messageTokens(message: ChatMessage): number {
  let characters = message.content?.length ?? 0;
  if (message.role === "assistant") {
    for (const call of message.tool_calls ?? []) characters += call.function.name.length + call.function.arguments.length + call.id.length;
  }
  return Math.ceil(characters / CHARACTERS_PER_TOKEN) + TOKENS_PER_MESSAGE;
}

/**
 * Estimates the prompt size of the next request, in tokens, before it is
 * sent: a character heuristic per message, scaled by the ratio between what
 * the provider reported (`usage.prompt_tokens`) and the heuristic for the last
 * request. The ratio is never below 1: the estimate may overshoot (clearing a
 * little early) but should not undershoot (a request over the window fails).
 */
export class TokenEstimator {
  private ratio = 1;
  private readonly cache = new WeakMap<ChatMessage, number>();
  private toolsTokens = 0;
  private toolsKey: ToolDefinition[] | null = null;

  /** Heuristic tokens of a request (messages and tool definitions), before calibration. */
  raw(messages: readonly ChatMessage[], tools: ToolDefinition[]): number {
    if (this.toolsKey !== tools) {
      this.toolsKey = tools;
      this.toolsTokens = tools.length ? Math.ceil(JSON.stringify(tools).length / CHARACTERS_PER_TOKEN) : 0;
    }
    let total = this.toolsTokens;
    for (const message of messages) {
      let tokens = this.cache.get(message);
      if (tokens === undefined) {
        tokens = messageTokens(message);
        this.cache.set(message, tokens);
      }
      total += tokens;
    }
    return total;
  }

  /** Calibrated estimate of the request, tokens. */
  estimate(messages: readonly ChatMessage[], tools: ToolDefinition[]): number {
    return Math.ceil(this.raw(messages, tools) * this.ratio);
  }

  /** Learns from the provider's count for a request whose heuristic size was `rawTokens` (ignored when the provider reports none). */
  calibrate(rawTokens: number, reportedPromptTokens: number): void {
    if (reportedPromptTokens <= 0 || rawTokens <= 0) return;
    this.ratio = Math.min(4, Math.max(1, reportedPromptTokens / rawTokens));
  }
}

/** Marks a result that clearing must keep (a loaded skill's body). */
export const SKILL_RESULT_PREFIX = "[skill]";

/** Start of the placeholder that replaces a cleared tool result. */
const CLEARED_PREFIX = "[cleared to save context:";

/**
 * Replaces the content of every tool result except the latest `keep` (and
 * skill results) with a short placeholder saying how to read it again.
 * Returns a new array (changed messages are new objects, the others are the
 * same objects), how many results were cleared and their positions. Calls and
 * results stay paired: only contents change.
 */
export function clearOldToolResults(messages: readonly ChatMessage[], keep: number): { messages: ChatMessage[]; cleared: number; indexes: number[] } {
  const toolIndexes = messages.flatMap((message, index) => (message.role === "tool" ? [index] : []));
  return clearToolResultsAt(messages, toolIndexes.slice(0, Math.max(0, toolIndexes.length - keep)));
}

/**
 * Clears the tool results at `indexes` (skipping skill results and results
 * already cleared); the same placeholder text every time, so a journal that
 * records only the positions rebuilds the identical conversation.
 */
export function clearToolResultsAt(
  messages: readonly ChatMessage[],
  indexes: readonly number[],
): { messages: ChatMessage[]; cleared: number; indexes: number[] } {
  const names = toolNamesById(messages);
  const wanted = new Set(indexes);
  const done: number[] = [];
  const result = messages.map((message, index) => {
    if (message.role !== "tool" || !wanted.has(index)) return message;
    if (message.content.startsWith(SKILL_RESULT_PREFIX) || message.content.startsWith(CLEARED_PREFIX)) return message;
    done.push(index);
    const name = names.get(message.tool_call_id) ?? "tool";
    return {
      ...message,
      content: `${CLEARED_PREFIX} the ${name} result (${message.content.length} characters) was removed. Call read_tool_result with tool_call_id "${message.tool_call_id}" to read it again.]`,
    };
  });
  return { messages: result, cleared: done.length, indexes: done };
}

/**
 * Where compaction may cut: the index of the assistant message that starts
 * the latest `keepTurns` turns (a turn = an assistant message and the tool
 * results answering it), or null when there is nothing older to summarise.
 * `head` messages at the start (system prompt, instruction) are never cut.
 * Cutting before an assistant message never separates a call from its result.
 */
export function compactionCut(messages: readonly ChatMessage[], head: number, keepTurns: number): number | null {
  const turnStarts = messages.flatMap((message, index) => (index >= head && message.role === "assistant" ? [index] : []));
  if (turnStarts.length <= keepTurns) return turnStarts.length > 1 ? turnStarts.at(-1)! : null;
  return turnStarts[turnStarts.length - keepTurns]!;
}

/** Text of the synthetic result given to a call that never finished. */
export function interruptedResult(reason: string): string {
  return `Error: [interrupted] this tool call has no result (${reason}): it may not have started, or may have partly run. Check the state and run it again if needed.`;
}

/**
 * Makes the conversation valid for a chat-completions request: every tool
 * call of an assistant message is answered by exactly one tool result right
 * after it. Missing results get a synthetic "interrupted" result; tool
 * results answering no pending call (orphans, duplicates) are dropped.
 * Returns the repaired conversation (the same array when nothing was wrong)
 * and a description of each repair.
 */
export function repairToolPairing(messages: ChatMessage[]): { messages: ChatMessage[]; repairs: string[] } {
  const repairs: string[] = [];
  const output: ChatMessage[] = [];
  let pending: ToolCall[] = [];
  let answered = new Set<string>();
  const closeTurn = () => {
    for (const call of pending) {
      if (answered.has(call.id)) continue;
      output.push({ role: "tool", tool_call_id: call.id, content: interruptedResult("no result was recorded") });
      repairs.push(`added an interrupted result for ${call.function.name} call ${call.id}`);
    }
    pending = [];
    answered = new Set();
  };
  for (const message of messages) {
    if (message.role === "tool") {
      const call = pending.find((candidate) => candidate.id === message.tool_call_id);
      if (!call || answered.has(call.id)) {
        repairs.push(`dropped a tool result for ${call ? "an already answered" : "an unknown"} call ${message.tool_call_id}`);
        continue;
      }
      answered.add(call.id);
      output.push(message);
      continue;
    }
    closeTurn();
    output.push(message);
    if (message.role === "assistant") pending = message.tool_calls ?? [];
  }
  closeTurn();
  return repairs.length ? { messages: output, repairs } : { messages, repairs };
}

/** Whether `next` starts with exactly the messages of `previous` (a provider's prompt cache can reuse that prefix). */
export function extendsPrefix(previous: readonly ChatMessage[], next: readonly ChatMessage[]): boolean {
  if (next.length < previous.length) return false;
  for (let index = 0; index < previous.length; index += 1) {
    const before = previous[index]!;
    const after = next[index]!;
    if (before !== after && JSON.stringify(before) !== JSON.stringify(after)) return false;
  }
  return true;
}

function toolNamesById(messages: readonly ChatMessage[]): Map<string, string> {
  const names = new Map<string, string>();
  for (const message of messages) {
    if (message.role !== "assistant") continue;
    for (const call of message.tool_calls ?? []) names.set(call.id, call.function.name);
  }
  return names;
}

/** The instruction the model gets for a compaction (summary) request. */
export const COMPACTION_INSTRUCTION = [
  "The conversation above is being compacted to fit the context window. Write a summary that lets you continue the task without it.",
  "Keep: the goal and constraints of the task; decisions made and why; every file read, created or changed (paths) and what changed;",
  "commands run and their important results (test outcomes, errors); open problems and the next steps you intended.",
  "Be specific and concise. Answer with the summary text only; do not call tools.",
].join(" ");

/** Prefix of the message that carries a compaction summary in the conversation. */
export const SUMMARY_PREFIX = "[summary of the earlier conversation, written at a compaction]";
