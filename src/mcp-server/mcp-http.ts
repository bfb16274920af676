import { randomUUID, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import type { RunnerMcpService } from "./runner-mcp-server.js";

/** The path the MCP endpoint answers on. */
const MCP_PATH = "/mcp";

/** Largest request body read, bytes (a tool call's arguments are small; run_start's instruction is the largest field). */
const MAX_BODY_BYTES = 4 * 1024 * 1024;

export interface McpHttpOptions {
  /** TCP port on 127.0.0.1; 0 picks a free one. */
  port: number;
  /** What every request must send as `Authorization: Bearer <token>`. */
  token: string;
}

/**
 * `runner mcp --http`: the service over MCP's streamable HTTP transport (the
 * SDK's StreamableHTTPServerTransport, one per client session) at
 * `http://127.0.0.1:<port>/mcp`, bound to loopback only. Every request must
 * carry `Authorization: Bearer <token>` (else 401, compared in constant
 * time), and a Host header naming the loopback address and port (the SDK's
 * DNS-rebinding check, else 403). Resolves once listening, with the URL and
 * `close()` (closes the sessions' transports and the listener; the service
 * is the caller's to close).
 */
export async function serveMcpHttp(service: RunnerMcpService, options: McpHttpOptions): Promise<{ url: string; close(): Promise<void> }> {
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const expected = Buffer.from(`Bearer ${options.token}`);
  let allowedHosts: string[] = [];

  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    const url = new URL(request.url ?? "/", "http://127.0.0.1");
    const given = Buffer.from(request.headers.authorization ?? "");
    if (given.length !== expected.length || !timingSafeEqual(given, expected))
      return reply(response, 401, "missing or wrong Authorization: Bearer <token> (printed when runner mcp --http started)");
    if (url.pathname !== MCP_PATH) return reply(response, 404, `the MCP endpoint is ${MCP_PATH}`);
    const sessionId = request.headers["mcp-session-id"];
    const body = request.method === "POST" ? await readJson(request) : undefined;
    if (body instanceof Error) return reply(response, 400, body.message);
    let transport = typeof sessionId === "string" ? transports.get(sessionId) : undefined;
    if (!transport) {
      if (sessionId !== undefined || request.method !== "POST" || !isInitializeRequest(body)) {
        return reply(
          response,
          sessionId === undefined ? 400 : 404,
          sessionId === undefined ? "start a session with an initialize request" : "no such session (it ended); initialize a new one",
        );
      }
      const created = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => void transports.set(id, created),
        enableDnsRebindingProtection: true,
        allowedHosts,
      });
      created.onclose = () => {
        if (created.sessionId) transports.delete(created.sessionId);
      };
      await service.createSession().connect(created);
      transport = created;
    }
    await transport.handleRequest(request, response, body);
  };

  const listener = createServer((request, response) => {
    handle(request, response).catch((error: unknown) => {
      if (!response.headersSent) reply(response, 500, `internal error: ${(error as Error)?.message ?? String(error)}`);
      else response.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    listener.once("error", reject);
    listener.listen(options.port, "127.0.0.1", () => resolve());
  });
  const { port } = listener.address() as AddressInfo;
  allowedHosts = [`127.0.0.1:${port}`, `localhost:${port}`];
  return {
    url: `http://127.0.0.1:${port}${MCP_PATH}`,
    async close() {
      await Promise.all([...transports.values()].map((transport) => transport.close()));
      listener.closeAllConnections();
      await new Promise<void>((resolve) => listener.close(() => resolve()));
    },
  };
}

function reply(response: ServerResponse, status: number, message: string): void {
  response.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message }, id: null }));
}

/** The request body as JSON; an Error for a body too large or not JSON. */
async function readJson(request: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) return new Error(`request body over ${MAX_BODY_BYTES} bytes`);
    chunks.push(chunk as Buffer);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    return new Error("request body is not JSON");
  }
}
