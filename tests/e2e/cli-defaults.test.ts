// The defaults files through the CLI (the built dist/cli/main.js, no Docker, no
// model): `runner config [show]` prints each default and where it came from;
// `runner exec` reads the same files before anything starts.
import { spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createGitRepository, temporaryDirectory } from "../helpers/git-repository.js";
import { CLI, type CliResult } from "../helpers/runner-cli.js";

/** The CLI run in `cwd` (the directory .runner.yaml is looked for in). */
function runIn(cwd: string, args: string[], environment: Record<string, string>): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd, env: { ...process.env, ...environment }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
}

describe("runner config", () => {
  it("prints each default with its value and file:line, built-in where no file sets it; .runner.yaml in the repository is named, not read", async () => {
    await using repository = createGitRepository({ "README.md": "x\n", ".runner.yaml": "max_steps: 2\n" });
    await using root = temporaryDirectory();
    const home = join(root.path, "home");
    const outside = join(root.path, "outside");
    mkdirSync(home);
    mkdirSync(outside);
    writeFileSync(join(home, "config.yaml"), "# mine\nmodel:\n  name: home-model\nmax_steps: 12\nlimits:\n  memory: 2g\n");
    writeFileSync(join(outside, ".runner.yaml"), "max_steps: 30\ntimeout: 20m\n");
    const environment = { RUNNER_HOME: home, OPENAI_MODEL: "" };
    for (const args of [["config"], ["config", "show", "-C", repository.root]]) {
      const shown = await runIn(outside, args, environment);
      expect(shown.code, shown.stderr).toBe(0);
      const lines = shown.stdout.split("\n").map((line) => line.split(/ {2,}/));
      expect(lines).toContainEqual(["model.name", "home-model", `${home}/config.yaml:3`]);
      expect(lines).toContainEqual(["max_steps", "30", `${outside}/.runner.yaml:1`]);
      expect(lines).toContainEqual(["timeout", "20m", `${outside}/.runner.yaml:2`]);
      expect(lines).toContainEqual(["limits.memory", "2g", `${home}/config.yaml:6`]);
      expect(lines).toContainEqual(["policy", "worker", "built-in"]);
    }
    const inRepository = await runIn(repository.root, ["config"], environment);
    expect(inRepository.code).toBe(0);
    expect(inRepository.stdout).toContain(`note: ${repository.root}/.runner.yaml not read: it is inside the task's repository ${repository.root}`);
    expect(inRepository.stdout.split("\n").map((line) => line.split(/ {2,}/))).toContainEqual(["max_steps", "12", `${home}/config.yaml:4`]);
  });

  it("runner exec reads the defaults before anything starts: a bad value fails with exit 2 naming the file and line", async () => {
    await using repository = createGitRepository({ "README.md": "x\n" });
    await using root = temporaryDirectory();
    const home = join(root.path, "home");
    mkdirSync(home);
    writeFileSync(join(root.path, "task.yaml"), `name: x\ninstruction: x\nworkspace: ${repository.root}\n`);
    writeFileSync(join(home, "config.yaml"), "max_steps: 3\nlimits:\n  cpus: 100\n");
    const limits = await runIn(root.path, ["exec", "task.yaml"], { RUNNER_HOME: home });
    expect(limits.code).toBe(2);
    expect(limits.stderr).toContain(`runner: ${home}/config.yaml: 1 problem:\n  - line 3: limits.cpus:`);

    writeFileSync(join(home, "config.yaml"), "timeout: 0s\n");
    const timeout = await runIn(root.path, ["exec", "--instruction", "x", "-C", repository.root], { RUNNER_HOME: home });
    expect(timeout.code).toBe(2);
    expect(timeout.stderr).toContain(`runner: timeout (${home}/config.yaml:1): expected a duration from 1s to 168h`);

    // Run from inside the repository, its .runner.yaml is left out (with a note): here its bad value would fail the run.
    writeFileSync(join(home, "config.yaml"), "max_steps: 3\n");
    writeFileSync(join(repository.root, ".runner.yaml"), "limits: { cpus: 100 }\n");
    writeFileSync(join(root.path, "typo-task.yaml"), `name: x\ninstruction: x\nworkspace: ${repository.root}\nmax_stepz: 1\n`);
    const inside = await runIn(repository.root, ["exec", join(root.path, "typo-task.yaml")], { RUNNER_HOME: home });
    expect(inside.code).toBe(2);
    expect(inside.stderr).toContain(`note: ${repository.root}/.runner.yaml not read: it is inside the task's repository`);
    expect(inside.stderr).toContain("unknown field max_stepz (did you mean max_steps?)");
  });
});
