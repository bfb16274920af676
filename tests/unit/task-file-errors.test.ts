// What a user sees for a broken task.yaml: YAML syntax errors with their
// line, column and the offending line; unknown fields with a "did you mean".
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadTaskFile, TaskValidationError } from "../../src/config/load-task.js";
import { closestName } from "../../src/describe-issue.js";
import { loadPolicyFile, PolicyValidationError } from "../../src/policy/load-policy.js";
import { temporaryDirectory } from "../helpers/git-repository.js";

function rejection(directory: string, yaml: string): TaskValidationError {
  const file = join(directory, "task.yaml");
  writeFileSync(file, yaml);
  try {
    loadTaskFile(file);
  } catch (error) {
    expect(error).toBeInstanceOf(TaskValidationError);
    return error as TaskValidationError;
  }
  throw new Error("expected the task to be rejected");
}

describe("task.yaml errors a user can act on", () => {
  it("a YAML syntax error keeps its line, column and the offending line with a caret", async () => {
    await using directory = temporaryDirectory();
    const error = rejection(directory.path, "name: fix\ninstruction: do it\nsandbox:\n  image: a: b\n");
    expect(error.problems).toEqual([
      {
        path: "",
        message:
          'YAML syntax, line 4, column 10: Nested mappings are not allowed in compact mappings\n     4 |   image: a: b\n       |          ^\n  the value holds ": ", which YAML reads as another key: quote it (image: "...") or write it as a block (image: |, the text on the lines below, indented)',
      },
    ]);
    // The whole error as the CLI prints it.
    expect(error.message).toContain(`${join(directory.path, "task.yaml")}: 1 problem:\n  - (file): YAML syntax, line 4, column 10: `);
  });

  it('a value with ": " in it (instruction: Fix add(): it is wrong) gets the fix next to the parser\'s message: quote it or use |', async () => {
    await using directory = temporaryDirectory();
    const [problem] = rejection(directory.path, "name: fix\ninstruction: Fix add(): it is wrong\n").problems;
    expect(problem!.message).toMatch(/^YAML syntax, line 2, column 14: Nested mappings are not allowed in compact mappings\n/);
    expect(problem!.message).toContain('quote it (instruction: "...") or write it as a block (instruction: |');
  });

  it("an unclosed quote, reported past the end, shows the last line with text", async () => {
    await using directory = temporaryDirectory();
    const [problem] = rejection(directory.path, 'name: fix\ninstruction: "do it\n\n').problems;
    expect(problem!.message).toBe('YAML syntax, line 4, column 1: Missing closing "quote\n     2 | instruction: "do it');
  });

  it("a tab indentation error points at its line too", async () => {
    await using directory = temporaryDirectory();
    const [problem] = rejection(directory.path, "name: fix\ninstruction: x\nsandbox:\n\timage: x\n").problems;
    expect(problem!.message).toMatch(/^YAML syntax, line 4, column 1: /);
    expect(problem!.message).toContain("\n     4 | \timage: x\n       | ^");
  });

  it("unknown fields get a 'did you mean' from the fields of that mapping, at any depth", async () => {
    await using directory = temporaryDirectory();
    const problems = rejection(
      directory.path,
      "name: fix\ninstruction: x\nmax_step: 3\nsandbox:\n  imgae: x\n  limits: { memroy: 1g }\nverify: { comand: make test }\nsubagents: { max_stepz: 3 }\ncompletely_unrelated_thing: 1\n",
    ).problems;
    expect(problems).toEqual([
      { path: "sandbox.limits", message: "unknown field memroy (did you mean memory?) (check the spelling; see docs/task-yaml.md)" },
      { path: "sandbox", message: "unknown field imgae (did you mean image?) (check the spelling; see docs/task-yaml.md)" },
      { path: "verify.command", message: "required: expected string" },
      { path: "verify", message: "unknown field comand (did you mean command?) (check the spelling; see docs/task-yaml.md)" },
      { path: "subagents", message: "unknown field max_stepz (did you mean max_steps?) (check the spelling; see docs/task-yaml.md)" },
      {
        path: "",
        message: "unknown fields max_step, completely_unrelated_thing (max_step: did you mean max_steps?) (check the spelling; see docs/task-yaml.md)",
      },
    ]);
  });

  it("policy files get the same: the YAML line, and did you mean", async () => {
    await using directory = temporaryDirectory();
    const file = join(directory.path, "policy.yaml");
    writeFileSync(file, "name: mine\ndescription: x\ntools: { alow: [read_file] }\n");
    expect(() => loadPolicyFile(file)).toThrow(PolicyValidationError);
    expect(() => loadPolicyFile(file)).toThrow(/- tools: unknown field alow \(did you mean allow\?\)/);
    writeFileSync(file, "name: mine\ndescription: a: b\n");
    expect(() => loadPolicyFile(file)).toThrow(/YAML syntax, line 2, column 14: .*\n {5}2 \| description: a: b\n {7}\| {14}\^/);
  });

  it("closestName: at most 3 edits and more than 40% alike (commander's rule), transpositions count once", () => {
    expect(closestName("polciy", ["policy", "name"])).toBe("policy");
    expect(closestName("timeout", ["timeout_sec", "command"])).toBe(null);
    expect(closestName("x", ["policy"])).toBe(null);
    expect(closestName("verfy", ["verify", "very"])).toBe("verify");
  });
});
