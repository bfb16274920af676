/**
 * `runner resume` end to end: the built CLI, a scripted model over HTTP, real
 * Docker and git. A run is stopped while one tool call of a turn has finished
 * and the next is in flight (`kill -9` of the runner, or Ctrl-C), then resumed
 * from its session journal in the same RUNNER_HOME.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { requireDocker } from "../helpers/docker.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import {
  containersOfRun,
  eventsOfType,
  onlyRunDirectory,
  readEvents,
  readJson,
  removeContainersOfRun,
  runCli,
  startCli,
  toolCall,
  waitFor,
  waitForRunEvent,
  worktreePaths,
  writeScriptedTask,
} from "../helpers/runner-cli.js";
import { closeRunDisk, runPaths } from "../../src/workspace/run-disk.js";

/**
 * Turn 0 finishes a call with a visible side effect; turn 1 makes two calls,
 * write_file (finishes) then `sleep 600` (in flight when the test stops the
 * runner). Turns 2 and 3 are played after the resume and check, through
 * `expect`, what the model sees there.
 */
const STOPPED_MID_TURN_SCRIPT = {
  turns: [
    { tool_calls: [toolCall("run_shell", { command: "echo once >> count.txt" })] },
    {
      expect: { tool_result_matches: "^exit_code: 0" },
      tool_calls: [toolCall("write_file", { path: "a.txt", content: "alpha\n" }), toolCall("run_shell", { command: "sleep 600" })],
    },
    {
      // The finished call's recorded result, then an interrupted result for the sleep; nothing else.
      expect: { tool_result_matches: "^Wrote 6 bytes to a\\.txt\\nError: \\[interrupted\\] this tool call has no result[^\\n]*$" },
      tool_calls: [toolCall("run_shell", { command: "cat count.txt a.txt" }), toolCall("write_file", { path: "b.txt", content: "after resume\n" })],
    },
    {
      // count.txt holds "once" exactly once: the finished echo was not run again.
      expect: { tool_result_matches: "^exit_code: 0\\nstdout:\\nonce\\nalpha\\n" },
      content: "Done after the resume.",
    },
  ],
};

const VERIFY = { command: 'test "$(cat count.txt)" = once && test "$(cat a.txt)" = alpha && test "$(cat b.txt)" = "after resume"', timeout_sec: 60 };

const isSleep = (data: Record<string, unknown>) => data.name === "run_shell" && String(data.arguments).includes("sleep 600");

describe("runner resume (real CLI, scripted model over HTTP, real Docker)", () => {
  it("after kill -9 mid-turn: finished calls are not run again, the in-flight call is reported interrupted, the run completes", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task, repo, git } = writeScriptedTask(directory.path, { script: STOPPED_MID_TURN_SCRIPT, task: { name: "resume-kill", verify: VERIFY } });
    const environment = { RUNNER_HOME: home.path };

    const first = startCli(["exec", task], environment);
    const { runDirectory } = await waitForRunEvent(home.path, "tool_call.started", isSleep, { process: first });
    const { run_id: runId, branch } = readJson<{ run_id: string; branch: string }>(join(runDirectory, "run.json"));
    try {
      expect(first.child.kill("SIGKILL")).toBe(true);
      expect((await first.result).signal).toBe("SIGKILL");
      expect(existsSync(join(runDirectory, "report.json"))).toBe(false);

      const resumed = await runCli(["resume", runId], environment);
      expect(resumed.code, resumed.stderr + resumed.stdout).toBe(0);
      expect(resumed.stdout).toContain(`resuming run ${runId} at model call 3`);

      const report = readJson(join(runDirectory, "report.json"));
      expect(report).toMatchObject({
        run_id: runId,
        status: "succeeded",
        reason: "verified",
        resumes: 1,
        verify: { passed: true },
        branch,
        // 2 model calls before the kill, 2 after; calls: echo, write a.txt, the interrupted sleep, cat, write b.txt.
        steps: 4,
        tool_calls: 5,
        final_message: "Done after the resume.",
      });

      const events = readEvents(runDirectory);
      const started = eventsOfType(events, "tool_call.started");
      expect(started.filter((event) => String(event.data.arguments).includes("echo once"))).toHaveLength(1);
      expect(started.filter((event) => event.data.name === "write_file" && String(event.data.arguments).includes("a.txt"))).toHaveLength(1);
      expect(eventsOfType(events, "tool_call.interrupted")).toEqual([
        expect.objectContaining({ data: expect.objectContaining({ name: "run_shell", step: 1 }) }),
      ]);
      expect(eventsOfType(events, "tool_call.replayed")).toEqual([expect.objectContaining({ data: expect.objectContaining({ name: "write_file", step: 1 }) })]);
      expect(eventsOfType(events, "run.resumed")).toEqual([expect.objectContaining({ data: expect.objectContaining({ resumes: 1, next_step: 2 }) })]);
      // The killed attempt never finished; the resumed one did, once.
      expect(eventsOfType(events, "run.finished")).toEqual([expect.objectContaining({ data: expect.objectContaining({ status: "succeeded", exit_code: 0 }) })]);

      // Nothing of either attempt is left: containers, the worktree directory, its git registration.
      expect(containersOfRun(runId)).toEqual([]);
      expect(existsSync(runPaths(runDirectory).worktree)).toBe(false);
      expect(existsSync(runPaths(runDirectory).disk)).toBe(false);
      expect(worktreePaths(repo)).toHaveLength(1);

      // The branch holds the final commit, on top of the partial work the sweep saved.
      expect(git("rev-parse", branch).trim()).toBe(report.head_commit);
      expect(git("log", "--format=%s", `main..${branch}`).trim().split("\n")).toEqual([
        `agent-runner: resume-kill (run ${runId})`,
        `agent-runner: run ${runId} (runner died: partial work)`,
      ]);
      expect(git("show", `${branch}:count.txt`)).toBe("once\n");
      expect(git("show", `${branch}:a.txt`)).toBe("alpha\n");
      expect(git("show", `${branch}:b.txt`)).toBe("after resume\n");

      const session = readJson<{ agents: { main: { messages: { role: string; content: string | null }[] } } }>(join(runDirectory, "session.json"));
      expect(session.agents.main.messages.filter((message) => message.role === "tool" && String(message.content).includes("[interrupted]"))).toHaveLength(1);
      expect(session.agents.main.messages.at(-1)).toMatchObject({ role: "assistant", content: "Done after the resume." });
    } finally {
      if (!first.exited) first.child.kill("SIGKILL");
      removeContainersOfRun(runId);
    }
  });

  it("after Ctrl-C mid-call: exit 130 and status cancelled; resume is refused while that runner lives, then continues the run to exit 0", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task, git } = writeScriptedTask(directory.path, { script: STOPPED_MID_TURN_SCRIPT, task: { name: "resume-sigint", verify: VERIFY } });
    const environment = { RUNNER_HOME: home.path };

    const first = startCli(["exec", task], environment);
    const { runDirectory } = await waitForRunEvent(home.path, "tool_call.started", isSleep, { process: first });
    const { run_id: runId, branch } = readJson<{ run_id: string; branch: string }>(join(runDirectory, "run.json"));
    try {
      // Its runner is alive: no second runner may take the run.
      const refused = await runCli(["resume", runId], environment);
      expect(refused.code, refused.stderr).toBe(2);
      expect(refused.stderr).toContain(`run ${runId} is still running`);
      expect(first.exited).toBeNull();

      expect(first.child.kill("SIGINT")).toBe(true);
      const stopped = await first.result;
      expect(stopped.code, stopped.stderr).toBe(130);
      expect(stopped.stdout).toContain(`continue it: runner resume ${runId}`);
      expect(readJson(join(runDirectory, "report.json"))).toMatchObject({ status: "cancelled", reason: "interrupted", steps: 2, tool_calls: 2 });
      // The partial work is on the branch; the worktree and the container are gone.
      expect(git("show", `${branch}:a.txt`)).toBe("alpha\n");
      expect(existsSync(runPaths(runDirectory).worktree)).toBe(false);
      expect(existsSync(runPaths(runDirectory).disk)).toBe(false);
      expect(containersOfRun(runId)).toEqual([]);

      const resumed = await runCli(["resume", runId.slice(0, 20)], environment);
      expect(resumed.code, resumed.stderr + resumed.stdout).toBe(0);
      const report = readJson(join(runDirectory, "report.json"));
      expect(report).toMatchObject({ status: "succeeded", reason: "verified", resumes: 1, steps: 4, tool_calls: 5 });
      const events = readEvents(runDirectory);
      expect(eventsOfType(events, "tool_call.started").filter((event) => String(event.data.arguments).includes("echo once"))).toHaveLength(1);
      expect(eventsOfType(events, "tool_call.interrupted")).toHaveLength(1);
      expect(eventsOfType(events, "run.finished").map((event) => event.data.status)).toEqual(["cancelled", "succeeded"]);
      expect(containersOfRun(runId)).toEqual([]);
      expect(git("show", `${branch}:count.txt`)).toBe("once\n");
    } finally {
      if (!first.exited) first.child.kill("SIGKILL");
      removeContainersOfRun(runId);
    }
  });

  /** A run whose agent is done (2 model calls) and whose runner is killed while `verify.command` runs (VERIFY_MODE=hang). */
  async function killDuringVerification(directory: string, home: string, maxSteps: number) {
    const { task, git } = writeScriptedTask(directory, {
      script: { turns: [{ tool_calls: [toolCall("write_file", { path: "done.txt", content: "done\n" })] }, { content: "Finished." }] },
      task: {
        name: "resume-verify",
        max_steps: maxSteps,
        sandbox: { pass_env: ["VERIFY_MODE"] },
        // The verify checkout is <run>/verify on the host: the marker file tells the test the command is running.
        verify: { command: 'if [ "$VERIFY_MODE" = hang ]; then touch verify-hanging; sleep 600; fi; test "$(cat done.txt)" = done', timeout_sec: 120 },
      },
    });
    const first = startCli(["exec", task], { RUNNER_HOME: home, VERIFY_MODE: "hang" });
    try {
      const { runDirectory } = await waitForRunEvent(home, "verify.started", () => true, { process: first });
      const { run_id: runId, branch } = readJson<{ run_id: string; branch: string }>(join(runDirectory, "run.json"));
      await waitFor("the verify command to run", () => existsSync(join(runPaths(runDirectory).verify, "verify-hanging")), { process: first });
      return { runId, branch, runDirectory, git };
    } finally {
      first.child.kill("SIGKILL");
      await first.result;
    }
  }

  it("after kill -9 during verification: resume verifies the committed work again, without another model call", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { runId, branch, runDirectory, git } = await killDuringVerification(directory.path, home.path, 20);
    try {
      const resumed = await runCli(["resume", runId], { RUNNER_HOME: home.path, VERIFY_MODE: "pass" });
      expect(resumed.code, resumed.stderr + resumed.stdout).toBe(0);
      expect(readJson(join(runDirectory, "report.json"))).toMatchObject({
        status: "succeeded",
        reason: "verified",
        resumes: 1,
        steps: 2,
        tool_calls: 1,
        final_message: "Finished.",
      });
      const events = readEvents(runDirectory);
      expect(eventsOfType(events, "model_call.started")).toHaveLength(2);
      expect(eventsOfType(events, "verify.finished")).toEqual([expect.objectContaining({ data: expect.objectContaining({ passed: true }) })]);
      expect(git("show", `${branch}:done.txt`)).toBe("done\n");
      expect(existsSync(runPaths(runDirectory).verify)).toBe(false);
      expect(containersOfRun(runId)).toEqual([]);
    } finally {
      removeContainersOfRun(runId);
    }
  });

  // The agent had answered: only commit and verification remain, whatever max_steps says.
  it("after kill -9 during verification of a run that used all of max_steps: resume still only verifies (no --max-steps needed)", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { runId, runDirectory } = await killDuringVerification(directory.path, home.path, 2);
    try {
      const resumed = await runCli(["resume", runId], { RUNNER_HOME: home.path, VERIFY_MODE: "pass" });
      expect(resumed.code, resumed.stderr + resumed.stdout).toBe(0);
      expect(readJson(join(runDirectory, "report.json"))).toMatchObject({ status: "succeeded", reason: "verified", steps: 2 });
    } finally {
      removeContainersOfRun(runId);
    }
  });

  it("an errored run (the model rate-limited for good) resumes once the model answers again, without redoing finished turns", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const turns = (faults: unknown[]) => [
      { tool_calls: [toolCall("run_shell", { command: "echo first >> log.txt" })] },
      { faults, expect: { tool_result_matches: "^exit_code: 0" }, tool_calls: [toolCall("run_shell", { command: "echo second >> log.txt" })] },
      { content: "Logged twice." },
    ];
    const limited = { status: 429, retry_after: 0.05 };
    const { task, git } = writeScriptedTask(directory.path, {
      script: { turns: turns([limited, limited]) },
      task: { name: "resume-error", model: { provider: "scripted", script: "./script.yaml", max_retries: 1 } },
    });
    const environment = { RUNNER_HOME: home.path };
    const failed = await runCli(["exec", task], environment);
    expect(failed.code, failed.stderr + failed.stdout).toBe(3);
    const runDirectory = onlyRunDirectory(home.path)!;
    const { run_id: runId, branch } = readJson<{ run_id: string; branch: string }>(join(runDirectory, "run.json"));
    expect(readJson(join(runDirectory, "report.json"))).toMatchObject({ status: "error", reason: "rate_limited", steps: 1, tool_calls: 1 });

    // The model is back (the scripted server plays the script file again on resume).
    writeFileSync(join(directory.path, "script.yaml"), JSON.stringify({ turns: turns([]) }));
    const resumed = await runCli(["resume", runId], environment);
    expect(resumed.code, resumed.stderr + resumed.stdout).toBe(0);
    expect(resumed.stdout).toContain(`resuming run ${runId} at model call 2`);
    expect(readJson(join(runDirectory, "report.json"))).toMatchObject({
      status: "succeeded",
      resumes: 1,
      steps: 3,
      tool_calls: 2,
      final_message: "Logged twice.",
    });
    expect(git("show", `${branch}:log.txt`)).toBe("first\nsecond\n");
    const events = readEvents(runDirectory);
    expect(eventsOfType(events, "tool_call.started")).toHaveLength(2);
    expect(eventsOfType(events, "tool_call.interrupted")).toEqual([]);
    expect(eventsOfType(events, "run.finished").map((event) => event.data.status)).toEqual(["error", "succeeded"]);
  });

  // Resume claims the run atomically (resume.lock, O_EXCL) before touching anything.
  it("two resumes of the same dead run at once: exactly one continues it, the other is refused (exit 2)", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const script = {
      turns: [
        { tool_calls: [toolCall("run_shell", { command: "sleep 600" })] },
        { tool_calls: [toolCall("run_shell", { command: "echo resumed >> count.txt" })] },
        { content: "done" },
      ],
    };
    const { task, git } = writeScriptedTask(directory.path, { script, task: { name: "resume-race" } });
    const environment = { RUNNER_HOME: home.path };
    const first = startCli(["exec", task], environment);
    const { runDirectory } = await waitForRunEvent(home.path, "tool_call.started", () => true, { process: first });
    const { run_id: runId, branch } = readJson<{ run_id: string; branch: string }>(join(runDirectory, "run.json"));
    try {
      first.child.kill("SIGKILL");
      await first.result;
      const results = await Promise.all([runCli(["resume", runId], environment), runCli(["resume", runId], environment)]);
      expect(results.map((result) => result.code).sort(), results.map((result) => result.stderr + result.stdout).join("\n----\n")).toEqual([0, 2]);
      expect(readJson(join(runDirectory, "report.json"))).toMatchObject({ status: "succeeded", resumes: 1 });
      expect(git("show", `${branch}:count.txt`)).toBe("resumed\n");
      const events = readEvents(runDirectory);
      expect(eventsOfType(events, "run.resumed")).toHaveLength(1);
      expect(eventsOfType(events, "run.finished")).toHaveLength(1);
    } finally {
      if (!first.exited) first.child.kill("SIGKILL");
      removeContainersOfRun(runId);
    }
  });

  it("refuses (exit 2, saying why) to resume a run that does not exist or already succeeded", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const environment = { RUNNER_HOME: home.path };

    const missing = await runCli(["resume", "no-such-run"], environment);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/no run no-such-run in .*runs \(see `runner runs`\)/);

    const { task } = writeScriptedTask(directory.path, { script: { turns: [{ content: "Nothing to do." }] }, task: { name: "resume-done" } });
    const done = await runCli(["exec", task], environment);
    expect(done.code, done.stderr + done.stdout).toBe(0);
    const runId = /run directory: \S+\/runs\/(\S+)/.exec(done.stdout)![1]!;
    const reportBefore = readFileSync(join(home.path, "runs", runId, "report.json"), "utf8");

    const again = await runCli(["resume", runId], environment);
    expect(again.code).toBe(2);
    expect(again.stderr).toContain(`run ${runId} already ended succeeded (finished_unverified)`);
    // The refusal touched nothing.
    expect(readFileSync(join(home.path, "runs", runId, "report.json"), "utf8")).toBe(reportBefore);
  });

  it("runner show prints the transcript of a run whose runner died (only session.jsonl, no session.json or report)", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task } = writeScriptedTask(directory.path, { script: STOPPED_MID_TURN_SCRIPT, task: { name: "show-dead" } });
    const environment = { RUNNER_HOME: home.path };

    const first = startCli(["exec", task], environment);
    const { runDirectory } = await waitForRunEvent(home.path, "tool_call.started", isSleep, { process: first });
    const { run_id: runId, branch } = readJson<{ run_id: string; branch: string }>(join(runDirectory, "run.json"));
    try {
      first.child.kill("SIGKILL");
      await first.result;
      expect(existsSync(join(runDirectory, "session.json"))).toBe(false);
      expect(existsSync(join(runDirectory, "session.jsonl"))).toBe(true);

      const runs = await runCli(["runs", "--json"], environment);
      expect(JSON.parse(runs.stdout.trim())).toMatchObject({ id: runId, status: "unfinished", branch });

      const shown = await runCli(["show", runId.slice(0, 20)], environment);
      expect(shown.code, shown.stderr).toBe(0);
      expect(shown.stdout).toContain(`(no report.json: the run stopped before it finished; \`runner resume ${runId}\` continues it)`);
      expect(shown.stdout).toContain("== transcript (main)");
      expect(shown.stdout).toContain("[user] Do what the script says.");
      expect(shown.stdout).toContain('→ run_shell {"command":"echo once >> count.txt"}');
      expect(shown.stdout).toMatch(/→ run_shell \{"command":"echo once >> count\.txt"\}\n {4}exit_code: 0\n/);
      expect(shown.stdout).toContain('→ write_file {"path":"a.txt","content":"alpha\\n"}');
      expect(shown.stdout).toContain('→ run_shell {"command":"sleep 600"}');
    } finally {
      if (!first.exited) first.child.kill("SIGKILL");
      removeContainersOfRun(runId);
      // No later start sweeps this RUNNER_HOME: release the dead run's disk here.
      await closeRunDisk(runDirectory);
    }
  });
});
