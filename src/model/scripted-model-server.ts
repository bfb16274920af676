import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { ConfigError } from "../errors.js";
import type { ChatMessage } from "./messages.js";
import { CALL_INDEX_HEADER } from "./openai-model-client.js";

const scriptedToolCallSchema = z
  .strictObject({
    name: z.string().min(1),
    arguments: z.record(z.string(), z.unknown()).optional(),
    /** Sent verbatim (e.g. malformed JSON) instead of `arguments`. */
    arguments_raw: z.string().optional(),
  })
  .refine((call) => !(call.arguments !== undefined && call.arguments_raw !== undefined), {
    message: "give either arguments or arguments_raw, not both",
  });

const scriptedTurnSchema = z.strictObject({
  content: z.string().optional(),
  tool_calls: z.array(scriptedToolCallSchema).optional(),
  expect: z
    .strictObject({
      tool_result_matches: z.string().optional(),
      tool_result_not_matches: z.string().optional(),
    })
    .optional(),
});

export const scriptSchema = z.strictObject({
  turns: z.array(scriptedTurnSchema),
});

export type Script = z.infer<typeof scriptSchema>;
export type ScriptedTurn = z.infer<typeof scriptedTurnSchema>;

/** Loads and validates a script file; throws ConfigError listing every problem with its path. */
export function loadScript(file: string): Script {
  let raw: unknown;
  try {
    raw = parseYaml(readFileSync(file, "utf8"));
  } catch (error) {
    throw new ConfigError(`model.script ${file}: ${(error as Error).message}`);
  }
  const parsed = scriptSchema.safeParse(raw);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => `  - ${issue.path.join(".") || "(file)"}: ${issue.message}`);
    throw new ConfigError(`model.script ${file}: ${lines.length} problem(s):\n${lines.join("\n")}`);
  }
  for (const [index, turn] of parsed.data.turns.entries()) {
    for (const key of ["tool_result_matches", "tool_result_not_matches"] as const) {
      const source = turn.expect?.[key];
      if (source === undefined) continue;
      try {
        new RegExp(source);
      } catch (error) {
        throw new ConfigError(`model.script ${file}: turns.${index}.expect.${key}: not a valid RegExp (${(error as Error).message})`);
      }
    }
  }
  return parsed.data;
}

/** What the server answers when a request asks for a turn past the script's end. */
export const SCRIPT_FINISHED_CONTENT = "(scripted model: no more turns) Done.";

/**
 * An OpenAI-compatible `/v1/chat/completions` endpoint on 127.0.0.1 that
 * replays a script (DESIGN.md "Scripted model"). It keeps no state: the
 * request's `x-agent-runner-call-index` header picks the turn. An unmet
 * `expect` answers HTTP 400 whose message names the turn and shows the start
 * of the tool results it saw (the client does not retry 400).
 */
export class ScriptedModelServer {
  private server: Server | null = null;
  /** Every request body received, in order (for tests and debugging). */
  readonly requests: { callIndex: number; messages: ChatMessage[] }[] = [];

  constructor(private readonly script: Script) {}

  /** Starts listening on an ephemeral loopback port; resolves with the base URL (`http://127.0.0.1:<port>/v1`). */
  async start(): Promise<string> {
    const server = createServer((request, response) => {
      this.handle(request, response).catch((error: unknown) => {
        sendJson(response, 500, { error: { message: String(error), type: "server_error" } });
      });
    });
    this.server = server;
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    return `http://127.0.0.1:${port}/v1`;
  }

  async close(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    if (request.method !== "POST" || !/\/chat\/completions$/.test(request.url ?? "")) {
      sendJson(response, 404, { error: { message: `no route ${request.method} ${request.url}`, type: "not_found" } });
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { messages: ChatMessage[] };
    const header = request.headers[CALL_INDEX_HEADER];
    const callIndex = Number(Array.isArray(header) ? header[0] : header);
    if (!Number.isInteger(callIndex) || callIndex < 0) {
      sendJson(response, 400, { error: { message: `scripted model: missing or bad ${CALL_INDEX_HEADER} header`, type: "invalid_request_error" } });
      return;
    }
    this.requests.push({ callIndex, messages: body.messages });
    const turn = this.script.turns[callIndex];
    if (!turn) {
      sendJson(response, 200, completion(callIndex, { content: SCRIPT_FINISHED_CONTENT }, body.messages));
      return;
    }
    const failure = checkExpectation(turn, callIndex, body.messages);
    if (failure) {
      sendJson(response, 400, { error: { message: failure, type: "script_expectation_failed", code: "script_expectation_failed" } });
      return;
    }
    sendJson(response, 200, completion(callIndex, turn, body.messages));
  }
}

/** Text of the tool results that follow the last assistant message. */
export function trailingToolResults(messages: ChatMessage[]): string {
  const results: string[] = [];
  for (let index = messages.length - 1; index >= 0; index -= 1) {
    const message = messages[index]!;
    if (message.role === "assistant") break;
    if (message.role === "tool") results.unshift(message.content);
  }
  return results.join("\n");
}

function checkExpectation(turn: ScriptedTurn, callIndex: number, messages: ChatMessage[]): string | null {
  if (!turn.expect) return null;
  const seen = trailingToolResults(messages);
  const preview = JSON.stringify(seen.slice(0, 300));
  const { tool_result_matches: matches, tool_result_not_matches: notMatches } = turn.expect;
  if (matches !== undefined && !new RegExp(matches).test(seen)) {
    return `scripted model: turn ${callIndex} (turns[${callIndex}]) expect.tool_result_matches /${matches}/ not met; tool results began: ${preview}`;
  }
  if (notMatches !== undefined && new RegExp(notMatches).test(seen)) {
    return `scripted model: turn ${callIndex} (turns[${callIndex}]) expect.tool_result_not_matches /${notMatches}/ matched; tool results began: ${preview}`;
  }
  return null;
}

function completion(callIndex: number, turn: ScriptedTurn, messages: ChatMessage[]) {
  const toolCalls = (turn.tool_calls ?? []).map((call, index) => ({
    id: `call_${callIndex}_${index}`,
    type: "function" as const,
    function: {
      name: call.name,
      arguments: call.arguments_raw ?? JSON.stringify(call.arguments ?? {}),
    },
  }));
  const content = turn.content ?? null;
  // Rough token counts (4 characters a token) so usage sums are exercised.
  const promptCharacters = JSON.stringify(messages).length;
  const completionCharacters = (content?.length ?? 0) + JSON.stringify(toolCalls).length;
  return {
    id: `chatcmpl-scripted-${callIndex}`,
    object: "chat.completion",
    created: 0,
    model: "scripted",
    choices: [
      {
        index: 0,
        message: { role: "assistant", content, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) },
        finish_reason: toolCalls.length ? "tool_calls" : "stop",
      },
    ],
    usage: {
      prompt_tokens: Math.ceil(promptCharacters / 4),
      completion_tokens: Math.ceil(completionCharacters / 4),
      total_tokens: Math.ceil((promptCharacters + completionCharacters) / 4),
    },
  };
}

function sendJson(response: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  response.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  response.end(text);
}
