import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import { connectMcpServers, mcpServersSchema, type McpServers } from "../../src/mcp/index.js";
import { FakeSandbox } from "../../src/sandbox/fake/fake-sandbox.js";
import { SANDBOX_IMAGE, requireDocker } from "../helpers/docker.js";

/**
 * The other two ways to reach a server, both against server-everything from
 * the sandbox image: streamable HTTP (a container publishing its port on
 * 127.0.0.1 only) and a trusted stdio server run on the host (here the
 * docker CLI running the server with no network, as `docker run -i` MCP
 * setups do). Neither needs the task's sandbox, so a fake one stands in.
 */

const context = { sandbox: new FakeSandbox(), signal: new AbortController().signal, toolCallId: "t", defaultTimeoutMs: 10_000 };
const call = (mcp: McpServers, name: string, args: Record<string, unknown> = {}) => mcp.tools.find((tool) => tool.name === name)!.execute(args, context);

describe("MCP transports besides the sandbox", () => {
  it("streamable HTTP: connects, lists, calls; a server gone mid-run gives Error: results", async () => {
    const docker = await requireDocker();
    const container = await docker.createContainer({
      name: `agent-runner-mcp-http-test-${randomUUID().slice(0, 8)}`,
      Image: SANDBOX_IMAGE,
      // Ends itself (AutoRemove) even if the test is killed before its cleanup.
      Cmd: ["timeout", "300", "mcp-server-everything", "streamableHttp"],
      User: "1000:1000",
      Env: ["PORT=3001"],
      ExposedPorts: { "3001/tcp": {} },
      Labels: { "dev.agent-runner.test": "mcp-http" },
      HostConfig: { AutoRemove: true, CapDrop: ["ALL"], PortBindings: { "3001/tcp": [{ HostIp: "127.0.0.1", HostPort: "" }] } },
    });
    try {
      await container.start();
      const port = Number((await container.inspect()).NetworkSettings.Ports["3001/tcp"]![0]!.HostPort);
      const url = `http://127.0.0.1:${port}/mcp`;
      await waitFor(async () => (await fetch(url, { method: "GET", signal: AbortSignal.timeout(1000) }).catch(() => null)) !== null, 20_000);
      await using mcp = await connectMcpServers(mcpServersSchema.parse({ remote: { url, timeout_ms: 10_000 } }), { sandbox: context.sandbox });
      expect(mcp.status()[0]).toMatchObject({ transport: "http", state: "connected", serverInfo: expect.stringMatching(/everything/) });
      expect((await call(mcp, "mcp__remote__echo", { message: "over http" })).content).toBe("Echo: over http");
      expect((await call(mcp, "mcp__remote__get-tiny-image")).content).toMatch(/\[image: image\/png, [\d.]+ (bytes|KiB); not shown\]/);
      // The server's end of a broken connection is an Error: result, not an exception.
      await container.kill();
      const after = await call(mcp, "mcp__remote__echo", { message: "gone" });
      expect(after.isError).toBe(true);
      expect(after.content).toMatch(/^Error: MCP server remote could not run "echo": /);
    } finally {
      await container.remove({ force: true }).catch(() => undefined);
    }
  });

  it("trusted: true runs the server as a host process (the SDK's stdio transport)", async () => {
    const docker = await requireDocker();
    const name = `agent-runner-mcp-host-test-${randomUUID().slice(0, 8)}`;
    const servers = mcpServersSchema.parse({
      hosted: {
        command: "docker",
        args: [
          "run",
          "-i",
          "--rm",
          "--name",
          name,
          "--network",
          "none",
          "--user",
          "1000:1000",
          "--cap-drop",
          "ALL",
          SANDBOX_IMAGE,
          "timeout",
          "300",
          "mcp-server-everything",
        ],
        env: process.env.DOCKER_HOST ? { DOCKER_HOST: process.env.DOCKER_HOST } : {},
        trusted: true,
        timeout_ms: 30_000,
      },
    });
    try {
      await using mcp = await connectMcpServers(servers, { sandbox: context.sandbox, hostCwd: "/" });
      expect(context.sandbox.spawned).toHaveLength(0);
      expect(mcp.status()[0]).toMatchObject({ transport: "host", state: "connected" });
      expect((await call(mcp, "mcp__hosted__get-sum", { a: 20, b: 22 })).content).toMatch(/\b42\b/);
      // The host's environment is not passed on (only HOME, PATH, USER and the like, plus `env`).
      await docker.getContainer(name).kill();
      const after = await call(mcp, "mcp__hosted__echo", { message: "gone" });
      expect(after.content).toMatch(/^Error: MCP server hosted is not running \(exit unknown: the host process ended/);
    } finally {
      await docker
        .getContainer(name)
        .remove({ force: true })
        .catch(() => undefined);
    }
  });
});

async function waitFor(condition: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`not ready within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
