import { existsSync, readFileSync } from "node:fs";
import { AppendOnlyFile } from "../events/append-only-file.js";
import { addUsage, emptyUsage, type ChatMessage, type ToolCall, type Usage } from "../model/messages.js";
import { clearToolResultsAt } from "./context-window.js";

/**
 * One line of `session.jsonl`, the append-only record of every agent's
 * conversation. A conversation is rebuilt by replaying its lines:
 * `message` appends, `tool_result` answers a call of the latest assistant
 * message (placed in call order), `context` replaces the whole conversation
 * (clearing, compaction, repair). Shapes are a file format: add fields, never
 * change their meaning.
 */
export type SessionEntry =
  /** `output_correction`: the user message is a correction turn for a rejected final answer (agent-loop.ts `checkFinalAnswer`). */
  | { type: "message"; agent_id: string; message: ChatMessage; step?: number; usage?: Usage; output_correction?: true }
  | {
      type: "tool_result";
      agent_id: string;
      step: number;
      key: string;
      tool_call_id: string;
      /** What the model got (capped). */
      content: string;
      is_error: boolean;
      /** The whole result, when capped: a path relative to the run directory. */
      full_output?: string;
    }
  | { type: "context"; agent_id: string; reason: "compacted" | "repaired"; next_step: number; messages: ChatMessage[] }
  /** Clearing, recorded as the positions of the cleared results (the placeholder text is rebuilt, see clearToolResultsAt). */
  | { type: "cleared"; agent_id: string; indexes: number[] };

/** Idempotency key of a tool call: one per agent, model call and call id. A finished key is never executed again. */
export function toolCallKey(agentId: string, step: number, callId: string): string {
  return `${agentId}/${step}/${callId}`;
}

/**
 * Appends session entries to a JSONL file, each with one write() so a crash
 * never leaves half an entry in the middle; `sync()` (at turn boundaries)
 * makes them durable. `redact` is applied to every entry before it is written.
 */
export class SessionJournal {
  private readonly file: AppendOnlyFile;

  constructor(
    readonly path: string,
    private readonly redact: <T>(value: T) => T = (value) => value,
  ) {
    this.file = new AppendOnlyFile(path);
  }

  append(entry: SessionEntry): void {
    this.file.appendLine(JSON.stringify(this.redact(entry)));
  }

  sync(): void {
    this.file.sync();
  }

  close(): void {
    this.file.close();
  }
}

/** An agent's conversation as rebuilt from the journal. */
export interface RestoredAgent {
  /** The conversation, without results for the unfinished turn below. */
  messages: ChatMessage[];
  /** Model calls made so far: the next call's index. */
  nextStep: number;
  /** The last assistant message's calls when not all of them were answered when the journal ended. */
  unfinishedTurn: { step: number; calls: ToolCall[] } | null;
  /** Recorded tool results by idempotency key. */
  results: Map<string, { content: string; isError: boolean; callId: string }>;
  usage: Usage;
  toolCalls: number;
  /** Compactions so far (the next summary request's call index). */
  compactions: number;
  /** Where each tool call's whole result is kept (relative to the run directory), by call id. */
  fullOutputs: Map<string, string>;
  /** Correction turns given for rejected final answers so far. */
  outputCorrections: number;
}

/**
 * Rebuilds every agent's conversation from `session.jsonl`. A last line cut
 * by a crash is ignored. Returns an empty map when the file does not exist.
 */
export function restoreSession(path: string): Map<string, RestoredAgent> {
  if (!existsSync(path)) return new Map();
  const agents = new Map<string, RestoredAgent>();
  const open = new Map<string, { step: number; calls: ToolCall[] }>();
  const agentFor = (id: string) => {
    let agent = agents.get(id);
    if (!agent) {
      agent = {
        messages: [],
        nextStep: 0,
        unfinishedTurn: null,
        results: new Map(),
        usage: emptyUsage(),
        toolCalls: 0,
        compactions: 0,
        fullOutputs: new Map(),
        outputCorrections: 0,
      };
      agents.set(id, agent);
    }
    return agent;
  };
  // A turn's results go in call order, whatever order they finished in.
  const closeTurn = (id: string, agent: RestoredAgent) => {
    const turn = open.get(id);
    if (!turn) return;
    for (const call of turn.calls) {
      const result = agent.results.get(toolCallKey(id, turn.step, call.id));
      if (result) agent.messages.push({ role: "tool", tool_call_id: call.id, content: result.content });
    }
    open.delete(id);
  };
  for (const line of readFileSync(path, "utf8").split("\n")) {
    if (!line.trim()) continue;
    let entry: SessionEntry;
    try {
      entry = JSON.parse(line) as SessionEntry;
    } catch {
      continue; // a line cut by a crash
    }
    const id = entry.agent_id;
    const agent = agentFor(id);
    switch (entry.type) {
      case "message":
        closeTurn(id, agent);
        agent.messages.push(entry.message);
        if (entry.step !== undefined) agent.nextStep = entry.step + 1;
        if (entry.usage) agent.usage = addUsage(agent.usage, entry.usage);
        if (entry.output_correction) agent.outputCorrections += 1;
        if (entry.message.role === "assistant" && entry.message.tool_calls?.length && entry.step !== undefined) {
          open.set(id, { step: entry.step, calls: entry.message.tool_calls });
        }
        break;
      case "tool_result":
        agent.results.set(entry.key, { content: entry.content, isError: entry.is_error, callId: entry.tool_call_id });
        agent.toolCalls += 1;
        if (entry.full_output) agent.fullOutputs.set(entry.tool_call_id, entry.full_output);
        break;
      case "cleared":
        closeTurn(id, agent);
        agent.messages = clearToolResultsAt(agent.messages, entry.indexes).messages;
        break;
      case "context":
        open.delete(id);
        agent.messages = [...entry.messages];
        agent.nextStep = entry.next_step;
        if (entry.reason === "compacted") agent.compactions += 1;
        break;
    }
  }
  for (const [id, turn] of open) {
    const agent = agents.get(id)!;
    if (turn.calls.every((call) => agent.results.has(toolCallKey(id, turn.step, call.id)))) closeTurn(id, agent);
    else agent.unfinishedTurn = turn;
  }
  return agents;
}
