/**
 * Findings of the adversarial review of the security round, each reproduced
 * end to end (real Docker, real git, the scripted model): host git never
 * starts inside a repository the agent made (its config's filters ran on the
 * host), a worker merge never hands a host path to the sandbox user through a
 * symlink the merge put in place of a directory, and the report a caller gets
 * back is the redacted one.
 */
import { existsSync, lstatSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { requireDocker } from "../helpers/docker.js";
import { createGitRepository } from "../helpers/git-repository.js";
import { describeRun, inspectGit, parseShellResult, randomToken, runScriptedTask, shellTurn, writeTurn } from "./security-harness.js";

const hostScratch = mkdtempSync(join(tmpdir(), "agent-runner-review-"));
afterAll(() => rmSync(hostScratch, { recursive: true, force: true }));

describe("findings of the review, end to end", () => {
  beforeAll(async () => {
    await requireDocker();
  });

  it("a nested repository the agent made is left out of every host commit: its filters never run on the host", async () => {
    await using repository = createGitRepository({ "README.md": "probe\n" }, { prefix: "agent-runner-nested-" });
    const marker = join(hostScratch, randomToken("pwned-"));
    // A filter in the nested repository's own config; host `git add` of a gitlink would run `git status` in it.
    const plant = [
      "set -e",
      "mkdir sub && cd sub && git init -q && echo hello > x && echo '* filter=pwn' > .gitattributes",
      "git add . && git -c user.name=a -c user.email=a@b commit -qm nested",
      `git config filter.pwn.clean 'sh -c "id > ${marker}; cat"'`,
      "touch -d 2000-01-01 x",
      // A gitfile naming a repository on the host (written by python: the policy's hard rule refuses a shell redirect into .git).
      `cd .. && mkdir gitfile && python3 -c ${JSON.stringify(`open('gitfile/.git', 'w').write('gitdir: ${join(repository.root, ".git")}\n')`)}`,
    ].join("\n");
    const run = await runScriptedTask({
      repository: repository.root,
      turns: [
        shellTurn(plant),
        // The worker's snapshot is the first host `git add`, the final commit the second.
        { tool_calls: [{ name: "agent", arguments: { mode: "worker", description: "w", prompt: "nothing" } }] },
        shellTurn("echo change >> README.md; touch -d 2001-01-01 sub/x"),
      ],
      subagents: { w: { turns: [{ content: "Nothing to do." }] } },
    });
    try {
      expect(run.report.status, describeRun(run)).toBe("succeeded");
      // The plant worked: the nested repository and its filter exist.
      expect(parseShellResult(run.toolResults[0]).exitCode, describeRun(run)).toBe("0");
      expect(existsSync(marker)).toBe(false);
      const tree = inspectGit(repository.root, ["ls-tree", "-r", run.report.branch!]);
      expect(tree).toContain("README.md");
      expect(tree).not.toMatch(/\bsub\b|gitfile/);
      expect(run.report.commit?.left_out, JSON.stringify(run.report.commit)).toEqual(
        expect.arrayContaining([
          { path: "sub", reason: "nested_repository" },
          { path: "gitfile", reason: "nested_repository" },
        ]),
      );
    } finally {
      run.dispose();
    }
  });

  it("a submodule of the base commit, turned into a repository of the agent's at the recorded commit, is kept out of git add: its filter never runs", async () => {
    await using repository = createGitRepository({ "README.md": "probe\n" }, { prefix: "agent-runner-gitlink-" });
    const recorded = repository.git("rev-parse", "HEAD").trim();
    repository.git("update-index", "--add", "--cacheinfo", `160000,${recorded},sub`);
    repository.git("commit", "-qm", "a submodule");
    const marker = join(hostScratch, randomToken("pwned-"));
    // At the gitlink's path: a repository whose HEAD is the recorded commit (so git sees the submodule as
    // unchanged and would still run `git status` in it), with a filter of its own on a stat-dirty file.
    const plant = [
      "import os, subprocess",
      "os.chdir('sub')",
      "subprocess.run(['git', 'init', '-q'], check=True)",
      "open('g', 'w').write('hi\\n')",
      "subprocess.run(['git', 'add', 'g'], check=True)",
      "subprocess.run(['git', '-c', 'user.name=a', '-c', 'user.email=a@b', 'commit', '-q', '-m', 's'], check=True)",
      "open('.git/HEAD', 'w').write('ref: refs/heads/master\\n')",
      `open('.git/refs/heads/master', 'w').write('${recorded}\\n')`,
      `open('.git/config', 'a').write('[filter "evil"]\\n\\tclean = "id > ${marker}; cat"\\n')`,
      "open('.gitattributes', 'w').write('g filter=evil\\n')",
      "os.utime('g', (978307200, 978307200))",
      `commit = subprocess.run(['git', '-C', '/workspace', 'cat-file', 'commit', '${recorded}'], capture_output=True, check=True).stdout`,
      "subprocess.run(['git', 'hash-object', '-t', 'commit', '-w', '--stdin'], input=commit, check=True)",
      "subprocess.run(['git', 'hash-object', '-t', 'tree', '-w', '--stdin'], input=b'', check=True)",
      "print('planted')",
    ].join("\n");
    const run = await runScriptedTask({
      repository: repository.root,
      turns: [writeTurn("plant.py", `${plant}\n`), shellTurn("python3 plant.py && rm plant.py")],
    });
    try {
      expect(parseShellResult(run.toolResults[1]).stdout, describeRun(run)).toContain("planted");
      expect(run.report.status, describeRun(run)).toBe("succeeded");
      expect(existsSync(marker)).toBe(false);
      expect(run.report.commit?.left_out).toEqual([{ path: "sub", reason: "nested_repository" }]);
      // The submodule stays as the base recorded it (nothing else changed: the run leaves no branch, its head is the base).
      expect(run.report.branch).toBeNull();
      expect(inspectGit(repository.root, ["ls-tree", run.report.head_commit!, "sub"])).toContain(`160000 commit ${recorded}\tsub`);
    } finally {
      run.dispose();
    }
  });

  it("a worker merge that replaces a directory with a symlink to a host directory hands no host path to the sandbox user", async () => {
    if (process.getuid?.() !== 0) throw new Error("the ownership hand-over runs only for a root runner; run this test as root, as CI does");
    await using repository = createGitRepository({ "README.md": "probe\n" }, { prefix: "agent-runner-chown-" });
    const victim = join(hostScratch, randomToken("victim-"));
    mkdirSync(join(victim, "sub"), { recursive: true, mode: 0o700 });
    writeFileSync(join(victim, "sub", "secret.txt"), "secret\n", { mode: 0o600 });
    const run = await runScriptedTask({
      repository: repository.root,
      turns: [
        writeTurn("a/sub/secret.txt", "planted\n"),
        { tool_calls: [{ name: "agent", arguments: { mode: "worker", description: "w", prompt: "go", verify: "true" } }] },
      ],
      subagents: { w: { turns: [shellTurn(`rm -rf a && ln -s ${victim} a`), { content: "Done." }] } },
    });
    try {
      const worker = (run.report.agents as { id: string; status: string }[]).find((agent) => agent.id === "w1");
      expect(worker?.status, describeRun(run)).toBe("merged");
      for (const path of [victim, join(victim, "sub"), join(victim, "sub", "secret.txt")]) {
        expect(lstatSync(path).uid, path).toBe(0);
      }
    } finally {
      run.dispose();
    }
  });

  it("a worker merge that the parent's untracked files stand in the way of is 'not merged' (blocked), not an infrastructure error", async () => {
    await using repository = createGitRepository({ "README.md": "probe\n" }, { prefix: "agent-runner-blocked-" });
    const run = await runScriptedTask({
      repository: repository.root,
      turns: [
        // A nested repository is left out of the parent's snapshot, so it stays untracked in the parent.
        shellTurn("git init -q sub && echo x > sub/f"),
        { tool_calls: [{ name: "agent", arguments: { mode: "worker", description: "w", prompt: "go", verify: "true" } }] },
      ],
      subagents: { w: { turns: [shellTurn("echo worker > sub"), { content: "Done." }] } },
    });
    try {
      expect(run.report.status, describeRun(run)).toBe("succeeded");
      const worker = (run.report.agents as { id: string; status: string; merge: { status: string } }[]).find((agent) => agent.id === "w1");
      expect(worker, JSON.stringify(worker) + describeRun(run)).toMatchObject({ status: "not_merged", merge: { status: "blocked" } });
      expect(run.toolResults[1]).toContain("NOT merged: files of yours that git does not track stand in the way");
    } finally {
      run.dispose();
    }
  });

  it("the report a caller gets back is redacted like report.json (the summary is printed from it)", async () => {
    await using repository = createGitRepository({ "README.md": "probe\n" }, { prefix: "agent-runner-summary-" });
    const secret = randomToken("SuperSecret");
    const run = await runScriptedTask({
      repository: repository.root,
      sandbox: { secret_env: ["MY_SECRET"] },
      hostEnvironment: { ...process.env, MY_SECRET: secret },
      task: { commit: { max_file_size: "1m" } },
      turns: [shellTurn('truncate -s 5m "leak-$MY_SECRET"')],
    });
    try {
      expect(run.report.commit?.left_out_count, describeRun(run)).toBe(1);
      expect(JSON.stringify(run.report)).not.toContain(secret);
    } finally {
      run.dispose();
    }
  });
});
