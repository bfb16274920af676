import { CancelledError, ModelError, errorMessage } from "../errors.js";
import type { EventSink } from "../events/run-events.js";
import { addUsage, emptyUsage, type ChatMessage, type ToolCall, type ToolDefinition, type Usage } from "../model/messages.js";
import type { ModelClient } from "../model/model-client.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import type { ToolContext, ToolGuard } from "../tools/define-tool.js";
import type { RunGate } from "./run-gate.js";
import { capText, type ToolRegistry } from "../tools/tool-registry.js";
import {
  clearOldToolResults,
  compactionCut,
  COMPACTION_INSTRUCTION,
  extendsPrefix,
  interruptedResult,
  repairToolPairing,
  SKILL_RESULT_PREFIX,
  SUMMARY_PREFIX,
  TokenEstimator,
  type ContextSettings,
} from "./context-window.js";
import { toolCallKey, type RestoredAgent, type SessionJournal } from "./session-journal.js";
import type { ToolResultStore } from "./tool-result-store.js";

/** What the model is told when a failed call could not resolve a name in a sandbox without network. */
const OFFLINE_NOTE =
  "[note] the sandbox has no network (the task's sandbox.network.allow is empty): nothing can be downloaded or installed in this run; work with what is installed, and say in your answer what needed the network.";

/** Longest tool-call arguments copied into a `tool_call.started` event, characters. */
const EVENT_ARGUMENTS_CHARACTERS = 4000;
/**
 * Clearing goes down to this share of the clearing threshold (keeping fewer
 * than `keep_tool_results` results only when those alone would stay above it).
 */
const CLEAR_LOW_WATER = 0.75;
/** Messages at the start that compaction never summarises: the system prompt and the instruction. */
const HEAD_MESSAGES = 2;
/** Replies cut at the output limit in a row after which the agent ends (`output_limit`) instead of asking again. */
export const MAX_CUT_REPLIES = 3;
/** Correction turns an agent gets for final answers `checkFinalAnswer` rejects before it ends `output_invalid` (issue 22: exactly one). */
const MAX_OUTPUT_CORRECTIONS = 1;
/**
 * What the model is told when `checkFinalAnswer` rejects its final answer: the problems, one a line. Worded for
 * the one check there is, the agency's `output_schema` (its instructions carry the schema).
 */
export function outputCorrectionNote(problems: string[]): string {
  return [
    "[agent-runner] Your final answer was rejected: it must be a JSON object that satisfies the output schema in your instructions (the whole answer, or one ```json fenced block). The problems:",
    ...problems.map((problem) => `- ${problem}`),
    "Answer again with the corrected object. This is your only correction: another invalid answer ends your work as failed.",
  ].join("\n");
}
/** What the model is told after a reply cut at its output-token limit. */
export const CUT_REPLY_NOTE =
  "[agent-runner] Your previous reply was cut off: it reached the output token limit (model.max_output_tokens), so any tool call in it was incomplete and was NOT run. Continue from where you stopped, in shorter steps: write large files in several smaller calls.";

export interface AgentLoopOptions {
  agentId: string;
  /** A subagent's description (its `agent` call's); sent with model requests. */
  description?: string;
  model: ModelClient;
  tools: ToolRegistry;
  sandbox: Sandbox;
  systemPrompt: string;
  instruction: string;
  /** Most model calls the agent may make (counted across resumes). */
  maxSteps: number;
  /** Default run_shell timeout, ms. */
  toolTimeoutMs: number;
  /**
   * For a sandbox without network: the hint for a failed call's output that
   * shows a name that did not resolve (`offlineHintFor`), else null. The
   * model gets a short note that the sandbox is offline; the whole hint
   * (which names the user's package index hosts) goes only to the call's
   * `tool_call.finished` details (`network_hint`), for the person.
   */
  networkHint?: (output: string) => string | null;
  events: EventSink;
  signal: AbortSignal;
  /** Window, thresholds and caps of context management. */
  context: ContextSettings;
  /** Where every message and tool result is persisted as it happens (synced at turn boundaries). */
  journal?: SessionJournal;
  /** Keeps full tool results for `read_tool_result`. */
  results?: ToolResultStore;
  /** Continue a persisted conversation instead of starting a new one. */
  resume?: RestoredAgent;
  /**
   * With `resume`: a user message appended to the restored conversation (and
   * journaled) before the next model call, after any interrupted turn is
   * answered: the feedback of `runner continue`.
   */
  followUp?: string;
  /**
   * Redacts secrets from text bound for records (journal, events). Applied
   * before the runner cuts text, so a cut never leaves part of a secret behind.
   */
  redact?: (text: string) => string;
  /** Called at each turn boundary, after the journal is synced (e.g. to sync the event log). */
  onTurnEnd?: () => void;
  /**
   * Background work (subagents, `run_shell` with background): how tools start
   * it, and the notifications of ended tasks, delivered as user messages
   * before the next model call. A final answer while tasks still run waits
   * for them and lets the model see their results.
   */
  background?: {
    start: NonNullable<ToolContext["startBackground"]>;
    drain(): string[];
    running(): boolean;
    wait(): Promise<void>;
  };
  /** Policy, approval and hooks: asked before each validated call runs. */
  guard?: ToolGuard;
  /** Sees the conversation before each turn's tool calls run (e.g. for a fork of it). */
  onConversation?: (messages: readonly ChatMessage[]) => void;
  /** Held while this agent's tool calls run, so a background merge into its worktree never overlaps them. */
  toolGate?: { runExclusive<T>(callback: () => Promise<T>): Promise<T> };
  /** The cost of a call's usage, USD, or null when the model is not priced (then `model_call.finished` says `cost_usd: null`). */
  costOf?: (usage: Usage) => number | null;
  /**
   * The run's cost budget, shared by every agent of the run: asked before each
   * model call (turns and compactions); once `spent()`, the agent makes no more
   * calls and ends with reason `budget_exceeded` (a call already in flight, its
   * own or another agent's, finishes; the tool calls of a finished call run).
   */
  budget?: { spent(): boolean };
  /**
   * Start from a copy of another agent's conversation (a fork: the prefix is
   * kept byte-identical so a prompt cache can hit), with `instruction` appended
   * as a user message; `systemPrompt` is then unused.
   */
  forkFrom?: ChatMessage[];
  /**
   * Judges a final answer (RunEmbedding.checkFinalAnswer): given its redacted
   * text, the problems or null. A rejected answer gets a correction turn (at
   * most {@link MAX_OUTPUT_CORRECTIONS}, counted across resumes by the
   * journal), then the agent ends `output_invalid`.
   */
  checkFinalAnswer?: (answer: string) => string[] | null;
  /** Waited on before each model call and each tool call that runs; told each model call's usage (a front end's rate limits). */
  gate?: RunGate;
}

/**
 * Why an agent's loop ended: it answered without tool calls (`final_answer`),
 * used its step limit (`max_steps`), the provider refused to answer
 * (`refusal`), or {@link MAX_CUT_REPLIES} replies in a row were cut at the
 * output-token limit (`output_limit`), or its final answer was rejected by
 * `checkFinalAnswer` after its correction turn (`output_invalid`).
 */
export type AgentEndReason = "final_answer" | "max_steps" | "refusal" | "output_limit" | "budget_exceeded" | "output_invalid";

export interface AgentOutcome {
  reason: AgentEndReason;
  finalMessage: string | null;
  /** Model calls made (including those before a resume). */
  steps: number;
  toolCalls: number;
  usage: Usage;
  messages: ChatMessage[];
}

/**
 * The think → act → observe loop: ask the model, run the tool calls it makes
 * (read-only ones concurrently, the others one at a time; each answered by
 * exactly one tool result, in call order), append the results, repeat until
 * the model answers without tool calls or `maxSteps` model calls have been
 * made. A reply cut at the output-token limit (finish reason `length`) with no
 * tool calls, or with a call whose arguments are not whole JSON, is neither
 * an answer nor run: the model is told (a `model_call.cut` event) and asked
 * again, and after {@link MAX_CUT_REPLIES} in a row the agent ends
 * (`output_limit`); a `refusal` ends it at once (`refusal`); once the run's budget is spent no call starts (`budget_exceeded`). Before every request the conversation is checked (orphan calls and
 * results repaired) and kept inside the context window (clearing, then
 * compaction). Throws ModelError when the model fails for good (reason
 * `context_window_exceeded` when nothing more can be shrunk), CancelledError
 * when the signal aborts, SandboxError when the sandbox breaks; tool failures
 * are results, never exceptions.
 */
export async function runAgentLoop(options: AgentLoopOptions): Promise<AgentOutcome> {
  const { agentId, events, signal, journal } = options;
  const turnEnd = () => {
    journal?.sync();
    options.onTurnEnd?.();
  };
  const state: LoopState = {
    options,
    definitions: options.tools.definitions(),
    estimator: new TokenEstimator(),
    recorded: new Map(options.resume?.results ?? []),
    compactions: options.resume?.compactions ?? 0,
    usage: options.resume?.usage ?? emptyUsage(),
    toolCalls: options.resume?.toolCalls ?? 0,
  };
  let messages: ChatMessage[];
  let step: number;
  if (options.resume) {
    messages = [...options.resume.messages];
    step = options.resume.nextStep;
    const unfinished = options.resume.unfinishedTurn;
    if (unfinished) {
      // Finished calls answer from the record; the rest were interrupted and are not run again.
      const results = await runTurnCalls(unfinished.calls, unfinished.step, state, { replayOnly: true });
      unfinished.calls.forEach((call, index) => messages.push({ role: "tool", tool_call_id: call.id, content: results[index]! }));
      turnEnd();
    }
    if (options.followUp !== undefined) {
      const message: ChatMessage = { role: "user", content: options.followUp };
      messages.push(message);
      journal?.append({ type: "message", agent_id: agentId, message });
      turnEnd();
    }
  } else {
    messages = options.forkFrom
      ? [...options.forkFrom, { role: "user", content: options.instruction }]
      : [
          { role: "system", content: options.systemPrompt },
          { role: "user", content: options.instruction },
        ];
    for (const message of messages) journal?.append({ type: "message", agent_id: agentId, message });
    step = 0;
  }
  const deliver = (notes: string[]) => {
    for (const note of notes) {
      const message: ChatMessage = { role: "user", content: note };
      messages.push(message);
      journal?.append({ type: "message", agent_id: agentId, message });
    }
    return notes.length > 0;
  };
  let previousRequest: ChatMessage[] | null = null;
  let cutInARow = 0;
  const end = (reason: AgentEndReason, steps: number, finalMessage: string | null): AgentOutcome => {
    events.emit({ type: "agent.finished", data: { agent_id: agentId, reason, steps, final_message: finalMessage } });
    return { reason, finalMessage, steps, toolCalls: state.toolCalls, usage: state.usage, messages };
  };
  const outOfBudget = (): AgentOutcome => end("budget_exceeded", step, null);
  let corrections = options.resume?.outputCorrections ?? 0;
  /** An answer without tool calls: accepted (the end), or rejected with a correction turn delivered (null: go on), or rejected for good. */
  const answered = (content: string | null, steps: number): AgentOutcome | null => {
    const problems = options.checkFinalAnswer?.((options.redact ?? ((text: string) => text))(content ?? "")) ?? null;
    if (problems === null) return end("final_answer", steps, content);
    const correcting = corrections < MAX_OUTPUT_CORRECTIONS;
    events.emit({ type: "agent.output_rejected", data: { agent_id: agentId, step: steps - 1, problems, correction: correcting } });
    if (!correcting) return end("output_invalid", steps, content);
    corrections += 1;
    const message: ChatMessage = { role: "user", content: outputCorrectionNote(problems) };
    messages.push(message);
    // Marked, so a resumed run counts it even after compaction has summarised the message away.
    journal?.append({ type: "message", agent_id: agentId, message, output_correction: true });
    turnEnd();
    return null;
  };
  // A run resumed right after its agent answered (it stopped before the answer was judged): judged now, with no model call.
  const last = messages.at(-1);
  if (options.checkFinalAnswer && options.resume && !options.resume.unfinishedTurn && last?.role === "assistant" && !last.tool_calls?.length) {
    const judged = answered(last.content, step);
    if (judged) return judged;
  }
  for (; step < options.maxSteps; step += 1) {
    if (signal.aborted) throw new CancelledError();
    if (options.background) deliver(options.background.drain());
    // Checked before the compaction a fit may make, and again after it: no call starts once the budget is spent.
    if (options.budget?.spent()) return outOfBudget();
    messages = repair(messages, step, state);
    messages = await fitContext(messages, step, state);
    if (options.budget?.spent()) return outOfBudget();
    const rawTokens = state.estimator.raw(messages, state.definitions);
    const estimatedTokens = state.estimator.estimate(messages, state.definitions);
    events.emit({
      type: "model_call.started",
      data: {
        agent_id: agentId,
        step,
        messages: messages.length,
        estimated_tokens: estimatedTokens,
        prefix_stable: previousRequest === null ? null : extendsPrefix(previousRequest, messages),
      },
    });
    await options.gate?.beforeModelCall(signal);
    const started = Date.now();
    const response = await options.model.complete({
      messages,
      tools: state.definitions,
      agentId,
      ...(options.description === undefined ? {} : { agentDescription: options.description }),
      callIndex: step,
      signal,
      onRetry: (retry) => events.emit({ type: "model_call.retrying", data: retryEvent(agentId, step, "turn", retry) }),
    });
    previousRequest = [...messages];
    state.estimator.calibrate(rawTokens, response.usage.prompt_tokens);
    state.usage = addUsage(state.usage, response.usage);
    options.gate?.afterModelCall(response.usage);
    const cut =
      response.finishReason === "length" && (response.toolCalls.length === 0 || response.toolCalls.some((call) => !wholeJson(call.function.arguments)));
    // Calls of a refused or cut reply are never run, so the message keeps none (no call without its result).
    const calls = cut || response.finishReason === "refusal" ? [] : uniqueIds(response.toolCalls, step);
    const assistant: ChatMessage = {
      role: "assistant",
      content: response.content,
      ...(calls.length ? { tool_calls: calls } : {}),
      ...(response.reasoning ? { reasoning: response.reasoning } : {}),
    };
    messages.push(assistant);
    journal?.append({ type: "message", agent_id: agentId, message: assistant, step, usage: response.usage });
    events.emit({
      type: "model_call.finished",
      data: {
        agent_id: agentId,
        step,
        duration_ms: Date.now() - started,
        usage: response.usage,
        cost_usd: options.costOf?.(response.usage) ?? null,
        tool_calls: calls.length,
        content: response.content,
      },
    });
    if (response.finishReason === "refusal") {
      turnEnd();
      return end("refusal", step + 1, response.content);
    }
    cutInARow = cut ? cutInARow + 1 : 0;
    if (cut) {
      events.emit({
        type: "model_call.cut",
        data: { agent_id: agentId, step, dropped_tool_calls: response.toolCalls.length, in_a_row: cutInARow, limit: MAX_CUT_REPLIES },
      });
      if (cutInARow >= MAX_CUT_REPLIES) {
        turnEnd();
        return end("output_limit", step + 1, response.content);
      }
      deliver([CUT_REPLY_NOTE]);
      turnEnd();
      continue;
    }
    if (calls.length === 0) {
      turnEnd();
      // Background tasks still running or just ended: the model sees their results before the run ends.
      if (options.background?.running()) await options.background.wait();
      if (options.background && deliver(options.background.drain())) {
        turnEnd();
        continue;
      }
      const judged = answered(response.content, step + 1);
      if (judged) return judged;
      continue;
    }
    options.onConversation?.(messages);
    const turn = () => runTurnCalls(calls, step, state, { replayOnly: false });
    const results = options.toolGate ? await options.toolGate.runExclusive(turn) : await turn();
    calls.forEach((call, index) => messages.push({ role: "tool", tool_call_id: call.id, content: results[index]! }));
    turnEnd();
    if (signal.aborted) throw new CancelledError();
  }
  return end("max_steps", options.maxSteps, null);
}

/** Whether a tool call's arguments are whole JSON (a reply cut mid-call leaves them unfinished). */
function wholeJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

interface LoopState {
  options: AgentLoopOptions;
  definitions: ToolDefinition[];
  estimator: TokenEstimator;
  /** Finished tool calls by idempotency key. */
  recorded: Map<string, { content: string; isError: boolean }>;
  compactions: number;
  usage: Usage;
  toolCalls: number;
}

/** Repairs broken call/result pairing before a request (resumed sessions, provider quirks) and records the repair. */
function repair(messages: ChatMessage[], step: number, state: LoopState): ChatMessage[] {
  const { agentId, events, journal } = state.options;
  const repaired = repairToolPairing(messages);
  if (repaired.repairs.length === 0) return messages;
  events.emit({ type: "context.repaired", data: { agent_id: agentId, step, repairs: repaired.repairs } });
  journal?.append({ type: "context", agent_id: agentId, reason: "repaired", next_step: step, messages: repaired.messages });
  return repaired.messages;
}

/**
 * Keeps the next request inside the window: above `clearAt` older tool
 * results are cleared; above `compactAt` the older turns are summarised by
 * the model; if the request would still not fit, results are cleared down to
 * none, and if even that fails the run ends (`context_window_exceeded`).
 */
async function fitContext(messages: ChatMessage[], step: number, state: LoopState): Promise<ChatMessage[]> {
  const { agentId, events, journal, context } = state.options;
  const estimate = (current: readonly ChatMessage[]) => state.estimator.estimate(current, state.definitions);
  const clear = (current: ChatMessage[], keep: number): ChatMessage[] => {
    const before = estimate(current);
    const cleared = clearOldToolResults(current, keep);
    if (cleared.cleared === 0) return current;
    events.emit({
      type: "context.cleared",
      data: { agent_id: agentId, step, cleared: cleared.cleared, kept: keep, tokens_before: before, tokens_after: estimate(cleared.messages) },
    });
    journal?.append({ type: "cleared", agent_id: agentId, indexes: cleared.indexes });
    return cleared.messages;
  };
  let current = messages;
  if (estimate(current) > context.contextWindow * context.clearAt) {
    // Clear down to a low-water mark, not just under the threshold: otherwise every
    // later step clears one more result and the prompt prefix never stays stable.
    const lowWater = context.contextWindow * context.clearAt * CLEAR_LOW_WATER;
    let keep = context.keepToolResults;
    while (keep > 1 && estimate(clearOldToolResults(current, keep).messages) > lowWater) keep -= 1;
    current = clear(current, keep);
  }
  if (estimate(current) > context.contextWindow * context.compactAt) {
    const compacted = await compact(current, step, state);
    if (compacted) {
      current = compacted;
      journal?.append({ type: "context", agent_id: agentId, reason: "compacted", next_step: step, messages: current });
    }
  }
  const limit = requestLimit(context);
  for (let keep = context.keepToolResults - 1; keep >= 0 && estimate(current) > limit; keep -= 1) current = clear(current, keep);
  const size = estimate(current);
  if (size > limit) {
    throw new ModelError(
      `the conversation needs about ${size} tokens but model.context_window is ${context.contextWindow} (${limit} usable after reserving room for the answer) even after clearing and compaction; raise model.context_window if the model allows it`,
      "context_window_exceeded",
    );
  }
  return current;
}

/** Largest request, tokens: the window minus room for the model's answer (1/8 of the window, at most 8192). */
export function requestLimit(context: ContextSettings): number {
  return context.contextWindow - Math.min(8192, Math.floor(context.contextWindow / 8));
}

/**
 * Summarises the turns before the latest `keepTurns` with a model call
 * (purpose `compaction`) and returns [system, instruction, summary, latest
 * turns]; skill results of the summarised part are carried over verbatim.
 * Returns null (after a `context.compaction_failed` event) when there is
 * nothing to summarise or the call fails: the conversation is kept as it is.
 */
async function compact(messages: ChatMessage[], step: number, state: LoopState): Promise<ChatMessage[] | null> {
  const { agentId, events, context, model, signal } = state.options;
  const tokensBefore = state.estimator.estimate(messages, state.definitions);
  const cut = compactionCut(messages, HEAD_MESSAGES, context.keepTurns);
  if (cut === null) {
    events.emit({ type: "context.compaction_failed", data: { agent_id: agentId, step, error: "nothing older than the latest turn to summarise" } });
    return null;
  }
  const head = messages.slice(0, HEAD_MESSAGES);
  let older = messages.slice(HEAD_MESSAGES, cut);
  const instruction: ChatMessage = { role: "user", content: COMPACTION_INSTRUCTION };
  // The summary request itself must fit: drop old results' text if it would not.
  if (state.estimator.estimate([...head, ...older, instruction], []) > requestLimit(context)) older = clearOldToolResults(older, 0).messages;
  const started = Date.now();
  let summary: string;
  try {
    const response = await model.complete({
      messages: [...head, ...older, instruction],
      tools: [],
      agentId,
      callIndex: state.compactions,
      purpose: "compaction",
      signal,
      onRetry: (retry) => events.emit({ type: "model_call.retrying", data: retryEvent(agentId, step, "compaction", retry) }),
    });
    state.usage = addUsage(state.usage, response.usage);
    state.options.gate?.afterModelCall(response.usage);
    events.emit({
      type: "context.summary_usage",
      data: { agent_id: agentId, usage: response.usage, cost_usd: state.options.costOf?.(response.usage) ?? null },
    });
    summary = response.content?.trim() ?? "";
    if (!summary) throw new Error("the model answered the summary request with no text");
  } catch (error) {
    if (error instanceof CancelledError || signal.aborted) throw new CancelledError();
    events.emit({ type: "context.compaction_failed", data: { agent_id: agentId, step, error: errorMessage(error) } });
    return null;
  }
  state.compactions += 1;
  const skills = messages
    .slice(HEAD_MESSAGES, cut)
    .flatMap((message) => (message.role === "tool" && message.content.startsWith(SKILL_RESULT_PREFIX) ? [message.content] : []));
  const summaryMessage: ChatMessage = {
    role: "user",
    content: [SUMMARY_PREFIX, summary, ...(skills.length ? ["", "Skills loaded before the summary, verbatim:", ...skills] : [])].join("\n"),
  };
  const compacted = [...head, summaryMessage, ...messages.slice(cut)];
  events.emit({
    type: "context.compacted",
    data: {
      agent_id: agentId,
      step,
      summarised_messages: cut - HEAD_MESSAGES,
      kept_messages: messages.length - cut,
      tokens_before: tokensBefore,
      tokens_after: state.estimator.estimate(compacted, state.definitions),
      duration_ms: Date.now() - started,
    },
  });
  return compacted;
}

/**
 * Runs a turn's calls: consecutive read-only calls together, every other call
 * alone, in call order. Results come back in call order. With `replayOnly`
 * (a resumed turn) nothing runs: recorded results are returned and the rest
 * get an "interrupted" result.
 */
async function runTurnCalls(calls: ToolCall[], step: number, state: LoopState, mode: { replayOnly: boolean }): Promise<string[]> {
  const results: string[] = [];
  let batch: ToolCall[] = [];
  const flush = async () => {
    results.push(...(await Promise.all(batch.map((call) => runToolCall(call, step, state, mode)))));
    batch = [];
  };
  for (const call of calls) {
    if (state.options.tools.runsConcurrently(call.function.name)) {
      batch.push(call);
      continue;
    }
    await flush();
    results.push(await runToolCall(call, step, state, mode));
  }
  await flush();
  return results;
}

async function runToolCall(call: ToolCall, step: number, state: LoopState, mode: { replayOnly: boolean }): Promise<string> {
  const { agentId, events, results: store, context } = state.options;
  const redact = state.options.redact ?? ((text: string) => text);
  const key = toolCallKey(agentId, step, call.id);
  const finished = state.recorded.get(key);
  if (finished) {
    events.emit({ type: "tool_call.replayed", data: { agent_id: agentId, step, tool_call_id: call.id, name: call.function.name, key } });
    return finished.content;
  }
  if (mode.replayOnly) {
    const content = interruptedResult("the run stopped while it was pending");
    finishCall(state, { key, step, call, content, isError: true });
    events.emit({ type: "tool_call.interrupted", data: { agent_id: agentId, step, tool_call_id: call.id, name: call.function.name } });
    return content;
  }
  await state.options.gate?.beforeToolCall({ name: call.function.name, toolCallId: call.id }, state.options.signal);
  // Set when the call goes ahead (after the guard and any approval question): a refused call never starts.
  let started: number | null = null;
  const onStarted = () => {
    started = Date.now();
    events.emit({
      type: "tool_call.started",
      // The full arguments are in the session; the event keeps a bounded copy.
      data: {
        agent_id: agentId,
        step,
        tool_call_id: call.id,
        name: call.function.name,
        arguments: capText(redact(call.function.arguments), EVENT_ARGUMENTS_CHARACTERS),
      },
    });
  };
  const asked = Date.now();
  const result = await state.options.tools.execute(call.function.name, call.function.arguments, {
    onStarted,
    sandbox: state.options.sandbox,
    signal: state.options.signal,
    toolCallId: call.id,
    agentId,
    defaultTimeoutMs: state.options.toolTimeoutMs,
    ...(state.options.guard ? { guard: state.options.guard } : {}),
    ...(state.options.background ? { startBackground: state.options.background.start } : {}),
  });
  // A call cut short by cancellation did not finish: it is not recorded, so a resume reports it as interrupted.
  if (state.options.signal.aborted) throw new CancelledError();
  const capCharacters = context.toolResultMaxTokens * 4;
  const exitCode = result.details?.exit_code;
  const failed = (result.isError ?? false) || (typeof exitCode === "number" && exitCode !== 0);
  const networkHint = failed ? (state.options.networkHint?.(result.content) ?? null) : null;
  let content = networkHint ? `${result.content}\n${OFFLINE_NOTE}` : result.content;
  const details = networkHint ? { ...result.details, network_hint: networkHint } : result.details;
  // What the records keep: redacted before any cut.
  let recorded = redact(content);
  let file: string | undefined;
  // Skill bodies are never cut (the skill loader caps them at their source).
  if (content.length > capCharacters && !content.startsWith(SKILL_RESULT_PREFIX)) {
    // The file is a record too: it gets the redacted text (redacted once, here).
    file = store?.saveFull(step, call.id, recorded);
    const where = file
      ? `the whole result (${content.length} characters) is kept: read it in pages with read_tool_result {"tool_call_id": ${JSON.stringify(call.id)}}`
      : `the result had ${content.length} characters`;
    content = `${capText(content, capCharacters)}\n[${where}]`;
    recorded = `${capText(recorded, capCharacters)}\n[${where}]`;
  }
  store?.remember(call.id, file ? { file } : { content });
  finishCall(state, { key, step, call, content: recorded, isError: result.isError ?? false, file });
  events.emit({
    type: "tool_call.finished",
    data: {
      agent_id: agentId,
      step,
      tool_call_id: call.id,
      name: call.function.name,
      is_error: result.isError ?? false,
      duration_ms: Date.now() - (started ?? asked),
      result_preview: recorded.slice(0, 500),
      ...(details ? { details } : {}),
    },
  });
  return content;
}

function finishCall(state: LoopState, done: { key: string; step: number; call: ToolCall; content: string; isError: boolean; file?: string }): void {
  state.recorded.set(done.key, { content: done.content, isError: done.isError });
  state.toolCalls += 1;
  state.options.journal?.append({
    type: "tool_result",
    agent_id: state.options.agentId,
    step: done.step,
    key: done.key,
    tool_call_id: done.call.id,
    content: done.content,
    is_error: done.isError,
    ...(done.file ? { full_output: done.file } : {}),
  });
}

function retryEvent(
  agentId: string,
  step: number,
  purpose: "turn" | "compaction",
  retry: { attempt: number; delayMs: number; reason: string; status?: number },
) {
  return {
    agent_id: agentId,
    step,
    purpose,
    attempt: retry.attempt,
    delay_ms: retry.delayMs,
    reason: retry.reason,
    ...(retry.status ? { status: retry.status } : {}),
  };
}

/**
 * Some providers repeat or omit tool-call ids; every result must answer a
 * distinct id, so duplicates and blanks get a fresh one.
 */
function uniqueIds(calls: ToolCall[], step: number): ToolCall[] {
  const seen = new Set<string>();
  return calls.map((call, index) => {
    let id = call.id;
    if (!id || seen.has(id)) id = `call_runner_${step}_${index}`;
    seen.add(id);
    return id === call.id ? call : { ...call, id };
  });
}
