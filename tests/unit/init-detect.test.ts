/**
 * `runner init`'s test-command detection (src/cli/init-command.ts) on real
 * directories: pytest's simplest layout, test files at the top, is found
 * (issue 26 item 13), as are tests/ and test/. No Docker.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { detectTestCommand } from "../../src/cli/init-command.js";
import { temporaryDirectory } from "../helpers/git-repository.js";

async function detected(files: Record<string, string>): Promise<string | null> {
  await using directory = temporaryDirectory();
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(directory.path, path)), { recursive: true });
    writeFileSync(join(directory.path, path), content);
  }
  return detectTestCommand(directory.path)?.command ?? null;
}

describe("runner init finds pytest's layouts", () => {
  it.each([
    [{ "calc.py": "def add(a, b): return a + b\n", "test_calc.py": "def test_add(): pass\n" }],
    [{ "calc.py": "x = 1\n", "calc_test.py": "def test_x(): pass\n" }],
    [{ "tests/test_app.py": "def test_x(): pass\n" }],
    [{ "test/test_app.py": "def test_x(): pass\n" }],
  ])("%o → python3 -m pytest -q", async (files) => {
    expect(await detected(files)).toBe("python3 -m pytest -q");
  });

  it("python files that are not tests are no pytest project", async () => {
    expect(await detected({ "calc.py": "x = 1\n", "testing.py": "x = 2\n" })).toBeNull();
  });
});
