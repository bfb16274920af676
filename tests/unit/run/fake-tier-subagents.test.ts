/**
 * Subagents in the Docker-free tier (issue 11 item 5), through the library
 * API: a worker's work is committed on its branch, verified on a clean
 * checkout and only then merged into the parent's branch; a failed
 * verification is not merged; two workers changing one line end in a
 * conflict that leaves the parent's files as they were; an explore agent's
 * workspace is the parent's, read-only.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { runPaths } from "../../../src/workspace/run-disk.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { eventData, eventsFile, fakeRunner, fakeShell, firstEvent, Gates, toolCall, writeScriptedTask } from "../../helpers/fake-runner.js";
import { join } from "node:path";

const worker = (description: string, verify: string) => toolCall("agent", { mode: "worker", description, prompt: `${description}.`, verify });
const editThenFinish = (path: string, content: string, answer: string) => ({
  turns: [{ tool_calls: [toolCall("write_file", { path, content })] }, { content: answer }],
});

describe("subagents in the Docker-free tier", () => {
  it("a verified worker is merged: its branch, the merge commit on the parent's branch, one sandbox per agent and checkout", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell() });
    const { task, git } = writeScriptedTask(directory.path, {
      files: { "calc.txt": "times2\n" },
      task: { name: "delegate", verify: { command: "grep -q times3 calc.txt", timeout_sec: 30 } },
      script: {
        turns: [
          { tool_calls: [worker("make it triple", "grep -q times3 calc.txt")] },
          {
            expect: { tool_result_matches: "^Worker w1's work passed verification .* and was merged into your branch; files changed: calc\\.txt\\." },
            content: "w1 merged.",
          },
        ],
        subagents: { "make it triple": editThenFinish("calc.txt", "times3\n", "tripled.") },
      },
    });
    const run = await fake.runner.start(task);
    const report = await run.result;

    expect(report).toMatchObject({ status: "succeeded", reason: "verified", verify: { passed: true } });
    expect(report.agents).toEqual([
      expect.objectContaining({
        id: "w1",
        parent: "main",
        mode: "worker",
        status: "merged",
        branch: `${report.branch}-w1`,
        verify: expect.objectContaining({ passed: true }),
        merge: expect.objectContaining({ status: "merged", files: ["calc.txt"] }),
      }),
    ]);
    expect(git("show", `${report.branch}-w1:calc.txt`)).toBe("times3\n");
    expect(git("show", `${report.branch}:calc.txt`)).toBe("times3\n");
    expect(git("log", "--merges", "--format=%s", report.branch!).trim()).toBe("agent-runner: merge worker w1 (make it triple)");
    expect(git("show", "main:calc.txt")).toBe("times2\n");
    const paths = runPaths(run.directory);
    expect(fake.provider.created.map((sandbox) => [sandbox.spec.agentId, sandbox.spec.workspace.hostPath])).toEqual([
      ["main", paths.worktree],
      ["w1", join(paths.workers, "w1")],
      ["w1-verify", join(paths.workers, "w1-verify")],
      ["verify", paths.verify],
    ]);
    expect(fake.provider.created.every((sandbox) => sandbox.closed)).toBe(true);
    // The snapshot and the merge happened with the parent's sandbox frozen.
    expect(fake.provider.sandboxesOf("main")[0]!.freezes).toBe(2);
    expect(eventData(eventsFile(run.directory), "subagent.finished")).toEqual([
      expect.objectContaining({ agent_id: "w1", status: "merged", merge: "merged", verify_passed: true, files: ["calc.txt"] }),
    ]);
    // Each verification says whose work it is: the worker's before its merge, then the main agent's.
    expect(eventData(eventsFile(run.directory), "verify.finished").map((data) => [data.agent_id, data.passed])).toEqual([
      ["w1", true],
      ["main", true],
    ]);
  });

  it("a worker whose verification fails is not merged: the parent's files are unchanged, its branch keeps the work", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell() });
    const { task, git } = writeScriptedTask(directory.path, {
      files: { "calc.txt": "times2\n" },
      task: { name: "delegate-badly", verify: { command: "grep -q times2 calc.txt", timeout_sec: 30 } },
      script: {
        turns: [
          { tool_calls: [worker("make it triple", "grep -q times3 calc.txt")] },
          {
            expect: { tool_result_matches: "^Worker w1's work was NOT merged: verification `grep -q times3 calc.txt` failed \\(exit 1\\)" },
            content: "w1 failed.",
          },
        ],
        subagents: { "make it triple": editThenFinish("calc.txt", "times4\n", "quadrupled instead.") },
      },
    });
    const run = await fake.runner.start(task);
    const report = await run.result;

    expect(report).toMatchObject({ status: "succeeded", reason: "verified" });
    expect(report.agents).toEqual([
      expect.objectContaining({
        id: "w1",
        status: "not_merged",
        verify: expect.objectContaining({ passed: false, exit_code: 1 }),
        merge: { status: "skipped", files: [], detail: "verify_failed" },
      }),
    ]);
    expect(git("show", `${report.agents[0]!.branch}:calc.txt`)).toBe("times4\n");
    // The run itself changed nothing: it leaves no branch of its own (issue 26), only the worker's.
    expect(report.branch).toBeNull();
    const recorded = (JSON.parse(readFileSync(join(run.directory, "run.json"), "utf8")) as { branch: string }).branch;
    expect(report.agents[0]!.branch).toBe(`${recorded}-w1`);
    expect(git("branch", "--list", recorded).trim()).toBe("");
    expect(eventData(eventsFile(run.directory), "subagent.finished")).toEqual([
      expect.objectContaining({ agent_id: "w1", status: "not_merged", verify_passed: false }),
    ]);
  });

  it("an explore agent works on the parent's worktree mounted read-only: its write is refused, the parent's files are unchanged", async () => {
    await using directory = temporaryDirectory();
    // `build` stands for a program that writes files where no policy can see it; the explore agent gets the
    // permissive ci policy, so only the read-only mount is left to stop it.
    const shell = fakeShell();
    await using fake = await fakeRunner({
      exec: async (exec) => {
        if (exec.request.command !== "build") return shell(exec);
        await exec.sandbox.writeFile("calc.txt", Buffer.from("planted\n"));
        return {};
      },
    });
    const { task, git } = writeScriptedTask(directory.path, {
      files: { "calc.txt": "times2\n" },
      task: { name: "explore", subagents: { explore_policy: "ci" } },
      script: {
        turns: [
          { tool_calls: [toolCall("agent", { mode: "explore", description: "look around", prompt: "Try to write." })] },
          { expect: { tool_result_matches: "^Explore subagent e1 \\(look around\\) finished\\. Its report:\\nrefused\\.$" }, content: "Explored." },
        ],
        subagents: {
          "look around": {
            turns: [
              { tool_calls: [toolCall("run_shell", { command: "build" })] },
              { expect: { tool_result_matches: "EROFS: read-only file system" }, content: "refused." },
            ],
          },
        },
      },
    });
    const run = await fake.runner.start(task);
    const report = await run.result;

    expect(report).toMatchObject({ status: "succeeded", reason: "finished_unverified" });
    expect(report.agents).toEqual([expect.objectContaining({ id: "e1", mode: "explore", status: "finished", branch: null })]);
    const explorer = fake.provider.sandboxesOf("e1");
    expect(explorer.map((sandbox) => sandbox.spec.workspace)).toEqual([{ hostPath: runPaths(run.directory).worktree, readOnly: true }]);
    // Nothing changed: no run branch is left (issue 26).
    expect(report.branch).toBeNull();
    expect(git("branch", "--list", "runner/*").trim()).toBe("");
  });

  it("two workers change the same line: the first is merged, the second conflicts; the parent keeps the first's version, the second's branch is kept", async () => {
    await using directory = temporaryDirectory();
    const gates = new Gates();
    await using fake = await fakeRunner({ exec: fakeShell(gates) });
    const { task, git } = writeScriptedTask(directory.path, {
      files: { "calc.txt": "times2\n" },
      task: { name: "conflicting-workers", verify: { command: "grep -q times3 calc.txt", timeout_sec: 30 } },
      script: {
        turns: [
          { tool_calls: [worker("make it triple", "grep -q times3 calc.txt"), worker("make it quadruple", "grep -q times4 calc.txt")] },
          {
            expect: {
              tool_result_matches:
                "^Worker w1's work passed verification [^\\n]* and was merged into your branch; files changed: calc\\.txt\\.[\\s\\S]*\\n" +
                "Worker w2's work passed verification but was NOT merged: it conflicts with your branch in calc\\.txt\\.[\\s\\S]*" +
                "<<<<<<< [^\\n]*\\ntimes3\\n=======\\ntimes4\\n>>>>>>> ",
            },
            content: "w1 merged; w2 conflicted.",
          },
        ],
        subagents: {
          "make it triple": editThenFinish("calc.txt", "times3\n", "tripled."),
          // Finishes only once w1 has been merged, so it merges second.
          "make it quadruple": {
            turns: [
              { tool_calls: [toolCall("write_file", { path: "calc.txt", content: "times4\n" })] },
              { tool_calls: [toolCall("run_shell", { command: "wait-for w1-merged" })] },
              { content: "quadrupled." },
            ],
          },
        },
      },
    });
    const run = await fake.runner.start(task);
    void firstEvent(run.events(), "subagent.finished", (data) => data.agent_id === "w1").then(() => gates.open("w1-merged"));
    const report = await run.result;

    expect(report).toMatchObject({ status: "succeeded", reason: "verified", verify: { passed: true } });
    expect(report.agents.map((agent) => [agent.id, agent.status, agent.merge?.status, agent.verify?.passed])).toEqual([
      ["w1", "merged", "merged", true],
      ["w2", "not_merged", "conflict", true],
    ]);
    expect(report.agents[1]!.merge!.files).toEqual(["calc.txt"]);
    expect(git("show", `${report.branch}-w2:calc.txt`)).toBe("times4\n");
    expect(git("show", `${report.head_commit}:calc.txt`)).toBe("times3\n");
    // Nothing half-merged: the parent's branch holds w1's file as it was (no conflict markers), one merge commit (w1's).
    expect(git("ls-tree", "-r", "--name-only", report.head_commit!).trim()).toBe("calc.txt");
    expect(git("log", "--merges", "--format=%s", report.branch!).trim()).toBe("agent-runner: merge worker w1 (make it triple)");
  });
});
