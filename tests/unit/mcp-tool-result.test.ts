import { describe, expect, it } from "vitest";
import { base64Bytes, mcpToolResult } from "../../src/mcp/mcp-tool-result.js";

const origin = { server: "srv", tool: "do-it" };
const png = Buffer.alloc(1000, 7).toString("base64");

describe("mcpToolResult", () => {
  it("joins text blocks with newlines", () => {
    const result = mcpToolResult(
      {
        content: [
          { type: "text", text: "one" },
          { type: "text", text: "two" },
        ],
      },
      origin,
    );
    expect(result).toMatchObject({ content: "one\ntwo", details: { mcp_server: "srv", mcp_tool: "do-it", content_types: ["text", "text"] } });
    expect(result.isError).toBeUndefined();
  });

  it("replaces images and audio by a placeholder with MIME type and size, never the data", () => {
    const result = mcpToolResult(
      {
        content: [
          { type: "text", text: "here:" },
          { type: "image", data: png, mimeType: "image/png" },
          { type: "audio", data: Buffer.alloc(3 * 1024 * 1024).toString("base64"), mimeType: "audio/wav" },
        ],
      },
      origin,
    );
    expect(result.content).toBe("here:\n[image: image/png, 1000 bytes; not shown]\n[audio: audio/wav, 3.0 MiB; not shown]");
    expect(result.content).not.toContain(png.slice(0, 20));
  });

  it("summarises resource links and embedded resources (keeping embedded text)", () => {
    const result = mcpToolResult(
      {
        content: [
          { type: "resource_link", uri: "file:///workspace/a.txt", name: "a.txt", mimeType: "text/plain", size: 2048, description: "the notes" },
          { type: "resource", resource: { uri: "test://static/1", mimeType: "text/plain", text: "resource body" } },
          { type: "resource", resource: { uri: "test://blob/2", mimeType: "application/octet-stream", blob: png } },
        ],
      },
      origin,
    );
    expect(result.content).toBe(
      [
        "[resource link: a.txt <file:///workspace/a.txt> (text/plain, 2.0 KiB): the notes]",
        "[resource <test://static/1> (text/plain)]\nresource body",
        "[resource <test://blob/2>: application/octet-stream, 1000 bytes; not shown]",
      ].join("\n"),
    );
  });

  it("adds structuredContent as JSON unless the text already carries it", () => {
    const structured = { temperature: 22.5, conditions: "Cloudy" };
    expect(mcpToolResult({ content: [], structuredContent: structured }, origin).content).toBe('{"temperature":22.5,"conditions":"Cloudy"}');
    const prose = mcpToolResult({ content: [{ type: "text", text: "It is warm." }], structuredContent: structured }, origin);
    expect(prose.content).toBe('It is warm.\n[structured content]\n{"temperature":22.5,"conditions":"Cloudy"}');
    expect(prose.details?.structured_content).toBe("added as JSON");
    // The same JSON in a text block (keys in another order), or prose naming every value: not repeated.
    const same = mcpToolResult({ content: [{ type: "text", text: '{"conditions":"Cloudy","temperature":22.5}' }], structuredContent: structured }, origin);
    expect(same.content).toBe('{"conditions":"Cloudy","temperature":22.5}');
    const wrapper = mcpToolResult(
      { content: [{ type: "text", text: "[FILE] a.txt\n[DIR] src" }], structuredContent: { content: "[FILE] a.txt\n[DIR] src" } },
      origin,
    );
    expect(wrapper.content).toBe("[FILE] a.txt\n[DIR] src");
    expect(wrapper.details?.structured_content).toBe("already in the text");
  });

  it("never passes base64 data on through structuredContent", () => {
    // server-filesystem's read_media_file repeats its content blocks there.
    const blocks = [{ type: "image" as const, data: png, mimeType: "image/png" }];
    const echoed = mcpToolResult({ content: blocks, structuredContent: { content: blocks } }, origin);
    expect(echoed.content).toBe("[image: image/png, 1000 bytes; not shown]");
    const other = mcpToolResult(
      { content: [], structuredContent: { thumbnail: { data: png, mimeType: "image/png" }, file: { blob: png }, raw: png, name: "x" } },
      origin,
    );
    expect(other.content).toBe(
      '{"thumbnail":{"data":"[image/png, 1000 bytes; not shown]","mimeType":"image/png"},"file":{"blob":"[binary, 1000 bytes; not shown]"},"raw":"[base64 data, 1000 bytes; not shown]","name":"x"}',
    );
  });

  it("makes isError an Error: result, without doubling an Error: prefix", () => {
    expect(mcpToolResult({ content: [{ type: "text", text: "no such city" }], isError: true }, origin)).toMatchObject({
      content: "Error: no such city",
      isError: true,
    });
    expect(mcpToolResult({ content: [{ type: "text", text: "Error: Access denied" }], isError: true }, origin).content).toBe("Error: Access denied");
    expect(mcpToolResult({ content: [], isError: true }, origin).content).toBe('Error: MCP tool "do-it" of server srv reported an error without a message');
  });

  it("says so when a tool returns nothing", () => {
    expect(mcpToolResult({ content: [] }, origin).content).toBe("(the tool returned no content)");
  });

  it("computes decoded base64 sizes", () => {
    expect(base64Bytes(Buffer.from("a").toString("base64"))).toBe(1);
    expect(base64Bytes(Buffer.from("ab").toString("base64"))).toBe(2);
    expect(base64Bytes(Buffer.from("abc").toString("base64"))).toBe(3);
    expect(base64Bytes("")).toBe(0);
  });
});
