/**
 * Verdict dodges (issue 10, items 6, 8, 9, 10): what the agent leaves in its
 * worktree must not turn an honest `failed` into an infrastructure `error`
 * (exit 3), lose its work, or buy a `succeeded (verified)` it did not earn.
 * Every run here is real: Docker, host git, the scripted model server.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunEvent } from "../../src/events/run-events.js";
import { createGitRepository } from "../helpers/git-repository.js";
import { requireDocker } from "../helpers/docker.js";
import { ROOT } from "../helpers/runner-cli.js";
import { describeRun, inspectGit, isolatedGitEnvironment, runScriptedTask, shellTurn, writeTurn } from "./security-harness.js";

/** Every path on a branch, sorted (UTF-8 names; see the byte-name test for the others). */
function pathsOn(repository: string, branch: string): string[] {
  return inspectGit(repository, ["ls-tree", "-r", "-z", "--name-only", branch]).split("\0").filter(Boolean).sort();
}

function committedEvents(events: RunEvent[]) {
  return events.flatMap((event) => (event.type === "workspace.committed" ? [event.data] : []));
}

describe("verdict dodges: the agent cannot turn `failed` into `error` or lose its work", () => {
  let scratch: string;
  beforeAll(async () => {
    await requireDocker();
    scratch = mkdtempSync(join(tmpdir(), "agent-runner-sec-verdict-"));
  });
  afterAll(() => {
    rmSync(scratch, { recursive: true, force: true });
  });

  it("a diff larger than 64 MiB is streamed to patch.diff, not buffered (item 6)", async () => {
    await using repository = createGitRepository({ "app.txt": "broken\n" }, { prefix: "agent-runner-sec-bigdiff-" });
    // 3 × 24 MiB of base64 text: a 96 MiB diff, each file under the per-file commit limit.
    const run = await runScriptedTask({
      repository: repository.root,
      turns: [writeTurn("app.txt", "fixed\n"), shellTurn("for i in 1 2 3; do head -c 18M /dev/urandom | base64 -w 76 > big$i.txt; done; ls -l", 120_000)],
      verify: { command: "grep -q fixed app.txt" },
    });
    try {
      expect(run.report.status, describeRun(run)).toBe("succeeded");
      expect(run.report.reason).toBe("verified");
      expect(run.report.patch).toBe("patch.diff");
      const patch = join(run.runDirectory, "patch.diff");
      expect(statSync(patch).size).toBeGreaterThan(64 * 1024 * 1024);
      const head = readFileSync(patch, { encoding: "latin1" }).slice(0, 4000);
      expect(head).toContain("diff --git a/app.txt b/app.txt");
      expect(pathsOn(repository.root, run.report.branch!)).toEqual(["app.txt", "big1.txt", "big2.txt", "big3.txt"]);
    } finally {
      run.dispose();
    }
  });

  it("a file name that is not valid UTF-8 is committed and verified (ownership walk by bytes, item 6)", async () => {
    await using repository = createGitRepository({ "app.txt": "broken\n" }, { prefix: "agent-runner-sec-bytes-" });
    const run = await runScriptedTask({
      repository: repository.root,
      turns: [
        writeTurn("app.txt", "fixed\n"),
        shellTurn(
          "mkdir -p \"$(printf 'dir\\377')\" && touch \"$(printf 'bad\\377\\376.txt')\" \"$(printf 'dir\\377/inner\\300.txt')\" && ls | od -c | head -3",
        ),
      ],
      verify: { command: "grep -q fixed app.txt && test -e \"$(printf 'bad\\377\\376.txt')\" && test -e \"$(printf 'dir\\377/inner\\300.txt')\"" },
    });
    try {
      expect(run.report.status, describeRun(run)).toBe("succeeded");
      expect(run.report.reason).toBe("verified");
      const raw = execFileSync("git", ["-C", repository.root, "ls-tree", "-r", "-z", "--name-only", run.report.branch!], { env: isolatedGitEnvironment() });
      const names = raw.toString("latin1").split("\0").filter(Boolean).sort();
      expect(names).toEqual(["app.txt", "bad\xff\xfe.txt", "dir\xff/inner\xc0.txt"]);
    } finally {
      run.dispose();
    }
  });

  it("a `.GIT/` path is left out and reported; the rest of the edit lands on the branch (item 6)", async () => {
    await using repository = createGitRepository({ "app.txt": "broken\n" }, { prefix: "agent-runner-sec-dotgit-" });
    const events: RunEvent[] = [];
    const run = await runScriptedTask({
      repository: repository.root,
      // The policy refuses a literal `.git` write; a name computed at run time gets past it, as a hostile agent's would.
      turns: [
        writeTurn("app.txt", "fixed\n"),
        shellTurn("D=$(printf '.GI%s' T); mkdir -p $D/hooks && echo x > $D/config && echo y > $D/hooks/post-checkout && echo kept > other.txt"),
      ],
      verify: { command: "grep -q fixed app.txt && test -f other.txt" },
      events: { emit: (event) => events.push(event) },
    });
    try {
      expect(run.report.status, describeRun(run)).toBe("succeeded");
      expect(run.report.reason).toBe("verified");
      expect(pathsOn(repository.root, run.report.branch!)).toEqual(["app.txt", "other.txt"]);
      expect(inspectGit(repository.root, ["show", `${run.report.branch}:app.txt`])).toBe("fixed\n");
      const commit = run.report.commit!;
      expect(commit.left_out).toEqual([expect.objectContaining({ path: ".GIT", reason: "dotgit_name" })]);
      expect(commit.left_out_count).toBe(1);
      expect(committedEvents(events).at(-1)?.left_out).toEqual([expect.objectContaining({ path: ".GIT", reason: "dotgit_name" })]);
      expect(readFileSync(join(run.runDirectory, "patch.diff"), "utf8")).not.toContain(".GIT");
    } finally {
      run.dispose();
    }
  });

  it("`.git` aliases git refuses on NTFS/HFS+ are left out of the commit like git fsck's hasDotgit (item 10)", async () => {
    await using repository = createGitRepository({ "app.txt": "broken\n" }, { prefix: "agent-runner-sec-alias-" });
    // .g<U+200C>it (HFS+ ignores the zero-width non-joiner), git~1 (NTFS short name), ".git " and ".git." (NTFS trims),
    // .git::$INDEX_ALLOCATION (NTFS stream), a\.git (NTFS separator), and a symlinked .gitmodules alias.
    const plant = [
      "for d in \"$(printf '.g\\342\\200\\214it')\" 'git~1' '.git ' '.Git.' '.git::$INDEX_ALLOCATION' 'sub/x\\.git' 'sub/deep/.gI\\342\\200\\214T'; do",
      '  d=$(printf "$d"); mkdir -p "$d" && echo \'[core] fsmonitor = evil\' > "$d/config"; done',
      "ln -s /etc/passwd 'GITMOD~1'",
      "echo kept > sub/fine.txt; mkdir -p .github && echo ok > .github/ci.yml; echo ok > .gitignore",
      "ls -a",
    ].join("\n");
    const run = await runScriptedTask({
      repository: repository.root,
      turns: [writeTurn("app.txt", "fixed\n"), shellTurn(plant)],
      verify: { command: "grep -q fixed app.txt" },
    });
    try {
      expect(run.report.status, describeRun(run)).toBe("succeeded");
      const paths = pathsOn(repository.root, run.report.branch!);
      expect(paths).toEqual([".github/ci.yml", ".gitignore", "app.txt", "sub/fine.txt"]);
      const leftOut = run.report.commit!.left_out.map((entry) => `${entry.reason} ${entry.path}`).sort();
      expect(leftOut).toEqual(
        [
          "dotgit_name .Git.",
          "dotgit_name .g\u200cit",
          "dotgit_name .git ",
          "dotgit_name .git::$INDEX_ALLOCATION",
          "dotgit_name git~1",
          "dotgit_name sub/deep/.gI\u200cT",
          "dotgit_name sub/x\\.git",
          "gitmodules_symlink GITMOD~1",
        ].sort(),
      );
    } finally {
      run.dispose();
    }
  });

  it("committed test code that kills every process it can in the verification sandbox is `verify_failed` (exit 1), not an error (item 6)", async () => {
    await using repository = createGitRepository({ "app.txt": "broken\n" }, { prefix: "agent-runner-sec-verifykill-" });
    const run = await runScriptedTask({
      repository: repository.root,
      turns: [
        writeTurn("app.txt", "fixed\n"),
        writeTurn("test_everything.py", "import os, signal\n\ndef test_it():\n    os.kill(-1, signal.SIGKILL)\n    assert False, 'still broken'\n"),
      ],
      verify: { command: "python3 -m pytest -q -p no:cacheprovider", timeout_sec: 120 },
    });
    try {
      expect(run.report.status, describeRun(run)).toBe("failed");
      expect(run.exitCode).toBe(1);
      expect(run.report.reason).toBe("verify_failed");
      expect(run.report.error).toBeNull();
      // The helper is out of the agent's reach (kill(-1) cannot signal it), so the command dies alone and
      // the sandbox stays; a verification sandbox lost some other way (a missed deadline, the OOM killer)
      // is verify_failed as well (tests/unit/verify-commit.test.ts).
      expect(run.report.verify).toMatchObject({ passed: false, exit_code: 1, sandbox_lost: null });
      expect(pathsOn(repository.root, run.report.branch!)).toContain("test_everything.py");
    } finally {
      run.dispose();
    }
  });
});

describe("the host commit is bounded in size and time (item 8)", () => {
  beforeAll(async () => {
    await requireDocker();
  });

  it("leaves out a file over the per-file limit and files past the total, sparse or not, and reports them with the limits", async () => {
    await using repository = createGitRepository({ "app.txt": "broken\n" }, { prefix: "agent-runner-sec-sparse-" });
    const events: RunEvent[] = [];
    // Sparse files cost the agent no disk but host git ~7 s of CPU per GiB to hash.
    const run = await runScriptedTask({
      repository: repository.root,
      turns: [
        writeTurn("app.txt", "fixed\n"),
        shellTurn("truncate -s 900M huge.bin && for i in 1 2 3; do truncate -s 30M part$i.bin; done && head -c 5M /dev/urandom > dense.bin && ls -ls"),
      ],
      verify: { command: "grep -q fixed app.txt" },
      task: { commit: { max_file_size: "100m", max_total_size: "70m" } },
      events: { emit: (event) => events.push(event) },
    });
    try {
      expect(run.report.status, describeRun(run)).toBe("succeeded");
      const commit = run.report.commit!;
      expect(commit.limits).toEqual({ max_file_size: 100 * 1024 ** 2, max_total_size: 70 * 1024 ** 2, timeout_sec: 300 });
      expect(commit.timed_out).toBe(false);
      // Candidates in git's order: app.txt, dense.bin (5M), huge.bin (over 100M), part1 and part2 (65M in all), part3 (over the total).
      expect(commit.left_out).toEqual([
        { path: "huge.bin", reason: "file_too_large", size: 900 * 1024 ** 2, sparse: true },
        { path: "part3.bin", reason: "over_total_size", size: 30 * 1024 ** 2, sparse: true },
      ]);
      expect(pathsOn(repository.root, run.report.branch!)).toEqual(["app.txt", "dense.bin", "part1.bin", "part2.bin"]);
      expect(committedEvents(events).at(-1)?.left_out).toHaveLength(2);
    } finally {
      run.dispose();
    }
  });

  it("a host commit past its time limit commits nothing and ends the run `failed` (commit_timed_out), not `error`", async () => {
    await using repository = createGitRepository({ "app.txt": "broken\n" }, { prefix: "agent-runner-sec-committime-" });
    const run = await runScriptedTask({
      repository: repository.root,
      // ~600 MiB of sparse files under the size limits: several seconds of hashing, past a 1 s limit.
      turns: [writeTurn("app.txt", "fixed\n"), shellTurn("for i in 1 2 3 4 5 6; do truncate -s 99M part$i.bin; done")],
      verify: { command: "grep -q fixed app.txt" },
      task: { commit: { timeout_sec: 1 } },
    });
    try {
      expect(run.report.status, describeRun(run)).toBe("failed");
      expect(run.exitCode).toBe(1);
      expect(run.report.reason).toBe("commit_timed_out");
      expect(run.report.commit!.timed_out).toBe(true);
      expect(run.report.verify).toBeNull();
      expect(run.report.head_commit).toBe(run.report.base_commit);
      // Nothing was committed, so no run branch is left behind (issue 26 item 10).
      expect(run.report.branch).toBeNull();
    } finally {
      run.dispose();
    }
  });
});

describe("the host commit as a runner that is not root (item 6)", () => {
  it("leaves out a file the agent made unreadable (same uid as the runner) instead of failing the whole commit", async () => {
    await using repository = createGitRepository({ "app.txt": "broken\n" }, { prefix: "agent-runner-sec-unreadable-" });
    const home = mkdtempSync(join(tmpdir(), "agent-runner-sec-unreadable-home-"));
    try {
      // As root the runner reads every file; the case needs a runner without that power, so a root test drops to nobody.
      const asRoot = process.getuid?.() === 0;
      if (asRoot) execFileSync("chown", ["-R", "nobody", repository.root, home]);
      const tsx = join(ROOT, "node_modules/.bin/tsx");
      const argv = [
        tsx,
        join(ROOT, "tests/helpers/commit-worktree-cli.ts"),
        repository.root,
        join(home, "worktree"),
        "echo fixed > app.txt && echo s > secret.txt && chmod 000 secret.txt",
      ];
      const output = execFileSync(
        asRoot ? "setpriv" : argv[0]!,
        asRoot ? ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", ...argv] : argv.slice(1),
        {
          encoding: "utf8",
          env: { PATH: process.env.PATH, HOME: home, TMPDIR: home },
        },
      );
      if (asRoot) execFileSync("chown", ["-R", "root", repository.root]);
      const outcome = JSON.parse(output) as { error?: string; changed: boolean; branch: string; leftOut: unknown[] };
      expect(outcome.error, output).toBeUndefined();
      expect(outcome.changed).toBe(true);
      expect(outcome.leftOut).toEqual([{ path: "secret.txt", reason: "unreadable" }]);
      expect(pathsOn(repository.root, outcome.branch)).toEqual(["app.txt"]);
      expect(inspectGit(repository.root, ["show", `${outcome.branch}:app.txt`])).toBe("fixed\n");
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});

describe("verify.protect: the verdict runs on the base commit's tests (item 9)", () => {
  let scratch: string;
  beforeAll(async () => {
    await requireDocker();
    scratch = mkdtempSync(join(tmpdir(), "agent-runner-sec-protect-"));
  });
  afterAll(() => {
    rmSync(scratch, { recursive: true, force: true });
  });

  const userFiles = {
    "calc.py": "def add(a, b):\n    return a + b\n",
    "tests/test_calc.py": "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    "tests/__init__.py": "",
  };
  // A conftest.py that turns every test report into a pass.
  const gamingConftest = [
    "import pytest",
    "",
    "@pytest.hookimpl(hookwrapper=True)",
    "def pytest_runtest_makereport(item, call):",
    "    outcome = yield",
    "    report = outcome.get_result()",
    "    report.outcome = 'passed'",
    "    report.longrepr = None",
    "",
  ].join("\n");
  const breakCalc = writeTurn("calc.py", "def add(a, b):\n    return a - b\n");
  const verify = { command: "python3 -m pytest -q -p no:cacheprovider", timeout_sec: 120 };

  it("without protect, a conftest.py that forces every report to pass makes a broken change `succeeded (verified)` (the documented limit)", async () => {
    await using repository = createGitRepository(userFiles, { prefix: "agent-runner-sec-gamed-" });
    const run = await runScriptedTask({ repository: repository.root, turns: [breakCalc, writeTurn("conftest.py", gamingConftest)], verify });
    try {
      expect(run.report.status, describeRun(run)).toBe("succeeded");
      expect(run.report.reason).toBe("verified");
    } finally {
      run.dispose();
    }
  });

  it("with protect, protected paths come from the base commit, added matches are deleted, and the verdict is verify_failed", async () => {
    await using repository = createGitRepository(userFiles, { prefix: "agent-runner-sec-protected-" });
    const run = await runScriptedTask({
      repository: repository.root,
      turns: [
        breakCalc,
        writeTurn("conftest.py", gamingConftest),
        writeTurn("tests/conftest.py", gamingConftest),
        writeTurn("tests/test_calc.py", "def test_add():\n    assert True\n"),
        writeTurn("tests/test_extra.py", "def test_extra():\n    assert True\n"),
      ],
      verify: { ...verify, protect: ["**/conftest.py", "tests/**"] },
    });
    try {
      expect(run.report.status, describeRun(run)).toBe("failed");
      expect(run.exitCode).toBe(1);
      expect(run.report.reason).toBe("verify_failed");
      expect(run.report.verify!.output_tail).toMatch(/1 failed/);
      expect(run.report.verify!.protected).toEqual({
        patterns: ["**/conftest.py", "tests/**"],
        from_commit: run.report.base_commit,
        restored: ["tests/test_calc.py"],
        deleted: ["conftest.py", "tests/conftest.py", "tests/test_extra.py"],
        omitted: 0,
      });
      // The agent's commit itself is unchanged: protect shapes only the verification checkout.
      expect(pathsOn(repository.root, run.report.branch!)).toEqual([
        "calc.py",
        "conftest.py",
        "tests/__init__.py",
        "tests/conftest.py",
        "tests/test_calc.py",
        "tests/test_extra.py",
      ]);
    } finally {
      run.dispose();
    }
  });

  it("a symlink the agent put at a protected directory's path is replaced, never written through", async () => {
    await using repository = createGitRepository(userFiles, { prefix: "agent-runner-sec-protect-link-" });
    const hostDirectory = mkdtempSync(join(scratch, "host-target-"));
    const run = await runScriptedTask({
      repository: repository.root,
      turns: [breakCalc, shellTurn(`rm -rf tests && ln -s ${hostDirectory} tests && ls -la`)],
      verify: { ...verify, protect: ["tests"] },
    });
    try {
      expect(run.report.status, describeRun(run)).toBe("failed");
      expect(run.report.reason).toBe("verify_failed");
      expect(run.report.verify!.output_tail).toMatch(/1 failed/);
      expect(run.report.verify!.protected).toMatchObject({ restored: ["tests/__init__.py", "tests/test_calc.py"], deleted: ["tests"] });
      expect(readdirSync(hostDirectory)).toEqual([]);
      expect(inspectGit(repository.root, ["cat-file", "-p", `${run.report.branch}:tests`]).trim()).toBe(hostDirectory);
    } finally {
      run.dispose();
    }
  });
});
