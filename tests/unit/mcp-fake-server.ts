import { createInterface } from "node:readline";
import type { FakeProgram, FakeProgramIo } from "../../src/sandbox/fake/fake-sandbox-process.js";

/** A tool as a fake server lists it (MCP's Tool shape, loosely). */
export interface FakeMcpTool {
  name: string;
  description?: string;
  inputSchema?: Record<string, unknown>;
  annotations?: Record<string, unknown>;
  execution?: Record<string, unknown>;
}

/** What a tools/call does: answer a result, never answer, or end the process with stderr. */
export type FakeCallAnswer =
  { result: Record<string, unknown> } | { hang: true } | { crash: { stderr: string; exitCode: number } } | { error: { code: number; message: string } };

export interface FakeMcpServerScript {
  tools: FakeMcpTool[];
  /** Tools per `tools/list` page (default: all on one page). */
  pageSize?: number;
  call?: (name: string, args: Record<string, unknown>) => FakeCallAnswer;
  /** Written to stderr at start. */
  banner?: string;
  /** Exit right away with this code, before answering anything. */
  exitAtStart?: number;
  /** Keep running when stdin closes (a server that must be killed); default: exit 0 as MCP's stdio shutdown expects. */
  ignoreStdinEnd?: boolean;
}

/** What the fake server saw, for assertions. */
export interface FakeMcpServerLog {
  requests: { method: string; params?: unknown }[];
  cancelled: unknown[];
}

/**
 * An MCP server for FakeSandbox.spawn, speaking raw newline-delimited
 * JSON-RPC (no SDK on this side), so tests control every byte: pagination,
 * content blocks, hangs and crashes.
 */
export function fakeMcpServer(script: FakeMcpServerScript, log: FakeMcpServerLog = { requests: [], cancelled: [] }): FakeProgram {
  return (io: FakeProgramIo) => {
    if (script.banner) io.stderr.write(`${script.banner}\n`);
    if (script.exitAtStart !== undefined) {
      io.exit(script.exitAtStart);
      return;
    }
    const send = (message: Record<string, unknown>) => io.stdout.write(`${JSON.stringify({ jsonrpc: "2.0", ...message })}\n`);
    const lines = createInterface({ input: io.stdin });
    if (!script.ignoreStdinEnd) lines.on("close", () => io.exit(0));
    lines.on("line", (line) => {
      const message = JSON.parse(line) as { id?: number; method: string; params?: Record<string, unknown> };
      log.requests.push({ method: message.method, params: message.params });
      switch (message.method) {
        case "initialize":
          send({
            id: message.id,
            result: { protocolVersion: message.params!.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "fake-server", version: "1.2.3" } },
          });
          return;
        case "notifications/initialized":
          return;
        case "notifications/cancelled":
          log.cancelled.push(message.params!.requestId);
          return;
        case "tools/list": {
          const size = script.pageSize ?? script.tools.length;
          const start = message.params?.cursor ? Number(message.params.cursor) : 0;
          const page = script.tools.slice(start, start + size).map((tool) => ({ inputSchema: { type: "object" }, ...tool }));
          const next = start + size < script.tools.length ? String(start + size) : undefined;
          send({ id: message.id, result: { tools: page, ...(next ? { nextCursor: next } : {}) } });
          return;
        }
        case "tools/call": {
          const answer = script.call?.(message.params!.name as string, (message.params!.arguments ?? {}) as Record<string, unknown>) ?? {
            result: { content: [{ type: "text", text: "ok" }] },
          };
          if ("hang" in answer) return;
          if ("crash" in answer) {
            io.stderr.write(answer.crash.stderr);
            io.exit(answer.crash.exitCode);
            return;
          }
          if ("error" in answer) {
            send({ id: message.id, error: answer.error });
            return;
          }
          send({ id: message.id, result: answer.result });
          return;
        }
        default:
          if (message.id !== undefined) send({ id: message.id, error: { code: -32601, message: `Method not found: ${message.method}` } });
      }
    });
  };
}
