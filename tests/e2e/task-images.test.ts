/**
 * Issue 14 items 2-4 through the real CLI: a task's own image (built from its
 * Dockerfile), `sandbox.workdir`, `sandbox.setup`, the pre-flight that comes
 * before any branch, and Python's bytecode cache kept out of the verdict.
 * Images are built offline here, FROM the sandbox image.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { randomUUID } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { requireDocker, SANDBOX_IMAGE } from "../helpers/docker.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { eventsOfType, onlyRunDirectory, readEvents, readJson, runCli, toolCall, writeScriptedTask } from "../helpers/runner-cli.js";
import { callsAndResults, firstSystemPrompt } from "../helpers/run-records.js";

/** Built images this file made (agent-runner/task-build:<hash>), removed at the end. */
const builtImages = new Set<string>();

afterAll(() => {
  for (const image of builtImages) execFileSync("docker", ["image", "rm", "-f", image], { stdio: "ignore" });
});

function runBranches(repo: string): string[] {
  return execFileSync("git", ["for-each-ref", "--format=%(refname:short)", "refs/heads/runner/"], { cwd: repo, encoding: "utf8" }).split("\n").filter(Boolean);
}

/** Rewrites task.yaml's sandbox (writeScriptedTask always names an image; `build` excludes it). */
function setSandbox(task: string, sandbox: Record<string, unknown>): void {
  const parsed = readJson<Record<string, Record<string, unknown>>>(task);
  const { image: _image, ...rest } = parsed.sandbox!;
  parsed.sandbox = { ...rest, ...sandbox };
  writeFileSync(task, JSON.stringify(parsed, null, 2));
}

function turns(...calls: { call: ReturnType<typeof toolCall>; expect?: string }[]): { turns: unknown[] } {
  const script: unknown[] = [];
  calls.forEach(({ call }, index) => {
    const previous = calls[index - 1]?.expect;
    script.push({ ...(previous ? { expect: { tool_result_matches: previous } } : {}), tool_calls: [call] });
  });
  const last = calls.at(-1)?.expect;
  script.push({ ...(last ? { expect: { tool_result_matches: last } } : {}), content: "done" });
  return { turns: script };
}

describe("task images, workdir and setup (real CLI, real Docker)", () => {
  it("runs in an image built from the task's Dockerfile (USER, ENTRYPOINT, WORKDIR /app) with sandbox.workdir /app", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const nonce = randomUUID();
    const { task, repo, git } = writeScriptedTask(directory.path, {
      script: turns(
        {
          call: toolCall("run_shell", { command: 'pwd; echo "ws=$RUNNER_WORKSPACE"; cat /etc/built-marker; git status --short | wc -l' }),
          expect: `^exit_code: 0[\\s\\S]*/app\\nws=/app\\nbuilt ${nonce}\\n0`,
        },
        { call: toolCall("write_file", { path: "/app/notes.txt", content: "hello\n" }), expect: "notes.txt" },
        { call: toolCall("read_file", { path: "notes.txt" }), expect: "hello" },
        { call: toolCall("glob", { pattern: "*.txt" }), expect: "^notes.txt$" },
        { call: toolCall("grep", { pattern: "hel+o", path: "/app" }), expect: "^notes.txt:1:hello$" },
        { call: toolCall("write_file", { path: "/workspace/escape.txt", content: "x" }), expect: "outside /app" },
      ),
      files: { "README.md": "app\n" },
      task: { verify: { command: 'test "$(pwd)" = /app && grep -qx hello notes.txt', timeout_sec: 60 } },
    });
    mkdirSync(join(directory.path, "image"));
    writeFileSync(
      join(directory.path, "image", "Dockerfile"),
      `FROM ${SANDBOX_IMAGE}\nRUN echo "built ${nonce}" > /etc/built-marker && mkdir /app\nUSER 1234\nWORKDIR /app\nENTRYPOINT ["/bin/false"]\nCMD ["never"]\n`,
    );
    setSandbox(task, { build: { context: "./image" }, workdir: "/app" });
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path });
    const runDirectory = onlyRunDirectory(home.path)!;
    const report = readJson(join(runDirectory, "report.json"));
    const created = eventsOfType(readEvents(runDirectory), "sandbox.created")[0]!.data;
    builtImages.add(String(created.image));
    expect(result.code, `${result.stdout}\n${result.stderr}\n${JSON.stringify(report, null, 2)}`).toBe(0);
    // The one denial is the write outside /app.
    expect(report).toMatchObject({ status: "succeeded", reason: "verified_with_denials" });
    expect(created.image).toMatch(/^agent-runner\/task-build:[0-9a-f]{32}$/);
    expect(firstSystemPrompt(runDirectory, "main")).toContain("mounted at /app");
    const denied = callsAndResults(runDirectory, "main").find((call) => call.arguments.path === "/workspace/escape.txt");
    expect(denied?.result).toMatch(/denied.*outside \/app/);
    expect(git("show", `${String(report.head_commit)}:notes.txt`)).toBe("hello\n");
    expect(readFileSync(join(repo, "README.md"), "utf8")).toBe("app\n");
  });

  it("runs sandbox.setup before the first step and again before verify: pip install -e . and a venv work offline", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task } = writeScriptedTask(directory.path, {
      script: turns(
        { call: toolCall("run_shell", { command: "cd /tmp && python -c 'import tinypkg; print(\"value\", tinypkg.VALUE)'" }), expect: "value 42" },
        {
          call: toolCall("run_shell", { command: "python3 -m venv /tmp/venv && /tmp/venv/bin/python -c 'import sys; print(sys.prefix)'" }),
          expect: "^exit_code: 0[\\s\\S]*/tmp/venv",
        },
      ),
      files: {
        "pyproject.toml":
          '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n\n[project]\nname = "tinypkg"\nversion = "0.1"\n',
        "tinypkg/__init__.py": "VALUE = 42\n",
        ".gitignore": "*.egg-info/\nbuild/\n",
      },
      task: {
        sandbox: { setup: ["pip install --no-index --no-build-isolation -e ."] },
        verify: { command: "cd /tmp && python -c 'import tinypkg'", timeout_sec: 120 },
      },
    });
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path });
    const runDirectory = onlyRunDirectory(home.path)!;
    const report = readJson(join(runDirectory, "report.json"));
    expect(result.code, `${result.stdout}\n${result.stderr}\n${JSON.stringify(report, null, 2)}`).toBe(0);
    expect(report).toMatchObject({ status: "succeeded", reason: "verified" });
    const events = readEvents(runDirectory);
    const finished = eventsOfType(events, "setup.finished").map((event) => event.data);
    expect(finished).toEqual([
      expect.objectContaining({ phase: "agent", agent_id: "main", index: 0, command: "pip install --no-index --no-build-isolation -e .", exit_code: 0 }),
      expect.objectContaining({ phase: "verify", exit_code: 0 }),
    ]);
    // Before the agent's first step: setup finished before the first model call started.
    const order = events.map((event) => event.type.replace(/^dev\.agent-runner\.|\.v1$/g, ""));
    expect(order.indexOf("setup.finished")).toBeLessThan(order.indexOf("model_call.started"));
  });

  it("a failing setup command ends the run with exit 3 (error, setup_failed) and its output, before the agent runs", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task } = writeScriptedTask(directory.path, {
      script: turns({ call: toolCall("run_shell", { command: "true" }) }),
      task: { sandbox: { setup: ["echo preparing", "echo 'no such requirement: wheelhouse' >&2; exit 7", "echo never"] } },
    });
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path });
    expect(result.code, result.stdout + result.stderr).toBe(3);
    const runDirectory = onlyRunDirectory(home.path)!;
    const report = readJson<{ status: string; reason: string; error: string }>(join(runDirectory, "report.json"));
    expect(report).toMatchObject({ status: "error", reason: "setup_failed" });
    expect(report.error).toContain("exited 7");
    expect(report.error).toContain("no such requirement: wheelhouse");
    const events = readEvents(runDirectory);
    expect(eventsOfType(events, "setup.finished").map((event) => event.data.exit_code)).toEqual([0, 7]);
    expect(eventsOfType(events, "model_call.started")).toHaveLength(0);
  });

  it("a verify or setup program that is not in the image is bad input (exit 2, task_invalid) before any model call", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task } = writeScriptedTask(directory.path, {
      script: turns({ call: toolCall("run_shell", { command: "true" }) }),
      task: { sandbox: { setup: ["python3 --version"] }, verify: { command: "cd /tmp && pytset -q", timeout_sec: 60 } },
    });
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path });
    expect(result.code, result.stdout + result.stderr).toBe(2);
    const runDirectory = onlyRunDirectory(home.path)!;
    const report = readJson<{ status: string; reason: string; error: string }>(join(runDirectory, "report.json"));
    expect(report).toMatchObject({ status: "error", reason: "task_invalid" });
    expect(report.error).toMatch(/^verify\.command: its program "pytset" is not in the task's sandbox/);
    expect(eventsOfType(readEvents(runDirectory), "model_call.started")).toHaveLength(0);

    await using second = temporaryDirectory();
    const setupTypo = writeScriptedTask(second.path, {
      script: turns({ call: toolCall("run_shell", { command: "true" }) }),
      task: { sandbox: { setup: ["pip-instal -r requirements.txt"] } },
    });
    const setup = await runCli(["exec", setupTypo.task], { RUNNER_HOME: home.path });
    expect(setup.code, setup.stdout + setup.stderr).toBe(2);
    expect(setup.stdout + setup.stderr).toContain('sandbox.setup[0]: "pip-instal -r requirements.txt" exited 127 (command not found)');
  });

  it("pre-flight: an image that is absent and cannot be pulled, or a failing build, stops before any branch or run exists", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task, repo } = writeScriptedTask(directory.path, { script: turns({ call: toolCall("run_shell", { command: "true" }) }) });
    // A registry on loopback that is not there: the pull fails at once and no packet leaves the host.
    setSandbox(task, { image: `localhost:1/agent-runner-absent/${randomUUID()}:1` });
    const absent = await runCli(["exec", task], { RUNNER_HOME: home.path });
    expect(absent.code, absent.stdout + absent.stderr).toBe(3);
    expect(absent.stderr).toMatch(/sandbox\.image: localhost:1\/\S+ is not present locally and could not be pulled/);
    expect(absent.stderr).not.toContain("runner image build");

    mkdirSync(join(directory.path, "image"));
    writeFileSync(join(directory.path, "image", "Dockerfile"), `FROM ${SANDBOX_IMAGE}\nRUN echo "the build says no ${randomUUID()}" && exit 4\n`);
    setSandbox(task, { build: { context: "./image" } });
    const failedBuild = await runCli(["exec", task], { RUNNER_HOME: home.path });
    expect(failedBuild.code, failedBuild.stdout + failedBuild.stderr).toBe(3);
    expect(failedBuild.stderr).toMatch(/sandbox\.build: building \S+Dockerfile .*failed/);
    expect(failedBuild.stderr).toContain("the build says no");

    expect(runBranches(repo)).toEqual([]);
    expect(onlyRunDirectory(home.path)).toBeUndefined();
  });

  it("verification never uses bytecode the agent's container wrote: a planted .pyc decides nothing, the committed source does", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    // The agent compiles `answer() == 2` into unchecked-hash .pyc files (never checked against
    // the source), in the worktree's __pycache__ (committed) and in its own cache under /tmp.
    const plant = [
      "mkdir -p /tmp/evil && printf 'def answer():\\n    return 2\\n' > /tmp/evil/mod.py",
      "python3 - <<'EOF'\nimport importlib.util, os, py_compile, sys\nfor target in ['__pycache__/mod.cpython-%d%d.pyc' % sys.version_info[:2], importlib.util.cache_from_source(os.path.abspath('mod.py'))]:\n    os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)\n    py_compile.compile('/tmp/evil/mod.py', cfile=target, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)\n    print('planted', target)\nEOF",
      "python3 -c 'import mod; print(\"answer\", mod.answer())'",
    ].join("\n");
    const { task, git } = writeScriptedTask(directory.path, {
      script: turns({ call: toolCall("run_shell", { command: plant }), expect: "answer 2" }),
      files: { "mod.py": "def answer():\n    return 1\n" },
      task: {
        // `python3 -c` imports from the working directory only without Python's safe path.
        verify: {
          command: "python3 -c 'import mod, sys; print(\"verdict from\", mod.answer()); sys.exit(0 if mod.answer() == 2 else 1)'",
          timeout_sec: 60,
          python_safe_path: false,
        },
      },
    });
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path });
    const runDirectory = onlyRunDirectory(home.path)!;
    const report = readJson<{ status: string; reason: string; head_commit: string; verify: { output_tail: string } }>(join(runDirectory, "report.json"));
    expect(report.verify.output_tail).toContain("verdict from 1");
    expect(report, result.stdout + result.stderr).toMatchObject({ status: "failed", reason: "verify_failed" });
    // Planted in both places (the crafted .pyc is in the verified commit), and the agent's own container ran it.
    expect(callsAndResults(runDirectory, "main")[0]!.result).toMatch(/planted __pycache__\/mod[\s\S]*planted \/tmp\/\.pycache\/workspace\/mod[\s\S]*answer 2/);
    expect(git("ls-tree", "-r", "--name-only", report.head_commit)).toMatch(/__pycache__\/mod\.cpython-\d+\.pyc/);
    expect(result.code).toBe(1);
  });
});
