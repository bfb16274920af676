import type { Tool as McpTool } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { CancelledError, ConfigError, RunnerError } from "../errors.js";
import { checkHostProgram, type HostProgramPlace, type HostProgramProblem } from "../process/host-program.js";
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
   * Real paths of the trees the agent's work can change (the repository,
   * RUNNER_HOME's runs). A trusted server that would run from them is
   * refused ({@link trustedServerProblems}): it runs on the host. Default
   * none (the other checks still apply): a run always gives them.
   */
  agentTrees?: readonly string[];
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
 * (with its stderr), ConfigError (exit 2) listing the trusted servers that
 * may not run ({@link trustedServerProblems}), CancelledError when `signal`
 * aborts; nothing is left running then.
 */
export async function connectMcpServers(servers: McpServersConfig, options: ConnectMcpServersOptions): Promise<McpServers> {
  const hostCwd = options.hostCwd ?? process.cwd();
  const checked = checkTrustedServers(servers, { cwd: hostCwd, agentTrees: options.agentTrees ?? [] });
  if (checked.problems.length > 0) {
    throw new ConfigError(`MCP servers refused:\n${checked.problems.map((problem) => `  - ${problem.path}: ${problem.message}`).join("\n")}`);
  }
  const connections = Object.entries(checked.servers).map(
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

/**
 * Every trusted (host) stdio server checked as a host program
 * ({@link checkHostProgram}: executable, arguments and `env` values) in
 * `place.cwd`, with the PATH it gets (its `env.PATH`, else the runner's):
 * the problems, each under `mcp_servers.<name>`; empty when all may run.
 */
export function trustedServerProblems(servers: McpServersConfig, place: Omit<HostProgramPlace, "searchPath">): HostProgramProblem[] {
  return checkTrustedServers(servers, place).problems;
}

/** The servers with each trusted one's `command` replaced by the executable checked (a real path), or the problems. */
function checkTrustedServers(
  servers: McpServersConfig,
  place: Omit<HostProgramPlace, "searchPath">,
): { servers: McpServersConfig; problems: HostProgramProblem[] } {
  const problems: HostProgramProblem[] = [];
  const checked: McpServersConfig = {};
  for (const [name, config] of Object.entries(servers)) {
    if (!isStdioServer(config) || !config.trusted) {
      checked[name] = config;
      continue;
    }
    const result = checkHostProgram(
      { field: `mcp_servers.${name}`, command: config.command, args: config.args, environmentValues: Object.values(config.env) },
      { ...place, searchPath: config.env.PATH ?? process.env.PATH },
    );
    problems.push(...result.problems);
    if (result.executable !== null) checked[name] = { ...config, command: result.executable };
  }
  return { servers: checked, problems };
}
