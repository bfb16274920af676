import { realpathSync } from "node:fs";
import { resolve, sep } from "node:path";
import type { Tool as McpTool } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { CancelledError, ConfigError, RunnerError } from "../errors.js";
import type { Sandbox } from "../sandbox/sandbox.js";
import { defineTool, type Tool } from "../tools/define-tool.js";
import type { McpEventSink } from "./mcp-events.js";
import { McpServerConnection, type McpServerStatus } from "./mcp-server-connection.js";
import { isStdioServer, type McpServersConfig } from "./mcp-servers-schema.js";
import { mcpToolName } from "./mcp-tool-names.js";

export interface ConnectMcpServersOptions {
  /** Where stdio servers run, unless `trusted`. The servers end with it at the latest. */
  sandbox: Sandbox;
  /** Aborting while servers start closes them and throws CancelledError. */
  signal?: AbortSignal;
  events?: McpEventSink;
  /** Working directory of trusted (host) stdio servers; default the runner's own. */
  hostCwd?: string;
  /**
   * The task's workspace on the host. A trusted server whose executable or
   * working directory lies inside it is refused: the agent can change those
   * files, and a trusted server runs on the host.
   */
  workspaceHostPath?: string;
}

/** The connected servers of a run (or of one agent's sandbox). */
export interface McpServers {
  /** One tool per server tool, named `mcp__<server>__<tool>`, in server then listing order. */
  readonly tools: Tool[];
  status(): McpServerStatus[];
  /**
   * Ends every session and server (stdin closed, killed after a grace of a
   * second); safe to call twice. Call it before `Sandbox.stopAllProcesses`
   * or `close`, or the servers' ends are reported as crashes.
   */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** A configured MCP server could not be started, initialized or listed: the run cannot offer its tools (exit 3). */
export class McpServerStartError extends RunnerError {
  constructor(message: string) {
    super(message, 3, { reason: "mcp_server_failed" });
  }
}

/**
 * Starts every server of task.yaml's `mcp_servers` at once (stdio servers
 * inside `sandbox`, trusted ones on the host, HTTP ones over streamable
 * HTTP), initializes them and lists their tools. Each tool becomes a
 * {@link Tool} with the server's input schema as its JSON Schema and
 * `readOnly` from its `readOnlyHint` annotation. A server that later exits
 * (a crash, a kill from inside the sandbox) makes its tools answer
 * `Error: MCP server <name> is not running (...)`; the run goes on.
 *
 * Throws {@link McpServerStartError} naming each server that did not come up
 * (with its stderr), ConfigError for a trusted server inside the workspace,
 * CancelledError when `signal` aborts; nothing is left running then.
 */
export async function connectMcpServers(servers: McpServersConfig, options: ConnectMcpServersOptions): Promise<McpServers> {
  const hostCwd = options.hostCwd ?? process.cwd();
  refuseTrustedServersInWorkspace(servers, hostCwd, options.workspaceHostPath);
  const connections = Object.entries(servers).map(
    ([name, config]) =>
      new McpServerConnection(name, config, {
        sandbox: options.sandbox,
        hostCwd,
        onExited: (connection) => {
          const status = connection.status();
          options.events?.emit({
            type: "mcp_server.exited",
            data: {
              server: connection.name,
              transport: connection.transport,
              exit_code: status.exit?.exitCode ?? null,
              signal: status.exit?.signal ?? null,
              detail: status.exit?.detail ?? null,
              stderr_tail: status.stderrTail,
            },
          });
        },
      }),
  );
  const closeAll = () => Promise.all(connections.map((connection) => connection.close())).then(() => undefined);
  const outcomes = await Promise.all(
    connections.map(async (connection) => {
      const started = Date.now();
      try {
        await connection.connect(options.signal);
        return { connection, durationMs: Date.now() - started, error: null };
      } catch (error) {
        return { connection, durationMs: Date.now() - started, error: error as Error };
      }
    }),
  );
  if (options.signal?.aborted) {
    await closeAll();
    throw new CancelledError();
  }
  const failures = outcomes.filter((outcome) => outcome.error !== null);
  if (failures.length > 0) {
    for (const { connection, error } of failures) {
      options.events?.emit({ type: "mcp_server.failed", data: { server: connection.name, transport: connection.transport, error: error!.message } });
    }
    await closeAll();
    const lines = failures.map(({ connection, error }) => `- ${connection.name} (${describeServer(connection)}): ${error!.message}`);
    throw new McpServerStartError(`MCP server${failures.length > 1 ? "s" : ""} did not start:\n${lines.join("\n")}`);
  }

  const taken = new Set<string>();
  const tools: Tool[] = [];
  for (const { connection, durationMs } of outcomes) {
    for (const tool of connection.tools) {
      if (tool.execution?.taskSupport === "required") {
        connection.skippedTools.push({ name: tool.name, reason: "it needs MCP task-based execution, which the runner does not use" });
        continue;
      }
      const exposed = exposeTool(connection, tool, taken);
      connection.exposedTools.push(exposed.name);
      tools.push(exposed);
    }
    const status = connection.status();
    options.events?.emit({
      type: "mcp_server.connected",
      data: {
        server: connection.name,
        transport: connection.transport,
        server_info: status.serverInfo ?? "unknown",
        tools: status.tools,
        skipped_tools: status.skippedTools,
        duration_ms: durationMs,
      },
    });
  }
  let closing: Promise<void> | null = null;
  const close = () => (closing ??= closeAll());
  return {
    tools,
    status: () => connections.map((connection) => connection.status()),
    close,
    [Symbol.asyncDispose]: close,
  };
}

/** Arguments are checked by the server against its own schema; the runner only insists on an object. */
const mcpArguments = z.record(z.string(), z.unknown());

function exposeTool(connection: McpServerConnection, tool: McpTool, taken: Set<string>): Tool {
  const name = mcpToolName(connection.name, tool.name, taken);
  const description = tool.description?.trim() || tool.title || `Tool "${tool.name}" of MCP server ${connection.name}.`;
  return defineTool({
    name,
    description: name === `mcp__${connection.name}__${tool.name}` ? description : `${description}\n(MCP tool "${tool.name}" of server ${connection.name})`,
    input: mcpArguments,
    jsonSchema: toolParameters(tool.inputSchema),
    // A hint from the server: it only lets calls of one turn run concurrently.
    readOnly: tool.annotations?.readOnlyHint === true,
    execute: (input, context) => connection.callTool(tool.name, input, context.signal),
  });
}

/** The server's input schema as function parameters: always an object with `properties`. */
function toolParameters(inputSchema: McpTool["inputSchema"]): Record<string, unknown> {
  const { $schema: _ignored, ...schema } = inputSchema as Record<string, unknown>;
  return { ...schema, type: "object", properties: schema.properties ?? {} };
}

function describeServer(connection: McpServerConnection): string {
  const config = connection.config;
  if (!isStdioServer(config)) return `HTTP ${config.url}`;
  return `${connection.transport === "host" ? "on the host" : "in the sandbox"}: ${[config.command, ...config.args].join(" ")}`;
}

function refuseTrustedServersInWorkspace(servers: McpServersConfig, hostCwd: string, workspaceHostPath: string | undefined): void {
  if (!workspaceHostPath) return;
  const workspace = realPath(resolve(workspaceHostPath));
  const inside = (path: string) => path === workspace || path.startsWith(`${workspace}${sep}`);
  for (const [name, config] of Object.entries(servers)) {
    if (!isStdioServer(config) || !config.trusted) continue;
    const cwd = realPath(resolve(hostCwd));
    if (inside(cwd)) {
      throw new ConfigError(
        `mcp_servers.${name}: a trusted server runs on the host; its working directory ${cwd} is inside the workspace, which the agent can change`,
      );
    }
    if (config.command.includes("/") && inside(realPath(resolve(cwd, config.command)))) {
      throw new ConfigError(
        `mcp_servers.${name}: a trusted server runs on the host; its command ${config.command} is inside the workspace, which the agent can change`,
      );
    }
  }
}

function realPath(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}
