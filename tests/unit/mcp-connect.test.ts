import { mkdirSync, realpathSync, writeFileSync } from "node:fs";
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CancelledError } from "../../src/errors.js";
import { connectMcpServers, McpServerStartError, mcpServersSchema, type McpEvent, type McpServersConfig } from "../../src/mcp/index.js";
import { FakeSandbox } from "../../src/sandbox/fake/fake-sandbox.js";
import { ToolRegistry } from "../../src/tools/tool-registry.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { fakeMcpServer, type FakeMcpServerLog, type FakeMcpServerScript } from "./mcp-fake-server.js";

const context = (sandbox: FakeSandbox, signal = new AbortController().signal) => ({ sandbox, signal, toolCallId: "t", defaultTimeoutMs: 1000 });
const servers = (raw: Record<string, unknown>): McpServersConfig => mcpServersSchema.parse(raw);

function sandboxWith(script: FakeMcpServerScript, log?: FakeMcpServerLog): FakeSandbox {
  const sandbox = new FakeSandbox();
  sandbox.programs.set("fake-mcp", fakeMcpServer(script, log));
  return sandbox;
}

describe("connectMcpServers", () => {
  it("starts a stdio server in the sandbox, follows tools/list pages and exposes each tool", async () => {
    const sandbox = sandboxWith({
      pageSize: 2,
      tools: [
        {
          name: "echo",
          description: "Echoes",
          inputSchema: {
            $schema: "http://json-schema.org/draft-07/schema#",
            type: "object",
            properties: { message: { type: "string" } },
            required: ["message"],
          },
          annotations: { readOnlyHint: true },
        },
        { name: "write.it", description: "Writes" },
        { name: "research", execution: { taskSupport: "required" } },
        { name: "third-page", annotations: { readOnlyHint: false } },
      ],
    });
    const events: McpEvent[] = [];
    await using mcp = await connectMcpServers(servers({ fake: { command: "fake-mcp", args: ["--x"], env: { FAKE_TOKEN: "1" } } }), {
      sandbox,
      events: { emit: (event) => events.push(event) },
    });
    expect(sandbox.spawned.map(({ request }) => request)).toEqual([{ command: "fake-mcp", args: ["--x"], env: { FAKE_TOKEN: "1" } }]);
    expect(mcp.tools.map((tool) => [tool.name, tool.readOnly])).toEqual([
      ["mcp__fake__echo", true],
      ["mcp__fake__write_it", false],
      ["mcp__fake__third-page", false],
    ]);
    const registry = new ToolRegistry(mcp.tools);
    const [echo, write] = registry.definitions();
    expect(echo!.function).toEqual({
      name: "mcp__fake__echo",
      description: "Echoes",
      parameters: { type: "object", properties: { message: { type: "string" } }, required: ["message"] },
    });
    expect(write!.function.description).toBe('Writes\n(MCP tool "write.it" of server fake)');
    expect(write!.function.parameters).toEqual({ type: "object", properties: {} });
    expect(events).toEqual([
      {
        type: "mcp_server.connected",
        data: {
          server: "fake",
          transport: "sandbox",
          server_info: "fake-server 1.2.3",
          tools: ["mcp__fake__echo", "mcp__fake__write_it", "mcp__fake__third-page"],
          skipped_tools: [{ name: "research", reason: "it needs MCP task-based execution, which the runner does not use" }],
          duration_ms: expect.any(Number),
        },
      },
    ]);
    expect(mcp.status()).toMatchObject([{ name: "fake", state: "connected", transport: "sandbox", calls: 0 }]);
  });

  it("calls tools through the registry, with the server's own names and the model's arguments", async () => {
    const log: FakeMcpServerLog = { requests: [], cancelled: [] };
    const sandbox = sandboxWith(
      {
        tools: [{ name: "write.it" }],
        call: (name, args) => ({ result: { content: [{ type: "text", text: `${name} got ${JSON.stringify(args)}` }] } }),
      },
      log,
    );
    await using mcp = await connectMcpServers(servers({ fake: { command: "fake-mcp" } }), { sandbox });
    const registry = new ToolRegistry(mcp.tools);
    const result = await registry.execute("mcp__fake__write_it", JSON.stringify({ path: "a", n: 2 }), context(sandbox));
    expect(result).toMatchObject({ content: 'write.it got {"path":"a","n":2}', details: { mcp_server: "fake", mcp_tool: "write.it" } });
    expect(log.requests.filter((request) => request.method === "tools/call")).toEqual([
      { method: "tools/call", params: { name: "write.it", arguments: { path: "a", n: 2 } } },
    ]);
    // Not an object: refused before the server sees it.
    expect((await registry.execute("mcp__fake__write_it", "[1]", context(sandbox))).content).toMatch(/^Error: invalid arguments for mcp__fake__write_it/);
    // A JSON-RPC error from the server is an Error: result too.
    expect(mcp.status()[0]).toMatchObject({ calls: 1, failedCalls: 0 });
  });

  it("cancels a call that exceeds timeout_ms and answers Error:, and the server stays usable", async () => {
    const log: FakeMcpServerLog = { requests: [], cancelled: [] };
    const sandbox = sandboxWith(
      {
        tools: [{ name: "slow" }, { name: "fast" }],
        call: (name) => (name === "slow" ? { hang: true } : { result: { content: [{ type: "text", text: "quick" }] } }),
      },
      log,
    );
    await using mcp = await connectMcpServers(servers({ fake: { command: "fake-mcp", timeout_ms: 200 } }), { sandbox });
    const [slow, fast] = mcp.tools;
    const started = Date.now();
    const result = await slow!.execute({}, context(sandbox));
    expect(Date.now() - started).toBeLessThan(2000);
    expect(result).toMatchObject({ isError: true, content: 'Error: MCP tool "slow" of server fake did not answer within 200 ms; the call was cancelled' });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(log.cancelled).toHaveLength(1);
    expect((await fast!.execute({}, context(sandbox))).content).toBe("quick");
  });

  it("answers a cancelled run's call at once", async () => {
    const sandbox = sandboxWith({ tools: [{ name: "slow" }], call: () => ({ hang: true }) });
    await using mcp = await connectMcpServers(servers({ fake: { command: "fake-mcp" } }), { sandbox });
    const abort = new AbortController();
    const pending = mcp.tools[0]!.execute({}, context(sandbox, abort.signal));
    abort.abort();
    expect(await pending).toMatchObject({ isError: true, content: 'Error: the call of MCP tool "slow" was cancelled' });
  });

  it("turns a crashed server's tools into clear errors, for the call in flight and every later one", async () => {
    const sandbox = sandboxWith({
      banner: "fake server starting",
      tools: [{ name: "crash" }, { name: "other" }],
      call: (name) =>
        name === "crash" ? { crash: { stderr: "panic: out of cheese\n", exitCode: 2 } } : { result: { content: [{ type: "text", text: "fine" }] } },
    });
    const events: McpEvent[] = [];
    await using mcp = await connectMcpServers(servers({ fake: { command: "fake-mcp" } }), { sandbox, events: { emit: (event) => events.push(event) } });
    const [crash, other] = mcp.tools;
    const expected =
      "Error: MCP server fake is not running (exit 2; last stderr: fake server starting | panic: out of cheese); its tools cannot be used for the rest of this run";
    expect((await crash!.execute({}, context(sandbox))).content).toBe(expected);
    expect(await other!.execute({}, context(sandbox))).toMatchObject({ isError: true, content: expected });
    expect(events.at(-1)).toEqual({
      type: "mcp_server.exited",
      data: { server: "fake", transport: "sandbox", exit_code: 2, signal: null, detail: null, stderr_tail: "fake server starting | panic: out of cheese" },
    });
    expect(mcp.status()[0]).toMatchObject({ state: "exited", exit: { exitCode: 2 }, calls: 2, failedCalls: 2 });
    await mcp.close();
    expect(mcp.status()[0]!.state).toBe("exited");
  });

  it("reports a server killed from inside the sandbox with its signal", async () => {
    const sandbox = sandboxWith({ tools: [{ name: "t" }] });
    await using mcp = await connectMcpServers(servers({ fake: { command: "fake-mcp" } }), { sandbox });
    await sandbox.spawned[0]!.process.kill();
    expect((await mcp.tools[0]!.execute({}, context(sandbox))).content).toMatch(
      /^Error: MCP server fake is not running \(exit 137, SIGKILL; last stderr: \(empty\)\)/,
    );
  });

  it("fails the start with each broken server's exit and stderr, and leaves nothing running", async () => {
    const sandbox = new FakeSandbox();
    sandbox.programs.set("fake-mcp", fakeMcpServer({ tools: [{ name: "t" }] }));
    sandbox.programs.set("dies", fakeMcpServer({ tools: [], banner: "Error: cannot open config", exitAtStart: 1 }));
    const events: McpEvent[] = [];
    const attempt = connectMcpServers(servers({ good: { command: "fake-mcp" }, broken: { command: "dies" }, missing: { command: "no-such-server" } }), {
      sandbox,
      events: { emit: (event) => events.push(event) },
    });
    await expect(attempt).rejects.toThrow(McpServerStartError);
    const message = await attempt.catch((error: Error) => error.message);
    expect(message).toMatch(/^MCP servers did not start:\n/);
    expect(message).toContain("- broken (in the sandbox: dies): it exited while starting (exit 1); last stderr: Error: cannot open config");
    expect(message).toContain(
      "- missing (in the sandbox: no-such-server): it exited while starting (exit 127); last stderr: env: 'no-such-server': No such file or directory",
    );
    expect(events.map((event) => `${event.type} ${event.data.server}`).sort()).toEqual(["mcp_server.failed broken", "mcp_server.failed missing"]);
    expect(sandbox.spawned.every(({ process }) => process.hasExited)).toBe(true);
  });

  it("closes every server: stdin closed, then killed; later calls say the run is ending", async () => {
    const sandbox = sandboxWith({ tools: [{ name: "t" }], ignoreStdinEnd: true });
    const mcp = await connectMcpServers(servers({ a: { command: "fake-mcp" }, b: { command: "fake-mcp" } }), { sandbox });
    expect(mcp.tools.map((tool) => tool.name)).toEqual(["mcp__a__t", "mcp__b__t"]);
    const started = Date.now();
    await mcp.close();
    await mcp.close();
    // One grace second for both (they close at once), then killed.
    expect(Date.now() - started).toBeLessThan(3000);
    expect(sandbox.spawned.every(({ process }) => process.hasExited)).toBe(true);
    expect(await sandbox.spawned[0]!.process.exited).toEqual({ exitCode: 137, signal: "SIGKILL" });
    expect(mcp.status().map((status) => status.state)).toEqual(["closed", "closed"]);
    expect((await mcp.tools[0]!.execute({}, context(sandbox))).content).toBe("Error: MCP server a was closed (the run is ending)");
  });

  it("stops starting servers when the run is cancelled, leaving none running", async () => {
    const sandbox = new FakeSandbox();
    sandbox.programs.set("mute", () => undefined);
    const abort = new AbortController();
    setTimeout(() => abort.abort(), 50);
    const started = Date.now();
    await expect(connectMcpServers(servers({ mute: { command: "mute" } }), { sandbox, signal: abort.signal })).rejects.toThrow(CancelledError);
    expect(Date.now() - started).toBeLessThan(3000);
    expect(sandbox.spawned[0]!.process.hasExited).toBe(true);
  });

  it("sends an HTTP server's headers and names it when it refuses the session", async () => {
    const seen: IncomingHttpHeaders[] = [];
    const server = createServer((request, response) => {
      seen.push(request.headers);
      response.writeHead(401, { "content-type": "text/plain" }).end("bad token");
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
      const attempt = connectMcpServers(servers({ remote: { url, headers: { Authorization: "Bearer t0ken" }, timeout_ms: 5000 } }), {
        sandbox: new FakeSandbox(),
      });
      await expect(attempt).rejects.toThrow(McpServerStartError);
      const message = await attempt.catch((error: Error) => error.message);
      expect(message).toContain(`- remote (HTTP ${url}): `);
      expect(message).toMatch(/401|bad token|Unauthorized/);
      expect(seen[0]).toMatchObject({ authorization: "Bearer t0ken" });
    } finally {
      server.close();
    }
  });

  it("refuses a trusted server that would run from the repository on the host, or through a shell's inline code", async () => {
    const sandbox = new FakeSandbox();
    await using root = temporaryDirectory();
    const workspace = realpathSync(root.path);
    mkdirSync(join(workspace, "tools"));
    writeFileSync(join(workspace, "tools", "server.sh"), "#!/bin/sh\n", { mode: 0o755 });
    await expect(
      connectMcpServers(servers({ planted: { command: join(workspace, "tools", "server.sh"), trusted: true } }), {
        sandbox,
        agentTrees: [workspace],
        hostCwd: "/",
      }),
    ).rejects.toThrow(/mcp_servers\.planted\.command: .*server\.sh resolves to .*, inside .*, which the agent's work can change/);
    await expect(
      connectMcpServers(servers({ planted: { command: "npx", trusted: true } }), { sandbox, agentTrees: [workspace], hostCwd: join(workspace, "tools") }),
    ).rejects.toThrow(/mcp_servers\.planted: it would run on the host in .*tools, inside/);
    await expect(
      connectMcpServers(servers({ planted: { command: "sh", args: ["-c", "cd tools && ./server.sh"], trusted: true } }), {
        sandbox,
        agentTrees: [workspace],
        hostCwd: "/",
      }),
    ).rejects.toThrow(/mcp_servers\.planted\.args: sh runs code from its arguments or stdin/);
    await expect(
      connectMcpServers(servers({ planted: { command: "true", env: { PATH: join(workspace, "tools") }, trusted: true } }), {
        sandbox,
        agentTrees: [workspace],
        hostCwd: "/",
      }),
    ).rejects.toThrow(/mcp_servers\.planted\.env: /);
    expect(sandbox.spawned).toHaveLength(0);
  });
});
