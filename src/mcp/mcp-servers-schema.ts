import { z } from "zod";

/** Default time a server gets to start, to answer `tools/list`, and for one tool call, ms. */
export const DEFAULT_MCP_TIMEOUT_MS = 60_000;

const environmentName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "expected an environment variable name like API_TOKEN");

const timeout = z
  .number()
  .int()
  .min(100, "at least 100 (ms)")
  .max(3_600_000, "at most 3600000 (1 h)")
  .optional()
  .describe("Limit for starting the server and for each tool call, ms (default 60000).");

/**
 * A server speaking MCP over stdin/stdout. It runs inside the task's sandbox
 * container (the same filesystem view, user, limits and network as the
 * agent's commands) unless `trusted` is true.
 */
export const mcpStdioServerSchema = z.strictObject({
  /** Executable, found on the sandbox's PATH (or the host's, when trusted); not run through a shell. */
  command: z.string().min(1),
  args: z.array(z.string()).default([]),
  /** Added to the environment the sandbox's commands get (the host's minimal default one, when trusted). */
  env: z.record(environmentName, z.string()).default({}),
  /**
   * Runs the server as a child process of the runner, **on the host**, outside
   * the sandbox: it then sees the host's filesystem and network with the
   * runner's privileges. Only for servers you trust with that.
   */
  trusted: z.boolean().default(false),
  timeout_ms: timeout,
});

/** A server reached over streamable HTTP, by the runner on the host (not through the sandbox's network). */
export const mcpHttpServerSchema = z.strictObject({
  url: z.url({ protocol: /^https?$/, error: "expected an http:// or https:// URL" }),
  /** Sent with every request, e.g. `Authorization`. */
  headers: z.record(z.string().min(1), z.string()).default({}),
  timeout_ms: timeout,
});

export type McpStdioServerConfig = z.infer<typeof mcpStdioServerSchema>;
export type McpHttpServerConfig = z.infer<typeof mcpHttpServerSchema>;
export type McpServerConfig = McpStdioServerConfig | McpHttpServerConfig;

/** True for a stdio server's configuration. */
export function isStdioServer(config: McpServerConfig): config is McpStdioServerConfig {
  return "command" in config;
}

/**
 * One server: stdio (`command`) or streamable HTTP (`url`). Picks the shape
 * by the key present, so a mistake is reported against that shape (an
 * unknown field, a bad URL) rather than as "matches neither".
 */
const mcpServerSchema = z.unknown().transform((value, context): McpServerConfig => {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    context.addIssue({ code: "custom", message: "expected a mapping with `command` (a stdio server) or `url` (a streamable HTTP server)", input: value });
    return z.NEVER;
  }
  const hasCommand = "command" in value;
  const hasUrl = "url" in value;
  if (hasCommand === hasUrl) {
    context.addIssue({
      code: "custom",
      message: hasCommand
        ? "give either `command` (a stdio server) or `url` (a streamable HTTP server), not both"
        : "required: `command` (a stdio server) or `url` (a streamable HTTP server)",
      input: value,
    });
    return z.NEVER;
  }
  const parsed = (hasCommand ? mcpStdioServerSchema : mcpHttpServerSchema).safeParse(value);
  if (parsed.success) return parsed.data;
  for (const issue of parsed.error.issues)
    context.addIssue({ ...issue, input: (issue as { input?: unknown }).input } as Parameters<typeof context.addIssue>[0]);
  return z.NEVER;
});

/** Server names: they become part of tool names `mcp__<server>__<tool>`. */
const mcpServerNameSchema = z
  .string()
  .regex(/^[a-z0-9][a-z0-9_-]*$/, "expected lowercase letters, digits, `_` and `-`, like github or docs_search")
  .max(32, "at most 32 characters (tool names are limited to 64)")
  .refine((name) => !name.includes("__"), "must not contain `__` (it separates the parts of a tool name)");

/**
 * task.yaml `mcp_servers:`: server name → stdio or HTTP server. Its tools
 * are offered to the model as `mcp__<server>__<tool>`.
 *
 * ```yaml
 * mcp_servers:
 *   files: { command: mcp-server-filesystem, args: [/workspace] }
 *   docs: { url: "https://mcp.example.com/mcp", headers: { Authorization: "Bearer ..." } }
 * ```
 */
export const mcpServersSchema = z.record(mcpServerNameSchema, mcpServerSchema).default({});

export type McpServersConfig = z.infer<typeof mcpServersSchema>;
