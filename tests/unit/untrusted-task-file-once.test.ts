/**
 * An untrusted caller's task file is read once (src/runner/untrusted-task.ts
 * `loadUntrustedTaskFile`): a file that is bad YAML, missing or not a file is
 * refused with the untrusted loader's own error, and the trusted loader
 * (`loadTaskFile`, no trust rule, no ceilings) is never reached. The race the
 * security review found (a writer flipping the file between bad YAML and a
 * task with hooks before a second, trusted read) is built deterministically:
 * the trusted loader, wrapped here, flips the file the moment it is called.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it, vi } from "vitest";
import { TaskValidationError } from "../../src/config/load-task.js";
import { loadUntrustedTaskFile } from "../../src/runner/untrusted-task.js";
import { temporaryDirectory } from "../helpers/git-repository.js";

const HOOKED = "name: t\ninstruction: x\nworkspace: repo\nhooks:\n  pre_tool_use: [{ command: /bin/true }]\n";

const trusted = vi.hoisted(() => ({ calls: [] as string[] }));
vi.mock("../../src/config/load-task.js", async (original) => {
  const actual = await original<typeof import("../../src/config/load-task.js")>();
  const { writeFileSync: write } = await import("node:fs");
  return {
    ...actual,
    loadTaskFile: (file: string, options?: Parameters<typeof actual.loadTaskFile>[1]) => {
      trusted.calls.push(file);
      write(file, HOOKED);
      return actual.loadTaskFile(file, options);
    },
  };
});

function refusal(run: () => unknown): TaskValidationError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(TaskValidationError);
    return error as TaskValidationError;
  }
  throw new Error("expected the task file to be refused");
}

describe("an untrusted task file is read once", () => {
  it("bad YAML is the untrusted loader's error; the trusted loader is never reached, so a file flipped to a task with hooks cannot run", async () => {
    await using root = temporaryDirectory();
    mkdirSync(join(root.path, "repo"));
    const file = join(root.path, "flip.yaml");
    writeFileSync(file, "name: [\n");
    const error = refusal(() => loadUntrustedTaskFile(file, [root.path]));
    expect(error.file).toBe(file);
    expect(error.problems).toHaveLength(1);
    expect(error.problems[0]!.path).toBe("");
    expect(error.problems[0]!.message).toMatch(/flow sequence|\]/i);
    expect(trusted.calls).toEqual([]);

    writeFileSync(file, "- a list\n- not a task\n");
    expect(refusal(() => loadUntrustedTaskFile(file, [root.path])).problems[0]!.message).toMatch(/mapping/);
    expect(trusted.calls).toEqual([]);
  });

  it("a missing file, a directory and a FIFO are refused by name without a second read (a FIFO does not hang)", async () => {
    await using root = temporaryDirectory();
    mkdirSync(join(root.path, "a-directory.yaml"));
    execFileSync("mkfifo", [join(root.path, "fifo.yaml")]);
    expect(refusal(() => loadUntrustedTaskFile(join(root.path, "missing.yaml"), [root.path])).problems).toEqual([{ path: "", message: "file not found" }]);
    for (const name of ["a-directory.yaml", "fifo.yaml"]) {
      expect(refusal(() => loadUntrustedTaskFile(join(root.path, name), [root.path])).problems).toEqual([
        { path: "", message: "not a file; give the path of a task.yaml" },
      ]);
    }
    expect(trusted.calls).toEqual([]);
  });
});
