/**
 * What `runner exec` tells the person at the terminal about the host commit
 * and verify.protect (issue 10, items 6, 9, 10): the summary names the paths
 * left out of the commit and what protect restored; the progress lines too.
 */
import { cpSync, writeFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { requireDocker, SANDBOX_IMAGE } from "../helpers/docker.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { ROOT, runCli } from "../helpers/runner-cli.js";

describe("runner exec summary: left-out paths and protected paths", () => {
  it("names the refused `.GIT` path and the restored test file, and the verified fix still lands", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    cpSync(join(ROOT, "examples/fix-median/repo"), join(directory.path, "repo"), { recursive: true });
    const git = (...args: string[]) =>
      execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@localhost", ...args], { cwd: join(directory.path, "repo"), encoding: "utf8" });
    git("init", "-q", "-b", "main");
    git("add", "-A");
    git("commit", "-q", "-m", "initial");
    writeFileSync(
      join(directory.path, "task.yaml"),
      [
        "name: fix-median",
        "instruction: Fix median().",
        "workspace: ./repo",
        "model: { provider: scripted, script: ./script.yaml }",
        `sandbox: { image: ${SANDBOX_IMAGE} }`,
        'verify: { command: "python3 -m pytest -q", protect: ["tests/**"] }',
        "max_steps: 10",
      ].join("\n"),
    );
    const fix = {
      path: "stats.py",
      old_string: "    return ordered[middle]\n",
      new_string: "    if len(ordered) % 2 == 1:\n        return ordered[middle]\n    return (ordered[middle - 1] + ordered[middle]) / 2\n",
    };
    writeFileSync(
      join(directory.path, "script.yaml"),
      JSON.stringify({
        turns: [
          { tool_calls: [{ name: "edit_file", arguments: fix }] },
          // A test weakened, and a `.GIT` directory (a name computed at run time, past the policy's literal `.git` rule).
          {
            tool_calls: [
              {
                name: "run_shell",
                arguments: { command: "echo 'def test_nothing(): pass' > tests/test_stats.py; D=$(printf '.GI%s' T); mkdir $D && echo x > $D/config" },
              },
            ],
          },
          { content: "Fixed." },
        ],
      }),
    );
    const result = await runCli(["exec", join(directory.path, "task.yaml")], { RUNNER_HOME: home.path });
    expect(result.code, result.stdout + result.stderr).toBe(0);
    expect(result.stdout).toContain("status: succeeded (verified)");
    expect(result.stdout).toContain('left out of the commit: ".GIT" (dotgit_name)');
    expect(result.stdout).toMatch(/verify: python3 -m pytest -q → exit 0 \(protected: 1 restored, 0 deleted\)/);
    expect(result.stderr).toMatch(/committed \w+ on runner\/\S+; left out: "\.GIT" \(dotgit_name\)/);
    expect(result.stderr).toContain("verify: protected paths from");
  });
});
