// `runner init [dir]`: the files it writes for a repository, the test command
// it finds, what it refuses; the generated task validates with load-task and,
// switched to its scripted trajectory, runs to a verified success (real CLI,
// real Docker).
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { detectTestCommand } from "../../src/cli/init-command.js";
import { loadTaskFile } from "../../src/config/load-task.js";
import { loadScript } from "../../src/model/scripted-model-server.js";
import { requireDocker } from "../helpers/docker.js";
import { createGitRepository, temporaryDirectory } from "../helpers/git-repository.js";
import { onlyRunDirectory, readJson, runCli } from "../helpers/runner-cli.js";

/** The task switched to the scripted example, as its comment says: provider scripted, script ./script.yaml. */
function scripted(taskYaml: string): string {
  return taskYaml
    .replace(/^ {2}provider: openai .*$/m, "")
    .replace(/^ {2}# provider: scripted$/m, "  provider: scripted")
    .replace(/^ {2}# script: \.\/script\.yaml$/m, "  script: ./script.yaml");
}

describe("runner init", () => {
  it("finds the obvious test command: Makefile test target, package.json scripts.test (npm's placeholder does not count), pytest, go, cargo", async () => {
    await using directory = temporaryDirectory();
    const project = (name: string, files: Record<string, string>) => {
      const root = join(directory.path, name);
      for (const [path, content] of Object.entries(files)) {
        mkdirSync(join(root, path, ".."), { recursive: true });
        writeFileSync(join(root, path), content);
      }
      mkdirSync(root, { recursive: true });
      return detectTestCommand(root)?.command ?? null;
    };
    expect(project("make", { Makefile: "build:\n\tcc x.c\ntest: build\n\t./run-tests\n", "package.json": '{"scripts":{"test":"jest"}}' })).toBe("make test");
    expect(project("npm", { "package.json": '{"scripts":{"test":"vitest run"}}' })).toBe("npm test");
    expect(project("pnpm", { "package.json": '{"scripts":{"test":"vitest run"}}', "pnpm-lock.yaml": "" })).toBe("pnpm test");
    expect(project("placeholder", { "package.json": '{"scripts":{"test":"echo \\"Error: no test specified\\" && exit 1"}}' })).toBeNull();
    expect(project("pyproject", { "pyproject.toml": "[project]\nname='x'\n\n[tool.pytest.ini_options]\naddopts='-q'\n" })).toBe("python3 -m pytest -q");
    expect(project("pytests", { "tests/test_app.py": "def test_x(): pass\n" })).toBe("python3 -m pytest -q");
    expect(project("go", { "go.mod": "module example.com/x\n" })).toBe("go test ./...");
    expect(project("cargo", { "Cargo.toml": "[package]\nname='x'\n" })).toBe("cargo test");
    expect(project("nothing", { "README.md": "hi\n" })).toBeNull();
    expect(project("broken-json", { "package.json": "{" })).toBeNull();
  });

  it("writes a commented task.yaml and a scripted example that validate with load-task; refuses to overwrite, and outside a repository", async () => {
    await using home = temporaryDirectory();
    await using repository = createGitRepository({ "package.json": '{"name":"my-app","scripts":{"test":"node -e 0"}}', "index.js": "\n" });
    // The allow-list hint names the registry of the user's npm configuration (here the environment's).
    const result = await runCli(["init", repository.root], { RUNNER_HOME: home.path, npm_config_registry: "https://npm.example.com/" });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toContain(`wrote ${join(repository.root, "task.yaml")} (verify: npm test, from package.json scripts.test)`);
    const taskFile = join(repository.root, "task.yaml");
    const taskYaml = readFileSync(taskFile, "utf8");
    expect(taskYaml).toMatch(/^ {2}command: npm test +# found: package\.json scripts\.test$/m);
    expect(taskYaml).toMatch(/^ {4}# allow: \[npm\.example\.com\] +# npm's index, from npm config get registry/m);
    const task = loadTaskFile(taskFile);
    expect(task).toMatchObject({
      workspacePath: repository.root,
      verify: { command: "npm test" },
      model: { provider: "openai" },
      policy: "worker",
      instructions_files: true,
    });
    expect(task.instruction).toBe("Run the test suite (`npm test`) and fix what fails.\nDo not change the tests.");
    // Switched to the scripted example as its comment says: still valid, and the script too.
    writeFileSync(taskFile, scripted(taskYaml));
    expect(loadTaskFile(taskFile)).toMatchObject({ model: { provider: "scripted" }, scriptPath: join(repository.root, "script.yaml") });
    expect(loadScript(join(repository.root, "script.yaml")).turns).toHaveLength(3);

    // Nothing is overwritten: the edited file stays as it is.
    const edited = readFileSync(taskFile, "utf8");
    const again = await runCli(["init", repository.root], { RUNNER_HOME: home.path });
    expect(again.code).toBe(2);
    expect(again.stderr).toContain(`runner: runner init: ${taskFile} and ${join(repository.root, "script.yaml")} already exist; nothing was written`);
    expect(readFileSync(taskFile, "utf8")).toBe(edited);

    await using plain = temporaryDirectory();
    // Outside every repository, and run from outside one too (from inside one it writes the task for that one).
    const outside = await runCli(["init", join(plain.path, "task")], { RUNNER_HOME: home.path }, plain.path);
    expect(outside.code).toBe(2);
    expect(outside.stderr).toContain("nor the current directory is in a git repository");
    const forRepository = await runCli(["init", join(plain.path, "task")], { RUNNER_HOME: home.path }, repository.root);
    expect(forRepository.code, forRepository.stderr).toBe(0);
    expect(readFileSync(join(plain.path, "task", "task.yaml"), "utf8")).toMatch(/^workspace: \.\.\//m);
  });

  it("in a subdirectory of the repository the workspace points at the top level", async () => {
    await using home = temporaryDirectory();
    await using repository = createGitRepository({ "go.mod": "module example.com/x\n", "tasks/.keep": "" });
    const result = await runCli(["init", join(repository.root, "tasks")], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr).toBe(0);
    const task = loadTaskFile(join(repository.root, "tasks", "task.yaml"));
    expect(task).toMatchObject({ workspace: "..", workspacePath: repository.root, verify: { command: "go test ./..." } });
  });

  it("the scripted example runs as generated: a verified success (real CLI, real Docker)", async () => {
    await requireDocker();
    await using home = temporaryDirectory();
    await using repository = createGitRepository({ "package.json": '{"name":"my-app","scripts":{"test":"node -e 0"}}' });
    expect((await runCli(["init", repository.root], { RUNNER_HOME: home.path })).code).toBe(0);
    const taskFile = join(repository.root, "task.yaml");
    writeFileSync(taskFile, scripted(readFileSync(taskFile, "utf8")));
    const run = await runCli(["exec", taskFile], { RUNNER_HOME: home.path });
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(readJson(join(onlyRunDirectory(home.path)!, "report.json"))).toMatchObject({ status: "succeeded", reason: "verified", steps: 3 });
    // The scaffold is not part of the agent's worktree (untracked files are not in HEAD).
    expect(execFileSync("git", ["-C", repository.root, "status", "--porcelain"], { encoding: "utf8" })).toBe("?? script.yaml\n?? task.yaml\n");
  });
});
