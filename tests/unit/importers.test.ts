/**
 * The importers offline: SWE-bench instances with a local clone (real git),
 * Harbor and Terminal-Bench 1 task dirs, export-predictions from a batch
 * report. What runs in Docker (the converted tasks through `runner batch run`)
 * is tests/e2e/importers.test.ts.
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { BatchReport } from "../../src/batch/batch-report.js";
import { loadTaskFile } from "../../src/config/load-task.js";
import { ConfigError } from "../../src/errors.js";
import { loadPolicyFile } from "../../src/policy/load-policy.js";
import { importHarbor, importTerminalBench1 } from "../../src/importers/benchmark-dirs.js";
import { relocateVerifierPaths } from "../../src/importers/container-task.js";
import { sweBenchPredictions } from "../../src/importers/export-predictions.js";
import { importSweBench, readSweBenchInstances } from "../../src/importers/swe-bench.js";
import { formatImportLine, hereDocument, type ImportLine } from "../../src/importers/task-writer.js";
import { temporaryDirectory } from "../helpers/git-repository.js";

function git(directory: string, ...args: string[]): string {
  return execFileSync("git", ["-c", "user.name=test", "-c", "user.email=test@localhost", ...args], { cwd: directory, encoding: "utf8" }).trim();
}

function writeFiles(root: string, files: Record<string, string>): void {
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(join(root, path, ".."), { recursive: true });
    writeFileSync(join(root, path), content);
  }
}

const TEST_PATCH = `diff --git a/tests/test_calc.py b/tests/test_calc.py
new file mode 100644
--- /dev/null
+++ b/tests/test_calc.py
@@ -0,0 +1,2 @@
+def test_add_hidden_marker():
+    assert True
`;

/** A clone with a base commit and a later "fix" commit the agent must never see. */
function makeClone(repos: string): { base: string; fix: string } {
  const clone = join(repos, "acme__calc");
  mkdirSync(clone, { recursive: true });
  git(clone, "init", "-q", "-b", "main");
  writeFiles(clone, { "calc.py": "def add(a, b):\n    return a - b\n" });
  git(clone, "add", "-A");
  git(clone, "commit", "-q", "-m", "base");
  const base = git(clone, "rev-parse", "HEAD");
  writeFiles(clone, { "calc.py": "def add(a, b):\n    return a + b\n" });
  git(clone, "commit", "-qam", "the upstream fix");
  return { base, fix: git(clone, "rev-parse", "HEAD") };
}

function instance(fields: Record<string, unknown>): string {
  return JSON.stringify({
    repo: "acme/calc",
    problem_statement: "add() subtracts.",
    test_patch: TEST_PATCH,
    FAIL_TO_PASS: '["tests/test_calc.py::test_add_hidden_marker"]',
    PASS_TO_PASS: [],
    version: "1.0",
    ...fields,
  });
}

const byId = (lines: ImportLine[]) => Object.fromEntries(lines.map((line) => [line.id, line]));

describe("runner import swe-bench (offline, real git)", () => {
  it("one task dir per instance; the rest get one line saying why", async () => {
    await using temporary = temporaryDirectory();
    const root = temporary.path;
    const repos = join(root, "repos");
    const { base, fix } = makeClone(repos);
    const file = join(root, "instances.jsonl");
    writeFileSync(
      file,
      [
        instance({ instance_id: "acme__calc-1", base_commit: base }),
        instance({ instance_id: "acme__calc-2", base_commit: base, FAIL_TO_PASS: ["tests/test_calc.py::test_add_hidden_marker"] }),
        instance({ instance_id: "acme__calc-4", base_commit: base, test_patch: "not a diff\n" }),
        instance({ instance_id: "other__lib-1", repo: "other/lib", base_commit: base }),
        instance({ instance_id: "acme__calc-3", base_commit: "0".repeat(40) }),
      ].join("\n"),
    );
    const lines = byId(await importSweBench(file, { repos, out: join(root, "tasks") }));
    expect(lines["acme__calc-1"]).toMatchObject({ converted: true });
    expect(lines["acme__calc-2"]).toMatchObject({ converted: true });
    expect(formatImportLine(lines["acme__calc-1"]!)).toMatch(/needs a Python package index; give --image/);
    expect(formatImportLine(lines["acme__calc-4"]!)).toBe("acme__calc-4: cannot convert: test_patch changes no file (no `diff --git a/... b/...` header)");
    expect(formatImportLine(lines["other__lib-1"]!)).toMatch(/cannot convert: no clone of other\/lib .*other__lib\/ or other\/lib\//);
    expect(formatImportLine(lines["acme__calc-3"]!)).toMatch(/cannot convert: base_commit 0{40} could not be had/);
    expect(existsSync(join(root, "tasks", "acme__calc-3"))).toBe(false);

    const directory = join(root, "tasks", "acme__calc-1");
    const task = loadTaskFile(join(directory, "task.yaml"));
    expect(task.name).toBe("acme--calc-1");
    expect(task.instruction).toBe("add() subtracts.");
    expect(task.sandbox.workdir).toBe("/testbed");
    expect(task.verify!.protect).toEqual(["tests/test_calc.py"]);
    expect(task.verify!.command).toContain(TEST_PATCH.trimEnd());
    // No subagents: a worker's verification would run the hidden tests for the agent.
    expect(task.policy).toBe(join(directory, "policy.yaml"));
    const policy = loadPolicyFile(task.policy);
    expect(policy.name).toBe("benchmark-worker");
    expect(policy.tools.deny).toEqual(["agent"]);
    expect(policy.tools.allow).toContain("run_shell");
    // The workspace is the base commit and its ancestors: the later fix is not in its object store.
    const repo = join(directory, "repo");
    expect(git(repo, "rev-parse", "HEAD")).toBe(base);
    expect(() => git(repo, "cat-file", "-e", fix)).toThrow();
    expect(git(repo, "log", "--all", "--format=%s")).toBe("base");
    expect(existsSync(join(repo, "tests"))).toBe(false);
    expect(JSON.parse(readFileSync(join(directory, "instance.json"), "utf8"))).toMatchObject({
      source: "swe-bench",
      instance_id: "acme__calc-1",
      base_commit: base,
    });
  });

  it("--image names each task's image ({instance_id} as the harness's Docker Hub images spell it); --shallow copies the base commit alone", async () => {
    await using temporary = temporaryDirectory();
    const root = temporary.path;
    const repos = join(root, "repos");
    const { base } = makeClone(repos);
    git(join(repos, "acme__calc"), "checkout", "-q", "-b", "old", base);
    writeFileSync(join(repos, "acme__calc", "more.py"), "x = 1\n");
    git(join(repos, "acme__calc"), "add", "-A");
    git(join(repos, "acme__calc"), "commit", "-qm", "second");
    const second = git(join(repos, "acme__calc"), "rev-parse", "HEAD");
    writeFileSync(join(root, "i.jsonl"), instance({ instance_id: "acme__calc-9", base_commit: second }));
    const [line] = await importSweBench(join(root, "i.jsonl"), { repos, out: join(root, "tasks"), image: "example/sweb.eval.{instance_id}:v1", shallow: true });
    // An image given: no note about a package index; a repository the harness does not know is run with pytest, and the line says so.
    expect(line).toMatchObject({ converted: true, notes: [expect.stringMatching(/^acme\/calc is not a harness repository: tests run with `pytest/)] });
    const task = loadTaskFile(join(root, "tasks", "acme__calc-9", "task.yaml"));
    expect(task.sandbox.image).toBe("example/sweb.eval.acme_1776_calc-9:v1");
    expect(git(join(root, "tasks", "acme__calc-9", "repo"), "log", "--format=%s")).toBe("second");
  });

  it("django: runtests.py over the test files as module names (the harness's directives); version 1.9 without --parallel", async () => {
    await using temporary = temporaryDirectory();
    const root = temporary.path;
    const repos = join(root, "repos");
    const { base } = makeClone(repos);
    execFileSync("mv", [join(repos, "acme__calc"), join(repos, "django__django")]);
    const patch =
      TEST_PATCH.replaceAll("tests/test_calc.py", "tests/queries/tests.py") + TEST_PATCH.replaceAll("tests/test_calc.py", "tests/queries/fixtures/data.json");
    writeFileSync(
      join(root, "i.jsonl"),
      [
        instance({ instance_id: "django__django-1", repo: "django/django", base_commit: base, test_patch: patch, version: "3.0" }),
        instance({ instance_id: "django__django-2", repo: "django/django", base_commit: base, test_patch: patch, version: "1.9" }),
      ].join("\n"),
    );
    await importSweBench(join(root, "i.jsonl"), { repos, out: join(root, "tasks"), image: "example/django:{instance_id}" });
    const spec = (id: string) => {
      const command = loadTaskFile(join(root, "tasks", id, "task.yaml")).verify!.command;
      return JSON.parse(/<<'RUNNER_EOF_\w+'\n(\{"instance_id".*)\n/.exec(command)![1]!) as { parser: string; test_command: string; directives: string[] };
    };
    expect(spec("django__django-1")).toMatchObject({
      parser: "django",
      test_command: "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1",
      directives: ["queries.tests"],
    });
    expect(spec("django__django-2").test_command).toBe("./tests/runtests.py --verbosity 2");
  });

  it("bad lines are bad input naming line and field; FAIL_TO_PASS may be a list or its JSON string", async () => {
    await using temporary = temporaryDirectory();
    const root = temporary.path;
    const file = join(root, "bad.jsonl");
    writeFileSync(
      file,
      `${instance({ instance_id: "a__b-1", base_commit: "f".repeat(40), FAIL_TO_PASS: "not json" })}\n{oops\n${instance({ base_commit: "x" })}\n`,
    );
    let error: unknown;
    try {
      readSweBenchInstances(file);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as Error).message;
    expect(message).toMatch(/line 1: FAIL_TO_PASS: expected a list of test ids, or its JSON string/);
    expect(message).toMatch(/line 2: not JSON/);
    expect(message).toMatch(/line 3: instance_id: /);
    expect(message).toMatch(/line 3: base_commit: expected the 40-hex commit/);
  });
});

describe("here-documents carry files into the verification sandbox byte for byte", () => {
  it("text and binary content survive bash", async () => {
    await using temporary = temporaryDirectory();
    const root = temporary.path;
    const text = Buffer.from("line 'one' $HOME `x`\n\\ No newline\r\nEOF\n");
    const binary = Buffer.from([0, 1, 2, 255, 10, 0x80]);
    const script = [hereDocument(`"${root}/text"`, text), hereDocument(`"${root}/binary"`, binary)].join("\n");
    execFileSync("bash", ["-c", script]);
    expect(readFileSync(join(root, "text"))).toEqual(text);
    expect(readFileSync(join(root, "binary"))).toEqual(binary);
  });
});

const HARBOR_TEST_SH = `#!/bin/bash
if grep -q hello /app/greeting.txt 2>/dev/null; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
python3 /tests/check.py
`;

function harborTask(root: string, name: string, files: Record<string, string> = {}): string {
  const directory = join(root, name);
  writeFiles(directory, {
    "task.toml": 'version = "1.0"\n[verifier]\ntimeout_sec = 120.0\n[agent]\ntimeout_sec = 600.0\n',
    "instruction.md": "Write hello into greeting.txt.\n",
    "environment/Dockerfile": "FROM agent-runner/sandbox:bookworm\nWORKDIR /app\nCOPY app/ /app/\n",
    "environment/app/README.md": "the app\n",
    "tests/test.sh": HARBOR_TEST_SH,
    "tests/check.py": "print('checked')\n",
    "solution/solve.sh": "echo hello > /app/greeting.txt\n",
    ...files,
  });
  return directory;
}

describe("runner import harbor / tb1 (offline)", () => {
  it("Harbor: sandbox.build from environment/, workdir from WORKDIR, the COPY'd files as the workspace, tests only inside verify.command", async () => {
    await using temporary = temporaryDirectory();
    const root = temporary.path;
    harborTask(root, "greet");
    harborTask(root, "downloads", { "tests/test.sh": "#!/bin/bash\ncurl -LsSf https://astral.sh/uv/install.sh | sh\nuvx pytest /tests\n" });
    harborTask(root, "two-services", { "environment/docker-compose.yaml": "services:\n  main: { build: . }\n  db: { image: postgres }\n" });
    const lines = byId(await importHarbor(root, join(root, "out")));
    expect(lines.greet).toMatchObject({ converted: true });
    expect(formatImportLine(lines.downloads!)).toMatch(/^downloads: cannot convert: tests\/test.sh line 2 runs `curl`: verify needs network/);
    expect(formatImportLine(lines["two-services"]!)).toMatch(/cannot convert: docker-compose.yaml defines 2 services \(main, db\)/);

    const directory = join(root, "out", "greet");
    const task = loadTaskFile(join(directory, "task.yaml"));
    expect(task.sandbox.workdir).toBe("/app");
    expect(task.sandbox.build!.context).toBe(join(directory, "environment"));
    expect(task.verify!.timeout_sec).toBe(120);
    expect(readFileSync(join(directory, "repo", "README.md"), "utf8")).toBe("the app\n");
    expect(existsSync(join(directory, "tests"))).toBe(false);
    expect(git(join(directory, "repo"), "ls-files")).toBe("README.md");
    expect(task.verify!.command).toContain("echo 1 > /tmp/runner-verifier/logs/verifier/reward.txt");
    expect(task.verify!.command).toContain("python3 /tmp/runner-verifier/tests/check.py");
  });

  it("Terminal-Bench 1: task.yaml's instruction, run-tests.sh and tests/ kept out of the build context and the workspace", async () => {
    await using temporary = temporaryDirectory();
    const root = temporary.path;
    writeFiles(join(root, "hello"), {
      "task.yaml": "instruction: |\n  Create hello.txt.\nmax_test_timeout_sec: 90\nparser_name: pytest\n",
      Dockerfile: "FROM agent-runner/sandbox:bookworm\nWORKDIR /app\nCOPY . /app\n",
      "docker-compose.yaml": "services:\n  client:\n    build: .\n",
      "run-tests.sh": "#!/bin/bash\ncd /app && pytest -rA $TEST_DIR/test_outputs.py\n",
      "tests/test_outputs.py": "def test_hello():\n    assert open('/app/hello.txt').read()\n",
      "solution.sh": "echo hi > hello.txt\n",
      "notes.md": "part of the image\n",
    });
    const [line] = await importTerminalBench1(root, join(root, "out"));
    expect(line).toMatchObject({ id: "hello", converted: true });
    const directory = join(root, "out", "hello");
    const task = loadTaskFile(join(directory, "task.yaml"));
    expect(task.instruction).toBe("Create hello.txt.");
    expect(task.verify!.timeout_sec).toBe(90);
    for (const hidden of ["tests", "run-tests.sh", "solution.sh", "task.yaml"]) {
      expect(existsSync(join(directory, "environment", hidden))).toBe(false);
      expect(existsSync(join(directory, "repo", hidden))).toBe(false);
    }
    expect(git(join(directory, "repo"), "ls-files").split("\n").sort()).toEqual(["Dockerfile", "docker-compose.yaml", "notes.md"]);
    expect(task.verify!.command).toContain("def test_hello");
  });

  it("moves /tests and /logs/verifier, and nothing that merely contains the words", () => {
    expect(relocateVerifierPaths("cat /tests/a.py /logs/verifier/reward.txt /app/tests/x /testsuite")).toBe(
      "cat /tmp/runner-verifier/tests/a.py /tmp/runner-verifier/logs/verifier/reward.txt /app/tests/x /testsuite",
    );
  });
});

describe("runner batch export-predictions", () => {
  it("one line per imported SWE-bench task: attempt 1's last try's patch.diff, the empty string when it left none", async () => {
    await using temporary = temporaryDirectory();
    const root = temporary.path;
    const task = (name: string, source: string | null) => {
      mkdirSync(join(root, name), { recursive: true });
      if (source) writeFileSync(join(root, name, "instance.json"), JSON.stringify({ source, instance_id: `${name}__x-1` }));
      return join(root, name, "task.yaml");
    };
    writeFileSync(join(root, "first.diff"), "diff --git a/calc.py b/calc.py\n");
    writeFileSync(join(root, "retry.diff"), "diff --git a/retry.py b/retry.py\n");
    writeFileSync(join(root, "second-attempt.diff"), "diff --git a/other.py b/other.py\n");
    const attempt = (number: number, tryNumber: number, patch: string | null) => ({ attempt: number, try: tryNumber, patch });
    const report = {
      batch_id: "b1",
      tasks: [
        {
          name: "a",
          task_file: task("a", "swe-bench"),
          attempts: [attempt(1, 1, join(root, "first.diff")), attempt(1, 2, join(root, "retry.diff")), attempt(2, 1, join(root, "second-attempt.diff"))],
        },
        { name: "b", task_file: task("b", "swe-bench"), attempts: [attempt(1, 1, null)] },
        { name: "c", task_file: task("c", "harbor"), attempts: [attempt(1, 1, join(root, "first.diff"))] },
        { name: "d", task_file: task("d", null), attempts: [] },
      ],
    } as unknown as BatchReport;
    expect(sweBenchPredictions(report, "my-model")).toEqual([
      { instance_id: "a__x-1", model_name_or_path: "my-model", model_patch: "diff --git a/retry.py b/retry.py\n" },
      { instance_id: "b__x-1", model_name_or_path: "my-model", model_patch: "" },
    ]);
    expect(sweBenchPredictions(report, "m", 2)[0]!.model_patch).toBe("diff --git a/other.py b/other.py\n");
    expect(() => sweBenchPredictions({ ...report, tasks: report.tasks.slice(2) }, "m")).toThrow(/no task imported by `runner import swe-bench`/);
  });
});
