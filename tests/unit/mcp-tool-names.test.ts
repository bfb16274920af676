import { describe, expect, it } from "vitest";
import { z } from "zod";
import { MAX_TOOL_NAME_LENGTH, mcpServersSchema, mcpToolName } from "../../src/mcp/index.js";

describe("mcpToolName", () => {
  it("prefixes mcp__<server>__ and keeps valid names as they are", () => {
    expect(mcpToolName("files", "read_text_file", new Set())).toBe("mcp__files__read_text_file");
    expect(mcpToolName("everything", "get-sum", new Set())).toBe("mcp__everything__get-sum");
  });

  it("replaces characters outside [a-zA-Z0-9_-]", () => {
    expect(mcpToolName("s", "files.read all", new Set())).toBe("mcp__s__files_read_all");
    expect(mcpToolName("s", "übersicht/ü", new Set())).toBe("mcp__s___bersicht__");
    expect(mcpToolName("s", "", new Set())).toBe("mcp__s__tool");
  });

  it("cuts long names to 64 characters with a stable hash suffix", () => {
    const long = `a_${"very_long_".repeat(10)}tool`;
    const first = mcpToolName("server", long, new Set());
    expect(first).toHaveLength(MAX_TOOL_NAME_LENGTH);
    expect(first).toMatch(/^mcp__server__a_very_long_.*_[0-9a-f]{8}$/);
    expect(mcpToolName("server", long, new Set())).toBe(first);
    // Two long names with the same start stay distinct.
    expect(mcpToolName("server", `${long}2`, new Set())).not.toBe(first);
  });

  it("keeps names distinct when sanitising makes them collide, or a name is listed twice", () => {
    const taken = new Set<string>();
    const names = ["a.b", "a_b", "a b", "a.b"].map((tool) => mcpToolName("s", tool, taken));
    expect(names[0]).toBe("mcp__s__a_b");
    expect(new Set(names).size).toBe(4);
    for (const name of names) expect(name).toMatch(/^[a-zA-Z0-9_-]{1,64}$/);
    expect(names[1]).toMatch(/^mcp__s__a_b_[0-9a-f]{8}$/);
    expect(names[3]).toMatch(/^mcp__s__a_b_[0-9a-f]{8}$/);
    // A third listing of the same name gets a number after the hash.
    expect(mcpToolName("s", "a.b", taken)).toBe(`${names[3]}2`);
  });
});

describe("mcpServersSchema", () => {
  const task = z.strictObject({ mcp_servers: mcpServersSchema });
  const problems = (servers: unknown) => {
    const parsed = task.safeParse({ mcp_servers: servers });
    return parsed.success ? [] : parsed.error.issues.map((issue) => `${issue.path.join(".")}: ${issue.message}`);
  };

  it("accepts stdio and HTTP servers and fills defaults", () => {
    const parsed = task.parse({
      mcp_servers: {
        files: { command: "mcp-server-filesystem", args: ["/workspace"] },
        host_tool: { command: "/opt/tool", trusted: true, env: { TOKEN: "x" }, timeout_ms: 5000 },
        docs: { url: "https://mcp.example.com/mcp", headers: { Authorization: "Bearer t" } },
      },
    });
    expect(parsed.mcp_servers).toEqual({
      files: { command: "mcp-server-filesystem", args: ["/workspace"], env: {}, trusted: false },
      host_tool: { command: "/opt/tool", args: [], env: { TOKEN: "x" }, trusted: true, timeout_ms: 5000 },
      docs: { url: "https://mcp.example.com/mcp", headers: { Authorization: "Bearer t" } },
    });
    expect(task.parse({}).mcp_servers).toEqual({});
  });

  it("reports mistakes against the shape the server has", () => {
    expect(problems({ s: { command: "x", tursted: true } })).toEqual(['mcp_servers.s: Unrecognized key: "tursted"']);
    expect(problems({ s: { url: "ftp://host/x" } })).toEqual(["mcp_servers.s.url: expected an http:// or https:// URL"]);
    expect(problems({ s: { url: "https://h/mcp", trusted: true } })).toEqual(['mcp_servers.s: Unrecognized key: "trusted"']);
    expect(problems({ s: { command: "x", url: "https://h/mcp" } })).toEqual([
      "mcp_servers.s: give either `command` (a stdio server) or `url` (a streamable HTTP server), not both",
    ]);
    expect(problems({ s: {} })).toEqual(["mcp_servers.s: required: `command` (a stdio server) or `url` (a streamable HTTP server)"]);
    expect(problems({ s: { command: "x", timeout_ms: 5 } })).toEqual(["mcp_servers.s.timeout_ms: at least 100 (ms)"]);
    expect(problems({ s: { command: "x", env: { "BAD-NAME": "1" } } })).toHaveLength(1);
  });

  it("refuses server names that would make ambiguous or invalid tool names", () => {
    expect(problems({ "Big Name": { command: "x" } })).toEqual(["mcp_servers.Big Name: Invalid key in record"]);
    expect(problems({ a__b: { command: "x" } })).toEqual(["mcp_servers.a__b: Invalid key in record"]);
    expect(problems({ [`s${"x".repeat(40)}`]: { command: "x" } })).toHaveLength(1);
  });
});
