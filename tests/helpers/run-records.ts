/**
 * Readers for what a finished run leaves in its directory, per agent, for the
 * policy, trust and MCP end-to-end tests: the conversation as the journal
 * recorded it (`session.jsonl`, appended as it happened) and the final one
 * (`session.json`). Plus small host-side probes (files by name, live pids).
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

/** A chat message as the journal records it. */
export interface RecordedMessage {
  role: string;
  content: string | null;
  tool_calls?: { id: string; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
}

/** The `session.jsonl` entries of one agent, in order (an unparsable line is skipped). */
function journalEntries(runDirectory: string, agentId: string): Record<string, unknown>[] {
  const path = join(runDirectory, "session.jsonl");
  if (!existsSync(path)) return [];
  const entries: Record<string, unknown>[] = [];
  for (const line of readFileSync(path, "utf8").split("\n")) {
    if (!line.trim()) continue;
    try {
      const entry = JSON.parse(line) as Record<string, unknown>;
      if (entry.agent_id === agentId) entries.push(entry);
    } catch {
      // a cut last line
    }
  }
  return entries;
}

/**
 * The system prompt the agent's first model request carried: the first
 * message the journal recorded for it (the journal is appended before the
 * request is sent, and the system prompt is byte-identical for the whole run).
 */
export function firstSystemPrompt(runDirectory: string, agentId: string): string {
  const first = journalEntries(runDirectory, agentId).find((entry) => entry.type === "message");
  const message = first?.message as RecordedMessage | undefined;
  if (message?.role !== "system" || typeof message.content !== "string") {
    throw new Error(`${runDirectory}/session.jsonl: the first message of agent ${agentId} is not a system prompt: ${JSON.stringify(first)}`);
  }
  return message.content;
}

/** The agent's final conversation (session.json, written when the run ends). */
function agentMessages(runDirectory: string, agentId: string): RecordedMessage[] {
  const session = JSON.parse(readFileSync(join(runDirectory, "session.json"), "utf8")) as { agents: Record<string, { messages: RecordedMessage[] }> };
  const agent = session.agents[agentId];
  if (!agent) throw new Error(`${runDirectory}/session.json has no agent ${agentId} (agents: ${Object.keys(session.agents).join(", ")})`);
  return agent.messages;
}

/** One tool call of an agent and the result the model got for it. */
export interface CallAndResult {
  name: string;
  arguments: Record<string, unknown>;
  result: string;
}

/** Every tool call the agent made, in order, each with the result it got (from session.json). */
export function callsAndResults(runDirectory: string, agentId: string): CallAndResult[] {
  const messages = agentMessages(runDirectory, agentId);
  const results = new Map(messages.filter((message) => message.role === "tool").map((message) => [message.tool_call_id, String(message.content)]));
  return messages.flatMap((message) =>
    (message.tool_calls ?? []).map((call) => ({
      name: call.function.name,
      arguments: JSON.parse(call.function.arguments || "{}") as Record<string, unknown>,
      result: results.get(call.id) ?? "(no result)",
    })),
  );
}

/** Paths (below `root`, recursively, symlinks not followed) of entries whose name matches `pattern`. */
export function filesNamed(root: string, pattern: RegExp): string[] {
  const found: string[] = [];
  const walk = (directory: string) => {
    let entries;
    try {
      entries = readdirSync(directory, { withFileTypes: true });
    } catch {
      return;
    }
    for (const entry of entries) {
      const path = join(directory, entry.name);
      if (pattern.test(entry.name)) found.push(path);
      if (entry.isDirectory()) walk(path);
    }
  };
  walk(root);
  return found;
}

/**
 * Whether a host process with this pid is alive: it exists and is not a
 * zombie (a killed process whose parent died waits for PID 1 to reap it).
 */
export function processAlive(pid: number): boolean {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return false;
  }
  // The state follows the command name, which may hold spaces and parentheses.
  const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
  return state !== "Z" && state !== "X";
}
