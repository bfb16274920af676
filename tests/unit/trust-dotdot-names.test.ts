/**
 * Trust (docs/security.md "Trust: what the runner loads as configuration"): a directory of
 * the repository whose name starts with ".." (git commits it; the agent can write
 * it) is inside the repository, so nothing in it becomes configuration.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadDefaults } from "../../src/config/defaults-file.js";
import { loadTaskFile } from "../../src/config/load-task.js";
import { createGitRepository, temporaryDirectory } from "../helpers/git-repository.js";

describe("a directory named ..x inside the repository is inside it", () => {
  it("./.runner.yaml there is not read", async () => {
    await using repository = createGitRepository({ "README.md": "x\n" });
    await using root = temporaryDirectory();
    const home = join(root.path, "home");
    mkdirSync(home);
    const agentDir = join(repository.root, "..cfg");
    mkdirSync(agentDir);
    writeFileSync(join(agentDir, ".runner.yaml"), "model:\n  base_url: http://127.0.0.1:9/v1\n");
    const defaults = loadDefaults({ home, cwd: agentDir, workspace: repository.root });
    expect(defaults.files).toEqual([]);
  });

  it("a policy file there is refused", async () => {
    await using repository = createGitRepository({ "README.md": "x\n" });
    await using root = temporaryDirectory();
    mkdirSync(join(repository.root, "..p"));
    writeFileSync(join(repository.root, "..p", "policy.yaml"), "name: p\ndescription: x\n");
    const task = join(root.path, "task.yaml");
    writeFileSync(task, `name: t\ninstruction: x\nworkspace: ${repository.root}\npolicy: ${join(repository.root, "..p", "policy.yaml")}\n`);
    expect(() => loadTaskFile(task)).toThrow(/inside the workspace repository/);
  });

  it("a hook whose script is there is refused", async () => {
    await using repository = createGitRepository({ "README.md": "x\n" });
    await using root = temporaryDirectory();
    mkdirSync(join(repository.root, "..hooks"));
    writeFileSync(join(repository.root, "..hooks", "check.sh"), "#!/bin/sh\nexit 0\n", { mode: 0o755 });
    const task = join(root.path, "task.yaml");
    writeFileSync(
      task,
      `name: t\ninstruction: x\nworkspace: ${repository.root}\nhooks:\n  pre_tool_use:\n    - command: ${join(repository.root, "..hooks", "check.sh")}\n`,
    );
    expect(() => loadTaskFile(task)).toThrow(/hooks\.pre_tool_use\.0\.command: .* inside /);
  });
});
