/**
 * Imported benchmark tasks through the built CLI and real Docker: `runner
 * import swe-bench | harbor | tb1` on small fixture datasets made here (a tiny
 * Python repository with a clone layout; Harbor and Terminal-Bench 1 task dirs
 * whose images build FROM the default sandbox image, so nothing is pulled),
 * then `runner batch run` with the scripted model, then `runner batch
 * export-predictions`. The image's own pytest runs the tests: no package index.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import type { BatchReport } from "../../src/batch/batch-report.js";
import { requireDocker } from "../helpers/docker.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { readJson, runCli, toolCall } from "../helpers/runner-cli.js";

function git(directory: string, ...args: string[]): string {
  return execFileSync("git", ["-c", "user.name=test", "-c", "user.email=test@localhost", ...args], { cwd: directory, encoding: "utf8" }).trim();
}

function writeFiles(root: string, files: Record<string, string>): void {
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(join(root, path, ".."), { recursive: true });
    writeFileSync(join(root, path), content);
  }
}

/** Gives an imported task the scripted model (importers leave `model` to the user). */
function useScript(taskDirectory: string, script: unknown): void {
  const file = join(taskDirectory, "task.yaml");
  const task = parse(readFileSync(file, "utf8")) as Record<string, unknown>;
  writeFileSync(join(taskDirectory, "script.yaml"), JSON.stringify(script));
  writeFileSync(file, stringify({ ...task, model: { provider: "scripted", script: "./script.yaml" }, max_steps: 10 }, { lineWidth: 0 }));
}

const TEST_PATCH = `diff --git a/tests/test_calc.py b/tests/test_calc.py
new file mode 100644
--- /dev/null
+++ b/tests/test_calc.py
@@ -0,0 +1,8 @@
+from calc import add, sub
+
+
+def test_add_hidden_f2p_marker():
+    assert add(2, 3) == 5
+
+def test_sub():
+    assert sub(5, 3) == 2
`;

/** Looks for the tests and the upstream fix from inside the agent's sandbox; the next turn's expect says it found nothing. */
const SEARCH = toolCall("run_shell", {
  command:
    "grep -rIl hidden_f2p_marker /testbed /tmp /run /home /opt /srv /root /var 2>/dev/null; find / -path /proc -prune -o \\( -name test_calc.py -o -name test.sh -o -name test_outputs.py \\) -print 2>/dev/null; git log --all --format=%s; echo searched",
});
// git log ran (its output precedes the marker), so the search was real; it lists no later commit.
const FOUND_NOTHING = {
  tool_result_matches: "(base|Dockerfile puts them in /app)\\s+searched",
  tool_result_not_matches: "hidden_f2p_marker|test_calc\\.py|test\\.sh|test_outputs|upstream fix",
};

const fixWith = (replacement: string) => ({
  turns: [
    { tool_calls: [SEARCH] },
    {
      expect: FOUND_NOTHING,
      tool_calls: [
        toolCall("edit_file", { path: "calc.py", old_string: "def add(a, b):\n    return a - b", new_string: `def add(a, b):\n    ${replacement}` }),
      ],
    },
    { content: "Fixed add()." },
  ],
});

describe("imported benchmark tasks (real CLI, real Docker)", () => {
  it("SWE-bench, Harbor and TB1 tasks run through `runner batch run`: the right work passes, wrong work and a forged reward fail, the tests stay hidden; predictions exported", async () => {
    await requireDocker();
    await using directory = temporaryDirectory("agent-runner-import-e2e-");
    await using home = temporaryDirectory("agent-runner-import-home-");
    const root = directory.path;
    const environment = { RUNNER_HOME: home.path };

    // SWE-bench: a clone whose history goes on past the base commit (the upstream fix the agent must not see).
    const clone = join(root, "repos", "acme__calc");
    mkdirSync(clone, { recursive: true });
    git(clone, "init", "-q", "-b", "main");
    writeFiles(clone, { "calc.py": "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n", "conftest.py": "" });
    git(clone, "add", "-A");
    git(clone, "commit", "-qm", "base");
    const base = git(clone, "rev-parse", "HEAD");
    writeFiles(clone, { "calc.py": "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n" });
    git(clone, "commit", "-qam", "the upstream fix");
    const instance = (id: string) =>
      JSON.stringify({
        instance_id: id,
        repo: "acme/calc",
        base_commit: base,
        problem_statement: "add() subtracts instead of adding.",
        test_patch: TEST_PATCH,
        FAIL_TO_PASS: JSON.stringify(["tests/test_calc.py::test_add_hidden_f2p_marker"]),
        PASS_TO_PASS: ["tests/test_calc.py::test_sub"],
        version: "0.1",
      });
    writeFileSync(join(root, "instances.jsonl"), `${instance("acme__calc-1")}\n${instance("acme__calc-2")}\n`);
    const tasks = join(root, "tasks");
    const swe = await runCli(["import", "swe-bench", join(root, "instances.jsonl"), "--repos", join(root, "repos"), "--out", join(tasks, "swe")], environment);
    expect(swe.code, swe.stdout + swe.stderr).toBe(0);
    expect(swe.stdout).toMatch(/^acme__calc-1: converted -> .*needs a Python package index; give --image/m);
    useScript(join(tasks, "swe", "acme__calc-1"), fixWith("return a + b"));
    // A worker subagent would be verified with the task's verify command and show the agent its output: not even offered.
    const wrong = fixWith("return a * b");
    useScript(join(tasks, "swe", "acme__calc-2"), {
      turns: [
        { tool_calls: [toolCall("agent", { description: "fix add", prompt: "Fix add() in calc.py.", mode: "worker" })] },
        { expect: { tool_result_matches: 'unknown tool "agent"' }, tool_calls: wrong.turns[0]!.tool_calls },
        ...wrong.turns.slice(1),
      ],
    });

    // Harbor: the verifier's reward decides; one task forges a reward file in its workspace; one needs the network.
    const harborTask = (
      name: string,
      testSh = "#!/bin/bash\nif grep -qx hello /app/greeting.txt; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n",
    ) =>
      writeFiles(join(root, "harbor", name), {
        "task.toml": 'version = "1.0"\n[verifier]\ntimeout_sec = 120.0\n',
        "instruction.md": "Write hello into greeting.txt.\n",
        "environment/Dockerfile": "FROM agent-runner/sandbox:bookworm\nWORKDIR /app\nCOPY app/ /app/\n",
        "environment/app/README.md": "greetings app\n",
        "tests/test.sh": testSh,
      });
    harborTask("greet");
    harborTask("greet-forged");
    harborTask("greet-online", "#!/bin/bash\ncurl -LsSf https://astral.sh/uv/install.sh | sh\n");
    const harbor = await runCli(["import", "harbor", join(root, "harbor"), "--out", join(tasks, "harbor")], environment);
    expect(harbor.code, harbor.stdout + harbor.stderr).toBe(1);
    expect(harbor.stdout).toContain("greet-online: cannot convert: tests/test.sh line 2 runs `curl`: verify needs network, and verification has none");
    expect(harbor.stdout).toMatch(/^2 of 3 converted$/m);
    const readme = toolCall("read_file", { path: "README.md" });
    useScript(join(tasks, "harbor", "greet"), {
      turns: [
        { tool_calls: [SEARCH, readme] },
        { expect: FOUND_NOTHING, tool_calls: [toolCall("write_file", { path: "greeting.txt", content: "hello\n" })] },
        { content: "Done." },
      ],
    });
    useScript(join(tasks, "harbor", "greet-forged"), {
      turns: [
        {
          tool_calls: [
            toolCall("write_file", { path: "logs/verifier/reward.txt", content: "1\n" }),
            toolCall("write_file", { path: "reward.txt", content: "1\n" }),
            toolCall("write_file", { path: "greeting.txt", content: "goodbye\n" }),
          ],
        },
        { content: "Done." },
      ],
    });

    // Terminal-Bench 1: run-tests.sh runs pytest -rA over tests/; the summary lines decide.
    writeFiles(join(root, "tb1", "hello-file"), {
      "task.yaml": "instruction: |\n  Create hello.txt holding the word hello.\nmax_test_timeout_sec: 120\nparser_name: pytest\n",
      Dockerfile: "FROM agent-runner/sandbox:bookworm\nWORKDIR /app\n",
      "docker-compose.yaml": "services:\n  client:\n    build: .\n",
      "run-tests.sh": "#!/bin/bash\ncd /app\npytest -rA -p no:cacheprovider $TEST_DIR/test_outputs.py\n",
      "tests/test_outputs.py": "def test_hello():\n    assert open('/app/hello.txt').read().strip() == 'hello'\n",
    });
    const tb1 = await runCli(["import", "tb1", join(root, "tb1"), "--out", join(tasks, "tb1")], environment);
    expect(tb1.code, tb1.stdout + tb1.stderr).toBe(0);
    useScript(join(tasks, "tb1", "hello-file"), {
      turns: [
        { tool_calls: [SEARCH] },
        { expect: FOUND_NOTHING, tool_calls: [toolCall("write_file", { path: "hello.txt", content: "hello\n" })] },
        { content: "Done." },
      ],
    });

    const result = await runCli(["batch", "run", tasks, "-j", "2", "--min-pass-rate", "0.5", "--json"], environment);
    const last = JSON.parse(result.stdout.trim().split("\n").at(-1)!) as { batch_id: string; report: string };
    const report = readJson<BatchReport>(last.report);
    const outcome = (name: string) => report.tasks.find((task) => task.name === name)!;
    const verifyOutput = (name: string) =>
      readJson<{ verify: { output_tail: string } }>(join(outcome(name).attempts[0]!.run_dir!, "report.json")).verify.output_tail;
    // The harness's reading of real pytest -rA output, both ways.
    expect(verifyOutput("swe/acme__calc-1")).toMatch(
      /PASSED tests\/test_calc.py::test_add_hidden_f2p_marker[\s\S]*FAIL_TO_PASS: 1\/1 passed[\s\S]*PASS_TO_PASS: 1\/1 passed[\s\S]*\[swe-bench\] resolved/,
    );
    expect(verifyOutput("swe/acme__calc-2")).toMatch(
      /FAIL_TO_PASS not passed: tests\/test_calc.py::test_add_hidden_f2p_marker[\s\S]*FAIL_TO_PASS: 0\/1 passed[\s\S]*PASS_TO_PASS: 1\/1 passed[\s\S]*not resolved/,
    );
    // The forged reward files sit in the workspace; the verifier's own directory held its real verdict.
    expect(verifyOutput("harbor/greet-forged")).toMatch(/\[harbor\] reward: 0 /);
    expect(verifyOutput("harbor/greet")).toMatch(/\[harbor\] reward: 1 /);

    expect(
      report.tasks.map((task) => [task.name, task.status, task.reason]),
      result.stderr,
    ).toEqual([
      ["harbor/greet", "succeeded", "verified"],
      ["harbor/greet-forged", "failed", "verify_failed"],
      ["swe/acme__calc-1", "succeeded", "verified"],
      ["swe/acme__calc-2", "failed", "verify_failed"],
      ["tb1/hello-file", "succeeded", "verified"],
    ]);
    expect(result.code).toBe(0);
    const predictionsFile = join(root, "predictions.jsonl");
    const exported = await runCli(["batch", "export-predictions", last.batch_id, "--model-name", "scripted-test", "--out", predictionsFile], environment);
    expect(exported.code, exported.stderr).toBe(0);
    const predictions = readFileSync(predictionsFile, "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as { instance_id: string; model_name_or_path: string; model_patch: string });
    expect(predictions.map((prediction) => [prediction.instance_id, prediction.model_name_or_path])).toEqual([
      ["acme__calc-1", "scripted-test"],
      ["acme__calc-2", "scripted-test"],
    ]);
    expect(predictions[0]!.model_patch).toMatch(/^diff --git a\/calc.py b\/calc.py[\s\S]*\+ {4}return a \+ b/);
    expect(predictions[1]!.model_patch).toContain("+    return a * b");
    // It applies to the base commit as the harness applies it.
    const check = join(root, "check");
    git(root, "clone", "-q", clone, check);
    git(check, "checkout", "-q", base);
    writeFileSync(join(root, "p.diff"), predictions[0]!.model_patch);
    git(check, "apply", "--check", join(root, "p.diff"));
  }, 600_000);
});
