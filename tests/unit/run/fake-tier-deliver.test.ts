/**
 * Whole runs through the library API without Docker (issue 11 item 5): the
 * main agent edits a file, the host commits it on its run branch, the
 * verification runs on a clean checkout of that commit, and the report,
 * the branch and the events say so. Cancel ends the run with its partial
 * work committed. The sandboxes are the run's real directories
 * (HostDirectorySandboxProvider); the model is the scripted one over loopback.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { HostDirectoryExecHandler } from "../../../src/sandbox/fake/host-directory-sandbox.js";
import { runPaths } from "../../../src/workspace/run-disk.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { eventData, eventsFile, fakeRunner, firstEvent, toolCall, writeScriptedTask } from "../../helpers/fake-runner.js";

/** `check-median`: the verification, passing when the checkout's median.txt says 3. */
const verifyMedian: HostDirectoryExecHandler = async ({ request, sandbox }) => {
  if (request.command !== "check-median") return { exitCode: 127, stderr: `${request.command}: not found\n` };
  const file = await sandbox.readFile("median.txt");
  const value = file?.content.toString().trim();
  return value === "3" ? { stdout: "median ok\n" } : { exitCode: 1, stdout: `expected 3, got ${value}\n` };
};

const EDIT_SCRIPT = (content: string) => ({
  turns: [{ tool_calls: [toolCall("write_file", { path: "median.txt", content })] }, { content: "Fixed the median." }],
});

describe("a run in the Docker-free tier: edit, commit, verify", () => {
  it("a verified edit: succeeded, the branch holds the edit, verify ran on a clean checkout of the commit", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: verifyMedian });
    const { task, git } = writeScriptedTask(directory.path, {
      script: EDIT_SCRIPT("3\n"),
      files: { "median.txt": "2\n" },
      task: { name: "fix-median", verify: { command: "check-median", timeout_sec: 30 } },
    });
    const run = await fake.runner.start(task);
    const report = await run.result;

    expect(report).toMatchObject({
      status: "succeeded",
      reason: "verified",
      branch: expect.stringMatching(/^runner\/fix-median-[0-9a-f]+$/),
      steps: 2,
      tool_calls: 1,
      final_message: "Fixed the median.",
      patch: "patch.diff",
    });
    expect(report.verify).toMatchObject({ command: "check-median", exit_code: 0, passed: true });
    expect(report.verify!.output_tail).toContain("median ok");
    expect(git("rev-parse", report.branch!).trim()).toBe(report.head_commit);
    expect(git("show", `${report.branch}:median.txt`)).toBe("3\n");
    expect(git("show", "main:median.txt")).toBe("2\n");
    expect(readFileSync(join(run.directory, "patch.diff"), "utf8")).toContain("+3");

    // One sandbox for the agent on its worktree, one for the verification on its own checkout.
    expect(fake.provider.created.map((sandbox) => [sandbox.spec.agentId, sandbox.spec.workspace.hostPath])).toEqual([
      ["main", runPaths(run.directory).worktree],
      ["verify", runPaths(run.directory).verify],
    ]);
    expect(fake.provider.created.every((sandbox) => sandbox.closed)).toBe(true);
    expect(fake.provider.commands.filter((command) => command.request.command === "check-median").map((command) => command.agentId)).toEqual(["verify"]);
    // Nothing of the run's directories is left but its records.
    expect(existsSync(runPaths(run.directory).worktree)).toBe(false);
    expect(existsSync(runPaths(run.directory).verify)).toBe(false);

    const events = eventsFile(run.directory);
    // A subscriber joining after the end replays exactly events.jsonl.
    const replayed = [];
    for await (const envelope of run.events({ from: 0 })) replayed.push(envelope);
    expect(replayed).toEqual(events);
    expect(eventData(events, "workspace.committed")).toEqual([expect.objectContaining({ branch: report.branch!, commit: report.head_commit, changed: true })]);
    expect(eventData(events, "verify.finished")).toEqual([expect.objectContaining({ command: "check-median", passed: true, exit_code: 0 })]);
    expect(eventData(events, "run.finished")).toEqual([expect.objectContaining({ status: "succeeded", exit_code: 0 })]);
  });

  it("a verification that fails: failed/verify_failed, the edit still committed on the branch", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: verifyMedian });
    const { task, git } = writeScriptedTask(directory.path, {
      script: EDIT_SCRIPT("4\n"),
      files: { "median.txt": "2\n" },
      task: { name: "wrong-median", verify: { command: "check-median", timeout_sec: 30 } },
    });
    const run = await fake.runner.start(task);
    const report = await run.result;

    expect(report).toMatchObject({ status: "failed", reason: "verify_failed", verify: { passed: false, exit_code: 1 } });
    expect(report.verify!.output_tail).toContain("expected 3, got 4");
    expect(git("show", `${report.branch}:median.txt`)).toBe("4\n");
    expect(git("show", "main:median.txt")).toBe("2\n");
    expect(eventData(eventsFile(run.directory), "run.finished")).toEqual([expect.objectContaining({ status: "failed", exit_code: 1 })]);
  });

  it("merge: a verified run fast-forwards the user's branch; a failed one leaves it", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: verifyMedian });
    const { task, git } = writeScriptedTask(directory.path, {
      script: EDIT_SCRIPT("3\n"),
      files: { "median.txt": "2\n" },
      task: { name: "merge-me", verify: { command: "check-median", timeout_sec: 30 } },
    });
    const run = await fake.runner.start(task, { merge: true });
    const report = await run.result;
    expect(report).toMatchObject({ status: "succeeded", reason: "verified", merge: { merged: true, branch: "refs/heads/main" } });
    expect(git("rev-parse", "main").trim()).toBe(report.head_commit);
    expect(git("show", "main:median.txt")).toBe("3\n");
    expect(eventData(eventsFile(run.directory), "workspace.merged")).toEqual([expect.objectContaining({ merged: true, branch: "refs/heads/main" })]);

    writeFileSync(join(directory.path, "script.yaml"), JSON.stringify(EDIT_SCRIPT("4\n")));
    const failing = await fake.runner.start(task, { merge: true });
    const failed = await failing.result;
    expect(failed).toMatchObject({ status: "failed", reason: "verify_failed", merge: null });
    expect(git("rev-parse", "main").trim()).toBe(report.head_commit);
    expect(eventData(eventsFile(failing.directory), "workspace.merged")).toEqual([]);
  });

  it("cancel while a command runs: cancelled with the reason, the command killed, the partial work on the branch", async () => {
    await using directory = temporaryDirectory();
    let killed = false;
    await using fake = await fakeRunner({
      exec: ({ request, signal }) =>
        request.command === "sleep 600"
          ? new Promise((_resolve, reject) => signal.addEventListener("abort", () => ((killed = true), reject(signal.reason)), { once: true }))
          : { exitCode: 127 },
    });
    const { task, git } = writeScriptedTask(directory.path, {
      script: {
        turns: [
          { tool_calls: [toolCall("write_file", { path: "partial.txt", content: "half\n" })] },
          { tool_calls: [toolCall("run_shell", { command: "sleep 600" })] },
          { content: "never" },
        ],
      },
      task: { name: "cancel-me" },
    });
    const run = await fake.runner.start(task);
    await firstEvent(run.events(), "tool_call.started", (data) => data.name === "run_shell");
    await run.cancel("the test stopped it");
    const report = await run.result;

    expect(killed).toBe(true);
    expect(report).toMatchObject({ status: "cancelled", reason: "interrupted", error: "cancelled: the test stopped it", steps: 2 });
    expect(git("show", `${report.branch}:partial.txt`)).toBe("half\n");
    expect(git("log", "--format=%s", "-1", report.branch!).trim()).toBe(`agent-runner: cancel-me (run ${run.id}, cancelled: partial work)`);
    expect(existsSync(runPaths(run.directory).worktree)).toBe(false);
    expect(eventData(eventsFile(run.directory), "run.finished")).toEqual([expect.objectContaining({ status: "cancelled", exit_code: 130 })]);
  });
});
