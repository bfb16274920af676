import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parse } from "yaml";
import { describe, expect, it } from "vitest";
import { initCommand } from "../../src/cli/init-command.js";
import { loadTaskFile } from "../../src/config/load-task.js";
import { createGitRepository, temporaryDirectory } from "../helpers/git-repository.js";

const sink = { write: () => true } as unknown as NodeJS.WritableStream;

describe("runner init outside the repository (where the README keeps tasks)", () => {
  it("writes the task for the repository the current directory is in, creating the directory, workspace pointing back", async () => {
    await using repository = createGitRepository({ "test_calc.py": "def test_x():\n    assert True\n" });
    await using outside = temporaryDirectory();
    const target = join(outside.path, "tasks", "pyproj-task");
    expect(initCommand(target, sink, () => [], repository.root)).toBe(0);
    const task = parse(readFileSync(join(target, "task.yaml"), "utf8")) as { workspace: string; verify: { command: string } };
    expect(task.verify.command).toContain("pytest");
    // The written task loads and names the repository.
    expect(resolve(target, loadTaskFile(join(target, "task.yaml")).workspace)).toBe(repository.root);
  });

  it("outside every repository, with a current directory outside too: refused, nothing created", async () => {
    await using outside = temporaryDirectory();
    const target = join(outside.path, "new-task");
    expect(() => initCommand(target, sink, () => [], outside.path)).toThrow(/neither .* nor the current directory is in a git repository/);
    expect(existsSync(target)).toBe(false);
  });

  it("a file where the directory belongs is refused", async () => {
    await using repository = createGitRepository({ "README.md": "x\n" });
    writeFileSync(join(repository.root, "plain"), "x");
    expect(() => initCommand("plain", sink, () => [], repository.root)).toThrow(/plain is not a directory/);
  });
});
