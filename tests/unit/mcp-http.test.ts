/**
 * `runner mcp --http`: the MCP service over streamable HTTP on loopback,
 * driven by the MCP SDK's own Client and its StreamableHTTPClientTransport
 * (two sessions of one server), with the Docker-free run tier behind it.
 */
import { request as httpRequest } from "node:http";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { serveMcpHttp } from "../../src/mcp-server/mcp-http.js";
import { RunnerMcpService } from "../../src/mcp-server/runner-mcp-server.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { fakeRunner, toolCall, writeScriptedTask } from "../helpers/fake-runner.js";

const TOKEN = "test-token-0123456789";

async function session(url: string, token = TOKEN) {
  const client = new Client({ name: "http-test", version: "1" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return {
    async ok(name: string, args: Record<string, unknown>) {
      const result = (await client.callTool({ name, arguments: args })) as CallToolResult;
      expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
      return result.structuredContent as Record<string, unknown>;
    },
    async [Symbol.asyncDispose]() {
      await client.close();
    },
  };
}

/** A raw POST to the endpoint with the given headers: the status code. */
function post(url: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "raw", version: "1" } },
    });
    const request = httpRequest(
      url,
      { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers } },
      (response) => {
        response.resume();
        resolve(response.statusCode!);
      },
    );
    request.on("error", reject);
    request.end(body);
  });
}

describe("runner mcp --http (streamable HTTP on loopback, the SDK's client)", () => {
  it("refuses a request without the bearer token or with another Host; two sessions share the runs", async () => {
    await using fake = await fakeRunner();
    await using root = temporaryDirectory();
    writeScriptedTask(root.path, { script: { turns: [{ tool_calls: [toolCall("write_file", { path: "a.txt", content: "a\n" })] }, { content: "Done." }] } });
    const service = new RunnerMcpService({ runner: fake.runner, workspaceRoots: [root.path], version: "test" });
    const http = await serveMcpHttp(service, { port: 0, token: TOKEN });
    try {
      expect(http.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
      expect(await post(http.url, {})).toBe(401);
      expect(await post(http.url, { authorization: "Bearer wrong" })).toBe(401);
      expect(await post(http.url, { authorization: `Bearer ${TOKEN}`, host: "evil.example.com" })).toBe(403);
      await expect(session(http.url, "wrong")).rejects.toThrow();

      await using first = await session(http.url);
      await using second = await session(http.url);
      const runId = (await first.ok("run_start", { task_file: "task.yaml" })).run_id as string;
      // The other session sees it, follows it to the end, and reads its result.
      expect((await second.ok("runs_list", {})).runs).toEqual([expect.objectContaining({ run_id: runId })]);
      let cursor = 0;
      for (;;) {
        const page = await second.ok("run_events", { run_id: runId, cursor, wait_ms: 20_000 });
        cursor = page.next_cursor as number;
        if (page.done) break;
      }
      expect(await second.ok("run_status", { run_id: runId })).toMatchObject({ status: "succeeded", owned_here: true });
      expect((await second.ok("run_result", { run_id: runId })).files).toEqual([expect.objectContaining({ path: "a.txt", change: "added" })]);
    } finally {
      await http.close();
      await service.close();
    }
  });
});
