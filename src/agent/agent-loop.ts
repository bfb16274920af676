import { CancelledError } from "../errors.js";
import type { EventSink } from "../events/run-events.js";
import { addUsage, emptyUsage, type ChatMessage, type ToolCall, type Usage } from "../model/messages.js";
import type { ModelClient } from "../model/model-client.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import { capText, type ToolRegistry } from "../tools/tool-registry.js";

/** Longest tool-call arguments copied into a `tool_call.started` event, characters. */
const EVENT_ARGUMENTS_CHARACTERS = 4000;

export interface AgentLoopOptions {
  agentId: string;
  model: ModelClient;
  tools: ToolRegistry;
  sandbox: Sandbox;
  systemPrompt: string;
  instruction: string;
  /** Most model calls the agent may make. */
  maxSteps: number;
  /** Default run_shell timeout, ms. */
  toolTimeoutMs: number;
  events: EventSink;
  signal: AbortSignal;
  /** Called after every turn with the conversation so far (persisting the session). */
  onTurn?: (messages: readonly ChatMessage[]) => void;
}

export interface AgentOutcome {
  reason: "final_answer" | "max_steps";
  finalMessage: string | null;
  /** Model calls made. */
  steps: number;
  toolCalls: number;
  usage: Usage;
  messages: ChatMessage[];
}

/**
 * The think → act → observe loop: ask the model, run the tool calls it makes
 * (read-only ones concurrently, the others one at a time; each answered by
 * exactly one tool result, in call order),
 * append the results, repeat until the model answers without tool calls or
 * `maxSteps` model calls have been made. Throws ModelError when the model
 * fails for good, CancelledError when the signal aborts, SandboxError when the
 * sandbox breaks; tool failures are results, never exceptions.
 */
export async function runAgentLoop(options: AgentLoopOptions): Promise<AgentOutcome> {
  const { agentId, events, signal } = options;
  const messages: ChatMessage[] = [
    { role: "system", content: options.systemPrompt },
    { role: "user", content: options.instruction },
  ];
  const definitions = options.tools.definitions();
  let usage = emptyUsage();
  let toolCalls = 0;
  for (let step = 0; step < options.maxSteps; step += 1) {
    if (signal.aborted) throw new CancelledError();
    events.emit({ type: "model_call.started", data: { agent_id: agentId, step, messages: messages.length } });
    const started = Date.now();
    const response = await options.model.complete({ messages, tools: definitions, agentId, callIndex: step, signal });
    usage = addUsage(usage, response.usage);
    const calls = uniqueIds(response.toolCalls, step);
    messages.push({ role: "assistant", content: response.content, ...(calls.length ? { tool_calls: calls } : {}) });
    events.emit({
      type: "model_call.finished",
      data: { agent_id: agentId, step, duration_ms: Date.now() - started, usage: response.usage, tool_calls: calls.length, content: response.content },
    });
    if (calls.length === 0) {
      options.onTurn?.(messages);
      events.emit({ type: "agent.finished", data: { agent_id: agentId, reason: "final_answer", steps: step + 1, final_message: response.content } });
      return { reason: "final_answer", finalMessage: response.content, steps: step + 1, toolCalls, usage, messages };
    }
    const results = await runTurnCalls(calls, step, options);
    toolCalls += calls.length;
    calls.forEach((call, index) => messages.push({ role: "tool", tool_call_id: call.id, content: results[index]! }));
    options.onTurn?.(messages);
    if (signal.aborted) throw new CancelledError();
  }
  events.emit({ type: "agent.finished", data: { agent_id: agentId, reason: "max_steps", steps: options.maxSteps, final_message: null } });
  return { reason: "max_steps", finalMessage: null, steps: options.maxSteps, toolCalls, usage, messages };
}

/**
 * Runs a turn's calls: consecutive read-only calls together, every other call
 * alone, in call order. Results come back in call order.
 */
async function runTurnCalls(calls: ToolCall[], step: number, options: AgentLoopOptions): Promise<string[]> {
  const results: string[] = [];
  let batch: ToolCall[] = [];
  const flush = async () => {
    results.push(...(await Promise.all(batch.map((call) => runToolCall(call, step, options)))));
    batch = [];
  };
  for (const call of calls) {
    if (options.tools.isReadOnly(call.function.name)) {
      batch.push(call);
      continue;
    }
    await flush();
    results.push(await runToolCall(call, step, options));
  }
  await flush();
  return results;
}

async function runToolCall(call: ToolCall, step: number, options: AgentLoopOptions): Promise<string> {
  const { agentId, events } = options;
  events.emit({
    type: "tool_call.started",
    // The full arguments are in the session; the event keeps a bounded copy.
    data: { agent_id: agentId, step, tool_call_id: call.id, name: call.function.name, arguments: capText(call.function.arguments, EVENT_ARGUMENTS_CHARACTERS) },
  });
  const started = Date.now();
  const result = await options.tools.execute(call.function.name, call.function.arguments, {
    sandbox: options.sandbox,
    signal: options.signal,
    toolCallId: call.id,
    defaultTimeoutMs: options.toolTimeoutMs,
  });
  events.emit({
    type: "tool_call.finished",
    data: {
      agent_id: agentId,
      step,
      tool_call_id: call.id,
      name: call.function.name,
      is_error: result.isError ?? false,
      duration_ms: Date.now() - started,
      result_preview: result.content.slice(0, 500),
      ...(result.details ? { details: result.details } : {}),
    },
  });
  return result.content;
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
