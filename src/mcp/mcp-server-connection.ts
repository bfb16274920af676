import { readFileSync } from "node:fs";
import type { Readable } from "node:stream";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { CallToolResultSchema, ErrorCode, McpError, type Tool as McpTool } from "@modelcontextprotocol/sdk/types.js";
import { errorMessage } from "../errors.js";
import type { Sandbox, SandboxProcessExit } from "../sandbox/sandbox.js";
import { toolError, type ToolResult } from "../tools/define-tool.js";
import type { McpTransportKind } from "./mcp-events.js";
import { DEFAULT_MCP_TIMEOUT_MS, isStdioServer, type McpServerConfig } from "./mcp-servers-schema.js";
import { mcpToolResult } from "./mcp-tool-result.js";
import { SandboxProcessTransport } from "./sandbox-process-transport.js";

/** Pages of `tools/list` followed at most (a server whose cursor never ends). */
const MAX_TOOL_PAGES = 100;
/** Server stderr kept for error messages, characters. */
const STDERR_KEPT = 8192;
/** How long a failed call waits for the exit status of a server that just went away, ms. */
const EXIT_STATUS_WAIT_MS = 3_000;

export type McpServerState = "starting" | "connected" | "exited" | "closed";

/** One server as `status()` reports it. */
export interface McpServerStatus {
  name: string;
  transport: McpTransportKind;
  state: McpServerState;
  /** `name version` the server reported; null before initialize. */
  serverInfo: string | null;
  /** Tool names as the model sees them. */
  tools: string[];
  skippedTools: { name: string; reason: string }[];
  /** How the server process ended (stdio servers), once it has. */
  exit: SandboxProcessExit | null;
  /** The last lines the server wrote to stderr. */
  stderrTail: string;
  calls: number;
  failedCalls: number;
}

interface ConnectionOptions {
  sandbox: Sandbox;
  /** Working directory of a trusted (host) stdio server. */
  hostCwd: string;
  /** The server ended by itself (or was killed) after it had connected. */
  onExited?: (connection: McpServerConnection) => void;
}

/**
 * The client side of one MCP server: starts it (a process in the sandbox, a
 * process on the host for `trusted`, or an HTTP session), initializes, lists
 * its tools and calls them. A call never throws: failures, time-outs and a
 * server that has gone away come back as `Error:` results.
 */
export class McpServerConnection {
  readonly transport: McpTransportKind;
  /** What the server listed (all pages), in its order. */
  tools: McpTool[] = [];
  /** Set by the owner: the names the model sees, and tools it does not. */
  exposedTools: string[] = [];
  skippedTools: { name: string; reason: string }[] = [];
  private client: Client | null = null;
  private openTransport: Transport | null = null;
  private state: McpServerState = "starting";
  private closing = false;
  private exit: SandboxProcessExit | null = null;
  private stderr = "";
  private serverInfo: string | null = null;
  private calls = 0;
  private failedCalls = 0;
  private resolveEnded!: () => void;
  private readonly ended = new Promise<void>((resolve) => {
    this.resolveEnded = resolve;
  });
  /** Resolves when the server's stderr has been read to its end (at once for HTTP). */
  private stderrEnded: Promise<void> = Promise.resolve();

  constructor(
    readonly name: string,
    readonly config: McpServerConfig,
    private readonly options: ConnectionOptions,
  ) {
    this.transport = isStdioServer(config) ? (config.trusted ? "host" : "sandbox") : "http";
  }

  /** Limit for starting, listing and each call, ms. */
  get timeoutMs(): number {
    return this.config.timeout_ms ?? DEFAULT_MCP_TIMEOUT_MS;
  }

  /**
   * Starts the server, runs `initialize` and lists its tools (following
   * `nextCursor`). Throws an Error whose message includes how the server
   * ended and its last stderr; call close() afterwards either way.
   */
  async connect(signal?: AbortSignal): Promise<void> {
    const started = Date.now();
    try {
      const transport = await this.createTransport();
      this.openTransport = transport;
      const client = new Client({ name: "agent-runner", version: runnerVersion() }, { capabilities: {} });
      this.client = client;
      client.onclose = () => this.onTransportClosed();
      await client.connect(transport, { timeout: this.timeoutMs, signal });
      const info = client.getServerVersion();
      this.serverInfo = info ? `${info.name} ${info.version}` : "unknown";
      this.tools = client.getServerCapabilities()?.tools ? await this.listTools(client, signal, started) : [];
    } catch (error) {
      if (signal?.aborted) throw error;
      // A server that died at start: its exit status and last words make the message.
      if (this.transport !== "http") await this.waitForEnd();
      const what = this.state === "exited" && this.transport !== "http" ? `it exited while starting (${this.describeExit()})` : errorMessage(error);
      const stderr = this.lastStderr();
      throw new Error(`${what}${stderr ? `; last stderr: ${stderr}` : ""}`, { cause: error });
    }
    if (this.state === "starting") this.state = "connected";
  }

  /** Calls tool `tool` (its MCP name) with a timeout; never throws. */
  async callTool(tool: string, args: Record<string, unknown>, signal: AbortSignal): Promise<ToolResult> {
    this.calls += 1;
    const result = await this.call(tool, args, signal);
    if (result.isError) this.failedCalls += 1;
    return result;
  }

  private async call(tool: string, args: Record<string, unknown>, signal: AbortSignal): Promise<ToolResult> {
    const details = { mcp_server: this.name, mcp_tool: tool };
    const client = this.client;
    if (this.state !== "connected" || !client) return toolError(this.notRunningMessage(), details);
    const started = Date.now();
    try {
      const answer = await client.request({ method: "tools/call", params: { name: tool, arguments: args } }, CallToolResultSchema, {
        timeout: this.timeoutMs,
        signal,
      });
      const result = mcpToolResult(answer, { server: this.name, tool });
      return { ...result, details: { ...result.details, duration_ms: Date.now() - started } };
    } catch (error) {
      if (signal.aborted) return toolError(`the call of MCP tool "${tool}" was cancelled`, details);
      if (error instanceof McpError && error.code === ErrorCode.RequestTimeout) {
        // The SDK sent notifications/cancelled to the server.
        return toolError(`MCP tool "${tool}" of server ${this.name} did not answer within ${this.timeoutMs} ms; the call was cancelled`, details);
      }
      if (this.state !== "connected" || (error instanceof McpError && error.code === ErrorCode.ConnectionClosed)) {
        await this.waitForEnd();
        if (this.state !== "connected") return toolError(this.notRunningMessage(), details);
      }
      return toolError(`MCP server ${this.name} could not run "${tool}": ${errorMessage(error)}`, details);
    }
  }

  status(): McpServerStatus {
    return {
      name: this.name,
      transport: this.transport,
      state: this.state,
      serverInfo: this.serverInfo,
      tools: [...this.exposedTools],
      skippedTools: [...this.skippedTools],
      exit: this.exit,
      stderrTail: this.lastStderr(),
      calls: this.calls,
      failedCalls: this.failedCalls,
    };
  }

  /** Ends the session and the server (stdin closed, killed after a grace); safe to call twice. */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    const wasRunning = this.state !== "exited";
    try {
      if (this.client) await this.client.close();
      else await this.openTransport?.close();
    } catch {
      // Closing a session whose server is gone can fail; nothing is left to do.
    }
    // A server that had already ended stays "exited" in status().
    if (wasRunning) this.state = "closed";
  }

  /** The `Error:` text of a call to a server that is not running. */
  notRunningMessage(): string {
    if (this.state === "closed") return `MCP server ${this.name} was closed (the run is ending)`;
    const stderr = this.lastStderr();
    return `MCP server ${this.name} is not running (${this.describeExit()}; last stderr: ${stderr || "(empty)"}); its tools cannot be used for the rest of this run`;
  }

  private async createTransport(): Promise<Transport> {
    const config = this.config;
    if (!isStdioServer(config)) {
      return new StreamableHTTPClientTransport(new URL(config.url), { requestInit: { headers: config.headers } });
    }
    if (config.trusted) {
      // The SDK adds a minimal environment of the host's (HOME, PATH, USER, ...), never all of it.
      const transport = new StdioClientTransport({ command: config.command, args: config.args, env: config.env, cwd: this.options.hostCwd, stderr: "pipe" });
      // With stderr: "pipe" this is a PassThrough, there before the process starts.
      if (transport.stderr) this.readStderr(transport.stderr as Readable);
      return transport;
    }
    const child = await this.options.sandbox.spawn({ command: config.command, args: config.args, env: config.env });
    this.readStderr(child.stderr);
    return new SandboxProcessTransport(child);
  }

  private async listTools(client: Client, signal: AbortSignal | undefined, started: number): Promise<McpTool[]> {
    const tools: McpTool[] = [];
    const cursors = new Set<string>();
    let cursor: string | undefined;
    for (let page = 0; page < MAX_TOOL_PAGES; page += 1) {
      // One limit for the whole start, however many pages.
      const timeout = Math.max(1, this.timeoutMs - (Date.now() - started));
      const result = await client.listTools(cursor === undefined ? undefined : { cursor }, { timeout, signal });
      tools.push(...result.tools);
      if (!result.nextCursor || cursors.has(result.nextCursor)) break;
      cursor = result.nextCursor;
      cursors.add(cursor);
    }
    return tools;
  }

  private onTransportClosed(): void {
    const wasConnected = this.state === "connected";
    if (this.openTransport instanceof SandboxProcessTransport) this.exit = this.openTransport.exit;
    else if (this.transport === "host") this.exit = { exitCode: null, signal: null, detail: "the host process ended (its status is not reported)" };
    else this.exit = { exitCode: null, signal: null, detail: "the HTTP session was closed" };
    this.state = this.closing ? "closed" : "exited";
    this.resolveEnded();
    if (wasConnected && !this.closing) this.options.onExited?.(this);
  }

  /** Waits (a few seconds at most) until the server has ended and its stderr is read. */
  private async waitForEnd(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all([this.ended, this.stderrEnded]),
      new Promise((resolve) => {
        timer = setTimeout(resolve, EXIT_STATUS_WAIT_MS);
      }),
    ]);
    clearTimeout(timer);
  }

  private describeExit(): string {
    const exit = this.exit;
    if (!exit) return "exit unknown";
    if (exit.exitCode !== null) return `exit ${exit.exitCode}${exit.signal ? `, ${exit.signal}` : ""}`;
    if (exit.signal) return `killed by ${exit.signal}`;
    return `exit unknown: ${exit.detail ?? "no status"}`;
  }

  private readStderr(stream: Readable): void {
    stream.on("data", (chunk: Buffer) => {
      this.stderr = (this.stderr + chunk.toString("utf8")).slice(-STDERR_KEPT);
    });
    this.stderrEnded = new Promise((resolve) => {
      stream.once("end", resolve);
      stream.once("close", resolve);
      stream.once("error", resolve);
    });
  }

  /** The last few lines of stderr on one line, at most 600 characters. */
  private lastStderr(): string {
    const lines = this.stderr
      .split("\n")
      .map((line) => line.trim())
      .filter(Boolean);
    const text = lines.slice(-5).join(" | ");
    return text.length > 600 ? `...${text.slice(-600)}` : text;
  }
}

let cachedVersion: string | null = null;

/** The runner's version for MCP's clientInfo. */
function runnerVersion(): string {
  if (cachedVersion === null) {
    try {
      cachedVersion = (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;
    } catch {
      cachedVersion = "0.0.0";
    }
  }
  return cachedVersion;
}
