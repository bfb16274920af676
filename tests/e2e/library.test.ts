/**
 * The run core as a library (docs/library.md "Library"): `createRunner` / `start` /
 * `RunHandle`, with real Docker, real git and the scripted model over HTTP.
 * The example examples/library/two-runs.mjs runs two tasks concurrently in
 * one process, through the package's own export, with different secrets.
 */
import { execFileSync, spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { createRunner, type ApprovalRequest } from "../../src/runner/runner.js";
import type { RunEnvelope } from "../../src/events/event-catalogue.js";
import { requireDocker, SANDBOX_IMAGE } from "../helpers/docker.js";
import { createGitRepository, temporaryDirectory } from "../helpers/git-repository.js";
import { randomToken, waitFor } from "../integration/security-harness.js";
import { runPaths } from "../../src/workspace/run-disk.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** Every file below `directory` (no symlinks followed). */
function filesBelow(directory: string): string[] {
  const files: string[] = [];
  for (const entry of readdirSync(directory, { withFileTypes: true })) {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) files.push(...filesBelow(path));
    else if (entry.isFile()) files.push(path);
  }
  return files;
}

async function collect(events: AsyncIterable<RunEnvelope>): Promise<RunEnvelope[]> {
  const all: RunEnvelope[] = [];
  for await (const envelope of events) all.push(envelope);
  return all;
}

function fileEnvelopes(directory: string): RunEnvelope[] {
  return readFileSync(join(directory, "events.jsonl"), "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as RunEnvelope);
}

describe("the Runner library", () => {
  it("examples/library/two-runs.mjs: two runs at once in one process, neither secret in clear in any record or log line", async () => {
    await requireDocker();
    await using home = temporaryDirectory("agent-runner-library-home-");
    const first = randomToken("first-secret-");
    const second = randomToken("second-secret-");
    const child = spawn(process.execPath, [join(ROOT, "examples/library/two-runs.mjs")], {
      cwd: ROOT,
      env: { ...process.env, RUNNER_HOME: home.path, FIRST_SECRET: first, SECOND_SECRET: second, RUNNER_LOG_LEVEL: "debug" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    expect(code, stderr).toBe(0);
    const reports = stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { run_id: string; directory: string; status: string });
    expect(reports.map((report) => report.status)).toEqual(["succeeded", "succeeded"]);
    expect(new Set(reports.map((report) => report.run_id)).size).toBe(2);
    // Both ran at once: each run's span overlaps the other's.
    const spans = reports.map((report) => {
      const lines = fileEnvelopes(report.directory);
      return [Date.parse(lines[0]!.time!), Date.parse(lines.at(-1)!.time!)] as const;
    });
    expect(spans[0]![0] < spans[1]![1] && spans[1]![0] < spans[0]![1]).toBe(true);
    for (const report of reports) {
      // The secret was printed inside the sandbox, and recorded redacted.
      expect(readFileSync(join(report.directory, "events.jsonl"), "utf8")).toContain("my secret is [REDACTED]");
    }
    const records = filesBelow(home.path).filter((path) => !path.endsWith(".img") && statSync(path).size < 64 * 1024 * 1024);
    expect(records.length).toBeGreaterThan(8);
    for (const path of records) {
      const text = readFileSync(path, "latin1");
      expect(text.includes(first) || text.includes(second), path).toBe(false);
    }
    expect(stdout + stderr).not.toContain(first);
    expect(stdout + stderr).not.toContain(second);
  });

  it("events(): a subscriber joining mid-run and one after the end see exactly events.jsonl, in order, no gap, no duplicate", async () => {
    await requireDocker();
    await using home = temporaryDirectory("agent-runner-library-home-");
    await using repository = createGitRepository({ "a.txt": "a\n" }, { prefix: "agent-runner-library-repo-" });
    await using scripts = temporaryDirectory("agent-runner-library-script-");
    const script = join(scripts.path, "script.yaml");
    const turns = [1, 2, 3].map((index) => ({ tool_calls: [{ name: "run_shell", arguments: { command: `echo step-${index}` } }] }));
    writeFileSync(script, JSON.stringify({ turns: [...turns, { content: "Done." }] }));
    await using runner = await createRunner({ home: home.path });
    const run = await runner.start({
      name: "replay",
      instruction: "x",
      workspace: repository.root,
      model: { provider: "scripted", script },
      sandbox: { image: SANDBOX_IMAGE },
    });
    expect(run.id).toMatch(/^\d{8}-\d{6}-[0-9a-f]{4}$/);
    const fromStart = collect(run.events({ from: 0 }));
    // Joins mid-run: once the first tool call has finished.
    let midRun: Promise<RunEnvelope[]> | null = null;
    for await (const envelope of run.events()) {
      if (envelope.type === "dev.agent-runner.tool_call.finished.v1") {
        midRun = collect(run.events({ from: 0 }));
        break;
      }
    }
    const report = await run.result;
    expect(report.status).toBe("succeeded");
    const written = fileEnvelopes(run.directory);
    expect(written.at(-1)!.type).toBe("dev.agent-runner.run.finished.v1");
    expect(await fromStart).toEqual(written);
    expect(await midRun).toEqual(written);
    expect(await collect(run.events({ from: 0 }))).toEqual(written);
    expect(await collect(run.events({ from: 5 }))).toEqual(written.slice(5));
    expect(new Set(written.map((envelope) => envelope.id)).size).toBe(written.length);
  });

  it("approvals: an ApprovalBroker answers the policy's questions, and each question and answer is an event", async () => {
    await requireDocker();
    await using home = temporaryDirectory("agent-runner-library-home-");
    await using repository = createGitRepository({ "a.txt": "a\n" }, { prefix: "agent-runner-library-repo-" });
    await using files = temporaryDirectory("agent-runner-library-script-");
    const script = join(files.path, "script.yaml");
    const shell = (command: string) => ({ tool_calls: [{ name: "run_shell", arguments: { command } }] });
    writeFileSync(script, JSON.stringify({ turns: [shell("echo first"), shell("echo second"), { content: "Done." }] }));
    const policy = join(files.path, "ask.yaml");
    writeFileSync(policy, "name: ask\ndescription: asks before every command\ntools: { allow: ['*'] }\ndefault_command_risk: confirm\nconfirmations: prompt\n");
    const questions: ApprovalRequest[] = [];
    const approvals = {
      async request(approval: ApprovalRequest) {
        questions.push(approval);
        return questions.length === 1 ? { answer: "yes" as const } : { answer: "no" as const, reason: "not today" };
      },
    };
    await using runner = await createRunner({ home: home.path });
    const run = await runner.start(
      { name: "ask", instruction: "x", workspace: repository.root, model: { provider: "scripted", script }, sandbox: { image: SANDBOX_IMAGE }, policy },
      { approvals },
    );
    const report = await run.result;
    expect(questions.map((question) => question.runId)).toEqual([run.id, run.id]);
    expect(questions[0]!.question).toContain("echo first");
    // The broker gets the call itself, not only the sentence: agent, tool call, tool, the matched command, rule and reason.
    expect(questions[0]).toMatchObject({
      agentId: "main",
      toolName: "run_shell",
      subject: "echo first",
      rule: "default_command_risk",
      canRemember: expect.any(Boolean),
    });
    expect(questions[0]!.toolCallId).toMatch(/\S/);
    expect(questions[0]!.reason).toMatch(/\S/);
    expect(report.denials).toEqual({ default_command_risk: 1 });
    const types = fileEnvelopes(run.directory).map((envelope) => envelope.type.replace(/^dev\.agent-runner\.|\.v1$/g, ""));
    expect(types.filter((type) => type.startsWith("approval."))).toEqual([
      "approval.requested",
      "approval.resolved",
      "approval.requested",
      "approval.resolved",
    ]);
    const resolved = fileEnvelopes(run.directory)
      .filter((envelope) => envelope.type === "dev.agent-runner.approval.resolved.v1")
      .map((envelope) => envelope.data);
    expect(resolved).toMatchObject([
      { answer: "yes", reason: null },
      { answer: "no", reason: "not today", timed_out: false },
    ]);
  });

  it("cancel(reason): the run ends cancelled (as Ctrl-C) with its partial work committed and resumes in the same process; start() refuses a bad task before anything exists", async () => {
    await requireDocker();
    await using home = temporaryDirectory("agent-runner-library-home-");
    await using repository = createGitRepository({ "a.txt": "a\n" }, { prefix: "agent-runner-library-repo-" });
    await using scripts = temporaryDirectory("agent-runner-library-script-");
    const script = join(scripts.path, "script.yaml");
    writeFileSync(script, JSON.stringify({ turns: [{ tool_calls: [{ name: "run_shell", arguments: { command: "echo partial > work.txt; sleep 600" } }] }] }));
    await using runner = await createRunner({ home: home.path });
    await expect(runner.start({ name: "Bad Name", instruction: "x", workspace: repository.root })).rejects.toThrow(/name/);
    await using notARepository = temporaryDirectory("agent-runner-library-plain-");
    await expect(runner.start({ name: "plain", instruction: "x", workspace: notARepository.path })).rejects.toThrow(/not a git repository/);
    const run = await runner.start({
      name: "cancel-me",
      instruction: "x",
      workspace: repository.root,
      model: { provider: "scripted", script },
      sandbox: { image: SANDBOX_IMAGE },
      tool_timeout_ms: 600_000,
    });
    // The command has written its file (seen from the host) and sleeps: cancel now.
    await waitFor("the agent's partial work", 60_000, () => existsSync(join(runPaths(run.directory).worktree, "work.txt")));
    await run.cancel("test");
    const report = await run.result;
    expect(report).toMatchObject({ status: "cancelled", reason: "interrupted", error: "cancelled: test" });
    expect(execFileSync("git", ["show", `${report.branch}:work.txt`], { cwd: repository.root, encoding: "utf8" })).toBe("partial\n");
    expect(readdirSync(join(home.path, "runs"))).toEqual([run.id]);
    // Resumed by the same process that cancelled it: the call in flight is reported interrupted, the script has no more turns.
    const again = await runner.resume(run.id);
    expect(again.id).toBe(run.id);
    expect(await again.result).toMatchObject({ status: "succeeded", resumes: 1 });
    const types = (await collect(again.events({ from: 0 }))).map((envelope) => envelope.type);
    expect(types.filter((type) => type === "dev.agent-runner.run.started.v1")).toHaveLength(1);
    expect(types).toContain("dev.agent-runner.run.resumed.v1");
    expect(types).toContain("dev.agent-runner.tool_call.interrupted.v1");
  });
});
