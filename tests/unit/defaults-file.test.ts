// The defaults files (docs/command-line.md "Defaults file"): $RUNNER_HOME/config.yaml, then
// ./.runner.yaml read only from outside the task's repository; the layering
// built-in < config.yaml < .runner.yaml < task.yaml < flags; errors with lines.
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadTask } from "../../src/cli/exec-command.js";
import { DefaultsFileError, defaultTimeout, loadDefaults } from "../../src/config/defaults-file.js";
import { loadTaskFile } from "../../src/config/load-task.js";
import { createGitRepository, temporaryDirectory } from "../helpers/git-repository.js";

/** A home with config.yaml, a directory outside the repository with .runner.yaml, a task file there. */
function layout(root: string, files: { config?: string; runnerYaml?: string; task: string }) {
  const home = join(root, "home");
  const outside = join(root, "outside");
  mkdirSync(home, { recursive: true });
  mkdirSync(outside, { recursive: true });
  if (files.config !== undefined) writeFileSync(join(home, "config.yaml"), files.config);
  if (files.runnerYaml !== undefined) writeFileSync(join(outside, ".runner.yaml"), files.runnerYaml);
  writeFileSync(join(outside, "task.yaml"), files.task);
  return { home, outside, task: join(outside, "task.yaml") };
}

describe("defaults files", () => {
  it("layer built-in < config.yaml < .runner.yaml < task.yaml < --max-steps, limits and model key by key", async () => {
    await using repository = createGitRepository({ "README.md": "x\n" });
    await using root = temporaryDirectory();
    const { home, outside, task } = layout(root.path, {
      config:
        "model:\n  name: home-model\n  base_url: http://127.0.0.1:9/v1\n  max_retries: 1\nmax_steps: 12\npolicy: ci\nlimits:\n  memory: 2g\n  pids: 100\ntimeout: 20m\n",
      runnerYaml: "model:\n  name: directory-model\nmax_steps: 30\nlimits:\n  pids: 200\n",
      task: `name: layered\ninstruction: x\nworkspace: ${repository.root}\nmodel:\n  max_retries: 3\nsandbox:\n  limits:\n    cpus: 2\n`,
    });
    const defaults = (workspace: string) => loadDefaults({ home, cwd: outside, workspace });
    const loaded = loadTaskFile(task, { defaults });
    expect(loaded.model).toMatchObject({ provider: "openai", name: "directory-model", base_url: "http://127.0.0.1:9/v1", max_retries: 3 });
    expect(loaded.max_steps).toBe(30);
    expect(loaded.policy).toBe("ci");
    expect(loaded.sandbox.limits).toEqual({ cpus: 2, memory: 2 * 1024 ** 3, pids: 200, file_size: 1024 ** 3, disk: 10 * 1024 ** 3 });
    expect(defaultTimeout(defaults(repository.root))).toEqual({ value: "20m", source: `${join(home, "config.yaml")}:10` });
    // Flags go over everything.
    const previous = process.cwd();
    process.chdir(outside);
    try {
      expect(loadTask(task, { maxSteps: "4" }, defaults).max_steps).toBe(4);
      expect(loadTask(undefined, { instruction: "x", workspace: repository.root, model: "flag-model" }, defaults).model).toMatchObject({
        name: "flag-model",
        base_url: "http://127.0.0.1:9/v1",
      });
    } finally {
      process.chdir(previous);
    }
    // Without defaults, the built-in values.
    const plain = loadTaskFile(task);
    expect(plain).toMatchObject({ max_steps: 50, policy: "worker" });
    expect(plain.model.name).toBeUndefined();
  });

  it("a task of another model provider takes none of the defaults' model keys", async () => {
    await using repository = createGitRepository({ "README.md": "x\n" });
    await using root = temporaryDirectory();
    writeFileSync(join(root.path, "script.yaml"), "turns: []\n");
    const { home, outside, task } = layout(root.path, {
      config: "model:\n  name: gpt-x\n  base_url: http://127.0.0.1:9/v1\n  request_timeout_sec: 5\nmax_steps: 12\n",
      task: `name: scripted\ninstruction: x\nworkspace: ${repository.root}\nmodel:\n  provider: scripted\n  script: ../script.yaml\n`,
    });
    const loaded = loadTaskFile(task, { defaults: (workspace) => loadDefaults({ home, cwd: outside, workspace }) });
    expect(loaded.model).toMatchObject({ provider: "scripted", request_timeout_sec: 300 });
    expect(loaded.model.name).toBeUndefined();
    expect(loaded.model.base_url).toBeUndefined();
    expect(loaded.max_steps).toBe(12);
  });

  it("./.runner.yaml is not read from inside the task's repository, nor through a symlink into it, nor from RUNNER_HOME", async () => {
    await using repository = createGitRepository({ "README.md": "x\n", ".runner.yaml": "max_steps: 2\n", "sub/dir/keep": "" });
    await using root = temporaryDirectory();
    const home = join(root.path, "home");
    mkdirSync(join(home, "runs", "20260101-000000-x", "worktree"), { recursive: true });
    writeFileSync(join(home, "runs", "20260101-000000-x", "worktree", ".runner.yaml"), "max_steps: 3\n");
    const linked = join(root.path, "linked");
    mkdirSync(linked);
    symlinkSync(join(repository.root, ".runner.yaml"), join(linked, ".runner.yaml"));
    for (const cwd of [repository.root, join(repository.root, "sub", "dir"), linked, join(home, "runs", "20260101-000000-x", "worktree")]) {
      writeFileSync(join(repository.root, "sub", "dir", ".runner.yaml"), "max_steps: 4\n");
      const defaults = loadDefaults({ home, cwd, workspace: join(repository.root, "sub") });
      expect(defaults.values, cwd).toEqual({});
      expect(defaults.files, cwd).toEqual([]);
      expect(defaults.notes, cwd).toEqual([
        expect.stringMatching(/\.runner\.yaml not read: it is inside (the task's repository|RUNNER_HOME) .*docs\/command-line\.md "Defaults file"/),
      ]);
    }
    // From outside, the same kind of file is read.
    const outside = join(root.path, "outside");
    mkdirSync(outside);
    writeFileSync(join(outside, ".runner.yaml"), "max_steps: 5\n");
    expect(loadDefaults({ home, cwd: outside, workspace: repository.root }).values).toEqual({ max_steps: 5 });
  });

  it("a bad defaults file fails with every problem, each with its line, unknown keys with a did-you-mean", async () => {
    await using root = temporaryDirectory();
    const { home, outside } = layout(root.path, {
      config: "model:\n  provider: openai\n  nmae: x\nmax_step: 12\nlimits:\n  memory: 2\ntimeout: soon\npolicy: ./missing-policy.yaml\n",
      task: "",
    });
    const file = join(home, "config.yaml");
    let error: unknown;
    try {
      loadDefaults({ home, cwd: outside, workspace: outside });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(DefaultsFileError);
    expect((error as Error).message).toBe(
      [
        `${file}: 5 problems:`,
        `  - line 3: model: unknown field nmae (did you mean name?) (check the spelling; see docs/command-line.md "Defaults file")`,
        `  - line 4: (file): unknown field max_step (did you mean max_steps?) (check the spelling; see docs/command-line.md "Defaults file")`,
        `  - line 6: limits.memory: expected a size of at least 16m such as "512m" or "2g", got 2`,
        `  - line 7: timeout: expected a duration such as "90s", "10m" or "1.5h", got "soon"`,
        `  - line 8: policy: file ${join(home, "missing-policy.yaml")} does not exist (a path is relative to this file)`,
      ].join("\n"),
    );
    writeFileSync(file, "model: [\n");
    expect(() => loadDefaults({ home, cwd: outside, workspace: outside })).toThrow(/config\.yaml: 1 problem:\n {2}- \(file\): YAML syntax, line 2, column 1/);
  });
});
