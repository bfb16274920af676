/**
 * Runs that die are resumed through the library API, without Docker (issue 11
 * item 5): a runner killed mid-turn (SIGKILL: no clean-up, no report) has its
 * journal replayed, a tool call that finished is not run again, the one in
 * flight is reported interrupted; one killed during verification is only
 * verified again; an errored run resumes in the same process.
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { runPaths } from "../../../src/workspace/run-disk.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { eventData, eventsFile, fakeRunner, fakeShell, isEvent, toolCall, writeScriptedTask } from "../../helpers/fake-runner.js";

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
    // The branch the killed attempt recorded: the resumed one goes on on it.
    const recorded = (JSON.parse(readFileSync(join(runDirectory, "run.json"), "utf8")) as { branch: string }).branch;

    const run = await fake.runner.resume(first.runId);
    expect(run.resumed).toEqual({ atModelCall: 3, earlierEvents: expect.any(Number) });
    const report = await run.result;

    expect(report).toMatchObject({
      run_id: first.runId,
      status: "succeeded",
      reason: "finished_unverified",
      resumes: 1,
      branch: recorded,
      // 2 model calls before the kill, 2 after; calls: echo, write a.txt, the interrupted sleep, echo, write b.txt.
      steps: 4,
      tool_calls: 5,
      final_message: "Done after the resume.",
    });
    // The resumed attempt ran only its own commands: the first echo is not played again.
    expect(fake.provider.commands.map((command) => command.request.command).filter((command) => !command.includes(" ls-tree "))).toEqual([
      "echo twice >> count.txt",
    ]);
    expect(git("show", `${recorded}:count.txt`)).toBe("once\ntwice\n");
    expect(git("show", `${recorded}:a.txt`)).toBe("alpha\n");
    expect(git("show", `${recorded}:b.txt`)).toBe("after resume\n");
    expect(git("rev-parse", recorded).trim()).toBe(report.head_commit);

    const events = eventsFile(runDirectory);
    expect(events.slice(0, run.resumed!.earlierEvents).some((envelope) => isEvent(envelope, "run.finished"))).toBe(false);
    expect(eventData(events, "tool_call.started").filter((data) => String(data.arguments).includes("echo once"))).toHaveLength(1);
    expect(eventData(events, "tool_call.interrupted")).toEqual([expect.objectContaining({ name: "run_shell", step: 1 })]);
    expect(eventData(events, "tool_call.replayed")).toEqual([expect.objectContaining({ name: "write_file", step: 1 })]);
    // The resume's sweep committed the dead attempt's worktree and removed it: the resume makes a new one of the branch.
    expect(eventData(events, "run.resumed")).toEqual([expect.objectContaining({ resumes: 1, next_step: 2, worktree: "recreated" })]);
    expect(git("log", "--format=%s", `main..${recorded}`).trim().split("\n")).toEqual([
      `agent-runner: resume-kill (run ${first.runId})`,
      `agent-runner: run ${first.runId} (runner died: partial work)`,
    ]);
    expect(git("show", `${recorded}~1:a.txt`)).toBe("alpha\n");
    expect(eventData(events, "run.finished")).toEqual([expect.objectContaining({ status: "succeeded", exit_code: 0 })]);
    expect(existsSync(runPaths(runDirectory).worktree)).toBe(false);
    const session = JSON.parse(readFileSync(join(runDirectory, "session.json"), "utf8")) as {
      agents: { main: { messages: { role: string; content: string | null }[] } };
    };
    expect(session.agents.main.messages.filter((message) => message.role === "tool" && String(message.content).includes("[interrupted]"))).toHaveLength(1);
  });
  it("after the runner is killed during verification: resume verifies the committed work again, without a model call", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell() });
    const { task, git } = writeScriptedTask(directory.path, {
      script: { turns: [{ tool_calls: [toolCall("write_file", { path: "done.txt", content: "done\n" })] }, { content: "Finished." }] },
      // max_steps 2: all used; the agent had answered, so the resume needs none.
      task: { name: "resume-verify", max_steps: 2, verify: { command: "grep -q done done.txt", timeout_sec: 30 } },
    });
    const first = await runUntilKilled(fake.home, task, "grep -q done done.txt");
    expect(first.signal, first.stderr).toBe("SIGKILL");
    const runDirectory = join(fake.home, "runs", first.runId);

    const run = await fake.runner.resume(first.runId);
    const report = await run.result;
    expect(report).toMatchObject({
      status: "succeeded",
      reason: "verified",
      resumes: 1,
      steps: 2,
      tool_calls: 1,
      final_message: "Finished.",
      verify: { passed: true },
    });
    expect(git("show", `${report.branch}:done.txt`)).toBe("done\n");
    const events = eventsFile(runDirectory);
    expect(eventData(events, "model_call.started")).toHaveLength(2);
    expect(eventData(events.slice(run.resumed!.earlierEvents), "model_call.started")).toEqual([]);
    expect(eventData(events, "verify.finished")).toEqual([expect.objectContaining({ passed: true })]);
    expect(fake.provider.created.map((sandbox) => sandbox.spec.agentId)).toEqual(["main", "verify"]);
    expect(existsSync(runPaths(runDirectory).verify)).toBe(false);
  });

  it("a run stopped at its step limit goes on with --max-steps N more model calls (and only with them), its earlier turns not played again", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell() });
    const { task, git } = writeScriptedTask(directory.path, {
      script: {
        turns: [
          { tool_calls: [toolCall("run_shell", { command: "echo one >> steps.txt" })] },
          { tool_calls: [toolCall("run_shell", { command: "echo two >> steps.txt" })] },
          { content: "Finished after more steps." },
        ],
      },
      task: { name: "more-steps", max_steps: 1, verify: { command: "grep -q two steps.txt", timeout_sec: 30 } },
    });
    const first = await fake.runner.start(task);
    expect(await first.result).toMatchObject({ status: "failed", reason: "max_steps", steps: 1 });

    await expect(fake.runner.resume(first.id)).rejects.toThrow(/stopped at its step limit \(1 model calls, max_steps 1\); continue it with --max-steps N/);
    const run = await fake.runner.resume(first.id, { maxSteps: 5 });
    expect(run.resumed).toEqual({ atModelCall: 2, earlierEvents: expect.any(Number) });
    const report = await run.result;
    expect(report).toMatchObject({ status: "succeeded", reason: "verified", resumes: 1, steps: 3, final_message: "Finished after more steps." });
    expect(git("show", `${report.branch}:steps.txt`)).toBe("one\ntwo\n");
    expect(fake.provider.commands.map((command) => command.request.command).filter((command) => command.startsWith("echo"))).toEqual([
      "echo one >> steps.txt",
      "echo two >> steps.txt",
    ]);
    // The raised limit is the run's own now: task.json holds 1 + 5.
    expect(JSON.parse(readFileSync(join(run.directory, "task.json"), "utf8"))).toMatchObject({ max_steps: 6 });
    // A finished run stays finished.
    await expect(fake.runner.resume(first.id, { maxSteps: 5 })).rejects.toThrow(/already ended succeeded/);
  });

  it("an errored run (the model rate-limited for good) resumes in the same process once the model answers, without redoing finished turns", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell() });
    const turns = (faults: unknown[]) => [
      { tool_calls: [toolCall("run_shell", { command: "echo first >> log.txt" })] },
      { faults, expect: { tool_result_matches: "^exit_code: 0" }, tool_calls: [toolCall("run_shell", { command: "echo second >> log.txt" })] },
      { content: "Logged twice." },
    ];
    const limited = { status: 429, retry_after: 0 };
    const { task, git } = writeScriptedTask(directory.path, {
      script: { turns: turns([limited, limited]) },
      task: { name: "resume-error", model: { provider: "scripted", script: "./script.yaml", max_retries: 1 } },
    });
    const failed = await (await fake.runner.start(task)).result;
    expect(failed).toMatchObject({ status: "error", reason: "rate_limited", steps: 1, tool_calls: 1 });

    writeFileSync(join(directory.path, "script.yaml"), JSON.stringify({ turns: turns([]) }));
    const run = await fake.runner.resume(failed.run_id);
    expect(run.resumed).toMatchObject({ atModelCall: 2 });
    const report = await run.result;
    expect(report).toMatchObject({ status: "succeeded", resumes: 1, steps: 3, tool_calls: 2, final_message: "Logged twice." });
    expect(git("show", `${failed.branch}:log.txt`)).toBe("first\nsecond\n");
    expect(fake.provider.commands.map((command) => command.request.command).filter((command) => command.startsWith("echo"))).toEqual([
      "echo first >> log.txt",
      "echo second >> log.txt",
    ]);
    expect(eventData(eventsFile(run.directory), "run.finished").map((data) => data.status)).toEqual(["error", "succeeded"]);
  });

  it("a resumed run counts its subagents' steps, tool calls and tokens once, not again for each attempt", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell() });
    const worker = toolCall("agent", { mode: "worker", description: "write it", prompt: "Write it.", verify: "test -f note.txt" });
    const { task } = writeScriptedTask(directory.path, {
      script: {
        turns: [{ tool_calls: [worker] }, { content: "Done." }],
        subagents: { "write it": { turns: [{ tool_calls: [toolCall("write_file", { path: "note.txt", content: "x\n" })] }, { content: "Written." }] } },
      },
      task: { name: "resume-subagents", max_steps: 1 },
    });
    const stopped = await (await fake.runner.start(task)).result;
    expect(stopped).toMatchObject({ status: "failed", reason: "max_steps" });
    const counted = stopped.agents.map((agent) => ({ id: agent.id, steps: agent.steps, tool_calls: agent.tool_calls, usage: agent.usage }));
    expect(counted).toEqual([expect.objectContaining({ id: "w1", steps: 2, tool_calls: 1 })]);

    const resumed = await (await fake.runner.resume(stopped.run_id, { maxSteps: 1 })).result;
    expect(resumed).toMatchObject({ status: "succeeded", resumes: 1 });
    expect(resumed.agents.map((agent) => ({ id: agent.id, steps: agent.steps, tool_calls: agent.tool_calls, usage: agent.usage }))).toEqual(counted);
  });
});
