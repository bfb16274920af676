/** MCP servers of a task: schema, connection, tools. The MCP SDK is used only under src/mcp/. */
export { connectMcpServers, McpServerStartError, trustedServerProblems, type ConnectMcpServersOptions, type McpServers } from "./connect-mcp-servers.js";
export type { McpEvent, McpEventSink, McpTransportKind } from "./mcp-events.js";
export type { McpServerState, McpServerStatus } from "./mcp-server-connection.js";
export { mcpServersSchema, type McpHttpServerConfig, type McpServerConfig, type McpServersConfig, type McpStdioServerConfig } from "./mcp-servers-schema.js";
export { mcpToolName, MAX_TOOL_NAME_LENGTH } from "./mcp-tool-names.js";
