import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";

/**
 * A throwaway git repository with the given files committed on `main`.
 * `await using` removes it. Git here is the test's own, on files the test wrote.
 */
export function createGitRepository(files: Record<string, string>, options: { prefix?: string } = {}) {
  const root = mkdtempSync(join(tmpdir(), options.prefix ?? "agent-runner-test-repo-"));
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), content);
  }
  const git = (...args: string[]) => execFileSync("git", ["-c", "user.name=test", "-c", "user.email=test@localhost", ...args], { cwd: root, encoding: "utf8" });
  git("init", "-q", "-b", "main");
  git("add", "-A");
  git("commit", "-q", "--allow-empty", "-m", "initial");
  return {
    root,
    git,
    async [Symbol.asyncDispose]() {
      rmSync(root, { recursive: true, force: true });
    },
  };
}

export function temporaryDirectory(prefix = "agent-runner-test-") {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return {
    path,
    async [Symbol.asyncDispose]() {
      rmSync(path, { recursive: true, force: true });
    },
  };
}
