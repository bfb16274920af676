/**
 * The MCP server mode's tools (`runner mcp`, src/mcp-server/) driven by the
 * MCP SDK's own Client over its in-memory transport, on the Docker-free run
 * tier (fakeRunner: real git, the scripted model over loopback, sandboxes as
 * host directories whose commands the test answers). The stdio process and
 * real Docker are tests/e2e/mcp-server.test.ts's.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { ElicitRequestSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { describe, expect, it } from "vitest";
import { createRunnerMcpServer } from "../../src/mcp-server/runner-mcp-server.js";
import { createRunner, type Runner } from "../../src/runner/runner.js";
import { HostDirectorySandboxProvider, type HostDirectoryExecHandler } from "../../src/sandbox/fake/host-directory-sandbox.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { eventsFile, fakeRunner, fakeShell, fakeTierEnvironment, Gates, toolCall, writeScriptedTask } from "../helpers/fake-runner.js";

/** A client connected to a fresh server over `runner`; `elicit` answers the server's elicitation requests when given. */
async function connect(
  runner: Runner,
  roots: string[],
  elicit?: (message: string) => { action: "accept" | "decline" | "cancel"; content?: Record<string, string> },
) {
  const { server, close } = createRunnerMcpServer({ runner, workspaceRoots: roots, version: "test", progressIntervalMs: 100 });
  const client = new Client({ name: "test-client", version: "1" }, elicit ? { capabilities: { elicitation: { form: {} } } } : {});
  if (elicit) client.setRequestHandler(ElicitRequestSchema, async (request) => elicit(request.params.message));
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  await client.connect(clientSide);
  const call = async (name: string, args: Record<string, unknown>) => (await client.callTool({ name, arguments: args })) as CallToolResult;
  return {
    client,
    call,
    /** The structured content of a successful call (fails the test on an error result). */
    async ok(name: string, args: Record<string, unknown>): Promise<Record<string, unknown>> {
      const result = await call(name, args);
      expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
      return result.structuredContent as Record<string, unknown>;
    },
    async [Symbol.asyncDispose]() {
      await client.close();
      await close();
    },
  };
}

interface PatchPage {
  offset: number;
  lines: number;
  total_lines: number;
  next_offset: number | null;
  text: string;
}

/** run_result's structured content, as far as these tests read it. */
interface ResultContent {
  files: unknown[];
  diffstat: unknown;
  verify: unknown;
  branch: string;
  how_to_merge: string;
  final_message: string;
  patch: PatchPage;
}

function text(result: CallToolResult): string {
  return result.content.map((block) => (block.type === "text" ? block.text : "")).join("\n");
}

/** `check-median`: passes when the checkout's median.txt says 3. */
const verifyMedian: HostDirectoryExecHandler = async ({ request, sandbox }) => {
  if (request.command !== "check-median") return { exitCode: 127, stderr: `${request.command}: not found\n` };
  const value = (await sandbox.readFile("median.txt"))?.content.toString().trim();
  return value === "3" ? { stdout: "median ok\n" } : { exitCode: 1, stdout: `expected 3, got ${value}\n` };
};

/** run_events from `cursor` 0 until `done`, long-polling; every page's events in order. */
async function followToEnd(ok: (name: string, args: Record<string, unknown>) => Promise<Record<string, unknown>>, runId: string, maxEvents = 7) {
  const events: Record<string, unknown>[] = [];
  let cursor = 0;
  for (let calls = 0; calls < 500; calls += 1) {
    const page = await ok("run_events", { run_id: runId, cursor, max_events: maxEvents, wait_ms: 20_000 });
    events.push(...(page.events as Record<string, unknown>[]));
    expect(page.next_cursor).toBe(cursor + (page.events as unknown[]).length);
    cursor = page.next_cursor as number;
    if (page.done) return events;
  }
  throw new Error("run_events never said done");
}

describe("runner mcp's tools over the Runner (SDK client, in-memory transport, Docker-free runs)", () => {
  it("lists the eight tools, each with an input and an output schema", async () => {
    await using fake = await fakeRunner();
    await using root = temporaryDirectory();
    await using mcp = await connect(fake.runner, [root.path]);
    const { tools } = await mcp.client.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual([
      "run_approve",
      "run_cancel",
      "run_events",
      "run_result",
      "run_resume",
      "run_start",
      "run_status",
      "runs_list",
    ]);
    for (const tool of tools) {
      expect(tool.outputSchema?.type, tool.name).toBe("object");
      expect(tool.description!.length, tool.name).toBeGreaterThan(60);
    }
    const start = tools.find((tool) => tool.name === "run_start")!;
    expect(Object.keys(start.inputSchema.properties!)).toEqual(
      expect.arrayContaining(["task_file", "instruction", "workspace", "verify", "model", "policy", "allow_hosts", "max_steps"]),
    );
  });

  it("starts a task file's run, follows its events to done, reads the result (verify first) and the patch in pages; a second server on the same RUNNER_HOME sees it all", async () => {
    await using fake = await fakeRunner({ exec: verifyMedian });
    await using root = temporaryDirectory();
    const lines = Array.from({ length: 40 }, (_, index) => `line ${index}: ${"x".repeat(60)}`).join("\n");
    const { git } = writeScriptedTask(root.path, {
      script: {
        turns: [
          {
            tool_calls: [toolCall("write_file", { path: "median.txt", content: "3\n" }), toolCall("write_file", { path: "notes.txt", content: `${lines}\n` })],
          },
          { content: "Fixed the median." },
        ],
      },
      files: { "median.txt": "2\n" },
      task: { name: "fix-median", verify: { command: "check-median", timeout_sec: 30 } },
    });
    await using mcp = await connect(fake.runner, [root.path]);
    const started = await mcp.ok("run_start", { task_file: "task.yaml" });
    const runId = started.run_id as string;
    expect(runId).toMatch(/^\d{8}-\d{6}-[0-9a-f]{4}$/);
    expect(started.status).toBe("running");

    const events = await followToEnd(mcp.ok, runId);
    const directory = join(fake.home, "runs", runId);
    expect(events).toEqual(eventsFile(directory));
    expect(events.at(-1)!.type).toBe("dev.agent-runner.run.finished.v1");

    const status = await mcp.ok("run_status", { run_id: runId.slice(0, -1) });
    expect(status).toMatchObject({
      run_id: runId,
      task: "fix-median",
      status: "succeeded",
      reason: "verified",
      step: 2,
      pending_approvals: [],
      owned_here: true,
    });
    expect((status.recent_events as { type: string }[]).at(-1)!.type).toBe("run.finished");

    const first = await mcp.call("run_result", { run_id: runId, patch_max_lines: 10 });
    const result = first.structuredContent as unknown as ResultContent;
    expect(text(first)).toMatch(/^verify: PASSED: check-median → exit 0\nstatus: succeeded \(verified\)\nchanged: 2 files, \+41 -1/);
    expect(result.files).toEqual([
      { path: "median.txt", change: "modified", added: 1, removed: 1, binary: false },
      { path: "notes.txt", change: "added", added: 40, removed: 0, binary: false },
    ]);
    expect(result.diffstat).toEqual({ files: 2, added: 41, removed: 1 });
    expect(result.verify).toMatchObject({ command: "check-median", passed: true, exit_code: 0 });
    expect(result.how_to_merge).toContain(`merge --ff-only ${result.branch}`);
    expect(result.final_message).toBe("Fixed the median.");
    // The patch in pages of 10 lines: together, patch.diff exactly.
    const patch = readFileSync(join(directory, "patch.diff"), "utf8");
    const pages = [result.patch.text as string];
    let next = result.patch.next_offset as number | null;
    expect(result.patch).toMatchObject({ offset: 0, lines: 10, total_lines: patch.trimEnd().split("\n").length });
    while (next !== null) {
      const page = (await mcp.ok("run_result", { run_id: runId, patch_offset: next, patch_max_lines: 10 })).patch as PatchPage;
      expect(page.offset).toBe(next);
      pages.push(page.text);
      next = page.next_offset;
    }
    expect(`${pages.join("\n")}\n`).toBe(patch);
    // A byte bound cuts a page short too.
    const small = (await mcp.ok("run_result", { run_id: runId, patch_max_bytes: 1024, patch_max_lines: 2000 })).patch as PatchPage;
    expect(Buffer.byteLength(small.text)).toBeLessThanOrEqual(1024);
    expect(small.next_offset).toBe(small.lines);
    expect(git("show", `${result.branch}:median.txt`)).toBe("3\n");

    // Another server process over the same RUNNER_HOME: reads the run from its records.
    const other = await createRunner({ home: fake.home, sandboxProvider: new HostDirectorySandboxProvider(), environment: fakeTierEnvironment(fake.home) });
    await using second = await connect(other, [root.path]);
    const listed = await second.ok("runs_list", { status: "succeeded" });
    expect(listed.runs).toEqual([expect.objectContaining({ run_id: runId, task: "fix-median", status: "succeeded", branch: result.branch })]);
    expect(await second.ok("run_status", { run_id: runId })).toMatchObject({ status: "succeeded", step: 2, owned_here: false });
    expect(await second.ok("run_events", { run_id: runId, cursor: 0, max_events: 1000 })).toMatchObject({ events, next_cursor: events.length, done: true });
    expect((await second.ok("run_result", { run_id: runId })).diffstat).toEqual(result.diffstat);
    // It cannot cancel another process's run; a finished one has nothing to cancel.
    expect(await second.ok("run_cancel", { run_id: runId })).toMatchObject({ status: "succeeded" });
  });

  it("a bad argument or an untrusted field is an isError result naming the field and the fix", async () => {
    await using fake = await fakeRunner();
    await using root = temporaryDirectory();
    await using outside = temporaryDirectory();
    mkdirSync(join(root.path, "repo"));
    await using mcp = await connect(fake.runner, [root.path]);
    const error = async (name: string, args: Record<string, unknown>) => {
      const result = await mcp.call(name, args);
      expect(result.isError, JSON.stringify(result)).toBe(true);
      return text(result);
    };
    expect(await error("run_status", {})).toMatch(/run_id/);
    expect(await error("run_events", { run_id: "x", max_events: 0 })).toMatch(/max_events/);
    expect(await error("run_events", { run_id: "x", colour: "red" })).toMatch(/colour/);
    expect(await error("run_status", { run_id: "nope" })).toMatch(/run_id: no run nope .*runs_list/);
    expect(await error("run_start", { instruction: "x", workspace: join(root.path, "repo"), policy: "./mine.yaml" })).toMatch(/policy/);
    expect(await error("run_start", { instruction: "x" })).toMatch(/^Error: workspace: .*repository/);
    expect(await error("run_start", { instruction: "x", workspace: outside.path })).toMatch(/workspace: .*outside the allowed roots/);
    writeFileSync(join(outside.path, "task.yaml"), "name: t\ninstruction: x\n");
    expect(await error("run_start", { task_file: join(outside.path, "task.yaml") })).toMatch(/outside the allowed roots/);
    writeFileSync(join(root.path, "hooked.yaml"), "name: t\ninstruction: x\nworkspace: repo\nhooks:\n  pre_tool_use: [{ command: /bin/true }]\n");
    expect(await error("run_start", { task_file: "hooked.yaml" })).toMatch(/hooks: not allowed here: hooks run commands on the host/);
    expect(await error("run_start", { task_file: "hooked.yaml", instruction: "y" })).toMatch(/instruction: ad-hoc fields, not with task_file/);
    expect(await error("run_start", { instruction: "x", workspace: join(root.path, "repo"), model: ":x" })).toMatch(/model: expected NAME or PROVIDER:NAME/);
    // Nothing of a run was created by any of them.
    expect((await mcp.ok("runs_list", {})).runs).toEqual([]);
  });

  it("an approval question: run_status lists it, a declined elicitation leaves it waiting, run_approve's deny and reason reach the agent", async () => {
    await using fake = await fakeRunner({ exec: fakeShell() });
    await using root = temporaryDirectory();
    const { task } = writeScriptedTask(root.path, {
      script: {
        turns: [
          { tool_calls: [toolCall("run_shell", { command: "git push origin main" })] },
          { expect: { tool_result_matches: "not from the IDE" }, content: "Left it unpushed." },
        ],
      },
    });
    const asked: string[] = [];
    let declined!: () => void;
    const elicited = new Promise<void>((resolve) => (declined = resolve));
    await using mcp = await connect(fake.runner, [root.path], (message) => {
      asked.push(message);
      declined();
      return { action: "decline" };
    });
    const runId = (await mcp.ok("run_start", { task_file: task })).run_id as string;
    // Long-poll until the question is asked.
    let cursor = 0;
    for (;;) {
      const page = await mcp.ok("run_events", { run_id: runId, cursor, wait_ms: 20_000 });
      cursor = page.next_cursor as number;
      if ((page.events as { type: string }[]).some((event) => event.type === "dev.agent-runner.approval.requested.v1")) break;
      expect(page.done).toBe(false);
    }
    await elicited;
    expect(asked[0]).toContain("git push origin main");
    // Declined: no answer, still waiting.
    const status = await mcp.call("run_status", { run_id: runId });
    const pending = (status.structuredContent as { pending_approvals: Record<string, unknown>[] }).pending_approvals;
    expect(pending).toEqual([
      expect.objectContaining({ tool: "run_shell", subject: "git push origin main", rule: expect.stringMatching(/git-push/), can_allow_always: true }),
    ]);
    expect(text(status)).toContain(`WAITING FOR APPROVAL ${pending[0]!.approval_id as string}`);
    expect((await mcp.call("run_approve", { run_id: runId, approval_id: "not-an-id", decision: "allow" })).isError).toBe(true);
    expect(await mcp.ok("run_approve", { run_id: runId, decision: "deny", reason: "not from the IDE" })).toMatchObject({
      approval_id: pending[0]!.approval_id,
      accepted: true,
    });
    await followToEnd(mcp.ok, runId, 100);
    const resolved = eventsFile(join(fake.home, "runs", runId)).filter((event) => event.type === "dev.agent-runner.approval.resolved.v1");
    expect(resolved.map((event) => event.data)).toEqual([expect.objectContaining({ answer: "no", reason: "not from the IDE", timed_out: false })]);
    expect(await mcp.ok("run_status", { run_id: runId })).toMatchObject({ status: "succeeded", pending_approvals: [] });
  });

  it("an accepted elicitation answers the question (allow), like run_approve would", async () => {
    await using fake = await fakeRunner({ exec: fakeShell() });
    await using root = temporaryDirectory();
    const { task } = writeScriptedTask(root.path, {
      script: { turns: [{ tool_calls: [toolCall("run_shell", { command: "git push origin main" })] }, { content: "Pushed." }] },
    });
    await using mcp = await connect(fake.runner, [root.path], () => ({ action: "accept", content: { decision: "allow" } }));
    const runId = (await mcp.ok("run_start", { task_file: task })).run_id as string;
    await followToEnd(mcp.ok, runId, 100);
    const resolved = eventsFile(join(fake.home, "runs", runId)).filter((event) => event.type === "dev.agent-runner.approval.resolved.v1");
    expect(resolved.map((event) => event.data)).toEqual([expect.objectContaining({ answer: "yes" })]);
  });

  it("run_cancel stops a run of this server (partial work committed, cancelled); run_resume continues it", async () => {
    const gates = new Gates();
    await using fake = await fakeRunner({ exec: fakeShell(gates) });
    await using root = temporaryDirectory();
    const { task } = writeScriptedTask(root.path, {
      script: {
        turns: [
          { tool_calls: [toolCall("run_shell", { command: "echo partial >> work.txt" })] },
          { tool_calls: [toolCall("run_shell", { command: "wait-for go" })] },
          { content: "Done." },
        ],
      },
    });
    await using mcp = await connect(fake.runner, [root.path]);
    const runId = (await mcp.ok("run_start", { task_file: task })).run_id as string;
    let cursor = 0;
    for (;;) {
      const page = await mcp.ok("run_events", { run_id: runId, cursor, wait_ms: 20_000 });
      cursor = page.next_cursor as number;
      const started = (page.events as { type: string; data: { arguments?: string } }[]).some(
        (event) => event.type === "dev.agent-runner.tool_call.started.v1" && event.data.arguments?.includes("wait-for"),
      );
      if (started) break;
    }
    // Nothing happens while the command waits: a bounded long-poll returns empty, with progress notifications meanwhile.
    const progress: number[] = [];
    const idle = (await mcp.client.callTool({ name: "run_events", arguments: { run_id: runId, cursor, wait_ms: 1500 } }, undefined, {
      onprogress: (notification) => progress.push(notification.progress),
    })) as CallToolResult;
    expect(idle.structuredContent).toMatchObject({ events: [], next_cursor: cursor, done: false });
    expect(progress.length).toBeGreaterThan(0);
    expect(await mcp.ok("run_cancel", { run_id: runId, reason: "changed my mind" })).toMatchObject({ run_id: runId, status: "cancelled" });
    const result = await mcp.ok("run_result", { run_id: runId });
    expect(result).toMatchObject({ status: "cancelled", files: [expect.objectContaining({ path: "work.txt", change: "added" })] });
    expect(result.how_to_merge).toMatch(/NOT verified/);
    gates.open("go");
    const resumed = await mcp.ok("run_resume", { run_id: runId });
    expect(resumed).toMatchObject({ run_id: runId, status: "running", resumed_at_model_call: 3 });
    await followToEnd(mcp.ok, runId, 1000);
    expect(await mcp.ok("run_status", { run_id: runId })).toMatchObject({ status: "succeeded" });
  });
});

describe("runner mcp: runs a caller could not have started are out of reach", () => {
  it("refuses events, result and resume of a run whose workspace is outside the roots, and leaves it out of runs_list", async () => {
    await using fake = await fakeRunner();
    await using root = temporaryDirectory("mcp-visible-root-");
    await using outside = temporaryDirectory("mcp-visible-private-");
    const id = "20260101-000000-priv";
    mkdirSync(join(fake.runner.home, "runs", id), { recursive: true });
    writeFileSync(join(fake.runner.home, "runs", id, "task.json"), JSON.stringify({ name: "private", workspacePath: outside.path, policy: "worker" }));
    writeFileSync(join(fake.runner.home, "runs", id, "events.jsonl"), "");
    await using session = await connect(fake.runner, [root.path]);
    for (const tool of ["run_events", "run_result", "run_status", "run_resume"]) {
      const result = await session.call(tool, { run_id: id });
      expect(result.isError, tool).toBe(true);
      expect(JSON.stringify(result.content)).toMatch(/not one this server's callers may use: its workspace .* is outside the allowed roots/);
    }
    const listed = (await session.ok("runs_list", {})) as { runs: { run_id: string }[] };
    expect(listed.runs.map((run) => run.run_id)).not.toContain(id);
  });
});
