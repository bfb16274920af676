import type { CallToolResult, ContentBlock } from "@modelcontextprotocol/sdk/types.js";
import type { ToolResult } from "../tools/define-tool.js";

/** Which tool of which server answered; for messages and `details`. */
export interface McpCallOrigin {
  server: string;
  tool: string;
}

/**
 * Turns an MCP `tools/call` result into what the model reads. Text blocks
 * are joined by newlines; images and audio become a placeholder naming the
 * MIME type and size (never the base64 data); resource links and embedded
 * resources are summarised (an embedded text resource keeps its text);
 * `structuredContent` is added as JSON unless the text already carries it.
 * `isError: true` gives an `Error:` result.
 */
export function mcpToolResult(result: CallToolResult, origin: McpCallOrigin): ToolResult {
  const blocks = result.content ?? [];
  const parts = blocks.map(describeContentBlock);
  const details: Record<string, unknown> = {
    mcp_server: origin.server,
    mcp_tool: origin.tool,
    content_types: blocks.map((block) => block.type),
  };
  if (result.structuredContent !== undefined) {
    const textBlocks = blocks.flatMap((block) => (block.type === "text" ? [block.text] : []));
    if (repeatsContent(result.structuredContent, blocks) || carriesStructuredContent(result.structuredContent, textBlocks)) {
      details.structured_content = "already in the text";
    } else {
      const json = JSON.stringify(withoutBinaryData(result.structuredContent));
      parts.push(parts.length === 0 ? json : `[structured content]\n${json}`);
      details.structured_content = "added as JSON";
    }
  }
  const content = parts.join("\n");
  if (result.isError === true) {
    const message = content.trim() === "" ? `MCP tool "${origin.tool}" of server ${origin.server} reported an error without a message` : content;
    return { content: `Error: ${message.replace(/^error:\s*/i, "")}`, isError: true, details };
  }
  return { content: parts.length === 0 ? "(the tool returned no content)" : content, details };
}

/** One content block as text for the model. */
function describeContentBlock(block: ContentBlock): string {
  switch (block.type) {
    case "text":
      return block.text;
    case "image":
    case "audio":
      return `[${block.type}: ${block.mimeType}, ${formatBytes(base64Bytes(block.data))}; not shown]`;
    case "resource_link": {
      const facts = [block.mimeType, block.size === undefined ? undefined : formatBytes(block.size)].filter(Boolean);
      const title = block.title && block.title !== block.name ? ` "${block.title}"` : "";
      const description = block.description ? `: ${block.description}` : "";
      return `[resource link: ${block.name}${title} <${block.uri}>${facts.length ? ` (${facts.join(", ")})` : ""}${description}]`;
    }
    case "resource": {
      const resource = block.resource;
      if ("text" in resource && typeof resource.text === "string") {
        return `[resource <${resource.uri}>${resource.mimeType ? ` (${resource.mimeType})` : ""}]\n${resource.text}`;
      }
      const blob = "blob" in resource && typeof resource.blob === "string" ? resource.blob : "";
      return `[resource <${resource.uri}>: ${resource.mimeType ?? "binary"}, ${formatBytes(base64Bytes(blob))}; not shown]`;
    }
    default:
      return `[${(block as { type: string }).type} content; not shown]`;
  }
}

/** Decoded size of base64 text, bytes. */
export function base64Bytes(data: string): number {
  const compact = data.replace(/\s/g, "");
  const padding = compact.endsWith("==") ? 2 : compact.endsWith("=") ? 1 : 0;
  return Math.max(0, Math.floor((compact.length * 3) / 4) - padding);
}

function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} bytes`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

/** Longest string kept as it is in structured content when it looks like base64 data. */
const MAX_BASE64_STRING = 256;

/**
 * `structured` with binary payloads replaced by a placeholder: the `data` of
 * image/audio-like objects, `blob` fields, and long base64-looking strings.
 */
function withoutBinaryData(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutBinaryData);
  if (typeof value === "string") {
    return value.length > MAX_BASE64_STRING && /^[A-Za-z0-9+/\s]+={0,2}$/.test(value) ? `[base64 data, ${formatBytes(base64Bytes(value))}; not shown]` : value;
  }
  if (value === null || typeof value !== "object") return value;
  const object = value as Record<string, unknown>;
  const mimeType = typeof object.mimeType === "string" ? object.mimeType : "binary";
  return Object.fromEntries(
    Object.entries(object).map(([key, item]) => {
      if ((key === "data" || key === "blob") && typeof item === "string" && (key === "blob" || "mimeType" in object)) {
        return [key, `[${mimeType}, ${formatBytes(base64Bytes(item))}; not shown]`];
      }
      return [key, withoutBinaryData(item)];
    }),
  );
}

/** Whether `structured` only wraps the result's own content blocks (e.g. `{content: [...]}`). */
function repeatsContent(structured: Record<string, unknown>, blocks: ContentBlock[]): boolean {
  if (blocks.length === 0) return false;
  const values = Object.values(structured);
  return values.length === 1 && canonicalJson(values[0]) === canonicalJson(blocks);
}

/**
 * Whether the text blocks already say what `structured` says, so adding it
 * would only double the result: a text block that is the same JSON, or text
 * containing every value of it (MCP asks servers to put structured results
 * in a text block too, often as prose or a wrapper like `{content: text}`).
 */
function carriesStructuredContent(structured: Record<string, unknown>, textBlocks: string[]): boolean {
  if (textBlocks.length === 0) return false;
  const canonical = canonicalJson(structured);
  for (const text of textBlocks) {
    try {
      if (canonicalJson(JSON.parse(text)) === canonical) return true;
    } catch {
      // not JSON
    }
  }
  const leaves: string[] = [];
  collectLeaves(structured, leaves);
  if (leaves.length === 0 || leaves.length > 1000) return false;
  const joined = textBlocks.join("\n");
  return leaves.every((leaf) => joined.includes(leaf));
}

function collectLeaves(value: unknown, leaves: string[]): void {
  if (value === null || value === undefined) return;
  if (Array.isArray(value)) {
    for (const item of value) collectLeaves(item, leaves);
  } else if (typeof value === "object") {
    for (const item of Object.values(value)) collectLeaves(item, leaves);
  } else if (value !== "") {
    leaves.push(String(value));
  }
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${canonicalJson(item)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}
