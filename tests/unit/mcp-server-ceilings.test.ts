/**
 * The operator's ceilings (`runner mcp --ceiling`, docs/mcp-server.md
 * "Trust") on run_start and run_resume, through the MCP SDK's Client over its
 * in-memory transport on the Docker-free run tier: above a ceiling is a tool
 * error naming the field, the value asked and the ceiling; unset fields run
 * with the ceiling where their default is higher.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { loadTaskFile } from "../../src/config/load-task.js";
import { createRunnerMcpServer } from "../../src/mcp-server/runner-mcp-server.js";
import { builtInCeilings, type Ceilings } from "../../src/runner/operator-ceilings.js";
import type { Runner } from "../../src/runner/runner.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { fakeRunner, writeScriptedTask } from "../helpers/fake-runner.js";

async function connect(runner: Runner, roots: string[], ceilings?: Ceilings) {
  const { server, close } = createRunnerMcpServer({ runner, workspaceRoots: roots, version: "test", ...(ceilings ? { ceilings } : {}) });
  const client = new Client({ name: "test-client", version: "1" });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  await client.connect(clientSide);
  return {
    call: async (name: string, args: Record<string, unknown>) => (await client.callTool({ name, arguments: args })) as CallToolResult,
    async [Symbol.asyncDispose]() {
      await client.close();
      await close();
    },
  };
}

function text(result: CallToolResult): string {
  return result.content.map((block) => (block.type === "text" ? block.text : "")).join("\n");
}

describe("runner mcp: operator ceilings", () => {
  it("run_start above a ceiling is a tool error naming the field, the value asked and the ceiling; nothing starts", async () => {
    await using fake = await fakeRunner();
    await using root = temporaryDirectory();
    writeScriptedTask(root.path, {
      script: { turns: [{ content: "Done." }] },
      task: { sandbox: { limits: { cpus: 12, memory: "32g" } }, timeout_sec: 36_000 },
    });
    await using mcp = await connect(fake.runner, [root.path]);
    const file = await mcp.call("run_start", { task_file: "task.yaml" });
    expect(file.isError).toBe(true);
    expect(text(file)).toContain(
      "sandbox.limits.cpus: asked 12, above this server's ceiling of 2 cpus; ask for at most that (the operator sets it: --ceiling sandbox.limits.cpus=VALUE)",
    );
    expect(text(file)).toContain(`sandbox.limits.memory: asked "32g" (${32 * 1024 ** 3} bytes), above this server's ceiling of 4g`);
    expect(text(file)).toContain("timeout_sec: asked 36000, above this server's ceiling of 3600 s");
    const adHoc = await mcp.call("run_start", { instruction: "Do it.", workspace: join(root.path, "repo"), max_steps: 1000 });
    expect(adHoc.isError).toBe(true);
    expect(text(adHoc)).toContain("max_steps: asked 1000, above this server's ceiling of 100 model calls");
    const withFile = await mcp.call("run_start", { task_file: "task.yaml", max_steps: 1000 });
    expect(withFile.isError).toBe(true);
    expect((await mcp.call("runs_list", {})).structuredContent).toMatchObject({ runs: [] });
    const resumed = await mcp.call("run_resume", { run_id: "20260101-000000-abcd", max_cost_usd: 99 });
    expect(resumed.isError).toBe(true);
    expect(text(resumed)).toContain("max_cost_usd: asked 99, above this server's ceiling of 10 USD");
  });

  it("--ceiling raises a ceiling, and an unset field runs with the ceiling where its default is higher", async () => {
    await using fake = await fakeRunner();
    await using root = temporaryDirectory();
    writeScriptedTask(root.path, { script: { turns: [{ content: "Done." }] }, task: { sandbox: { limits: { cpus: 12 } } } });
    await using mcp = await connect(fake.runner, [root.path], { ...builtInCeilings(), "sandbox.limits.cpus": 16, timeout_sec: 900 });
    const started = await mcp.call("run_start", { task_file: "task.yaml" });
    expect(started.isError, text(started)).toBeFalsy();
    const runId = (started.structuredContent as { run_id: string }).run_id;
    for (let cursor = 0, done = false; !done;) {
      const page = (await mcp.call("run_events", { run_id: runId, cursor, wait_ms: 5000 })).structuredContent as { next_cursor: number; done: boolean };
      cursor = page.next_cursor;
      done = page.done;
    }
    const task = JSON.parse(readFileSync(join(fake.home, "runs", runId, "task.json"), "utf8")) as {
      timeout_sec: number;
      sandbox: { limits: { cpus: number } };
    };
    expect(task.sandbox.limits.cpus).toBe(12);
    expect(task.timeout_sec).toBe(900);
  });

  it("run_resume of a run not started under the ceilings is a tool error naming the recorded field, value and ceiling", async () => {
    await using fake = await fakeRunner();
    await using root = temporaryDirectory();
    const { task } = writeScriptedTask(root.path, { script: { turns: [{ content: "Done." }] }, task: { max_steps: 400, timeout_sec: 600 } });
    // Started on the operator's side (as `runner exec` would): no ceiling applied.
    const own = await fake.runner.startTask(loadTaskFile(task));
    await own.result;
    await using mcp = await connect(fake.runner, [root.path]);
    const resumed = await mcp.call("run_resume", { run_id: own.id });
    expect(resumed.isError).toBe(true);
    expect(text(resumed)).toContain(
      "task.max_steps: the run was recorded with 400, above this server's ceiling of 100 model calls; give max_steps in the resume (at most the ceiling)",
    );
    const more = await mcp.call("run_resume", { run_id: own.id, max_steps: 10 });
    expect(text(more)).not.toContain("task.max_steps");
  });
});
