import { describe, expect, it } from "vitest";
import { connectMcpServers, mcpServersSchema, type McpEvent, type McpServers } from "../../src/mcp/index.js";
import type { Sandbox } from "../../src/sandbox/sandbox.js";
import { createSandboxWorkspace, createTestSandbox, requireDocker } from "../helpers/docker.js";

const everything = mcpServersSchema.parse({ everything: { command: "mcp-server-everything" } });

function caller(mcp: McpServers, sandbox: Sandbox) {
  return (name: string, args: Record<string, unknown> = {}) =>
    mcp.tools.find((tool) => tool.name === name)!.execute(args, { sandbox, signal: new AbortController().signal, toolCallId: "t", defaultTimeoutMs: 10_000 });
}

describe("an MCP server process inside the sandbox (network none)", () => {
  it("a server killed inside the container turns its tools into clear errors, for the call in flight too; the sandbox goes on", async () => {
    await requireDocker();
    await using workspace = createSandboxWorkspace();
    await using sandbox = await createTestSandbox(workspace.path);
    const events: McpEvent[] = [];
    await using mcp = await connectMcpServers(everything, { sandbox, events: { emit: (event) => events.push(event) } });
    const call = caller(mcp, sandbox);
    expect((await call("mcp__everything__echo", { message: "before" })).content).toBe("Echo: before");

    const inFlight = call("mcp__everything__trigger-long-running-operation", { duration: 60, steps: 2 });
    await new Promise((resolve) => setTimeout(resolve, 300));
    const started = Date.now();
    const kill = await sandbox.exec({ command: "pkill -KILL -f '[s]erver-everything/dist'; echo killed" });
    expect(kill.stdout).toBe("killed\n");
    const expected = /^Error: MCP server everything is not running \(exit 137, SIGKILL; last stderr: .*\); its tools cannot be used for the rest of this run$/;
    expect((await inFlight).content).toMatch(expected);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(await call("mcp__everything__echo", { message: "after" })).toMatchObject({ isError: true, content: expect.stringMatching(expected) });
    expect(events.filter((event) => event.type === "mcp_server.exited")).toEqual([
      {
        type: "mcp_server.exited",
        data: { server: "everything", transport: "sandbox", exit_code: 137, signal: "SIGKILL", detail: null, stderr_tail: expect.any(String) },
      },
    ]);
    expect(mcp.status()[0]).toMatchObject({ state: "exited", exit: { exitCode: 137, signal: "SIGKILL" } });
    // The sandbox itself is fine.
    expect((await sandbox.exec({ command: "echo ok" })).stdout).toBe("ok\n");
  });

  it("another command's timeout spares the server (it has its own process marker); stopAllProcesses does not", async () => {
    await requireDocker();
    await using workspace = createSandboxWorkspace();
    await using sandbox = await createTestSandbox(workspace.path);
    await using mcp = await connectMcpServers(everything, { sandbox });
    const call = caller(mcp, sandbox);
    const timedOut = await sandbox.exec({ command: "sleep 30", timeoutMs: 300 });
    expect(timedOut.timedOut).toBe(true);
    expect((await call("mcp__everything__echo", { message: "alive" })).content).toBe("Echo: alive");
    await sandbox.stopAllProcesses();
    expect((await call("mcp__everything__echo", { message: "gone" })).content).toMatch(/^Error: MCP server everything is not running \(exit 137, SIGKILL/);
  });

  it("spawn runs as the sandbox user in /workspace, with piped stdin/stdout/stderr and the exit code", async () => {
    await requireDocker();
    await using workspace = createSandboxWorkspace();
    await using sandbox = await createTestSandbox(workspace.path);
    const child = await sandbox.spawn({
      command: "bash",
      args: ["-c", 'id -u; pwd; echo "$GREETING"; read line; echo "got $line"; echo oops >&2; exit 3'],
      env: { GREETING: "hello" },
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.stdin.write("a line\n");
    child.stdin.end();
    expect(await child.exited).toEqual({ exitCode: 3, signal: null });
    expect(stdout).toBe("1000\n/workspace\nhello\ngot a line\n");
    expect(stderr).toBe("oops\n");
    // A command the image lacks is refused before any exec, naming the command and the image.
    await expect(sandbox.spawn({ command: "no-such-server" })).rejects.toThrow(/"no-such-server" is not in the sandbox image \S+ \(looked on its PATH\)/);
  });

  it("kill() ends a spawned process and its children; closing the sandbox ends the rest without hanging", async () => {
    await requireDocker();
    await using workspace = createSandboxWorkspace();
    const sandbox = await createTestSandbox(workspace.path);
    try {
      const first = await sandbox.spawn({ command: "bash", args: ["-c", "sleep 1000 & sleep 1000; wait"] });
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect((await sandbox.exec({ command: "pgrep -c -x sleep" })).stdout.trim()).toBe("2");
      await first.kill();
      expect(await first.exited).toMatchObject({ exitCode: 137, signal: "SIGKILL" });
      expect((await sandbox.exec({ command: "pgrep -c -x sleep || true" })).stdout.trim()).toBe("0");
      await first.kill();

      const second = await sandbox.spawn({ command: "sleep", args: ["1000"] });
      const started = Date.now();
      await sandbox.close();
      const exit = await second.exited;
      expect(Date.now() - started).toBeLessThan(20_000);
      expect(exit).toEqual({ exitCode: null, signal: null, detail: "the sandbox was closed" });
      second.stdin.write("dropped after the exit\n");
      await expect(sandbox.spawn({ command: "true" })).rejects.toThrow(/is closed/);
    } finally {
      await sandbox.close();
    }
  });
});
