/**
 * A benchmark download is untrusted input (issue 20 item 2): no file of a
 * Harbor or Terminal-Bench 1 task that leads out of its directory through a
 * symlink is read (into the instruction, the verify command) or copied (the
 * build context), and the refusal names the file; a SWE-bench instance
 * cannot pick a clone outside --repos with `..`.
 */
import { execFileSync } from "node:child_process";
import { existsSync, linkSync, mkdirSync, readFileSync, readlinkSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { importHarbor, importTerminalBench1 } from "../../src/importers/benchmark-dirs.js";
import { importSweBench } from "../../src/importers/swe-bench.js";
import { formatImportLine, type ImportLine } from "../../src/importers/task-writer.js";
import { temporaryDirectory } from "../helpers/git-repository.js";

/** A host file the importer must never copy into a task. */
const HOST_SECRET = "HOST-SECRET-do-not-copy";

function writeFiles(root: string, files: Record<string, string>): void {
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(join(root, path, ".."), { recursive: true });
    writeFileSync(join(root, path), content);
  }
}

function harborTask(directory: string): void {
  writeFiles(directory, {
    "task.toml": 'version = "1.0"\n[verifier]\ntimeout_sec = 120.0\n',
    "instruction.md": "Write hello into greeting.txt.\n",
    "environment/Dockerfile": "FROM agent-runner/sandbox:bookworm\nWORKDIR /app\nCOPY app/ /app/\n",
    "environment/app/README.md": "the app\n",
    "tests/test.sh": "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
  });
}

/** Every file under `directory` (contents), to show the secret went nowhere. */
function everything(directory: string): string {
  if (!existsSync(directory)) return "";
  return execFileSync("sh", ["-c", "find . -type f -exec cat {} + 2>/dev/null; find . -type l -exec readlink {} +"], { cwd: directory, encoding: "utf8" });
}

const byId = (lines: ImportLine[]) => Object.fromEntries(lines.map((line) => [line.id, formatImportLine(line)]));

describe("importers read only the task's own files", () => {
  it("Harbor: instruction.md, tests/test.sh, a file under tests/, a linked tests/ and a link in environment/ leading out are refused, naming the file", async () => {
    await using temporary = temporaryDirectory();
    const root = join(temporary.path, "tasks");
    const secret = join(temporary.path, "host-secret.txt");
    writeFileSync(secret, `${HOST_SECRET}\n`);
    mkdirSync(join(temporary.path, "host-dir"));
    writeFileSync(join(temporary.path, "host-dir", "check.py"), `${HOST_SECRET}\n`);
    const planted: Record<string, (directory: string) => void> = {
      instruction: (directory) => symlinkSync(secret, join(directory, "instruction.md")),
      "test-script": (directory) => symlinkSync(secret, join(directory, "tests", "test.sh")),
      "test-file": (directory) => symlinkSync(secret, join(directory, "tests", "check.py")),
      "tests-dir": (directory) => symlinkSync(join(temporary.path, "host-dir"), join(directory, "tests", "data")),
      context: (directory) => symlinkSync(secret, join(directory, "environment", "app", "notes.txt")),
      // A relative link out, through `..`.
      relative: (directory) => symlinkSync("../../../host-secret.txt", join(directory, "tests", "check.py")),
    };
    for (const [name, plant] of Object.entries(planted)) {
      const directory = join(root, name);
      harborTask(directory);
      if (name === "instruction" || name === "test-script") {
        execFileSync("rm", [join(directory, name === "instruction" ? "instruction.md" : "tests/test.sh")]);
      }
      plant(directory);
    }
    // A link that stays inside the task directory is read as the file it names.
    harborTask(join(root, "inside"));
    symlinkSync("../instruction.md", join(root, "inside", "tests", "instruction-copy.md"));

    const lines = byId(await importHarbor(root, join(temporary.path, "out")));
    const refused = (file: string) => new RegExp(`cannot convert: ${file.replaceAll(".", "\\.")} leads out of the task directory \\(to .*\\): refused`);
    expect(lines.instruction).toMatch(refused("instruction.md"));
    expect(lines["test-script"]).toMatch(refused("tests/test.sh"));
    expect(lines["test-file"]).toMatch(refused("tests/check.py"));
    expect(lines["tests-dir"]).toMatch(refused("tests/data"));
    expect(lines.context).toMatch(refused("environment/app/notes.txt"));
    expect(lines.relative).toMatch(refused("tests/check.py"));
    expect(lines.inside).toMatch(/^inside: converted/);
    expect(readFileSync(join(temporary.path, "out", "inside", "task.yaml"), "utf8")).toContain("Write hello into greeting.txt.");
    // Nothing of the host file reached any output.
    expect(everything(join(temporary.path, "out"))).not.toContain(HOST_SECRET);
    expect(everything(join(temporary.path, "out"))).not.toContain(secret);
  });

  it("Harbor and Terminal-Bench 1: a hard link to a host file (instruction.md, environment/creds.txt, tests/, task.yaml) is refused, naming the file", async () => {
    await using temporary = temporaryDirectory();
    const secret = join(temporary.path, "host-secret.txt");
    writeFileSync(secret, `instruction: ${HOST_SECRET}\n`);
    const root = join(temporary.path, "harbor");
    const planted: Record<string, string> = { instruction: "instruction.md", context: "environment/app/creds.txt", tests: "tests/check.py" };
    for (const [name, file] of Object.entries(planted)) {
      const directory = join(root, name);
      harborTask(directory);
      execFileSync("rm", ["-f", join(directory, file)]);
      linkSync(secret, join(directory, file));
    }
    harborTask(join(root, "clean"));
    const lines = byId(await importHarbor(root, join(temporary.path, "out")));
    for (const [name, file] of Object.entries(planted)) {
      expect(lines[name]).toContain(`cannot convert: ${file} is a hard link: a benchmark download's files must be its own; refused`);
    }
    expect(lines.clean).toMatch(/^clean: converted/);

    const tb1 = join(temporary.path, "tb1", "config");
    writeFiles(tb1, {
      Dockerfile: "FROM agent-runner/sandbox:bookworm\nWORKDIR /app\nCOPY . /app\n",
      "run-tests.sh": "#!/bin/bash\npytest -rA $TEST_DIR\n",
      "tests/test_outputs.py": "def test_hello():\n    pass\n",
    });
    linkSync(secret, join(tb1, "task.yaml"));
    const tb1Lines = byId(await importTerminalBench1(join(temporary.path, "tb1"), join(temporary.path, "out-tb1")));
    expect(tb1Lines.config).toMatch(/^config: cannot convert: task\.yaml is a hard link/);
    expect(everything(join(temporary.path, "out"))).not.toContain(HOST_SECRET);
    expect(everything(join(temporary.path, "out-tb1"))).not.toContain(HOST_SECRET);
  });

  it("Terminal-Bench 1: a task.yaml or run-tests.sh leading out is refused", async () => {
    await using temporary = temporaryDirectory();
    const secret = join(temporary.path, "host-secret.txt");
    writeFileSync(secret, `instruction: ${HOST_SECRET}\n`);
    const tb1 = (directory: string) =>
      writeFiles(directory, {
        "task.yaml": "instruction: Create hello.txt.\n",
        Dockerfile: "FROM agent-runner/sandbox:bookworm\nWORKDIR /app\nCOPY . /app\n",
        "run-tests.sh": "#!/bin/bash\npytest -rA $TEST_DIR\n",
        "tests/test_outputs.py": "def test_hello():\n    pass\n",
      });
    tb1(join(temporary.path, "tasks", "config"));
    execFileSync("rm", [join(temporary.path, "tasks", "config", "task.yaml")]);
    symlinkSync(secret, join(temporary.path, "tasks", "config", "task.yaml"));
    tb1(join(temporary.path, "tasks", "script"));
    execFileSync("rm", [join(temporary.path, "tasks", "script", "run-tests.sh")]);
    symlinkSync(secret, join(temporary.path, "tasks", "script", "run-tests.sh"));
    const lines = byId(await importTerminalBench1(join(temporary.path, "tasks"), join(temporary.path, "out")));
    expect(lines.config).toMatch(/^config: cannot convert: task\.yaml leads out of the task directory/);
    expect(lines.script).toMatch(/^script: cannot convert: run-tests\.sh leads out of the task directory/);
    expect(everything(join(temporary.path, "out"))).not.toContain(HOST_SECRET);
  });

  it("Harbor: a link in environment/ that dangles in the task but leads out once the output's repo/ exists is refused, and nothing is copied", async () => {
    await using temporary = temporaryDirectory();
    writeFileSync(join(temporary.path, "secret.txt"), `${HOST_SECRET}\n`);
    const task = join(temporary.path, "bench", "evil");
    harborTask(task);
    writeFileSync(
      join(task, "environment", "Dockerfile"),
      "FROM agent-runner/sandbox:bookworm\nWORKDIR /app\nCOPY a/secret.txt /app/\nCOPY r/etc/passwd /app/\n",
    );
    // Both dangle in the task directory (no environment/repo); in <out>/evil/environment they would pass through <out>/evil/repo.
    symlinkSync("../repo/../../..", join(task, "environment", "a"));
    symlinkSync("../repo/../../../../../../../../../../..", join(task, "environment", "r"));
    const out = join(temporary.path, "out");
    const lines = byId(await importHarbor(join(temporary.path, "bench"), out));
    expect(lines.evil).toMatch(/^evil: cannot convert: environment\/a leads out of the task directory \(to .*\): refused/);
    expect(existsSync(join(out, "evil"))).toBe(false);
    expect(everything(out)).not.toContain(HOST_SECRET);
    expect(everything(out)).not.toContain("root:");
  });

  it("Harbor: a link out that dangles, an absolute link and a link leaving the copied tree are refused; a link inside is copied as a link", async () => {
    await using temporary = temporaryDirectory();
    const root = join(temporary.path, "tasks");
    const planted: Record<string, [string, string]> = {
      // Dangling: the target's name does not exist, yet the link's text leads out.
      dangling: ["../../../nothing-here", "environment/app/x"],
      absolute: ["/nonexistent-absolute-target", "environment/app/y"],
      // Inside the task directory, but out of the build context (the tree that is copied).
      "out-of-context": ["../../tests/test.sh", "environment/app/z"],
    };
    for (const [name, [target, link]] of Object.entries(planted)) {
      harborTask(join(root, name));
      symlinkSync(target, join(root, name, link));
    }
    harborTask(join(root, "inside"));
    symlinkSync("README.md", join(root, "inside", "environment", "app", "readme-link"));
    const out = join(temporary.path, "out");
    const lines = byId(await importHarbor(root, out));
    expect(lines.dangling).toMatch(/^dangling: cannot convert: environment\/app\/x leads out of the task directory/);
    expect(lines.absolute).toMatch(/^absolute: cannot convert: environment\/app\/y leads out of the task directory/);
    expect(lines["out-of-context"]).toMatch(/^out-of-context: cannot convert: environment\/app\/z leads out of the copied directory/);
    expect(lines.inside).toMatch(/^inside: converted/);
    expect(readlinkSync(join(out, "inside", "environment", "app", "readme-link"))).toBe("README.md");
    expect(readlinkSync(join(out, "inside", "repo", "readme-link"))).toBe("README.md");
    for (const name of Object.keys(planted)) expect(existsSync(join(out, name))).toBe(false);
  });

  it("Harbor: a COPY source whose links stay inside as written but resolve out of the copied context is refused", async () => {
    await using temporary = temporaryDirectory();
    writeFileSync(join(temporary.path, "secret.txt"), `${HOST_SECRET}\n`);
    const task = join(temporary.path, "bench", "evil");
    harborTask(task);
    writeFileSync(join(task, "environment", "Dockerfile"), "FROM agent-runner/sandbox:bookworm\nWORKDIR /app\nCOPY x/y/e /app/\n");
    mkdirSync(join(task, "environment", "x", "y"), { recursive: true });
    // d is environment/ itself; e's text stays inside lexically (environment/secret.txt) and dangles in the
    // task (no <bench>/evil/repo), but in <out>/evil/environment it goes through <out>/evil/repo to the host file.
    symlinkSync("../..", join(task, "environment", "x", "y", "d"));
    symlinkSync("d/../repo/../../../secret.txt", join(task, "environment", "x", "y", "e"));
    const out = join(temporary.path, "out");
    const lines = byId(await importHarbor(join(temporary.path, "bench"), out));
    expect(lines.evil).toMatch(/^evil: cannot convert: COPY x\/y\/e leads out of the build context \(to .*secret\.txt\): refused/);
    expect(existsSync(join(out, "evil"))).toBe(false);
    expect(everything(out)).not.toContain(HOST_SECRET);
  });

  it("Terminal-Bench 1: a link in the task directory that dangles but leads out once copied is refused, and nothing is copied", async () => {
    await using temporary = temporaryDirectory();
    writeFileSync(join(temporary.path, "secret.txt"), `${HOST_SECRET}\n`);
    const task = join(temporary.path, "bench", "evil");
    writeFiles(task, {
      "task.yaml": "instruction: Create hello.txt.\n",
      Dockerfile: "FROM agent-runner/sandbox:bookworm\nWORKDIR /app\nCOPY a/secret.txt /app/\nCOPY r/etc/passwd /app/\n",
      "run-tests.sh": "#!/bin/bash\npytest -rA $TEST_DIR\n",
      "tests/test_outputs.py": "def test_hello():\n    pass\n",
    });
    // The build context is the task directory, copied to <out>/evil/environment: `repo/..` there is <out>/evil.
    symlinkSync("repo/../../..", join(task, "a"));
    symlinkSync("repo/../../../../../../../../../../..", join(task, "r"));
    const out = join(temporary.path, "out");
    const lines = byId(await importTerminalBench1(join(temporary.path, "bench"), out));
    expect(lines.evil).toMatch(/^evil: cannot convert: a leads out of the task directory \(to .*\): refused/);
    expect(existsSync(join(out, "evil"))).toBe(false);
    expect(everything(out)).not.toContain(HOST_SECRET);
    expect(everything(out)).not.toContain("root:");
  });

  it("SWE-bench: `repo: ../x` is bad input, and no clone outside --repos is taken", async () => {
    await using temporary = temporaryDirectory();
    const repos = join(temporary.path, "repos");
    mkdirSync(repos);
    // A clone next to --repos, which `../outside` would name as <repos>/../outside.
    const outside = join(temporary.path, "outside");
    mkdirSync(outside);
    execFileSync("git", ["init", "-q", outside]);
    const file = join(temporary.path, "instances.jsonl");
    const line = (repo: string) =>
      JSON.stringify({
        instance_id: "x-1",
        repo,
        base_commit: "0".repeat(40),
        problem_statement: "p",
        test_patch: "diff --git a/t.py b/t.py\n",
        FAIL_TO_PASS: [],
        PASS_TO_PASS: [],
        version: "1",
      });
    writeFileSync(file, `${line("../outside")}\n`);
    await expect(importSweBench(file, { repos, out: join(temporary.path, "out") })).rejects.toThrow(
      /line 1: repo: expected owner\/name like astropy\/astropy, neither part only dots/,
    );
    writeFileSync(file, `${line("./outside")}\n${line("../..")}\n`);
    await expect(importSweBench(file, { repos, out: join(temporary.path, "out") })).rejects.toThrow(/2 problems/);
  });
});
