/**
 * verify.protect's tree building (issue 10, item 9) on real git: which paths
 * come back from the base commit, which go, and that nothing else changes.
 */
import { existsSync, mkdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { applyProtectedPaths } from "../../src/workspace/protected-paths.js";
import type { RunWorktree } from "../../src/workspace/run-worktree.js";
import { createGitRepository } from "../helpers/git-repository.js";

const baseFiles = {
  "calc.py": "def add(a, b):\n    return a + b\n",
  "tests/test_calc.py": "assert add(2, 3) == 5\n",
  "tests/data/input.txt": "1 2\n",
  "pytest.ini": "[pytest]\n",
};

/** The base commit, then the agent's commit made by `change` in the checkout. */
function repositoryWithAgentCommit(change: (root: string) => void) {
  const repository = createGitRepository(baseFiles, { prefix: "agent-runner-protect-unit-" });
  const base = repository.git("rev-parse", "HEAD").trim();
  change(repository.root);
  repository.git("add", "-A");
  repository.git("commit", "-q", "-m", "agent");
  const agent = repository.git("rev-parse", "HEAD").trim();
  const worktree = { repositoryRoot: repository.root, gitConfig: [] } as unknown as RunWorktree;
  const tree = (commit: string) =>
    Object.fromEntries(
      repository
        .git("ls-tree", "-r", commit)
        .trim()
        .split("\n")
        .map((line) => {
          const [meta, path] = line.split("\t");
          const [mode, , object] = meta!.split(" ");
          return [path!, `${mode} ${repository.git("cat-file", "-p", object!)}`];
        }),
    );
  return { repository, base, agent, worktree, tree };
}

describe("applyProtectedPaths", () => {
  it("restores changed and deleted protected paths, deletes added ones, and leaves the rest as the agent made it", async () => {
    const { repository, base, agent, worktree, tree } = repositoryWithAgentCommit((root) => {
      writeFileSync(join(root, "calc.py"), "def add(a, b):\n    return a - b\n");
      writeFileSync(join(root, "tests/test_calc.py"), "assert True\n");
      rmSync(join(root, "tests/data/input.txt"));
      writeFileSync(join(root, "conftest.py"), "# forces passes\n");
      mkdirSync(join(root, "src"));
      writeFileSync(join(root, "src/conftest.py"), "# forces passes\n");
      writeFileSync(join(root, "README.md"), "new\n");
    });
    await using _ = repository;
    const index = join(repository.root, "..", `${repository.root.split("/").at(-1)}.index`);
    const result = await applyProtectedPaths(worktree, agent, base, ["tests/**", "**/conftest.py", "pytest.ini"], index);
    expect(result).toMatchObject({ restored: ["tests/data/input.txt", "tests/test_calc.py"], deleted: ["conftest.py", "src/conftest.py"], omitted: 0 });
    expect(result.commit).not.toBe(agent);
    expect(repository.git("rev-parse", `${result.commit}^`).trim()).toBe(agent);
    const expected = tree(agent);
    delete expected["conftest.py"];
    delete expected["src/conftest.py"];
    expected["tests/test_calc.py"] = tree(base)["tests/test_calc.py"]!;
    expected["tests/data/input.txt"] = tree(base)["tests/data/input.txt"]!;
    expect(tree(result.commit)).toEqual(expected);
    expect(existsSync(index)).toBe(false);
    // The agent's branch and the user's checkout are untouched.
    expect(repository.git("rev-parse", "HEAD").trim()).toBe(agent);
    expect(repository.git("status", "--porcelain")).toBe("");
  });

  it("puts a protected directory back where the agent left a symlink, and the reverse", async () => {
    const { repository, base, agent, worktree, tree } = repositoryWithAgentCommit((root) => {
      rmSync(join(root, "tests"), { recursive: true });
      symlinkSync("/etc", join(root, "tests"));
      rmSync(join(root, "pytest.ini"));
      mkdirSync(join(root, "pytest.ini"));
      writeFileSync(join(root, "pytest.ini/x"), "x\n");
    });
    await using _ = repository;
    const result = await applyProtectedPaths(worktree, agent, base, ["tests", "pytest.ini"], join(repository.root, ".git", "protect-index"));
    expect(result).toMatchObject({ restored: ["pytest.ini", "tests/data/input.txt", "tests/test_calc.py"], deleted: ["pytest.ini/x", "tests"] });
    expect(tree(result.commit)).toEqual(tree(base));
  });

  it("returns the agent's own commit when no protected path changed", async () => {
    const { repository, base, agent, worktree } = repositoryWithAgentCommit((root) => writeFileSync(join(root, "calc.py"), "changed\n"));
    await using _ = repository;
    expect(await applyProtectedPaths(worktree, agent, base, ["tests/**", "**/conftest.py"], join(repository.root, ".git", "protect-index"))).toEqual({
      commit: agent,
      restored: [],
      deleted: [],
      omitted: 0,
    });
  });
});
