import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { readFileSync } from "node:fs";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { ConfigError } from "../errors.js";
import type { ChatMessage, Usage } from "./messages.js";
import { AGENT_ID_HEADER, ATTEMPT_HEADER, CALL_INDEX_HEADER, DESCRIPTION_HEADER, PURPOSE_HEADER } from "./request-headers.js";
import { PromptCache, scriptedTokens } from "./scripted-prompt-cache.js";
import {
  chatQuirksSchema,
  sendJson,
  waitUnlessGone,
  WireRequestError,
  type ScriptedAnswer,
  type ScriptedWire,
  type WireName,
  type WireRequest,
} from "./scripted-wire.js";
import { anthropicWire } from "./scripted-wire-anthropic.js";
import { openAIChatWire } from "./scripted-wire-openai-chat.js";
import { openAIResponsesWire } from "./scripted-wire-responses.js";

/** The wire formats the server answers, each on its own route. */
const WIRES: readonly ScriptedWire[] = [openAIChatWire, anthropicWire, openAIResponsesWire];

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

/**
 * One failed attempt, played instead of (or before) the normal answer. Exactly
 * one kind per fault:
 * - `{ status: 400-599, retry_after?: seconds, message?: text }`: that HTTP
 *   status with an OpenAI-shaped error body (`{ error: { message, type, code } }`)
 *   and, with `retry_after`, a `Retry-After: <seconds>` header;
 * - `{ delay_ms: n }`: waits n ms, then answers normally (makes a client with
 *   a shorter timeout give up); the wait ends early when the client
 *   disconnects or the server closes;
 * - `{ truncate: true }`: sends the normal answer's status, headers and full
 *   Content-Length but only the first half of the body (for a streamed
 *   answer, about half of its events), then destroys the socket;
 * - `{ stall_ms: n }`: starts the normal answer, and after about half the
 *   stream (a whole answer: after its headers) waits n ms before the rest (makes
 *   a client with a shorter idle timeout give up mid-reply); the wait ends
 *   early when the client disconnects or the server closes.
 */
const faultSchema = z
  .strictObject({
    status: z.number().int().min(400).max(599).optional(),
    retry_after: z.number().nonnegative().optional(),
    message: z.string().optional(),
    delay_ms: z.number().int().nonnegative().optional(),
    truncate: z.literal(true).optional(),
    stall_ms: z.number().int().nonnegative().optional(),
  })
  .superRefine((fault, context) => {
    const kinds = (["status", "delay_ms", "truncate", "stall_ms"] as const).filter((key) => fault[key] !== undefined);
    if (kinds.length !== 1) {
      context.addIssue({
        code: "custom",
        message:
          kinds.length === 0 ? "a fault needs one of status, delay_ms, truncate or stall_ms" : `a fault has exactly one kind; got ${kinds.join(" and ")}`,
      });
    }
    for (const key of ["retry_after", "message"] as const) {
      if (fault[key] !== undefined && fault.status === undefined) {
        context.addIssue({ code: "custom", path: [key], message: `${key} belongs to a status fault` });
      }
    }
  });

const scriptedTurnSchema = z.strictObject({
  content: z.string().optional(),
  tool_calls: z.array(scriptedToolCallSchema).optional(),
  /**
   * Thinking the model shows before its reply. The anthropic wire sends it as
   * a `thinking` block with a signature derived from the text, and answers
   * 400 (like the real API) when a later request sends this turn's
   * `tool_use` blocks without that block, unchanged, before them. Other wires ignore it.
   */
  thinking: z.string().min(1).optional(),
  /**
   * Anthropic wire only: the reply's `stop_reason` when it is not the natural
   * one (`tool_use` / `end_turn`): `max_tokens` (cut at the output limit),
   * `refusal`, or `pause_turn` (the text with `pause_turn`; the tool calls
   * when the client sends the paused turn back).
   */
  stop_reason: z.enum(["max_tokens", "refusal", "pause_turn"]).optional(),
  /** Fault i is played on attempt i of this turn's call; later attempts get the answer. */
  faults: z.array(faultSchema).optional(),
  /** The model's reasoning text, sent where the wire's provider sends it (openai-chat: `reasoning_content`, as DeepSeek and vLLM do). */
  reasoning: z.string().optional(),
  /**
   * The finish reason sent in the provider's own words (openai-chat: e.g.
   * `stop` with tool calls, as some servers do, or `content_filter`), instead
   * of the one the answer implies.
   */
  finish_reason: z.string().min(1).optional(),
  expect: z
    .strictObject({
      tool_result_matches: z.string().optional(),
      tool_result_not_matches: z.string().optional(),
    })
    .optional(),
});

/** Answer to compaction (summary) request n; without `content`, the default summary ({@link defaultSummary}). */
const scriptedCompactionSchema = z.strictObject({
  content: z.string().optional(),
  faults: z.array(faultSchema).optional(),
});

export const scriptSchema = z.strictObject({
  /** The main agent's turns. */
  turns: z.array(scriptedTurnSchema),
  /** Each subagent's turns, by the `description` of the `agent` call that started it. */
  subagents: z.record(z.string().min(1), z.strictObject({ turns: z.array(scriptedTurnSchema) })).optional(),
  /** Indexed by the call-index header of requests whose purpose is `compaction`. */
  compactions: z.array(scriptedCompactionSchema).optional(),
  /** How the server misbehaves ({@link chatQuirksSchema}, openai-chat wire only). */
  quirks: chatQuirksSchema.optional(),
});

export type Script = z.infer<typeof scriptSchema>;
export type ScriptedTurn = z.infer<typeof scriptedTurnSchema>;
export type ScriptedFault = z.infer<typeof faultSchema>;

/** A request as the server saw it (see {@link ScriptedModelServer.requests}). */
export interface ScriptedRequest {
  /** `x-agent-runner-call-index`: the turn, or for compactions the compaction number. */
  callIndex: number;
  /** `x-agent-runner-attempt` (0 when absent): which attempt of that call this is. */
  attempt: number;
  /** `x-agent-runner-purpose` (`turn` when absent). */
  purpose: "turn" | "compaction";
  /** The request body's `model`. */
  model: string;
  messages: ChatMessage[];
  /** The wire format the request came in. */
  wire: WireName;
  /** Whether it asked for a stream. */
  stream: boolean;
  /** The top-level fields of its body (`model`, `messages`, `stream_options`, ...), in order. */
  parameters: string[];
}

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
  const turnLists: [string, ScriptedTurn[]][] = [
    ["turns", parsed.data.turns],
    ...Object.entries(parsed.data.subagents ?? {}).map(([description, entry]): [string, ScriptedTurn[]] => [
      `subagents[${JSON.stringify(description)}].turns`,
      entry.turns,
    ]),
  ];
  for (const [where, turns] of turnLists) {
    for (const [index, turn] of turns.entries()) {
      for (const key of ["tool_result_matches", "tool_result_not_matches"] as const) {
        const source = turn.expect?.[key];
        if (source === undefined) continue;
        try {
          new RegExp(source);
        } catch (error) {
          throw new ConfigError(`model.script ${file}: ${where}.${index}.expect.${key}: not a valid RegExp (${(error as Error).message})`);
        }
      }
    }
  }
  return parsed.data;
}

/** What the server answers when a request asks for a turn past the script's end. */
export const SCRIPT_FINISHED_CONTENT = "(scripted model: no more turns) Done.";

/** Start of the text answered to a compaction request that has no `compactions` entry. */
export const DEFAULT_SUMMARY_PREFIX = "Summary (scripted):";

/**
 * A model endpoint on 127.0.0.1 that
 * replays a script (DESIGN.md "Scripted model"; README "Scripted model: faults
 * and compaction"), in each wire format of {@link WIRES} on its own route.
 * Request headers pick the answer; the only state is the prompt cache
 * ({@link PromptCache}), so cached tokens are reported the way the wire's
 * provider reports them.
 * - `x-agent-runner-call-index` picks the turn (or, for compactions, the
 *   `compactions` entry); `x-agent-runner-attempt` (0-based, default 0) picks
 *   the entry's fault, if it has one for that attempt;
 * - `x-agent-runner-purpose: compaction` marks a summary request: answered
 *   from `compactions` or with {@link defaultSummary}; never checks `expect`
 *   and never consumes `turns`.
 * An unmet `expect` answers HTTP 400 whose message names the turn and shows
 * the start of the tool results it saw (the client does not retry 400).
 */
export class ScriptedModelServer {
  private server: Server | null = null;
  /** Aborted by close(): ends pending `delay_ms` waits. */
  private closing = new AbortController();
  /** Every request received, in order (for tests and debugging). */
  readonly requests: ScriptedRequest[] = [];
  /** The provider's prompt cache, shared by every request of this server's life (all agents, like a provider's). */
  private readonly cache = new PromptCache();

  constructor(private readonly script: Script) {}

  /** Starts listening on an ephemeral loopback port; resolves with the base URL (`http://127.0.0.1:<port>/v1`). */
  async start(): Promise<string> {
    this.closing = new AbortController();
    const server = createServer((request, response) => {
      this.handle(request, response).catch((error: unknown) => {
        if (!response.headersSent && !response.destroyed) sendJson(response, 500, { error: { message: String(error), type: "server_error" } });
        else response.destroy();
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
    this.closing.abort();
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const path = (request.url ?? "").split("?")[0]!;
    const wire = request.method === "POST" ? WIRES.find((candidate) => candidate.route(path)) : undefined;
    if (!wire) {
      sendJson(response, 404, { error: { message: `no route ${request.method} ${request.url}`, type: "not_found" } });
      return;
    }
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    let body: WireRequest;
    let raw: unknown;
    try {
      raw = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      body = wire.readRequest(raw);
    } catch (error) {
      if (!(error instanceof WireRequestError) && !(error instanceof SyntaxError)) throw error;
      wire.sendError(response, 400, { message: `scripted model: ${error.message}`, type: "invalid_request_error", code: null });
      return;
    }
    const callIndex = integerHeader(request, CALL_INDEX_HEADER);
    const attempt = integerHeader(request, ATTEMPT_HEADER) ?? 0;
    const purpose = headerValue(request, PURPOSE_HEADER) ?? "turn";
    if (callIndex === undefined || callIndex === null || attempt === null || (purpose !== "turn" && purpose !== "compaction")) {
      const problem =
        callIndex === undefined || callIndex === null
          ? `missing or bad ${CALL_INDEX_HEADER} header`
          : attempt === null
            ? `bad ${ATTEMPT_HEADER} header`
            : `bad ${PURPOSE_HEADER} header ${JSON.stringify(purpose)} (turn or compaction)`;
      wire.sendError(response, 400, { message: `scripted model: ${problem}`, type: "invalid_request_error", code: null });
      return;
    }
    this.requests.push({
      callIndex,
      attempt,
      purpose,
      model: body.model,
      messages: body.messages,
      wire: wire.name,
      stream: body.stream,
      parameters: Object.keys(raw as object),
    });
    const rejected = (this.script.quirks?.reject_params ?? []).find((name) => Object.hasOwn(raw as object, name));
    if (rejected !== undefined) {
      // The words vLLM's and OpenAI's own 400s use for a parameter they do not take.
      wire.sendError(response, 400, { message: `Unrecognized request argument supplied: ${rejected}`, type: "invalid_request_error", code: null });
      return;
    }
    const expectationFailed = (message: string) =>
      wire.sendError(response, 400, { message, type: "script_expectation_failed", code: "script_expectation_failed" });

    let fault: ScriptedFault | undefined;
    let answer: () => { failure: string } | { invalid: string } | { answer: ScriptedAnswer };
    if (purpose === "compaction") {
      const entry = this.script.compactions?.[callIndex];
      fault = entry?.faults?.[attempt];
      const content = entry?.content ?? defaultSummary(body.messages);
      answer = () => ({ answer: { id: `compaction-${callIndex}`, content, toolCalls: [] } });
    } else {
      // Subagents are scripted by the description of the `agent` call that started them.
      const description = headerValue(request, DESCRIPTION_HEADER);
      const agentId = headerValue(request, AGENT_ID_HEADER) ?? "main";
      const subagent = agentId !== "main" && description !== undefined ? decodeURIComponent(description) : null;
      const entry = subagent === null ? { turns: this.script.turns } : this.script.subagents?.[subagent];
      if (!entry) {
        const known = Object.keys(this.script.subagents ?? {}).map((name) => JSON.stringify(name));
        expectationFailed(
          `scripted model: no subagents entry for the description ${JSON.stringify(subagent)} (agent ${agentId}); the script has ${known.length ? known.join(", ") : "none"}`,
        );
        return;
      }
      const where = subagent === null ? "turns" : `subagents[${JSON.stringify(subagent)}].turns`;
      const turn = entry.turns[callIndex];
      fault = turn?.faults?.[attempt];
      answer = () => {
        if (!turn) return { answer: { id: String(callIndex), content: SCRIPT_FINISHED_CONTENT, toolCalls: [] } };
        if (wire.name === "anthropic") {
          const problem = missingThinking(entry.turns, body.messages);
          if (problem) return { invalid: problem };
        }
        const failure = checkExpectation(turn, callIndex, body.messages, where);
        if (failure) return { failure };
        return { answer: scriptedAnswer(String(callIndex), callIndex, turn) };
      };
    }

    if (fault?.status !== undefined) {
      const message = fault.message ?? `scripted fault: HTTP ${fault.status}`;
      const headers: Record<string, string> = fault.retry_after === undefined ? {} : { "retry-after": String(fault.retry_after) };
      wire.sendError(response, fault.status, { message, type: fault.status >= 500 ? "server_error" : "scripted_fault", code: null }, headers);
      return;
    }
    const wait = fault?.delay_ms ?? (body.stream ? undefined : fault?.stall_ms);
    if (wait !== undefined) {
      await waitUnlessGone(wait, response, this.closing.signal);
      if (response.destroyed || response.writableEnded) return;
    }
    const outcome = answer();
    if ("failure" in outcome) {
      expectationFailed(outcome.failure);
      return;
    }
    if ("invalid" in outcome) {
      wire.sendError(response, 400, { message: outcome.invalid, type: "invalid_request_error", code: null });
      return;
    }
    const cache = this.cache.measure(body.blocks, wire.cacheMode);
    const completionCharacters = (outcome.answer.content?.length ?? 0) + JSON.stringify(outcome.answer.toolCalls).length;
    const usage: Usage = {
      prompt_tokens: cache.prompt,
      completion_tokens: scriptedTokens(completionCharacters),
      cached_tokens: cache.cached,
      cache_write_tokens: cache.cacheWrite,
    };
    const stallMs = fault?.stall_ms;
    await wire.sendAnswer(response, outcome.answer, body, usage, {
      truncate: fault?.truncate === true,
      ...(stallMs === undefined ? {} : { stall: () => waitUnlessGone(stallMs, response, this.closing.signal) }),
      quirks: this.script.quirks ?? {},
    });
  }
}

/**
 * What a compaction request gets when `compactions` has no entry for it:
 * `Summary (scripted): <n> messages. Files: <paths>.` where the paths are
 * every distinct `"path":"..."` found in the tool-call arguments of the
 * request's messages, in order of first appearance (`Files: (none)` if none).
 */
function defaultSummary(messages: ChatMessage[]): string {
  const paths: string[] = [];
  for (const message of messages) {
    if (message.role !== "assistant") continue;
    for (const call of message.tool_calls ?? []) {
      for (const match of call.function.arguments.matchAll(/"path"\s*:\s*"((?:[^"\\]|\\.)*)"/g)) {
        let path = match[1]!;
        try {
          path = JSON.parse(`"${path}"`) as string;
        } catch {
          // keep the raw text of a malformed escape
        }
        if (!paths.includes(path)) paths.push(path);
      }
    }
  }
  return `${DEFAULT_SUMMARY_PREFIX} ${messages.length} messages. Files: ${paths.length ? paths.join(", ") : "(none)"}.`;
}

function headerValue(request: IncomingMessage, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** The header as a non-negative integer; undefined when absent, null when malformed. */
function integerHeader(request: IncomingMessage, name: string): number | undefined | null {
  const text = headerValue(request, name);
  if (text === undefined) return undefined;
  const value = Number(text);
  return text.trim() !== "" && Number.isInteger(value) && value >= 0 ? value : null;
}

/** Text of the tool results that follow the last assistant message. */
function trailingToolResults(messages: ChatMessage[]): string {
  const results: string[] = [];
  for (let index = messages.length - 1; index >= 0; index -= 1) {
    const message = messages[index]!;
    if (message.role === "assistant") break;
    if (message.role === "tool") results.unshift(message.content);
  }
  return results.join("\n");
}

function checkExpectation(turn: ScriptedTurn, callIndex: number, messages: ChatMessage[], where: string): string | null {
  if (!turn.expect) return null;
  const seen = trailingToolResults(messages);
  const preview = JSON.stringify(seen.slice(0, 300));
  const { tool_result_matches: matches, tool_result_not_matches: notMatches } = turn.expect;
  if (matches !== undefined && !new RegExp(matches).test(seen)) {
    return `scripted model: step ${callIndex + 1} (${where}[${callIndex}]) expect.tool_result_matches /${matches}/ not met; tool results began: ${preview}`;
  }
  if (notMatches !== undefined && new RegExp(notMatches).test(seen)) {
    return `scripted model: step ${callIndex + 1} (${where}[${callIndex}]) expect.tool_result_not_matches /${notMatches}/ matched; tool results began: ${preview}`;
  }
  return null;
}

/**
 * Why a request must be refused like Anthropic refuses it when thinking is on:
 * an assistant turn whose script turn had `thinking` (known by its tool-call
 * ids, `call_<turn>_<n>`) came back with `tool_use` blocks but without that
 * thinking block, unchanged (the wire already checked each block's
 * signature). Null when every such turn carries its thinking.
 */
function missingThinking(turns: ScriptedTurn[], messages: ChatMessage[]): string | null {
  for (const [index, message] of messages.entries()) {
    if (message.role !== "assistant" || !message.tool_calls?.length) continue;
    const turnIndex = /^call_(\d+)_\d+$/.exec(message.tool_calls[0]!.id)?.[1];
    const thinking = turnIndex === undefined ? undefined : turns[Number(turnIndex)]?.thinking;
    if (thinking === undefined) continue;
    const sent = (message.reasoning?.items ?? []) as { type?: unknown; thinking?: unknown }[];
    if (!sent.some((item) => item.type === "thinking" && item.thinking === thinking)) {
      return `messages.${index}.content.0.type: Expected \`thinking\` or \`redacted_thinking\`, but found \`tool_use\`. When \`thinking\` is enabled, a final \`assistant\` message must start with a thinking block (scripted model: the thinking of step ${Number(turnIndex) + 1} (turns[${turnIndex}]) was not sent back unchanged)`;
    }
  }
  return null;
}

/** A scripted turn as an answer; tool call ids are `call_<turn>_<n>`. */
function scriptedAnswer(
  id: string,
  callIndex: number,
  turn: Pick<ScriptedTurn, "content" | "tool_calls" | "thinking" | "stop_reason" | "reasoning" | "finish_reason">,
): ScriptedAnswer {
  return {
    id,
    content: turn.content ?? null,
    ...(turn.thinking === undefined ? {} : { thinking: turn.thinking }),
    ...(turn.stop_reason === undefined ? {} : { stop: turn.stop_reason }),
    ...(turn.reasoning === undefined ? {} : { reasoning: turn.reasoning }),
    ...(turn.finish_reason === undefined ? {} : { finishReason: turn.finish_reason }),
    toolCalls: (turn.tool_calls ?? []).map((call, index) => ({
      id: `call_${callIndex}_${index}`,
      name: call.name,
      arguments: call.arguments_raw ?? JSON.stringify(call.arguments ?? {}),
    })),
  };
}
