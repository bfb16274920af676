import { spawn } from "node:child_process";
import { appendFileSync, cpSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { requireDocker, SANDBOX_IMAGE } from "../helpers/docker.js";
import { createFakeInternet } from "../helpers/fake-internet.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { execFileSync } from "node:child_process";
import { runPaths } from "../../src/workspace/run-disk.js";
import { onlyRunDirectory, readJson } from "../helpers/runner-cli.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const CLI = join(ROOT, "dist/cli/main.js");

interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

function runCli(args: string[], environment: Record<string, string>): Promise<CliResult> {
  if (!existsSync(CLI)) throw new Error("dist/cli/main.js is missing: run `make build` (make test does)");
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { env: { ...process.env, ...environment }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

/** A copy of examples/fix-median whose repo/ is a fresh git repository; optional script override. */
function fixMedianCopy(directory: string, script?: string): { task: string; repo: string } {
  cpSync(join(ROOT, "examples/fix-median"), directory, { recursive: true });
  const repo = join(directory, "repo");
  const git = (...args: string[]) => execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@localhost", ...args], { cwd: repo, encoding: "utf8" });
  git("init", "-q", "-b", "main");
  git("add", "-A");
  git("commit", "-q", "-m", "initial");
  if (script !== undefined) writeFileSync(join(directory, "script.yaml"), script);
  return { task: join(directory, "task.yaml"), repo };
}

function readReport(home: string, stdout: string): Record<string, unknown> {
  const runDirectory = /run directory: (\S+)/.exec(stdout)?.[1];
  expect(runDirectory, stdout).toBeDefined();
  expect(runDirectory!.startsWith(join(home, "runs"))).toBe(true);
  return JSON.parse(readFileSync(join(runDirectory!, "report.json"), "utf8"));
}

describe("runner exec (real CLI, scripted model over HTTP, real Docker)", () => {
  it("fixes examples/fix-median: exit 0, verified, patch on runner/<id>, user's checkout untouched", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task, repo } = fixMedianCopy(directory.path);
    const before = execFileSync("git", ["status", "--porcelain", "--branch"], { cwd: repo, encoding: "utf8" });
    const headBefore = execFileSync("git", ["rev-parse", "HEAD"], { cwd: repo, encoding: "utf8" });
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr + result.stdout).toBe(0);
    const report = readReport(home.path, result.stdout);
    expect(report).toMatchObject({
      task: "fix-median",
      status: "succeeded",
      reason: "verified",
      verify: { command: "python3 -m pytest -q", exit_code: 0, passed: true },
      steps: 5,
      tool_calls: 4,
      patch: "patch.diff",
    });
    expect(report.trace_id).toMatch(/^[0-9a-f]{32}$/);
    const runDirectory = join(home.path, "runs", String(report.run_id));
    const patch = readFileSync(join(runDirectory, "patch.diff"), "utf8");
    expect(patch).toContain("+    return (ordered[middle - 1] + ordered[middle]) / 2");
    expect(execFileSync("git", ["show", `${report.branch}:stats.py`], { cwd: repo, encoding: "utf8" })).toContain("ordered[middle - 1]");
    // The user's checkout: same branch, same HEAD, same (clean) status, file unchanged.
    expect(execFileSync("git", ["status", "--porcelain", "--branch"], { cwd: repo, encoding: "utf8" })).toBe(before);
    expect(execFileSync("git", ["rev-parse", "HEAD"], { cwd: repo, encoding: "utf8" })).toBe(headBefore);
    expect(readFileSync(join(repo, "stats.py"), "utf8")).toContain("return ordered[middle]\n");
    // events.jsonl: CloudEvents envelopes with the run's trace id.
    const events = readFileSync(join(runDirectory, "events.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    expect(events[0]).toMatchObject({ specversion: "1.0", type: "dev.agent-runner.run.started.v1", source: `agent-runner://runs/${report.run_id}` });
    expect(events.at(-1)).toMatchObject({ type: "dev.agent-runner.run.finished.v1", data: { status: "succeeded", exit_code: 0 } });
    for (const event of events) expect(event.traceparent).toMatch(new RegExp(`^00-${report.trace_id}-[0-9a-f]{16}-01$`));
    const session = JSON.parse(readFileSync(join(runDirectory, "session.json"), "utf8"));
    expect(session.agents.main.messages.at(-1)).toMatchObject({ role: "assistant", content: expect.stringContaining("All 5 tests pass") });
    // The worktree directory is removed; the branch stays.
    expect(existsSync(runPaths(runDirectory).worktree)).toBe(false);
    expect(existsSync(runPaths(runDirectory).disk)).toBe(false);
    // runner runs / runner show find it.
    const runs = await runCli(["runs", "--json"], { RUNNER_HOME: home.path });
    expect(runs.code).toBe(0);
    expect(JSON.parse(runs.stdout.trim())).toMatchObject({ id: report.run_id, task: "fix-median", status: "succeeded", branch: report.branch });
    const shown = await runCli(["show", String(report.run_id).slice(0, 15)], { RUNNER_HOME: home.path });
    expect(shown.code).toBe(0);
    // The summary runner exec printed comes first (--json keeps the raw record).
    expect(shown.stdout).toContain("status: succeeded");
    expect(shown.stdout).toMatch(/→ edit_file \{"path":"stats\.py"/);
    expect((await runCli(["show", "no-such-run"], { RUNNER_HOME: home.path })).code).toBe(2);
  });

  it("exit 1 when the agent stops without fixing the bug (verification fails)", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task } = fixMedianCopy(directory.path, "turns:\n  - content: I give up.\n");
    const answerFile = join(directory.path, "answer.txt");
    const result = await runCli(["exec", task, "-o", answerFile], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr).toBe(1);
    const report = readReport(home.path, result.stdout);
    expect(report).toMatchObject({ status: "failed", reason: "verify_failed", verify: { passed: false } });
    expect(String((report.verify as { output_tail: string }).output_tail)).toMatch(/failed/);
    // For scripts: the final answer alone in the -o file; for people: the answer and the verify output's tail in the summary.
    expect(readFileSync(answerFile, "utf8")).toBe("I give up.");
    expect(result.stdout).toMatch(/\nanswer:\n {2}I give up\.\n/);
    expect(result.stdout).toMatch(/\nverify output \(last lines\):\n(?: {2}.*\n)*? {2}.*failed/);
  });

  it("verification cannot be rigged by what the agent leaves outside the commit", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    // The bug stays; instead the agent makes every Python process exit 0, through
    // a usercustomize module outside /workspace and an ignored conftest-like file.
    const rig = [
      'site=$(python3 -m site --user-site) && mkdir -p "$site"',
      `printf 'import atexit, os\\natexit.register(lambda: os._exit(0))\\n' > "$site/usercustomize.py"`,
      'mkdir -p __pycache__ && cp "$site/usercustomize.py" __pycache__/sitecustomize.py',
      "python3 -m pytest -q; echo rigged-exit=$?",
    ].join(" && ");
    const { task } = fixMedianCopy(
      directory.path,
      `turns:\n  - tool_calls: [{ name: run_shell, arguments: { command: ${JSON.stringify(rig)} } }]\n  - expect: { tool_result_matches: "rigged-exit=0" }\n    content: All tests pass now.\n`,
    );
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr + result.stdout).toBe(1);
    expect(readReport(home.path, result.stdout)).toMatchObject({ status: "failed", reason: "verify_failed", verify: { passed: false } });
  });

  it("survives the agent killing every process it can: the daemon is out of its reach, files stay, the run goes on", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const fix = {
      path: "stats.py",
      old_string: "    return ordered[middle]\n",
      new_string: "    if len(ordered) % 2:\n        return ordered[middle]\n    return (ordered[middle - 1] + ordered[middle]) / 2\n",
    };
    const { task } = fixMedianCopy(
      directory.path,
      [
        "turns:",
        `  - tool_calls: [{ name: edit_file, arguments: ${JSON.stringify(fix)} }]`,
        '  - tool_calls: [{ name: run_shell, arguments: { command: "pkill node; echo daemon-spared" } }]',
        '  - expect: { tool_result_matches: "daemon-spared" }',
        '    tool_calls: [{ name: run_shell, arguments: { command: "sleep 1000 & kill -9 -1; echo after-kill" } }]',
        '  - expect: { tool_result_not_matches: "sandbox was restarted" }',
        `    tool_calls: [{ name: run_shell, arguments: { command: "grep -c 'middle - 1' stats.py; pgrep -c sleep" } }]`,
        '  - expect: { tool_result_matches: "stdout:\\n1\\n0\\n" }',
        "    content: Fixed.",
      ].join("\n"),
    );
    // The worker policy would ask before `kill -9 -1` (and refuse without a terminal); the sandbox must
    // survive it anyway, since a policy can be talked around. A policy outside the repository allows everything.
    // (`grep -c` prints 1 and `pgrep -c` 0: the background sleep died, the daemon did not.)
    writeFileSync(
      join(directory.path, "allow-all.yaml"),
      "name: allow-all\ndescription: every tool and command\ntools: { allow: ['*'] }\ndefault_command_risk: allow\nconfirmations: allow\n",
    );
    appendFileSync(task, "policy: ./allow-all.yaml\n");
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr + result.stdout).toBe(0);
    const report = readReport(home.path, result.stdout);
    expect(report).toMatchObject({ status: "succeeded", tool_calls: 4, policy: "allow-all", denials: {} });
    const events = readFileSync(join(home.path, "runs", String(report.run_id), "events.jsonl"), "utf8");
    expect(events).not.toMatch(/dev\.agent-runner\.sandbox\.restarted/);
  });

  it("runs as the workspace owner when that is not root: files the agent creates belong to the owner, with normal modes", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task, repo } = fixMedianCopy(
      directory.path,
      [
        "turns:",
        "  - tool_calls: [{ name: run_shell, arguments: { command: \"id -u; id -g; umask; touch made.txt; mkdir made-dir; stat -c '%u:%g %a %n' made.txt made-dir\" } }]",
        "  - expect: { tool_result_matches: 'stdout:\\n1234\\n1234\\n0022\\n1234:1234 644 made.txt\\n1234:1234 755 made-dir' }",
        "    content: done",
      ].join("\n"),
    );
    execFileSync("chown", ["-R", "1234:1234", repo]);
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr + result.stdout).toBe(1); // the bug stays, so verification fails
    expect(readReport(home.path, result.stdout)).toMatchObject({ reason: "verify_failed", tool_calls: 1 });
  });

  it("exit 1 at max_steps", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task } = fixMedianCopy(directory.path, "turns:\n" + "  - tool_calls: [{ name: list_dir, arguments: { path: . } }]\n".repeat(3));
    const result = await runCli(["exec", task, "--max-steps", "2"], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr).toBe(1);
    expect(readReport(home.path, result.stdout)).toMatchObject({ status: "failed", reason: "max_steps", steps: 2 });
  });

  it("exit 3 with the step, the turn and what it saw when a scripted expect is not met", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task } = fixMedianCopy(
      directory.path,
      'turns:\n  - tool_calls: [{ name: read_file, arguments: { path: stats.py } }]\n  - expect: { tool_result_matches: "def mode" }\n    content: never\n',
    );
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr).toBe(3);
    const report = readReport(home.path, result.stdout);
    expect(report).toMatchObject({ status: "error", reason: "script_expectation_failed" });
    expect(String(report.error)).toMatch(/: step 2 \(turns\[1\]\) expect\.tool_result_matches \/def mode\/ not met; tool results began: ".*Small descriptive/);
  });

  it("exit 2 before anything starts for a bad task file, listing every problem", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    writeFileSync(join(directory.path, "task.yaml"), "name: BAD NAME\nmax_steps: zero\nsandbox: { limits: { cpus: -1 } }\n");
    const result = await runCli(["exec", join(directory.path, "task.yaml")], { RUNNER_HOME: home.path });
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/problems:/);
    for (const field of ["name", "instruction", "max_steps", "sandbox.limits.cpus"]) expect(result.stderr).toContain(`  - ${field}: `);
    expect(existsSync(join(home.path, "runs"))).toBe(false);
  });

  it("with an allow-list, the built CLI reaches the allowed host through its proxy and reports the refusals", async () => {
    const docker = await requireDocker();
    await using internet = await createFakeInternet(docker, {
      id: `e2e-${process.pid}`,
      image: SANDBOX_IMAGE,
      servers: [{ aliases: ["allowed.test"] }, { aliases: ["denied.test"] }],
    });
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task } = fixMedianCopy(
      directory.path,
      [
        "turns:",
        '  - tool_calls: [{ name: run_shell, arguments: { command: "curl -sS http://allowed.test/; curl -sS http://denied.test/" } }]',
        "  - expect: { tool_result_matches: 'refused denied[.]test:80' }",
        "    content: done",
      ].join("\n"),
    );
    writeFileSync(
      task,
      readFileSync(task, "utf8").replace("network: { allow: [] }", `network: { allow: [allowed.test], allow_cidrs: ["${internet.subnet}"] }`),
    );
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path, RUNNER_EGRESS_NETWORK: internet.network });
    expect(result.code, result.stderr + result.stdout).toBe(1); // the bug is not fixed: verification fails
    const report = readReport(home.path, result.stdout);
    expect(report).toMatchObject({
      reason: "verify_failed",
      network: { "allowed.test:80": { allowed: 1, denied: 0 }, "denied.test:80": { allowed: 0, denied: 1 } },
    });
    const session = readFileSync(join(home.path, "runs", String(report.run_id), "session.json"), "utf8");
    expect(session).toContain("only: allowed.test");
  });

  it("exit 2 for a broken script before any branch or container exists", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task, repo } = fixMedianCopy(directory.path, 'turns:\n  - expect: { tool_result_matches: "[unclosed" }\n');
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path });
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/turns\.0\.expect\.tool_result_matches: not a valid RegExp/);
    expect(execFileSync("git", ["branch", "--list", "runner/*"], { cwd: repo, encoding: "utf8" })).toBe("");
    expect(existsSync(join(home.path, "runs"))).toBe(false);
  });

  it("exit 2 when the workspace is not a git repository, naming the fix", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const result = await runCli(["exec", "--instruction", "do something", "--workspace", directory.path], {
      RUNNER_HOME: home.path,
      OPENAI_API_KEY: "x",
      OPENAI_MODEL: "m",
    });
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/is not a git repository; run `git init/);
  });

  it("--json streams the CloudEvents on stdout, one JSON object per line, and ends with the report's path and status", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task } = fixMedianCopy(directory.path);
    const result = await runCli(["exec", task, "--json"], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr).toBe(0);
    const lines = result.stdout
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line));
    const types = lines.map((line) => line.type);
    expect(types[0]).toBe("dev.agent-runner.run.started.v1");
    expect(types).toContain("dev.agent-runner.tool_call.finished.v1");
    expect(types).toContain("dev.agent-runner.verify.finished.v1");
    expect(types.at(-2)).toBe("dev.agent-runner.run.finished.v1");
    // The last line is not an event: the run's outcome, for scripts.
    const runDirectory = onlyRunDirectory(home.path)!;
    expect(lines.at(-1)).toEqual({
      type: "runner.result",
      run_id: basename(runDirectory),
      status: "succeeded",
      reason: "verified",
      report: join(runDirectory, "report.json"),
    });
    expect(readJson(join(runDirectory, "report.json"))).toMatchObject({ status: "succeeded", reason: "verified" });
  });
});
