/**
 * A run whose runner dies mid-turn (SIGKILL: no clean-up, no report) is
 * resumed through the library API, without Docker (issue 11 item 5): the
 * journal is replayed, a tool call that finished is not run again, the one in
 * flight is reported interrupted, and the run completes on the same branch.
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { runPaths } from "../../../src/workspace/run-disk.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { eventData, eventsFile, fakeRunner, fakeShell, toolCall, writeScriptedTask } from "../../helpers/fake-runner.js";

const CHILD = fileURLToPath(new URL("../../helpers/fake-runner-child.ts", import.meta.url));

/** Turn 1's second call is in flight when the runner dies; turns 2 and 3 run after the resume and check what the model sees. */
const SCRIPT = {
  turns: [
    { tool_calls: [toolCall("run_shell", { command: "echo once >> count.txt" })] },
    { tool_calls: [toolCall("write_file", { path: "a.txt", content: "alpha\n" }), toolCall("run_shell", { command: "sleep 600" })] },
    {
      expect: { tool_result_matches: "^Wrote 6 bytes to a\\.txt\\nError: \\[interrupted\\] this tool call has no result[^\\n]*$" },
      tool_calls: [toolCall("run_shell", { command: "echo twice >> count.txt" }), toolCall("write_file", { path: "b.txt", content: "after resume\n" })],
    },
    { content: "Done after the resume." },
  ],
};

function runUntilKilled(home: string, task: string, dieAt: string): Promise<{ runId: string; signal: NodeJS.Signals | null; stderr: string }> {
  const child = spawn(process.execPath, ["--import", "tsx", CHILD, home, task, dieAt], { stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve) => child.on("close", (_code, signal) => resolve({ runId: stdout.trim(), signal, stderr })));
}

describe("resume in the Docker-free tier", () => {
  it("after the runner is killed mid-turn: finished calls are not run again, the in-flight one is interrupted, the run completes", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell() });
    const { task, git } = writeScriptedTask(directory.path, { script: SCRIPT, task: { name: "resume-kill" } });

    const first = await runUntilKilled(fake.home, task, "sleep 600");
    expect(first.signal, first.stderr).toBe("SIGKILL");
    const runDirectory = join(fake.home, "runs", first.runId);
    expect(existsSync(join(runDirectory, "report.json"))).toBe(false);

    const run = await fake.runner.resume(first.runId);
    expect(run.resumed).toEqual({ atModelCall: 3, earlierEvents: expect.any(Number) });
    const report = await run.result;

    expect(report).toMatchObject({
      run_id: first.runId,
      status: "succeeded",
      reason: "finished_unverified",
      resumes: 1,
      branch: `runner/${first.runId}`,
      // 2 model calls before the kill, 2 after; calls: echo, write a.txt, the interrupted sleep, echo, write b.txt.
      steps: 4,
      tool_calls: 5,
      final_message: "Done after the resume.",
    });
    // The resumed attempt ran only its own commands: the first echo is not played again.
    expect(fake.provider.commands.map((command) => command.request.command).filter((command) => !command.includes(" ls-tree "))).toEqual(["echo twice >> count.txt"]);
    expect(git("show", `runner/${first.runId}:count.txt`)).toBe("once\ntwice\n");
    expect(git("show", `runner/${first.runId}:a.txt`)).toBe("alpha\n");
    expect(git("show", `runner/${first.runId}:b.txt`)).toBe("after resume\n");
    expect(git("rev-parse", `runner/${first.runId}`).trim()).toBe(report.head_commit);

    const events = eventsFile(runDirectory);
    expect(events.slice(0, run.resumed!.earlierEvents).some((envelope) => envelope.type.includes("run.finished"))).toBe(false);
    expect(eventData(events, "tool_call.started").filter((data) => String(data.arguments).includes("echo once"))).toHaveLength(1);
    expect(eventData(events, "tool_call.interrupted")).toEqual([expect.objectContaining({ name: "run_shell", step: 1 })]);
    expect(eventData(events, "tool_call.replayed")).toEqual([expect.objectContaining({ name: "write_file", step: 1 })]);
    expect(eventData(events, "run.resumed")).toEqual([expect.objectContaining({ resumes: 1, next_step: 2, worktree: "reused" })]);
    expect(eventData(events, "run.finished")).toEqual([expect.objectContaining({ status: "succeeded", exit_code: 0 })]);
    expect(existsSync(runPaths(runDirectory).worktree)).toBe(false);
    const session = JSON.parse(readFileSync(join(runDirectory, "session.json"), "utf8")) as { agents: { main: { messages: { role: string; content: string | null }[] } } };
    expect(session.agents.main.messages.filter((message) => message.role === "tool" && String(message.content).includes("[interrupted]"))).toHaveLength(1);
  });
});
