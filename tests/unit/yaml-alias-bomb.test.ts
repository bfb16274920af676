/**
 * A YAML alias bomb (a few lines whose aliases expand past the yaml package's
 * limit) in a task file, a policy or a defaults file is the file's fault: a
 * validation error naming the file (exit 2), never an internal error (exit 3).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadDefaults } from "../../src/config/defaults-file.js";
import { loadTaskFile } from "../../src/config/load-task.js";
import { loadPolicyFile } from "../../src/policy/load-policy.js";
import { createGitRepository, temporaryDirectory } from "../helpers/git-repository.js";

const BOMB = [
  "a: &a [x, x, x, x, x, x, x, x, x, x]",
  ...Array.from({ length: 8 }, (_, index) => {
    const name = String.fromCharCode(98 + index);
    const previous = String.fromCharCode(97 + index);
    return `${name}: &${name} [*${previous}, *${previous}, *${previous}, *${previous}, *${previous}, *${previous}, *${previous}, *${previous}, *${previous}, *${previous}]`;
  }),
].join("\n");

describe("a YAML alias bomb is bad input, named", () => {
  it("in task.yaml, a policy file and config.yaml", async () => {
    await using directory = temporaryDirectory();
    const task = join(directory.path, "task.yaml");
    writeFileSync(task, `${BOMB}\nname: t\ninstruction: x\n`);
    expect(() => loadTaskFile(task)).toThrow(expect.objectContaining({ exitCode: 2, message: expect.stringContaining(task) }));
    const policy = join(directory.path, "policy.yaml");
    writeFileSync(policy, `${BOMB}\nname: p\n`);
    expect(() => loadPolicyFile(policy)).toThrow(expect.objectContaining({ exitCode: 2, message: expect.stringContaining("alias") }));
    await using repository = createGitRepository({ "README.md": "x\n" });
    const home = join(directory.path, "home");
    mkdirSync(home);
    writeFileSync(join(home, "config.yaml"), `${BOMB}\n`);
    expect(() => loadDefaults({ home, cwd: directory.path, workspace: repository.root })).toThrow(expect.objectContaining({ exitCode: 2 }));
  });
});
