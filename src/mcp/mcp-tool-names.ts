import { createHash } from "node:crypto";

/** Longest tool name OpenAI-compatible APIs accept. */
export const MAX_TOOL_NAME_LENGTH = 64;

/** Replaces every character outside the tool-name charset `[a-zA-Z0-9_-]` by `_`. */
export function sanitizeToolNamePart(part: string): string {
  const sanitized = part.replace(/[^a-zA-Z0-9_-]/g, "_");
  return sanitized === "" ? "tool" : sanitized;
}

/**
 * The name the model sees for MCP tool `tool` of server `server`:
 * `mcp__<server>__<tool>` in the charset `[a-zA-Z0-9_-]`, at most 64
 * characters. A name that had to be cut, or that is already in `taken` (two
 * tools that differ only in characters outside the charset), ends in `_` and
 * 8 hex digits of a hash of the original tool name, so it stays the same from
 * run to run. Adds the result to `taken`.
 */
export function mcpToolName(server: string, tool: string, taken: Set<string>): string {
  const plain = `mcp__${sanitizeToolNamePart(server)}__${sanitizeToolNamePart(tool)}`;
  let name = plain;
  if (name.length > MAX_TOOL_NAME_LENGTH || taken.has(name)) {
    const suffix = `_${createHash("sha256").update(tool).digest("hex").slice(0, 8)}`;
    name = `${plain.slice(0, MAX_TOOL_NAME_LENGTH - suffix.length)}${suffix}`;
    // The same tool name listed twice: number the repeats.
    for (let repeat = 2; taken.has(name); repeat += 1) {
      const numbered = `${suffix}${repeat}`;
      name = `${plain.slice(0, MAX_TOOL_NAME_LENGTH - numbered.length)}${numbered}`;
    }
  }
  taken.add(name);
  return name;
}
