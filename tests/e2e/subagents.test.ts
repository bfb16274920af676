/**
 * Subagents end to end (issue 4): the built CLI, the scripted model over HTTP
 * (subagents scripted by the description of their `agent` call), real Docker
 * and real git. Each test is one `runner exec` in its own RUNNER_HOME and
 * repository; what the parent agent sees is asserted with the script's own
 * `expect` (an unmet expect ends the run with exit 3), what lands on disk with
 * git and docker afterwards.
 */
import { execFileSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { requireDocker } from "../helpers/docker.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import {
  containersOfRun,
  eventsOfType,
  readEvents,
  readJson,
  runCli,
  startCli,
  toolCall,
  waitFor,
  waitForRunEvent,
  worktreePaths,
  writeScriptedTask,
  allowAllPolicy,
} from "../helpers/runner-cli.js";
import {
  branches,
  containersNamed,
  containersOfAgent,
  hostProcesses,
  inspectGit,
  inspectGitStatus,
  isolatedGitEnvironment,
  mainToolResults,
  mainWorktree,
  readReport,
  release,
  removeRunContainers,
  runDirectoryOf,
  waitForRelease,
} from "../helpers/subagent-e2e.js";
import { runPaths } from "../../src/workspace/run-disk.js";
import { CONTAINER_GIT_DIRECTORY } from "../../src/workspace/run-worktree.js";

/** Three small modules with one bug each and a test file each (as examples/parallel-workers). */
const THREE_MODULES: Record<string, string> = {
  "shapes.py": "def square_area(side):\n    return side * 4\n",
  "test_shapes.py": "from shapes import square_area\n\ndef test_square_area():\n    assert square_area(3) == 9\n",
  "money.py": "def cents(amount):\n    return int(amount * 10)\n",
  "test_money.py": "from money import cents\n\ndef test_cents():\n    assert cents(1.25) == 125\n",
  "words.py": 'def shout(text):\n    return text.lower() + "!"\n',
  "test_words.py": 'from words import shout\n\ndef test_shout():\n    assert shout("hi") == "HI!"\n',
};

/** One module whose tests pass at the start. */
const CALC: Record<string, string> = {
  "calc.py": "def add(a, b):\n    return a + b\n\n\ndef scale(x):\n    return x * 2\n",
  "test_calc.py": "from calc import add, scale\n\ndef test_add():\n    assert add(2, 3) == 5\n\ndef test_scale():\n    assert scale(4) == 8\n",
};

const PYTEST = { command: "python3 -m pytest -q -p no:cacheprovider", timeout_sec: 120 };

/** A worker's script: one edit, then its final answer. */
function editThenFinish(path: string, oldString: string, newString: string, summary: string) {
  return {
    turns: [
      { tool_calls: [toolCall("edit_file", { path, old_string: oldString, new_string: newString })] },
      { expect: { tool_result_matches: `^Edited ${path}: replaced 1 occurrence` }, content: summary },
    ],
  };
}

/** `git worktree list` of the repository holds only the user's own checkout. */
function onlyMainCheckout(repo: string): void {
  expect(worktreePaths(repo)).toEqual([inspectGit(repo, ["rev-parse", "--show-toplevel"]).trim()]);
}

describe("subagents (real CLI, scripted model over HTTP, real Docker and git)", () => {
  beforeAll(async () => {
    await requireDocker();
  });

  it("three workers in parallel edit different files: each verified and merged, the final verify passes, and they overlapped in time", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const worker = (description: string, file: string, test: string) =>
      toolCall("agent", {
        mode: "worker",
        description,
        prompt: `Fix ${file}; check with ${test}.`,
        verify: `python3 -m pytest -q -p no:cacheprovider ${test}`,
      });
    const merged = (file: string) =>
      `Worker w\\d's work passed verification \\(\`python3 -m pytest -q -p no:cacheprovider test_${file}\\.py\`\\) and was merged into your branch; files changed: ${file}\\.py\\.`;
    const { task, repo } = writeScriptedTask(directory.path, {
      files: THREE_MODULES,
      task: { name: "three-workers", verify: PYTEST, max_parallel: 3 },
      script: {
        turns: [
          {
            tool_calls: [
              worker("fix shapes", "shapes.py", "test_shapes.py"),
              worker("fix money", "money.py", "test_money.py"),
              worker("fix words", "words.py", "test_words.py"),
            ],
          },
          {
            // Results come back in call order, each naming what was merged.
            expect: { tool_result_matches: `^${merged("shapes")}[\\s\\S]*\\n${merged("money")}[\\s\\S]*\\n${merged("words")}` },
            // The parent's container already sees all three merges.
            tool_calls: [toolCall("run_shell", { command: "python3 -m pytest -q -p no:cacheprovider" })],
          },
          { expect: { tool_result_matches: "3 passed" }, content: "All three fixed by workers." },
        ],
        subagents: {
          "fix shapes": editThenFinish("shapes.py", "side * 4", "side * side", "square_area fixed."),
          "fix money": editThenFinish("money.py", "int(amount * 10)", "round(amount * 100)", "cents fixed."),
          "fix words": editThenFinish("words.py", "text.lower()", "text.upper()", "shout fixed."),
        },
      },
    });
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr + result.stdout).toBe(0);
    const runDirectory = runDirectoryOf(result);
    const report = readReport(runDirectory);
    const runId = report.run_id;
    const branch = readJson<{ branch: string }>(join(runDirectoryOf(result), "run.json")).branch;
    expect(report).toMatchObject({ status: "succeeded", reason: "verified", verify: { passed: true } });
    expect(report.verify!.output_tail).toMatch(/3 passed/);

    const byDescription = Object.fromEntries(report.agents.map((agent) => [agent.description, agent]));
    expect(Object.keys(byDescription).sort()).toEqual(["fix money", "fix shapes", "fix words"]);
    for (const [description, file] of [
      ["fix shapes", "shapes.py"],
      ["fix money", "money.py"],
      ["fix words", "words.py"],
    ] as const) {
      const agent = byDescription[description]!;
      expect(agent).toMatchObject({
        mode: "worker",
        status: "merged",
        verify: { passed: true, exit_code: 0 },
        merge: { status: "merged", files: [file] },
        error: null,
      });
      expect(agent.branch).toBe(`${branch}-${agent.id}`);
      expect(branches(repo, agent.branch!)).toEqual([agent.branch]);
    }

    // Parallel: every worker had started before the first one finished.
    const events = readEvents(runDirectory);
    const indexOf = (event: unknown) => events.indexOf(event as (typeof events)[number]);
    const started = eventsOfType(events, "subagent.started").map(indexOf);
    const finished = eventsOfType(events, "subagent.finished").map(indexOf);
    expect(started).toHaveLength(3);
    expect(finished).toHaveLength(3);
    expect(Math.max(...started)).toBeLessThan(Math.min(...finished));

    // The run branch holds all three fixes, as merges of the worker branches.
    expect(inspectGit(repo, ["show", `${branch}:shapes.py`])).toContain("side * side");
    expect(inspectGit(repo, ["show", `${branch}:money.py`])).toContain("round(amount * 100)");
    expect(inspectGit(repo, ["show", `${branch}:words.py`])).toContain("text.upper()");
    const merges = inspectGit(repo, ["log", "--merges", "--format=%s", branch]).trim().split("\n");
    expect(merges.sort()).toEqual(report.agents.map((agent) => `agent-runner: merge worker ${agent.id} (${agent.description})`).sort());
    // The user's checkout is untouched; nothing of the run is left running or checked out.
    expect(readFileSync(join(repo, "shapes.py"), "utf8")).toBe(THREE_MODULES["shapes.py"]);
    expect(containersOfRun(runId)).toEqual([]);
    onlyMainCheckout(repo);
  });

  it("two workers change the same line: the first merges, the second reports a conflict with its hunks; its branch is kept, nothing is half-merged", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const agentA = toolCall("agent", {
      mode: "worker",
      description: "scale by three",
      prompt: "Make scale multiply by 3.",
      verify: "python3 -c 'import calc; assert calc.scale(1) == 3'",
    });
    const agentB = toolCall("agent", {
      mode: "worker",
      description: "scale by four",
      prompt: "Make scale multiply by 4.",
      verify: "python3 -c 'import calc; assert calc.scale(1) == 4'",
    });
    // No MERGE_HEAD in the parent's container's own git directory, and a clean status: the runner brought the
    // container's git up to the merge it committed (syncContainerGit).
    const noMergeInProgress =
      'd=$(git rev-parse --absolute-git-dir) && echo "admin=$d" && if [ -e "$d/MERGE_HEAD" ]; then echo MERGE-IN-PROGRESS; else echo no-merge-head; fi; ' +
      'echo "status=[$(git status --porcelain --untracked-files=no)]"; grep -c "<<<<<<<" calc.py; cat calc.py';
    const { task, repo } = writeScriptedTask(directory.path, {
      files: CALC,
      // The run's own verification checks that w1's version is what the parent's branch ends with.
      // `python3 -c` imports from the working directory only without Python's safe path (verify.python_safe_path).
      task: {
        name: "conflicting-workers",
        verify: { command: "python3 -c 'import calc; assert calc.scale(1) == 3'", timeout_sec: 60, python_safe_path: false },
      },
      script: {
        turns: [
          { tool_calls: [agentA, agentB] },
          {
            expect: {
              tool_result_matches:
                "^Worker w1's work passed verification [^\\n]* and was merged into your branch; files changed: calc\\.py\\.[\\s\\S]*\\n" +
                "Worker w2's work passed verification but was NOT merged: it conflicts with your branch in calc\\.py\\. " +
                "Your files are unchanged; its branch runner/[0-9a-z-]+-w2 is kept[\\s\\S]*" +
                "--- calc\\.py\\n@@ line \\d+\\n<<<<<<< [^\\n]*\\n    return x \\* 3\\n=======\\n    return x \\* 4\\n>>>>>>> ",
            },
            tool_calls: [toolCall("run_shell", { command: noMergeInProgress })],
          },
          {
            expect: { tool_result_matches: "no-merge-head\\nstatus=\\[\\]\\n0\\n[\\s\\S]*return x \\* 3\\n" },
            content: "w1 merged; w2 conflicted.",
          },
        ],
        subagents: {
          "scale by three": editThenFinish("calc.py", "return x * 2", "return x * 3", "scale now triples."),
          // Ends only once the object of w1's merge is in the repository (its objects are mounted read-only and live), so it merges second.
          "scale by four": {
            turns: [
              { tool_calls: [toolCall("edit_file", { path: "calc.py", old_string: "return x * 2", new_string: "return x * 4" })] },
              {
                tool_calls: [
                  toolCall("run_shell", {
                    command:
                      "for i in $(seq 1 1200); do git cat-file --batch-all-objects --batch | grep -aq '^agent-runner: merge worker w1 ' && { echo saw-w1-merged; exit 0; }; sleep 0.05; done; exit 1",
                  }),
                ],
              },
              { expect: { tool_result_matches: "saw-w1-merged" }, content: "scale now quadruples." },
            ],
          },
        },
      },
    });
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr + result.stdout).toBe(0);
    const runDirectory = runDirectoryOf(result);
    const report = readReport(runDirectory);
    const runId = report.run_id;
    const branch = readJson<{ branch: string }>(join(runDirectoryOf(result), "run.json")).branch;
    expect(report).toMatchObject({ status: "succeeded", verify: { passed: true } });
    expect(report.agents.map((agent) => [agent.id, agent.status, agent.merge?.status])).toEqual([
      ["w1", "merged", "merged"],
      ["w2", "not_merged", "conflict"],
    ]);
    expect(report.agents[1]!.merge!.files).toEqual(["calc.py"]);
    expect(report.agents[1]!.verify).toMatchObject({ passed: true });
    // w2's branch is kept with its version; the parent's branch has w1's, and no conflict markers anywhere.
    expect(branches(repo, `${branch}-w*`)).toEqual([`${branch}-w1`, `${branch}-w2`]);
    expect(inspectGit(repo, ["show", `${branch}-w2:calc.py`])).toContain("return x * 4");
    expect(inspectGit(repo, ["show", `${report.head_commit}:calc.py`])).toContain("return x * 3");
    expect(inspectGitStatus(repo, ["grep", "-n", "-e", "<<<<<<<", "-e", ">>>>>>>", report.head_commit])).toMatchObject({ code: 1, stdout: "" });
    // The directory the parent's container found without MERGE_HEAD (turn 2's expect) is the container's own
    // git directory (security-mounts-env.test.ts checks what is mounted there).
    const admin = /admin=(\S+)/.exec(mainToolResults(runDirectory).at(-1)!)![1]!;
    expect(admin).toBe(CONTAINER_GIT_DIRECTORY);
    expect(containersOfRun(runId)).toEqual([]);
    onlyMainCheckout(repo);
  });

  it("a worker whose change breaks the tests is not merged: the parent is told why with the output, its files are unchanged, the branch is kept", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task, repo } = writeScriptedTask(directory.path, {
      files: CALC,
      task: { name: "breaking-worker", verify: PYTEST },
      script: {
        turns: [
          // No verify in the call: the task's verify.command decides.
          { tool_calls: [toolCall("agent", { mode: "worker", description: "break add", prompt: "Change add." })] },
          {
            expect: {
              tool_result_matches:
                "^Worker w1's work was NOT merged: verification `python3 -m pytest -q -p no:cacheprovider` failed \\(exit 1\\)\\. " +
                "Its branch runner/[0-9a-z-]+-w1 keeps the work; your files are unchanged\\.\\nIts output:\\n[\\s\\S]*" +
                "assert -1 == 5[\\s\\S]*1 failed, 1 passed",
            },
            tool_calls: [toolCall("run_shell", { command: "cat calc.py; git status --porcelain --untracked-files=no; echo status-done" })],
          },
          // Exactly the original file, and a clean status (nothing staged or modified).
          {
            expect: {
              tool_result_matches:
                "^exit_code: 0\\nstdout:\\ndef add\\(a, b\\):\\n    return a \\+ b\\n\\n\\ndef scale\\(x\\):\\n    return x \\* 2\\nstatus-done\\n",
            },
            content: "The worker's change broke the tests; kept my version.",
          },
        ],
        subagents: { "break add": editThenFinish("calc.py", "return a + b", "return a - b", "add now subtracts.") },
      },
    });
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr + result.stdout).toBe(0);
    const report = readReport(runDirectoryOf(result));
    const runId = report.run_id;
    const branch = readJson<{ branch: string }>(join(runDirectoryOf(result), "run.json")).branch;
    expect(report).toMatchObject({ status: "succeeded", reason: "verified" });
    expect(report.agents).toEqual([
      expect.objectContaining({
        id: "w1",
        status: "not_merged",
        branch: `${branch}-w1`,
        verify: expect.objectContaining({ passed: false, exit_code: 1 }),
        merge: { status: "skipped", files: [], detail: "verify_failed" },
      }),
    ]);
    // Nothing of the worker reached the parent's branch; its own branch keeps the broken change.
    expect(inspectGit(repo, ["diff", "--stat", report.base_commit, report.head_commit])).toBe("");
    // The run itself changed nothing, so it leaves no branch of its own (issue 26); the worker's stays.
    expect(report.branch).toBeNull();
    expect(branches(repo, branch)).toEqual([]);
    expect(branches(repo, `${branch}-w1`)).toEqual([`${branch}-w1`]);
    expect(inspectGit(repo, ["show", `${branch}-w1:calc.py`])).toContain("return a - b");
    expect(containersOfRun(runId)).toEqual([]);
    onlyMainCheckout(repo);
  });

  it("task_stop ends a background worker (task cancelled, its container and its sleep gone) and a background run_shell's whole process tree", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    // Unique sleep lengths, so host-wide pgrep finds only this test's processes (container processes are host processes).
    const WORKER_SLEEP = "slee[p] 3307";
    const SHELL_SLEEPS = "slee[p] 330[89]";
    const { task } = writeScriptedTask(directory.path, {
      task: { name: "stop-background" },
      script: {
        turns: [
          { tool_calls: [toolCall("agent", { mode: "worker", description: "sleeper", prompt: "Wait.", background: true })] },
          {
            expect: { tool_result_matches: "^started worker subagent w1 as background task t1; its outcome arrives as a message" },
            // A process tree with a setsid'd grandchild, in the parent's own container.
            tool_calls: [toolCall("run_shell", { command: "setsid sleep 3309 & sleep 3308", background: true })],
          },
          // Paused until the test has seen the worker's sleep running in its container.
          {
            expect: { tool_result_matches: "^started background task t2;" },
            tool_calls: [toolCall("run_shell", { command: waitForRelease("worker-sleeping") })],
          },
          { expect: { tool_result_matches: "released-worker-sleeping" }, tool_calls: [toolCall("task_list", {})] },
          {
            expect: { tool_result_matches: "^t1  agent  running  background  agent w1\\n  sleeper\\n[^\\n]*\\nt2  shell  running  background\\n" },
            tool_calls: [toolCall("task_stop", { task_id: "t1" })],
          },
          // Paused until the test has checked that the worker's container and process are gone.
          {
            expect: { tool_result_matches: "^task t1 stopped: cancelled$" },
            tool_calls: [toolCall("run_shell", { command: waitForRelease("worker-stopped") })],
          },
          {
            expect: { tool_result_matches: "released-worker-stopped" },
            tool_calls: [toolCall("run_shell", { command: `pgrep -af '${SHELL_SLEEPS}' | sed 's/^[0-9]* //' | sort` })],
          },
          // The tree: its bash, the sleep and the setsid'd sleep.
          {
            expect: { tool_result_matches: "^exit_code: 0\\nstdout:\\n/bin/bash -c setsid sleep 3309 & sleep 3308\\nsleep 3308\\nsleep 3309\\n" },
            tool_calls: [toolCall("task_stop", { task_id: "t2" })],
          },
          {
            expect: { tool_result_matches: "^task t2 stopped: cancelled$" },
            tool_calls: [toolCall("run_shell", { command: `pgrep -af '${SHELL_SLEEPS}'; echo pgrep-exit=$?` })],
          },
          // No process of the stopped tree is left in the container (pgrep finds nothing: exit 1).
          { expect: { tool_result_matches: "^exit_code: 0\\nstdout:\\npgrep-exit=1\\n" }, tool_calls: [toolCall("task_get", { task_id: "t1" })] },
          { expect: { tool_result_matches: "^t1  agent  cancelled  background  agent w1\\n" }, content: "Stopped both." },
        ],
        subagents: {
          sleeper: { turns: [{ tool_calls: [toolCall("run_shell", { command: "sleep 3307", timeout_ms: 600_000 })] }, { content: "never reached" }] },
        },
      },
    });
    const running = startCli(["exec", task], { RUNNER_HOME: home.path });
    try {
      const { runDirectory } = await waitForRunEvent(
        home.path,
        "tool_call.started",
        (data) => data.agent_id === "w1" && String(data.arguments).includes("sleep 3307"),
        { process: running },
      );
      const { run_id: runId, branch } = readJson<{ run_id: string; branch: string }>(join(runDirectory, "run.json"));
      await waitFor("the worker's sleep on the host", () => hostProcesses(WORKER_SLEEP).length === 1, { process: running });
      expect(containersOfAgent(runId, "w1")).toHaveLength(1);
      expect(containersNamed(`agent-runner-${runId}-w1`)).toHaveLength(1);
      release(mainWorktree(runDirectory), "worker-sleeping");

      await waitForRunEvent(home.path, "tool_call.finished", (data) => data.agent_id === "main" && data.name === "task_stop", { process: running });
      // task_stop returned: the worker's loop, container and processes are gone already.
      expect(containersOfAgent(runId, "w1")).toEqual([]);
      expect(containersNamed(`agent-runner-${runId}-w1`)).toEqual([]);
      expect(hostProcesses(WORKER_SLEEP)).toEqual([]);
      expect(existsSync(join(runPaths(runDirectory).workers, "w1"))).toBe(false);
      release(mainWorktree(runDirectory), "worker-stopped");

      const result = await running.result;
      expect(result.code, result.stderr + result.stdout).toBe(0);
      const report = readReport(runDirectory);
      expect(report).toMatchObject({ status: "succeeded", reason: "finished_unverified" });
      expect(report.agents).toEqual([expect.objectContaining({ id: "w1", task_id: "t1", background: true, status: "cancelled", branch: `${branch}-w1` })]);
      const tasks = eventsOfType(readEvents(runDirectory), "task.finished").map((event) => [event.data.task_id, event.data.kind, event.data.status]);
      expect(tasks).toEqual([
        ["t1", "agent", "cancelled"],
        ["t2", "shell", "cancelled"],
      ]);
      expect(hostProcesses(SHELL_SLEEPS)).toEqual([]);
      expect(containersOfRun(runId)).toEqual([]);
    } finally {
      if (!running.exited) running.child.kill("SIGKILL");
    }
  });

  it("an explore agent cannot write: write tools are unknown to it ([denied] when forked) and its workspace mount is read-only; the parent's files are unchanged", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const shellWrite = toolCall("run_shell", { command: "echo x > f.txt; echo redirect=$?; touch calc.py; echo touch=$?; mkdir d; echo mkdir=$?" });
    const refusedByMount = "redirect=1\\ntouch=1\\nmkdir=1\\n[\\s\\S]*f\\.txt: Read-only file system[\\s\\S]*calc\\.py'?: Read-only file system";
    const { task, repo } = writeScriptedTask(directory.path, {
      files: CALC,
      // The explore policy would refuse the shell writes before they run; with a permissive one the
      // read-only mount itself must refuse them.
      task: { name: "explore-readonly", verify: PYTEST, subagents: { explore_policy: allowAllPolicy(directory.path) } },
      script: {
        turns: [
          {
            tool_calls: [
              toolCall("agent", { mode: "explore", description: "snoop fresh", prompt: "Try to change things." }),
              toolCall("agent", { mode: "explore", description: "snoop forked", prompt: "Try to change things.", fork: true }),
            ],
          },
          {
            expect: {
              tool_result_matches:
                "^Explore subagent e1 \\(snoop fresh\\) finished\\. Its report:\\nfresh: nothing could be written\\.\\n" +
                "Explore subagent e2 \\(snoop forked\\) finished\\. Its report:\\nforked: nothing could be written\\.$",
            },
            tool_calls: [toolCall("run_shell", { command: "ls -A; git status --porcelain; echo listed" })],
          },
          {
            expect: { tool_result_matches: "^exit_code: 0\\nstdout:\\n\\.git\\ncalc\\.py\\ntest_calc\\.py\\nlisted\\n" },
            content: "The explorers wrote nothing.",
          },
        ],
        subagents: {
          "snoop fresh": {
            turns: [
              {
                tool_calls: [
                  toolCall("write_file", { path: "f.txt", content: "x\n" }),
                  toolCall("edit_file", { path: "calc.py", old_string: "a + b", new_string: "a - b" }),
                ],
              },
              {
                expect: { tool_result_matches: '^Error: unknown tool "write_file"\\. Available tools: [^\\n]*\\nError: unknown tool "edit_file"' },
                tool_calls: [shellWrite],
              },
              { expect: { tool_result_matches: refusedByMount }, content: "fresh: nothing could be written." },
            ],
          },
          "snoop forked": {
            turns: [
              {
                tool_calls: [
                  toolCall("write_file", { path: "f.txt", content: "x\n" }),
                  toolCall("edit_file", { path: "calc.py", old_string: "a + b", new_string: "a - b" }),
                ],
              },
              {
                expect: { tool_result_matches: "^\\[denied\\] explore agents are read-only\\n\\[denied\\] explore agents are read-only$" },
                tool_calls: [shellWrite],
              },
              { expect: { tool_result_matches: refusedByMount }, content: "forked: nothing could be written." },
            ],
          },
        },
      },
    });
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr + result.stdout).toBe(0);
    const report = readReport(runDirectoryOf(result));
    expect(report.agents.map((agent) => [agent.id, agent.mode, agent.status, agent.branch])).toEqual([
      ["e1", "explore", "finished", null],
      ["e2", "explore", "finished", null],
    ]);
    // The tools an unforked explorer is offered: read-only ones and run_shell; no writer's tool, no delegation.
    const session = readJson<{ agents: Record<string, { messages: { role: string; content: string | null }[] }> }>(
      join(runDirectoryOf(result), "session.json"),
    );
    const refusal = session.agents.e1!.messages.find((message) => message.role === "tool")!.content!;
    expect(/Available tools: (.*)$/.exec(refusal)![1]!.split(", ").sort()).toEqual([
      "glob",
      "grep",
      "list_dir",
      "load_skill",
      "read_file",
      "read_tool_result",
      "run_shell",
    ]);
    expect(report.head_commit).toBe(report.base_commit);
    expect(branches(repo, "runner/*")).toEqual([]);
    expect(containersOfRun(report.run_id)).toEqual([]);
  });

  it("parent killed (SIGKILL) while a worker runs: the next runner exec sweeps every container and worktree of the run", async () => {
    await using directory = temporaryDirectory();
    await using other = temporaryDirectory();
    await using home = temporaryDirectory();
    const WORKER_SLEEP = "slee[p] 3317";
    const { task, repo } = writeScriptedTask(directory.path, {
      task: { name: "killed-parent" },
      script: {
        turns: [
          { tool_calls: [toolCall("agent", { mode: "worker", description: "long job", prompt: "Work for a long time." })] },
          { content: "never reached" },
        ],
        subagents: {
          "long job": {
            turns: [
              { tool_calls: [toolCall("write_file", { path: "partial.txt", content: "worker was here\n" })] },
              { tool_calls: [toolCall("run_shell", { command: "sleep 3317", timeout_ms: 600_000 })] },
              { content: "never reached" },
            ],
          },
        },
      },
    });
    const running = startCli(["exec", task], { RUNNER_HOME: home.path });
    let runId = "";
    let branch = "";
    try {
      const { runDirectory } = await waitForRunEvent(
        home.path,
        "tool_call.started",
        (data) => data.agent_id === "w1" && String(data.arguments).includes("sleep 3317"),
        { process: running },
      );
      ({ run_id: runId, branch } = readJson<{ run_id: string; branch: string }>(join(runDirectory, "run.json")));
      await waitFor("the worker's sleep on the host", () => hostProcesses(WORKER_SLEEP).length === 1, { process: running });
      // What there is to sweep: the parent's and the worker's worktrees (registered with git) and containers.
      const workerWorktree = join(runPaths(runDirectory).workers, "w1");
      expect(existsSync(workerWorktree)).toBe(true);
      expect(existsSync(mainWorktree(runDirectory))).toBe(true);
      expect(worktreePaths(repo)).toHaveLength(3);
      expect(containersOfAgent(runId, "w1")).toHaveLength(1);
      expect(containersOfAgent(runId, "main")).toHaveLength(1);

      expect(running.child.kill("SIGKILL")).toBe(true);
      expect((await running.result).signal).toBe("SIGKILL");

      // Any small task in the same RUNNER_HOME: its start sweeps the dead run.
      const small = writeScriptedTask(other.path, { task: { name: "small" }, script: { turns: [{ content: "nothing to do" }] } });
      const next = await runCli(["exec", small.task], { RUNNER_HOME: home.path });
      expect(next.code, next.stderr + next.stdout).toBe(0);

      expect(containersOfRun(runId)).toEqual([]);
      expect(hostProcesses(WORKER_SLEEP)).toEqual([]);
      expect(existsSync(mainWorktree(runDirectory))).toBe(false);
      const workers = runPaths(runDirectory).workers;
      expect(existsSync(workers) ? readdirSync(workers) : []).toEqual([]);
      onlyMainCheckout(repo);
      const swept = readReport(runDirectory);
      expect(swept).toMatchObject({ status: "error", reason: "runner_died" });
      expect(swept.error).toContain(`runner resume ${runId}`);
      // The branches stay: the parent's with what the sweep committed, the worker's as it was created.
      expect(branches(repo, `${branch}*`)).toEqual([branch, `${branch}-w1`]);
    } finally {
      if (!running.exited) running.child.kill("SIGKILL");
      if (runId) await removeRunContainers(runId);
    }
  });

  it("invariant 3 for worker branches: a worker's planted hooks, fsmonitor and .gitattributes never run on the host (commit, verification checkout, merge, --merge); its .git cannot be swapped", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const markers = join(directory.path, "markers");
    mkdirSync(markers);
    const { task, repo, git } = writeScriptedTask(directory.path, {
      files: { "notes.txt": "notes\n" },
      // Even with a policy that allows every command, host-side git must not run anything planted.
      task: {
        name: "hostile-worker",
        verify: { command: "grep -qx 'hello from the worker' notes.txt", timeout_sec: 60 },
        policy: allowAllPolicy(directory.path),
      },
      script: {
        turns: [
          {
            tool_calls: [
              toolCall("agent", {
                mode: "worker",
                description: "plant traps",
                prompt: "Plant.",
                verify: "grep -qx 'hello from the worker' notes.txt && test -f .gitattributes",
              }),
            ],
          },
          {
            expect: {
              tool_result_matches:
                "^Worker w1's work passed verification [^\\n]* merged into your branch; files changed: \\.gitattributes, notes\\.txt, planted\\.txt\\.",
            },
            content: "Merged.",
          },
        ],
        subagents: {
          "plant traps": {
            turns: [
              { tool_calls: [toolCall("run_shell", { command: plantTraps(markers) })] },
              { expect: { tool_result_matches: "stdout:\\ndot-git-refused\\nplanted\\n" }, content: "Planted." },
            ],
          },
        },
      },
    });
    // The user's own repository names drivers and hooks that would leave markers (the worker's .gitattributes names them).
    hostileUserRepository(repo, git, markers);

    const result = await runCli(["exec", task, "--merge"], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr + result.stdout).toBe(0);
    const report = readReport(runDirectoryOf(result));
    const runId = report.run_id;
    const branch = readJson<{ branch: string }>(join(runDirectoryOf(result), "run.json")).branch;
    expect(report.agents).toEqual([
      expect.objectContaining({ id: "w1", status: "merged", merge: expect.objectContaining({ files: [".gitattributes", "notes.txt", "planted.txt"] }) }),
    ]);
    expect(report.merge).toMatchObject({ merged: true });

    // Nothing ran: not the planted hooks, fsmonitor or filters, not the user's drivers and hooks.
    expect(readdirSync(markers)).toEqual([]);
    // No clean filter touched the blobs; the planted git directory is in no commit.
    for (const ref of [`${branch}-w1`, branch, "main"]) {
      expect(inspectGit(repo, ["show", `${ref}:notes.txt`])).toBe("hello from the worker\n");
      expect(inspectGit(repo, ["ls-tree", "-r", "--name-only", ref]).split("\n").filter(Boolean)).toEqual([".gitattributes", "notes.txt", "planted.txt"]);
    }
    // The user's checkout was fast-forwarded without a smudge filter.
    expect(readFileSync(join(repo, "notes.txt"), "utf8")).toBe("hello from the worker\n");
    expect(containersOfRun(runId)).toEqual([]);

    // Control: the same payloads DO fire under plain host git, so the assertions above can fail.
    const plainGit = (cwd: string, ...args: string[]) =>
      execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@l", ...args], { cwd, encoding: "utf8", env: isolatedGitEnvironment() });
    plainGit(repo, "worktree", "add", "-q", join(directory.path, "control-checkout"), `${branch}-w1`);
    expect(readdirSync(markers)).toEqual(expect.arrayContaining(["PWNED-user-filter-smudge", "PWNED-user-hook-post-checkout"]));
    const planted = join(directory.path, "control-planted");
    mkdirSync(planted);
    writeFileSync(join(planted, ".git"), "gitdir: /nonexistent\n");
    execFileSync("bash", ["-c", plantTraps(markers)], { cwd: planted, env: isolatedGitEnvironment() });
    plainGit(planted, "add", "-A");
    plainGit(planted, "commit", "-qm", "control");
    expect(readdirSync(markers)).toEqual(
      expect.arrayContaining(["PWNED-planted-fsmonitor", "PWNED-planted-filter-clean", "PWNED-planted-hook-pre-commit", "PWNED-planted-hook-post-commit"]),
    );
  });

  it("a worker's new files with non-ASCII names are merged under their names and stay writable by the parent", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task, repo } = writeScriptedTask(directory.path, {
      task: { name: "unicode-paths", verify: { command: "test -f café.txt && test -f données/notes.txt", timeout_sec: 60 } },
      script: {
        turns: [
          { tool_calls: [toolCall("agent", { mode: "worker", description: "add files", prompt: "Add two files." })] },
          {
            expect: { tool_result_matches: "merged into your branch; files changed: café\\.txt, données/notes\\.txt\\." },
            // The merged file and directory belong to the parent's sandbox user like everything else in its worktree.
            tool_calls: [
              toolCall("edit_file", { path: "café.txt", old_string: "worker", new_string: "parent" }),
              toolCall("write_file", { path: "données/more.txt", content: "parent\n" }),
            ],
          },
          { expect: { tool_result_matches: "^Edited café\\.txt: replaced 1 occurrence[^\\n]*\\nWrote 7 bytes to données/more\\.txt$" }, content: "Done." },
        ],
        subagents: {
          "add files": {
            turns: [
              {
                tool_calls: [
                  toolCall("write_file", { path: "café.txt", content: "from the worker\n" }),
                  toolCall("write_file", { path: "données/notes.txt", content: "notes\n" }),
                ],
              },
              { content: "Added." },
            ],
          },
        },
      },
    });
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path });
    const report = readReport(runDirectoryOf(result));
    expect(result.code, `${report.error}\n${result.stdout}`).toBe(0);
    expect(report.agents[0]).toMatchObject({ status: "merged", merge: { status: "merged", files: ["café.txt", "données/notes.txt"] } });
    expect(inspectGit(repo, ["show", `${report.branch}:café.txt`])).toBe("from the parent\n");
    expect(inspectGit(repo, ["show", `${report.branch}:données/more.txt`])).toBe("parent\n");
  });

  it("a blocking agent call while a background worker holds the only slot: both finish (no deadlock between the slot and the parent's gate)", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task, repo } = writeScriptedTask(directory.path, {
      task: { name: "slot-and-gate", max_parallel: 1 },
      script: {
        turns: [
          {
            tool_calls: [
              toolCall("agent", { mode: "worker", description: "in the background", prompt: "Add bg.txt.", background: true, verify: "test -f bg.txt" }),
            ],
          },
          { tool_calls: [toolCall("agent", { mode: "worker", description: "in the foreground", prompt: "Add fg.txt.", verify: "test -f fg.txt" })] },
          { content: "Both done." },
        ],
        subagents: {
          "in the background": { turns: [{ tool_calls: [toolCall("write_file", { path: "bg.txt", content: "bg\n" })] }, { content: "Added bg.txt." }] },
          "in the foreground": { turns: [{ tool_calls: [toolCall("write_file", { path: "fg.txt", content: "fg\n" })] }, { content: "Added fg.txt." }] },
        },
      },
    });
    const running = startCli(["exec", task], { RUNNER_HOME: home.path });
    let runId = "";
    let branch = "";
    try {
      // The background worker has verified its work and only needs to merge.
      const { runDirectory } = await waitForRunEvent(home.path, "verify.finished", (data) => data.command === "test -f bg.txt" && data.passed === true, {
        process: running,
      });
      ({ run_id: runId, branch } = readJson<{ run_id: string; branch: string }>(join(runDirectory, "run.json")));
      // Healthy, the rest (a merge, one more small worker, the final commit) takes a few seconds.
      await waitFor("the run to finish", () => running.exited, { timeoutMs: 15_000 });
      const report = readReport(runDirectory);
      expect(report.agents.map((agent) => [agent.description, agent.status])).toEqual([
        ["in the background", "merged"],
        ["in the foreground", "merged"],
      ]);
      expect(inspectGit(repo, ["ls-tree", "--name-only", branch]).split("\n").filter(Boolean)).toEqual(["README.md", "bg.txt", "fg.txt"]);
    } finally {
      if (!running.exited) {
        running.child.kill("SIGKILL");
        await running.result;
      }
      if (runId) await removeRunContainers(runId);
    }
  });

  it("after kill -9 and runner resume, a new worker gets a fresh id and branch and is merged", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const worker = (description: string, file: string) => toolCall("agent", { mode: "worker", description, prompt: `Add ${file}.`, verify: `test -f ${file}` });
    const { task, repo } = writeScriptedTask(directory.path, {
      task: { name: "resume-workers" },
      script: {
        turns: [
          { tool_calls: [worker("first worker", "first.txt")] },
          // The runner is killed while this waits.
          { expect: { tool_result_matches: "merged into your branch" }, tool_calls: [toolCall("run_shell", { command: waitForRelease("never") })] },
          { expect: { tool_result_matches: "^Error: \\[interrupted\\]" }, tool_calls: [worker("second worker", "second.txt")] },
          {
            expect: { tool_result_matches: "^Worker w\\d+'s work passed verification [^\\n]* merged into your branch; files changed: second\\.txt\\." },
            content: "Both merged.",
          },
        ],
        subagents: {
          "first worker": { turns: [{ tool_calls: [toolCall("write_file", { path: "first.txt", content: "1\n" })] }, { content: "Added." }] },
          "second worker": { turns: [{ tool_calls: [toolCall("write_file", { path: "second.txt", content: "2\n" })] }, { content: "Added." }] },
        },
      },
    });
    const first = startCli(["exec", task], { RUNNER_HOME: home.path });
    let runId = "";
    let branch = "";
    try {
      const { runDirectory } = await waitForRunEvent(
        home.path,
        "tool_call.started",
        (data) => data.agent_id === "main" && String(data.arguments).includes(".release-never"),
        { process: first },
      );
      ({ run_id: runId, branch } = readJson<{ run_id: string; branch: string }>(join(runDirectory, "run.json")));
      first.child.kill("SIGKILL");
      await first.result;
      const resumed = await runCli(["resume", runId], { RUNNER_HOME: home.path });
      const report = readReport(runDirectory);
      expect(resumed.code, `${report.error}\n${resumed.stdout}`).toBe(0);
      expect(inspectGit(repo, ["ls-tree", "--name-only", branch]).split("\n").filter(Boolean)).toEqual(["README.md", "first.txt", "second.txt"]);
      expect(branches(repo, `${branch}-w*`)).toHaveLength(2);
    } finally {
      if (!first.exited) first.child.kill("SIGKILL");
      if (runId) await removeRunContainers(runId);
    }
  });
});

/**
 * What a hostile worker plants in its worktree (run with bash in the worktree):
 * its `.git` file replaced by a git directory of its own with hooks, an
 * fsmonitor script and a filter of its own, and a `.gitattributes` naming
 * both its filter and the user's drivers. Every payload touches a file in
 * `markers`, a host path (absent in the container).
 */
function plantTraps(markers: string): string {
  const hooks = ["pre-commit", "post-commit", "commit-msg", "pre-merge-commit", "post-merge", "post-checkout", "reference-transaction", "post-index-change"];
  return [
    "set -e",
    `M=${markers}`,
    // The policy refuses literal writes under .git; a path computed at run time gets past it
    // (docs/policies.md "Policies": the sandbox and host-side git are the boundary), as a hostile agent's would.
    "G=$(printf %s .git)",
    // In a container /workspace/.git is the runner's read-only file: the worker cannot swap it for a git
    // directory of its own (in a host directory it can: the control does), so its traps go elsewhere.
    'if rm -f "$G" 2>/dev/null; then git init -q .; else echo dot-git-refused; G=/tmp/planted-git; git init -q --bare "$G"; fi',
    ...hooks.map((hook) => `printf '#!/bin/sh\\ntouch %s/PWNED-planted-hook-${hook}\\n' "$M" > "$G/hooks/${hook}" && chmod +x "$G/hooks/${hook}"`),
    `printf '#!/bin/sh\\ntouch %s/PWNED-planted-fsmonitor\\nexit 1\\n' "$M" > "$G/fsmonitor-hook" && chmod +x "$G/fsmonitor-hook"`,
    'git config -f "$G/config" core.fsmonitor .git/fsmonitor-hook',
    'git config -f "$G/config" filter.planted.clean "touch $M/PWNED-planted-filter-clean; cat"',
    'git config -f "$G/config" filter.planted.smudge "touch $M/PWNED-planted-filter-smudge; cat"',
    'git config -f "$G/config" diff.external "touch $M/PWNED-planted-external-diff; true"',
    "printf '* filter=evil diff=evil merge=evil\\nplanted.txt filter=planted\\n' > .gitattributes",
    "printf 'hello from the worker\\n' > notes.txt",
    "printf 'hello planted\\n' > planted.txt",
    "echo planted",
  ].join("\n");
}

/** Drivers and hooks in the user's repository that leave markers (and a clean filter that rewrites content). */
function hostileUserRepository(repo: string, git: (...args: string[]) => string, markers: string): void {
  git("config", "filter.evil.clean", `touch ${markers}/PWNED-user-filter-clean; sed s/hello/CLEANED/`);
  git("config", "filter.evil.smudge", `touch ${markers}/PWNED-user-filter-smudge; cat`);
  git("config", "filter.evil.required", "true");
  git("config", "diff.evil.textconv", `touch ${markers}/PWNED-user-diff-textconv; cat`);
  git("config", "diff.evil.command", `touch ${markers}/PWNED-user-diff-command; true`);
  git("config", "merge.evil.driver", `touch ${markers}/PWNED-user-merge-driver; true`);
  for (const hook of [
    "pre-commit",
    "post-commit",
    "commit-msg",
    "pre-merge-commit",
    "post-merge",
    "post-checkout",
    "reference-transaction",
    "post-index-change",
    "post-rewrite",
  ]) {
    const path = join(repo, ".git", "hooks", hook);
    writeFileSync(path, `#!/bin/sh\ntouch ${markers}/PWNED-user-hook-${hook}\n`);
    chmodSync(path, 0o755);
  }
}
