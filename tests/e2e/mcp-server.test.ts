/**
 * `runner mcp` end to end (issue 24): the built CLI as a child process,
 * driven over stdio by the MCP SDK's own Client, with real Docker, real git
 * and the scripted model over HTTP. A second `runner mcp` process on the
 * same RUNNER_HOME sees the first one's run while it waits for an answer.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { requireDocker } from "../helpers/docker.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { CLI, readEvents, startCli, toolCall, waitFor, writeScriptedTask } from "../helpers/runner-cli.js";

/** An MCP client of a `runner mcp` child process; `await using` closes the connection, which ends the process. */
async function startServer(home: string, root: string) {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [CLI, "mcp", "--workspace-root", root],
    env: { ...(process.env as Record<string, string>), RUNNER_HOME: home },
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const client = new Client({ name: "e2e", version: "1" });
  await client.connect(transport);
  const call = async (name: string, args: Record<string, unknown>) =>
    (await client.callTool({ name, arguments: args }, undefined, { timeout: 90_000 })) as CallToolResult;
  return {
    call,
    stderr: () => stderr,
    async ok(name: string, args: Record<string, unknown>): Promise<Record<string, unknown>> {
      const result = await call(name, args);
      expect(result.isError, `${JSON.stringify(result.content)}\nserver stderr:\n${stderr}`).toBeFalsy();
      return result.structuredContent as Record<string, unknown>;
    },
    async [Symbol.asyncDispose]() {
      await client.close();
    },
  };
}

function text(result: CallToolResult): string {
  return result.content.map((block) => (block.type === "text" ? block.text : "")).join("\n");
}

interface Envelope {
  type: string;
  data: Record<string, unknown>;
}

describe("runner mcp (the built CLI over stdio, the SDK's client, real Docker)", () => {
  it("starts a scripted run, follows its events to the end, answers its approval, reads the result and the paged patch; a second server sees the run; a bad argument is an isError naming the field", async () => {
    await requireDocker();
    await using home = temporaryDirectory("agent-runner-mcp-home-");
    await using root = temporaryDirectory("agent-runner-mcp-root-");
    writeScriptedTask(root.path, {
      script: {
        turns: [
          { tool_calls: [toolCall("write_file", { path: "median.txt", content: "3\n" })] },
          // The worker policy asks before a push; answered over MCP.
          { tool_calls: [toolCall("run_shell", { command: "git push origin main" })] },
          { content: "Fixed the median." },
        ],
      },
      files: { "median.txt": "2\n", "stats.txt": Array.from({ length: 30 }, (_, index) => `row ${index}`).join("\n") + "\n" },
      task: { name: "mcp-median", verify: { command: 'test "$(cat median.txt)" = 3' } },
    });
    await using first = await startServer(home.path, root.path);

    const bad = await first.call("run_events", { run_id: "x", max_bytes: 1 });
    expect(bad.isError).toBe(true);
    expect(text(bad)).toMatch(/max_bytes/);

    const runId = (await first.ok("run_start", { task_file: "task.yaml" })).run_id as string;
    const events: Envelope[] = [];
    let cursor = 0;
    let approved = false;
    for (let calls = 0; ; calls += 1) {
      expect(calls, "run_events never said done").toBeLessThan(500);
      const page = await first.ok("run_events", { run_id: runId, cursor, max_events: 25, wait_ms: 30_000 });
      events.push(...(page.events as Envelope[]));
      cursor = page.next_cursor as number;
      if (!approved && events.some((event) => event.type === "dev.agent-runner.approval.requested.v1")) {
        // A second server process over the same RUNNER_HOME sees the run, going on in the first one.
        {
          await using second = await startServer(home.path, root.path);
          expect((await second.ok("runs_list", {})).runs).toEqual([expect.objectContaining({ run_id: runId, task: "mcp-median", status: "running" })]);
          const seen = await second.call("run_status", { run_id: runId });
          expect(seen.structuredContent).toMatchObject({ run_id: runId, status: "running", owned_here: false, pending_approvals: [] });
          expect(text(seen)).toContain("run by another process");
        }
        const status = await first.ok("run_status", { run_id: runId });
        const pending = status.pending_approvals as { approval_id: string; subject: string }[];
        expect(pending).toEqual([expect.objectContaining({ subject: "git push origin main" })]);
        expect(await first.ok("run_approve", { run_id: runId, approval_id: pending[0]!.approval_id, decision: "allow" })).toMatchObject({ accepted: true });
        approved = true;
      }
      if (page.done) break;
    }
    expect(approved).toBe(true);
    const directory = join(home.path, "runs", runId);
    expect(events).toEqual(readEvents(directory));
    const resolved = events.filter((event) => event.type === "dev.agent-runner.approval.resolved.v1");
    expect(resolved.map((event) => event.data.answer)).toEqual(["yes"]);
    // Allowed: the push ran in the sandbox (and failed there: the repository has no remote).
    expect(events.some((event) => event.type === "dev.agent-runner.tool_call.finished.v1" && event.data.name === "run_shell")).toBe(true);

    const result = await first.call("run_result", { run_id: runId, patch_max_lines: 4 });
    expect(text(result)).toMatch(/^verify: PASSED: test "\$\(cat median\.txt\)" = 3 → exit 0\nstatus: succeeded/);
    const structured = result.structuredContent as {
      files: unknown[];
      how_to_merge: string;
      branch: string;
      patch: { text: string; next_offset: number | null };
    };
    expect(structured.files).toEqual([{ path: "median.txt", change: "modified", added: 1, removed: 1, binary: false }]);
    expect(structured.how_to_merge).toContain(`merge --ff-only ${structured.branch}`);
    const pages = [structured.patch.text];
    let next = structured.patch.next_offset;
    expect(next).toBe(4);
    while (next !== null) {
      const page = (await first.ok("run_result", { run_id: runId, patch_offset: next, patch_max_lines: 4 })).patch as {
        text: string;
        next_offset: number | null;
      };
      pages.push(page.text);
      next = page.next_offset;
    }
    expect(`${pages.join("\n")}\n`).toBe(readFileSync(join(directory, "patch.diff"), "utf8"));
    expect(first.stderr()).toContain("runner mcp: serving on stdio");
  });

  it("runner mcp --http prints its URL and token, serves the SDK's client with the token only, and stops on SIGTERM", async () => {
    await using home = temporaryDirectory("agent-runner-mcp-home-");
    await using root = temporaryDirectory("agent-runner-mcp-root-");
    const server = startCli(["mcp", "--http", "--workspace-root", root.path], { RUNNER_HOME: home.path, RUNNER_MCP_TOKEN: "e2e-token-abcdef" });
    try {
      const [, url] = await waitFor(
        "the URL on stdout",
        () => /listening on (http:\/\/127\.0\.0\.1:\d+\/mcp)\ntoken: e2e-token-abcdef\n/.exec(server.output().stdout),
        { process: server },
      );
      const unauthorized = await fetch(url!, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
      expect(unauthorized.status).toBe(401);
      const client = new Client({ name: "e2e-http", version: "1" });
      await client.connect(new StreamableHTTPClientTransport(new URL(url!), { requestInit: { headers: { Authorization: "Bearer e2e-token-abcdef" } } }));
      const listed = (await client.callTool({ name: "runs_list", arguments: {} })) as CallToolResult;
      expect(listed.structuredContent).toEqual({ runs: [] });
      await client.close();
      server.child.kill("SIGTERM");
      expect((await server.result).code).toBe(130);
    } finally {
      if (!server.exited) server.child.kill("SIGKILL");
    }
  });
});
