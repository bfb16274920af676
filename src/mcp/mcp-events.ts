import type { RunEvent } from "../events/event-catalogue.js";

/** What the MCP layer reports: the `mcp_server.*` events of the run's event catalogue (docs/events.md). */
export type McpEvent = Extract<RunEvent, { type: `mcp_server.${string}` }>;

/** Where a server runs: a process in the sandbox, a process on the host (`trusted`), or a streamable HTTP endpoint. */
export type McpTransportKind = McpEvent["data"]["transport"];

/** Receives MCP events; must not throw. The run's `EventSink` is one. */
export interface McpEventSink {
  emit(event: McpEvent): void;
}
