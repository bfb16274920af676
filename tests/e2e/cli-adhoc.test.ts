// Ad-hoc mode's flags: what task they build (load-task's validation, the
// flag named in each problem), and two real runs through the CLI (real Docker,
// the test's own scripted server as the OpenAI-compatible endpoint): the flags
// reach the run and the model's requests; --timeout (timeout_sec) ends a run failed/timed_out.
import { chownSync, mkdirSync, realpathSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { loadTask, parseDuration } from "../../src/cli/exec-command.js";
import { ScriptedModelServer, type Script } from "../../src/model/scripted-model-server.js";
import { requireDocker } from "../helpers/docker.js";
import { createGitRepository, temporaryDirectory } from "../helpers/git-repository.js";
import { onlyRunDirectory, readJson, runCli } from "../helpers/runner-cli.js";

let server: ScriptedModelServer | null = null;
afterEach(async () => {
  await server?.close();
  server = null;
});

async function modelServer(script: Script): Promise<string> {
  server = new ScriptedModelServer(script);
  return server.start();
}

describe("ad-hoc flags", () => {
  it("--model, --policy, --max-steps, --image, --allow-host and the workspace build the task, validated like a task file", async () => {
    await using repository = createGitRepository({ "README.md": "x\n" });
    const task = loadTask(undefined, {
      instruction: "Fix it.",
      workspace: repository.root,
      model: "my-model",
      policy: "ci",
      maxSteps: "7",
      image: "agent-runner/sandbox:bookworm",
      allowHost: ["packages.example.com", "*.files.example.com", "git.example.net:8443"],
    });
    expect(task).toMatchObject({
      name: "adhoc",
      file: null,
      workspacePath: repository.root,
      model: { provider: "openai", name: "my-model" },
      max_steps: 7,
      sandbox: { image: "agent-runner/sandbox:bookworm" },
    });
    expect(task.policy).toMatch(/(^|\/)ci(\.yaml)?$/);
    expect(task.sandbox.network.allow).toHaveLength(3);
  });

  it("bad values name the flag; ad-hoc flags with a task file are refused; durations", async () => {
    await using repository = createGitRepository({ "README.md": "x\n" });
    expect(() => loadTask(undefined, { instruction: "x", workspace: repository.root, allowHost: ["packages.example.com", "http://evil/"] })).toThrow(
      /- --allow-host \(sandbox\.network\.allow\.1\): /,
    );
    expect(() => loadTask(undefined, { instruction: "x", workspace: repository.root, image: "Not An Image" })).toThrow(
      /- --image \(sandbox\.image\): expected a Docker image reference/,
    );
    expect(() => loadTask(undefined, { instruction: "x", workspace: repository.root, policy: "nope" })).toThrow(/--policy \(policy\): /);
    // Without -C: the repository the current directory lies in (from a subdirectory too), as codex exec works where it is run.
    const cwd = process.cwd();
    try {
      mkdirSync(join(repository.root, "src", "deep"), { recursive: true });
      process.chdir(join(repository.root, "src", "deep"));
      expect(loadTask(undefined, { instruction: "x" }).workspace).toBe(realpathSync(repository.root));
      // Not above a GIT_CEILING_DIRECTORIES entry, as git; and never a repository another user owns.
      process.env.GIT_CEILING_DIRECTORIES = repository.root;
      expect(() => loadTask(undefined, { instruction: "x" })).toThrow("--workspace: an ad-hoc task needs the repository");
      delete process.env.GIT_CEILING_DIRECTORIES;
      chownSync(join(repository.root, ".git"), 65534, 65534);
      expect(() => loadTask(undefined, { instruction: "x" })).toThrow(/the repository at .* belongs to another user \(uid 65534\)/);
      chownSync(join(repository.root, ".git"), process.getuid!(), process.getgid!());
      process.chdir(tmpdir());
      expect(() => loadTask(undefined, { instruction: "x" })).toThrow(
        "--workspace: an ad-hoc task needs the repository to work on: run it inside one, or give `--workspace DIR` (`-C DIR`)",
      );
    } finally {
      delete process.env.GIT_CEILING_DIRECTORIES;
      process.chdir(cwd);
    }
    // A prompt where the task file belongs says which flag takes it.
    expect(() => loadTask("fix the failing test", {})).toThrow(
      '"fix the failing test" is not a task file; for an ad-hoc task give the instruction as a flag: runner exec --instruction "fix the failing test"',
    );
    expect(() => loadTask("task.yaml", { model: "m", allowHost: ["a.org"] })).toThrow(
      "--model, --allow-host: ad-hoc task flags (with --instruction); with a task file, set the field in task.yaml",
    );
    expect([
      parseDuration("90", "--timeout"),
      parseDuration("90s", "--timeout"),
      parseDuration("10m", "--timeout"),
      parseDuration("1.5h", "--timeout"),
    ]).toEqual([90_000, 90_000, 600_000, 5_400_000]);
    for (const bad of ["0", "0.5s", "10 minutes", "-1m", "200h", ""])
      expect(() => parseDuration(bad, "--timeout"), bad).toThrow(/^--timeout: expected a duration from 1s to 168h/);
  });

  it("a real ad-hoc run: -C, --model, --policy, --max-steps and --image reach the run and the model's requests", async () => {
    await requireDocker();
    await using home = temporaryDirectory();
    await using repository = createGitRepository({ "README.md": "x\n" });
    const baseUrl = await modelServer({ turns: [{ tool_calls: [{ name: "run_shell", arguments: { command: "echo hi" } }] }, { content: "Done." }] });
    const result = await runCli(
      [
        "exec",
        "--instruction",
        "Say hi.",
        "-C",
        repository.root,
        "--model",
        "model-from-flag",
        "--policy",
        "ci",
        "--max-steps",
        "5",
        "--image",
        "agent-runner/sandbox:bookworm",
        "--timeout",
        "5m",
      ],
      { RUNNER_HOME: home.path, OPENAI_API_KEY: "test-key", OPENAI_BASE_URL: baseUrl, OPENAI_MODEL: "not-this-one" },
    );
    expect(result.code, result.stdout + result.stderr).toBe(0);
    expect(server!.requests.map((request) => request.model)).toEqual(["model-from-flag", "model-from-flag"]);
    const runDirectory = onlyRunDirectory(home.path)!;
    expect(readJson(join(runDirectory, "report.json"))).toMatchObject({ status: "succeeded", policy: "ci", steps: 2 });
    expect(readJson(join(runDirectory, "task.json"))).toMatchObject({
      max_steps: 5,
      workspacePath: repository.root,
      sandbox: { image: "agent-runner/sandbox:bookworm" },
    });
  });

  it("--timeout stops a run that is still going: failed/timed_out with the reason, exit 1 (a limit, not an interrupt)", async () => {
    await requireDocker();
    await using home = temporaryDirectory();
    await using repository = createGitRepository({ "README.md": "x\n" });
    // The model never answers its first call within the limit.
    const baseUrl = await modelServer({ turns: [{ content: "late", faults: [{ delay_ms: 120_000 }] }] });
    const result = await runCli(["exec", "--instruction", "Wait.", "-C", repository.root, "--model", "m", "--timeout", "2s"], {
      RUNNER_HOME: home.path,
      OPENAI_API_KEY: "test-key",
      OPENAI_BASE_URL: baseUrl,
    });
    expect(result.code, result.stdout + result.stderr).toBe(1);
    expect(result.stdout).toContain("status: failed (timed_out)\nerror: the run's time limit was reached (timeout_sec 2)");
    const runDirectory = onlyRunDirectory(home.path)!;
    expect(readJson(join(runDirectory, "report.json"))).toMatchObject({
      status: "failed",
      reason: "timed_out",
      error: "the run's time limit was reached (timeout_sec 2)",
    });
    expect(readJson(join(runDirectory, "task.json"))).toMatchObject({ timeout_sec: 2 });
  });
});
