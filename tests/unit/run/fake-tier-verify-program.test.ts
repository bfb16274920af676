/**
 * A verify (or setup) command that cannot run is the task's mistake, found
 * before the paid run, never the agent's failure (issue 26 item 2): the
 * program of `verify.command` is looked up in the sandbox before the first
 * model call (task_invalid, exit 2), a setup command bash cannot run is
 * task_invalid naming `sandbox.setup[i]`, and a verify that exits 126/127
 * after the run is error/verify_unrunnable. Docker-free: the sandbox is the
 * host-directory fake whose exec handler plays bash's `command -v`.
 */
import { describe, expect, it } from "vitest";
import { outcomeOfReport } from "../../../src/batch/outcomes.js";
import { firstProgram } from "../../../src/delivery/command-program.js";
import { exitCodeOfReport } from "../../../src/run/run-report.js";
import type { HostDirectoryExecHandler } from "../../../src/sandbox/fake/host-directory-sandbox.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { eventData, eventsFile, fakeRunner, toolCall, writeScriptedTask } from "../../helpers/fake-runner.js";

/** Plays bash for the programs in `installed`: `command -v` finds them; running one answers `run(command)`; anything else is not found (127). */
function bashWith(installed: string[], run: (command: string) => { exitCode: number; stdout?: string } = () => ({ exitCode: 0 })): HostDirectoryExecHandler {
  return ({ request }) => {
    const lookup = /^command -v '([^']+)' >\/dev\/null 2>&1 \|\| echo '([^']+)'$/.exec(request.command);
    if (lookup) return installed.includes(lookup[1]!) ? { stdout: "" } : { stdout: `${lookup[2]}\n` };
    const program = request.command.split(/\s/)[0]!;
    if (!installed.includes(program)) return { exitCode: 127, stderr: `bash: ${program}: command not found\n` };
    return run(request.command);
  };
}

const WRITE_AND_FINISH = { turns: [{ tool_calls: [toolCall("write_file", { path: "x.txt", content: "x\n" })] }, { content: "Done." }] };

describe("the program a command runs first", () => {
  it.each([
    ["pytset -q", "pytset"],
    ["python3 -m pytest -q", "python3"],
    ["cd tests && pytest -q", "pytest"],
    ["set -e; export CI=1; make test", "make"],
    ["FOO=1 pytest", "pytest"],
    ["pytest -q | tee out.txt", "pytest"],
    ["./run-tests.sh", "./run-tests.sh"],
    ["/usr/bin/env python3 t.py", "/usr/bin/env"],
  ])("%s → %s", async (command, program) => {
    expect(await firstProgram(command)).toBe(program);
  });

  it.each([
    "PATH=/opt/bin:$PATH pytest",
    "export PATH=$HOME/.local/bin:$PATH; pytest",
    "source venv/bin/activate && pytest",
    ". venv/bin/activate && pytest",
    "$PYTEST -q",
    "cd sub && ./run.sh",
    "eval pytest",
    "alias t=pytest; t",
    "echo 'unterminated",
  ])("%s → cannot be told from the text", async (command) => {
    expect(await firstProgram(command)).toBeNull();
  });
});

describe("a verify or setup command that cannot run", () => {
  it("verify.command naming a program that is not in the image: task_invalid (exit 2) naming the field, before any model call", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: bashWith(["python3"]) });
    const { task, git } = writeScriptedTask(directory.path, {
      script: WRITE_AND_FINISH,
      task: { name: "typo", verify: { command: "pytset -q", timeout_sec: 30 } },
    });
    const run = await fake.runner.start(task);
    const report = await run.result;
    expect(report).toMatchObject({ status: "error", reason: "task_invalid", steps: 0 });
    expect(report.error).toMatch(/^verify\.command: its program "pytset" is not in the task's sandbox/);
    expect(exitCodeOfReport(report)).toBe(2);
    expect(outcomeOfReport(report)).toMatchObject({ status: "error", reason: "task_invalid" });
    const events = eventsFile(run.directory);
    expect(eventData(events, "model_call.started")).toEqual([]);
    expect(eventData(events, "tool_call.started")).toEqual([]);
    // Nothing was changed: the run leaves no branch (issue 26).
    expect(report.branch).toBeNull();
    expect(git("branch", "--list", "runner/*").trim()).toBe("");
  });

  it("a program that is there passes the check and the run goes on", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: bashWith(["pytest"]) });
    const { task } = writeScriptedTask(directory.path, {
      script: WRITE_AND_FINISH,
      task: { name: "ok", verify: { command: "cd . && pytest -q", timeout_sec: 30 } },
    });
    // `cd . && pytest -q` is not a command this fake bash runs: the check passes on pytest, the verify then exits 127.
    const report = await (await fake.runner.start(task)).result;
    expect(report.steps).toBe(2);
  });

  it("a verify command that exits 127 after the run is error/verify_unrunnable, not the agent's failure", async () => {
    await using directory = temporaryDirectory();
    // `command -v` finds the program, yet running the verify exits 127 (a script whose interpreter is missing, say).
    await using fake = await fakeRunner({
      exec: bashWith(["./check.sh"], () => ({ exitCode: 127, stdout: "./check.sh: line 1: pytset: command not found\n" })),
    });
    const { task } = writeScriptedTask(directory.path, {
      script: WRITE_AND_FINISH,
      task: { name: "unrunnable", verify: { command: "./check.sh", timeout_sec: 30 } },
    });
    const report = await (await fake.runner.start(task)).result;
    expect(report).toMatchObject({ status: "error", reason: "verify_unrunnable", steps: 2, verify: { exit_code: 127, passed: false } });
    expect(report.error).toMatch(/^verify\.command "\.\/check\.sh" could not run \(exit 127: command not found\)/);
    expect(report.error).toContain("pytset: command not found");
    expect(exitCodeOfReport(report)).toBe(3);
    expect(outcomeOfReport(report)).toMatchObject({ status: "error", reason: "verify_unrunnable" });
  });

  it("a sandbox.setup command bash cannot run is task_invalid naming sandbox.setup[i], before any model call", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: bashWith(["true"]) });
    const { task } = writeScriptedTask(directory.path, {
      script: WRITE_AND_FINISH,
      task: { name: "setup-typo", sandbox: { setup: ["true", "pip-instal -r requirements.txt"] } },
    });
    const run = await fake.runner.start(task);
    const report = await run.result;
    expect(report).toMatchObject({ status: "error", reason: "task_invalid", steps: 0 });
    expect(report.error).toMatch(/^sandbox\.setup\[1\]: "pip-instal -r requirements\.txt" exited 127 \(command not found\)/);
    expect(exitCodeOfReport(report)).toBe(2);
    expect(eventData(eventsFile(run.directory), "model_call.started")).toEqual([]);
  });
});
