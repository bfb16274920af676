import { describe, expect, it } from "vitest";
import { FakeSandbox } from "../../src/sandbox/fake/fake-sandbox.js";
import { RecoveringSandbox } from "../../src/sandbox/recovering-sandbox.js";
import { SandboxGoneError, type SandboxProvider, type SpawnRequest } from "../../src/sandbox/sandbox.js";

/** Sandbox.spawn, the process MCP stdio servers run in, on the fakes. */
describe("Sandbox.spawn", () => {
  it("FakeSandbox runs a program on piped streams and reports its exit", async () => {
    const sandbox = new FakeSandbox();
    sandbox.programs.set("upper", (io) => {
      io.stdin.on("data", (chunk: Buffer) => io.stdout.write(chunk.toString().toUpperCase()));
      io.stdin.on("end", () => io.exit(0));
    });
    const child = await sandbox.spawn({ command: "upper" });
    let output = "";
    child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stdin.write("hello\n");
    child.stdin.end();
    expect(await child.exited).toEqual({ exitCode: 0, signal: null });
    expect(output).toBe("HELLO\n");
  });

  it("FakeSandbox kills spawned processes on stopAllProcesses and close", async () => {
    const sandbox = new FakeSandbox();
    sandbox.programs.set("forever", () => undefined);
    const first = await sandbox.spawn({ command: "forever" });
    await sandbox.stopAllProcesses();
    expect(await first.exited).toEqual({ exitCode: 137, signal: "SIGKILL" });
    const second = await sandbox.spawn({ command: "forever" });
    await sandbox.close();
    expect(await second.exited).toEqual({ exitCode: 137, signal: "SIGKILL" });
  });

  it("RecoveringSandbox spawns in a new sandbox when the old one is gone", async () => {
    const created: FakeSandbox[] = [];
    const provider: SandboxProvider = {
      async create() {
        const sandbox = new FakeSandbox();
        sandbox.programs.set("server", () => undefined);
        if (created.length === 0) {
          sandbox.spawn = async (_request: SpawnRequest) => {
            throw new SandboxGoneError("the in-container daemon went away");
          };
        }
        created.push(sandbox);
        return sandbox;
      },
      ensureWorkspaceIdle: async () => undefined,
    };
    const restarts: string[] = [];
    const sandbox = await RecoveringSandbox.create(provider, {} as never, (id) => restarts.push(id));
    const child = await sandbox.spawn({ command: "server", args: ["--x"] });
    expect(created).toHaveLength(2);
    expect(restarts).toHaveLength(1);
    expect(created[1]!.spawned.map(({ request }) => request)).toEqual([{ command: "server", args: ["--x"] }]);
    await child.kill();
  });
});
