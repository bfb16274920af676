/**
 * What the MCP layer reports, noun-then-verb like the run's events (the
 * runner can add these to its event union as they are).
 */
export type McpEvent =
  | {
      type: "mcp_server.connected";
      data: {
        server: string;
        transport: McpTransportKind;
        /** `name version` the server reported. */
        server_info: string;
        /** Tool names as the model sees them. */
        tools: string[];
        /** Tools not offered, with the reason (e.g. they need MCP tasks). */
        skipped_tools: { name: string; reason: string }[];
        duration_ms: number;
      };
    }
  | { type: "mcp_server.failed"; data: { server: string; transport: McpTransportKind; error: string } }
  | {
      type: "mcp_server.exited";
      /** The server ended while the run went on: its tools now answer with an error. */
      data: { server: string; transport: McpTransportKind; exit_code: number | null; signal: string | null; detail: string | null; stderr_tail: string };
    };

/** Where a server runs: a process in the sandbox, a process on the host (`trusted`), or a streamable HTTP endpoint. */
export type McpTransportKind = "sandbox" | "host" | "http";

/** Receives MCP events; must not throw. The run's `EventSink` fits once its union includes {@link McpEvent}. */
export interface McpEventSink {
  emit(event: McpEvent): void;
}
