/**
 * Security invariant 3 (DESIGN.md): the host never runs code the agent
 * controls, and reads nothing through a symlink from the workspace. A scripted
 * agent plants every trap it can in its worktree (a `.git` file redirected to
 * a git dir it controls, `.gitattributes` naming the user's filter/diff/merge
 * drivers, a nested repository with fsmonitor, symlinks to host files); the
 * user's repository carries hooks and drivers that would leave marker files on
 * the host. After the real run: no marker exists, the agent's change is on
 * runner/<id>, and the user's checkout is untouched.
 *
 * The first test is the control: the very same payloads DO fire under plain
 * host git, so a runner that stopped disarming them would fail the others.
 * A further test races the host-side commit from a background process the
 * agent leaves running (directory swapped for a symlink mid `git add`).
 */
import { createHash } from "node:crypto";
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createGitRepository } from "../helpers/git-repository.js";
import { requireDocker } from "../helpers/docker.js";
import {
  describeRun,
  inspectGit,
  isolatedGitEnvironment,
  parseShellResult,
  randomToken,
  runScriptedTask,
  shellTurn,
  writeTurn,
  type ScriptedRun,
} from "./security-harness.js";

const USER_HOOKS = [
  "post-checkout",
  "pre-commit",
  "prepare-commit-msg",
  "commit-msg",
  "post-commit",
  "post-merge",
  "post-rewrite",
  "reference-transaction",
  "post-index-change",
  "pre-auto-gc",
];

/** A user repository (app.txt = "broken") whose config and hooks run marker commands writing into `markers`. */
function createHostileUserRepository(markers: string) {
  const repository = createGitRepository({ "app.txt": "broken\n", "lib/keep.txt": "keep\n" }, { prefix: "agent-runner-sec-hostile-" });
  const set = (key: string, value: string) => repository.git("config", key, value);
  // Drivers the agent can name from a .gitattributes it writes. The clean filter
  // also changes content, so a run that applied it shows in the committed blob.
  set("filter.evil.clean", `touch ${markers}/PWNED-filter-clean; sed s/hello/CLEANED/`);
  set("filter.evil.smudge", `touch ${markers}/PWNED-filter-smudge; cat`);
  set("filter.evil.required", "true");
  set("diff.evil.textconv", `touch ${markers}/PWNED-diff-textconv; cat`);
  set("diff.evil.command", `touch ${markers}/PWNED-diff-command; true`);
  set("merge.evil.driver", `touch ${markers}/PWNED-merge-driver; true`);
  for (const hook of USER_HOOKS) {
    const path = join(repository.root, ".git", "hooks", hook);
    writeFileSync(path, `#!/bin/sh\ntouch ${markers}/PWNED-hook-${hook}\nexit 0\n`);
    chmodSync(path, 0o755);
  }
  return repository;
}

/**
 * What the agent plants, as a bash script run in its worktree (relative paths
 * only, so the same script works in the container and, for the control, on
 * the host). `markers` is the host directory; it does not exist in the container.
 */
function plantScript(markers: string): string {
  return [
    "set -e",
    `M=${markers}`,
    "export GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@b GIT_COMMITTER_NAME=a GIT_COMMITTER_EMAIL=a@b",
    // 1. .gitattributes naming the user's drivers for every file.
    "printf '* filter=evil diff=evil merge=evil\\n' > .gitattributes",
    "printf 'hello\\n' > data.txt",
    // 2. A nested repository whose own config runs an fsmonitor hook.
    "git init -q sub && echo x > sub/f && git -C sub add f && git -C sub commit -qm sub",
    'git -C sub config core.fsmonitor "touch $M/PWNED-nested-fsmonitor; exit 1"',
    "git -C sub status >/dev/null 2>&1 || true",
    // 3. A git dir the agent controls, with fsmonitor, a filter and hooks, and the .git file redirected to it.
    "git init -q --bare evilgit && git config -f evilgit/config core.bare false",
    'git config -f evilgit/config core.fsmonitor "touch $M/PWNED-gitfile-fsmonitor; exit 1"',
    'git config -f evilgit/config filter.evil.clean "touch $M/PWNED-gitfile-filter; cat"',
    'git config -f evilgit/config diff.external "touch $M/PWNED-gitfile-external-diff; true"',
    "for h in pre-commit post-commit reference-transaction post-checkout post-index-change; do " +
      'printf \'#!/bin/sh\\ntouch %s/PWNED-gitfile-hook-%s\\n\' "$M" "$h" > evilgit/hooks/$h; chmod +x evilgit/hooks/$h; done',
    // The policy refuses a literal write to .git; a path computed at run time gets past it, as a hostile
    // agent's would. The container's /workspace/.git is the runner's own read-only file, so the redirect
    // is refused there too (host-side git would ignore it anyway: explicit --git-dir).
    "G=$(printf %s .git); if printf 'gitdir: evilgit\\n' 2>/dev/null > \"$G\"; then echo gitfile-planted; else echo gitfile-refused; fi",
    "git status >/dev/null 2>&1 || true",
    // 4. Symlinks to host files and directories outside the workspace.
    "ln -s $M/canary.txt leak-canary",
    "ln -s /etc/shadow leak-shadow",
    "ln -s $M leak-dir",
    "echo planted",
  ].join("\n");
}

/** Everything that identifies the state of the user's checkout. */
function checkoutSnapshot(root: string) {
  const tracked = inspectGit(root, ["ls-files", "-z"]).split("\0").filter(Boolean);
  return {
    head: inspectGit(root, ["rev-parse", "HEAD"]).trim(),
    branch: inspectGit(root, ["symbolic-ref", "HEAD"]).trim(),
    indexSha256: createHash("sha256")
      .update(readFileSync(join(root, ".git", "index")))
      .digest("hex"),
    stagedEntries: inspectGit(root, ["ls-files", "--stage"]),
    files: Object.fromEntries(tracked.map((path) => [path, readFileSync(join(root, path), "utf8")])),
    topLevel: readdirSync(root).sort(),
    status: execFileSync("git", ["-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-C", root, "status", "--porcelain"], {
      encoding: "utf8",
      env: { ...isolatedGitEnvironment(), GIT_OPTIONAL_LOCKS: "0" },
    }),
  };
}

function markersIn(directory: string): string[] {
  return existsSync(directory)
    ? readdirSync(directory)
        .filter((name) => name.startsWith("PWNED"))
        .sort()
    : [];
}

describe("security invariant 3: a hostile worktree runs nothing on the host", () => {
  let scratch: string;
  beforeAll(async () => {
    await requireDocker();
    scratch = mkdtempSync(join(tmpdir(), "agent-runner-sec-inv3-"));
  });
  afterAll(() => {
    rmSync(scratch, { recursive: true, force: true });
  });

  it("control: the planted payloads, the user's hooks and hostile GIT_* variables DO run under plain host git", async () => {
    const markers = join(scratch, "control-markers");
    mkdirSync(markers);
    await using repository = createHostileUserRepository(markers);
    const worktree = join(scratch, "control-worktree");
    const plainGit = (args: string[], env: NodeJS.ProcessEnv = isolatedGitEnvironment()) =>
      spawnSync("git", ["-c", "user.name=t", "-c", "user.email=t@l", ...args], { encoding: "utf8", env });
    plainGit(["-C", repository.root, "worktree", "add", "-q", "-b", "naive", worktree]);
    const fromUserHooks = markersIn(markers);
    // Plant as the container would: the marker directory does not exist while planting.
    rmSync(markers, { recursive: true });
    const planted = spawnSync("bash", ["-c", plantScript(markers)], { cwd: worktree, encoding: "utf8", env: isolatedGitEnvironment() });
    expect(planted.stdout, planted.stderr).toContain("planted");
    mkdirSync(markers);
    const gitDirectory = join(repository.root, ".git", "worktrees", "control-worktree");
    plainGit(["-C", worktree, "status"]); // follows the planted .git file
    plainGit([`--git-dir=${gitDirectory}`, `--work-tree=${worktree}`, "add", "-A"]);
    plainGit([`--git-dir=${gitDirectory}`, `--work-tree=${worktree}`, "status"]);
    plainGit([`--git-dir=${gitDirectory}`, `--work-tree=${worktree}`, "commit", "-qm", "naive"]);
    plainGit([`--git-dir=${gitDirectory}`, `--work-tree=${worktree}`, "diff", "HEAD~1", "HEAD"]);
    const fromWorktree = markersIn(markers);
    const cleanedBlob = inspectGit(repository.root, ["cat-file", "-p", "naive:data.txt"]);

    const envMarkers = join(scratch, "control-env-markers");
    mkdirSync(envMarkers);
    const hostile = hostileGitEnvironment(envMarkers);
    const redirected = plainGit(["-C", repository.root, "rev-parse", "--absolute-git-dir"], { ...isolatedGitEnvironment(), ...hostile });
    // Without the redirection variables, the rest of them run code in the real repository.
    const { GIT_DIR, GIT_WORK_TREE, GIT_COMMON_DIR, GIT_INDEX_FILE, GIT_OBJECT_DIRECTORY, ...programs } = hostile;
    plainGit(["-C", repository.root, "branch", "naive-env"], { ...isolatedGitEnvironment(), ...programs });
    plainGit(["-C", repository.root, "diff", "HEAD", "naive"], { ...isolatedGitEnvironment(), ...programs });

    expect(fromUserHooks).toEqual(expect.arrayContaining(["PWNED-hook-post-checkout", "PWNED-hook-reference-transaction"]));
    expect(fromWorktree).toEqual(
      expect.arrayContaining([
        "PWNED-gitfile-fsmonitor",
        "PWNED-nested-fsmonitor",
        "PWNED-filter-clean",
        "PWNED-diff-command",
        "PWNED-hook-pre-commit",
        "PWNED-hook-post-commit",
      ]),
    );
    expect(cleanedBlob).toBe("CLEANED\n");
    expect(redirected.stdout.trim()).toBe(GIT_DIR);
    expect(markersIn(envMarkers)).toEqual(expect.arrayContaining(["PWNED-env-hook-reference-transaction", "PWNED-env-external-diff", "PWNED-trace"]));
  });

  describe("a run whose agent plants a hostile worktree", () => {
    let markers: string;
    let canaryContent: string;
    let repository: ReturnType<typeof createHostileUserRepository>;
    let before: ReturnType<typeof checkoutSnapshot>;
    let run: ScriptedRun;

    beforeAll(async () => {
      markers = join(scratch, "run-markers");
      mkdirSync(markers);
      canaryContent = randomToken("CANARY-CONTENT-");
      writeFileSync(join(markers, "canary.txt"), `${canaryContent}\n`);
      repository = createHostileUserRepository(markers);
      before = checkoutSnapshot(repository.root);
      run = await runScriptedTask({
        repository: repository.root,
        turns: [
          writeTurn("app.txt", "fixed\n"),
          shellTurn(plantScript(markers)),
          // The agent also tries to read the host file through its symlink, inside the container.
          shellTurn("cat leak-canary; cat leak-dir/canary.txt; echo read-attempted"),
        ],
      });
    });
    afterAll(async () => {
      run?.dispose();
      await repository?.[Symbol.asyncDispose]();
    });

    it("plants everything in the container but the .git redirect, and the run still succeeds", () => {
      expect(parseShellResult(run.toolResults[1]).stdout, describeRun(run)).toMatch(/^gitfile-refused\nplanted$/m);
      expect(parseShellResult(run.toolResults[2]).stdout).not.toContain(canaryContent);
      expect(run.report.status, describeRun(run)).toBe("succeeded");
    });

    it("runs no hook, filter, diff/merge driver or fsmonitor on the host (no marker file)", () => {
      expect(markersIn(markers)).toEqual([]);
      expect(readdirSync(markers)).toEqual(["canary.txt"]);
    });

    it("commits the agent's change on the run branch with the planted files as plain data", () => {
      const branch = run.report.branch!;
      expect(JSON.parse(readFileSync(join(run.runDirectory, "run.json"), "utf8")).branch).toBe(branch);
      expect(inspectGit(repository.root, ["rev-parse", branch]).trim()).toBe(run.report.head_commit);
      expect(inspectGit(repository.root, ["rev-parse", `${branch}~1`]).trim()).toBe(before.head);
      expect(inspectGit(repository.root, ["cat-file", "-p", `${branch}:app.txt`])).toBe("fixed\n");
      // The clean filter did not run: the blob is the worktree's bytes.
      expect(inspectGit(repository.root, ["cat-file", "-p", `${branch}:data.txt`])).toBe("hello\n");
      const tree = inspectGit(repository.root, ["ls-tree", branch]);
      // The nested repository is left out (host git never starts in a repository the agent configured), and says so.
      expect(tree).not.toMatch(/\tsub$/m);
      expect(run.report.commit?.left_out).toContainEqual({ path: "sub", reason: "nested_repository" });
      expect(tree).toMatch(/^100644 blob [0-9a-f]{40}\t\.gitattributes$/m);
      // The run's worktree is gone and pruned; the user's repository lists only its own checkout.
      expect(inspectGit(repository.root, ["worktree", "list", "--porcelain"]).match(/^worktree /gm)).toHaveLength(1);
    });

    it("commits symlinks to host files as symlinks (mode 120000), never their targets' content", () => {
      const branch = run.report.branch!;
      const tree = inspectGit(repository.root, ["ls-tree", branch]);
      for (const name of ["leak-canary", "leak-shadow", "leak-dir"]) {
        expect(tree).toMatch(new RegExp(`^120000 blob [0-9a-f]{40}\\t${name}$`, "m"));
      }
      expect(inspectGit(repository.root, ["cat-file", "-p", `${branch}:leak-canary`])).toBe(`${markers}/canary.txt`);
      expect(inspectGit(repository.root, ["cat-file", "-p", `${branch}:leak-shadow`])).toBe("/etc/shadow");
      expect(inspectGit(repository.root, ["cat-file", "-p", `${branch}:leak-dir`])).toBe(markers);
      const grep = spawnSync("git", ["-C", repository.root, "grep", "-F", "-e", canaryContent, branch, "--"], {
        encoding: "utf8",
        env: isolatedGitEnvironment(),
      });
      expect(grep.status, grep.stdout).toBe(1);
      // Nothing the run wrote carries the canary either.
      for (const name of readdirSync(run.runDirectory)) {
        const path = join(run.runDirectory, name);
        if (!existsSync(path) || name === "worktree") continue;
        expect(readFileSync(path, "utf8"), name).not.toContain(canaryContent);
      }
      expect(readdirSync(run.runDirectory)).toEqual(expect.arrayContaining(["patch.diff", "report.json", "session.json", "events.jsonl"]));
    });

    it("leaves the user's checkout unchanged (HEAD, branch, index, working files)", () => {
      expect(checkoutSnapshot(repository.root)).toEqual(before);
    });
  });

  it("reads no host file through a directory the agent swaps for a symlink while the host commits", async () => {
    // A background process the agent leaves running waits (inotify) until host git
    // opens a bait file during `git add`, then swaps directory z/ (whose z/canary.txt
    // git has already listed) for a symlink to a host directory holding canary.txt.
    // If git then opens z/canary.txt, it reads the host file into the run's commit.
    const markers = join(scratch, "swap-markers");
    mkdirSync(markers);
    const canaryContent = randomToken("SWAP-CANARY-");
    writeFileSync(join(markers, "canary.txt"), `${canaryContent}\n`);
    await using repository = createGitRepository({ "app.txt": "broken\n" }, { prefix: "agent-runner-sec-swap-" });
    const watcher = [
      "import ctypes, os, sys",
      'libc = ctypes.CDLL("libc.so.6", use_errno=True)',
      "fd = libc.inotify_init()",
      'assert libc.inotify_add_watch(fd, b"/workspace/a/bait", 0x20) >= 0  # IN_OPEN',
      'print("watching", flush=True)',
      "os.read(fd, 4096)",
      'os.rename("/workspace/z", "/workspace/z.real")',
      'os.symlink(sys.argv[1], "/workspace/z")',
      'print("swapped", flush=True)',
    ].join("\n");
    const run = await runScriptedTask({
      repository: repository.root,
      turns: [
        writeTurn("app.txt", "fixed\n"),
        shellTurn(
          // Many files between the bait and z/ give the swap time; a world-writable
          // workspace root keeps the swap possible after the host chowns files back.
          "mkdir -p a m z && echo bait > a/bait && for i in $(seq -w 0 1999); do echo $i > m/$i; done && " +
            "echo decoy > z/canary.txt && chmod 777 . && " +
            `cat > /tmp/watch.py <<'PY'\n${watcher}\nPY\n` +
            `nohup python3 /tmp/watch.py ${markers} > /tmp/watch.log 2>&1 < /dev/null &\n` +
            "until grep -q watching /tmp/watch.log; do :; done; cat /tmp/watch.log",
        ),
      ],
    });
    try {
      expect(parseShellResult(run.toolResults[1]).stdout, describeRun(run)).toContain("watching");
      const branch = run.report.branch!;
      expect(inspectGit(repository.root, ["cat-file", "-p", `${branch}:app.txt`])).toBe("fixed\n");
      const grep = spawnSync("git", ["-C", repository.root, "grep", "-F", "-l", "-e", canaryContent, branch, "--"], {
        encoding: "utf8",
        env: isolatedGitEnvironment(),
      });
      expect(grep.stdout, "files on the run branch holding the host file's content").toBe("");
      for (const name of ["patch.diff", "session.json", "events.jsonl", "report.json"]) {
        const path = join(run.runDirectory, name);
        if (existsSync(path)) expect(readFileSync(path, "utf8"), name).not.toContain(canaryContent);
      }
    } finally {
      run.dispose();
    }
  });

  it("ignores hostile GIT_* / HOME / XDG variables in the runner's own environment; the commit lands on runner/<id>", async () => {
    const markers = join(scratch, "env-markers");
    mkdirSync(markers);
    await using repository = createGitRepository({ "app.txt": "broken\n" }, { prefix: "agent-runner-sec-env-" });
    const before = checkoutSnapshot(repository.root);
    const hostile = hostileGitEnvironment(markers);
    const saved = Object.fromEntries(Object.keys(hostile).map((name) => [name, process.env[name]]));
    Object.assign(process.env, hostile);
    let run: ScriptedRun | undefined;
    try {
      run = await runScriptedTask({
        repository: repository.root,
        hostEnvironment: process.env,
        turns: [writeTurn("app.txt", "fixed\n"), shellTurn("git status --porcelain")],
      });
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
    try {
      expect(run.report.status, describeRun(run)).toBe("succeeded");
      expect(markersIn(markers)).toEqual([]);
      const branch = run.report.branch!;
      expect(inspectGit(repository.root, ["rev-parse", branch]).trim()).toBe(run.report.head_commit);
      expect(inspectGit(repository.root, ["cat-file", "-p", `${branch}:app.txt`])).toBe("fixed\n");
      expect(readFileSync(join(run.runDirectory, "patch.diff"), "utf8")).toMatch(/-broken\n\+fixed/);
      // The decoy repository named by GIT_DIR got nothing.
      expect(inspectGit(join(markers, "evil-gitdir"), ["for-each-ref"]).trim()).toBe("");
      expect(checkoutSnapshot(repository.root)).toEqual(before);
    } finally {
      run.dispose();
    }
  });
});

/**
 * Variables a hostile parent environment could hand the runner: each would
 * redirect git or make it run a marker command (or write a trace file) in `markers`.
 */
function hostileGitEnvironment(markers: string): Record<string, string> {
  const hooks = join(markers, "evil-hooks");
  mkdirSync(hooks, { recursive: true });
  for (const hook of USER_HOOKS) {
    writeFileSync(join(hooks, hook), `#!/bin/sh\ntouch ${markers}/PWNED-env-hook-${hook}\nexit 0\n`, { mode: 0o755 });
  }
  const script = (name: string) => {
    const path = join(hooks, `run-${name}`);
    writeFileSync(path, `#!/bin/sh\ntouch ${markers}/PWNED-env-${name}\nexit 0\n`, { mode: 0o755 });
    return path;
  };
  const evilConfig = `[core]\n\thooksPath = ${hooks}\n\tfsmonitor = ${script("config-fsmonitor")}\n\tpager = ${script("config-pager")}\n[diff]\n\texternal = ${script("config-external-diff")}\n`;
  const home = join(markers, "evil-home");
  mkdirSync(join(home, ".config", "git"), { recursive: true });
  writeFileSync(join(home, ".gitconfig"), evilConfig);
  writeFileSync(join(home, ".config", "git", "config"), evilConfig);
  writeFileSync(join(home, ".config", "git", "attributes"), "* filter=envevil\n");
  writeFileSync(join(markers, "evil-gitconfig"), `${evilConfig}[filter "envevil"]\n\tclean = ${script("filter")}\n`);
  const decoy = join(markers, "evil-gitdir");
  execFileSync("git", ["init", "-q", "--bare", decoy], { env: isolatedGitEnvironment() });
  return {
    GIT_DIR: decoy,
    GIT_WORK_TREE: markers,
    GIT_COMMON_DIR: decoy,
    GIT_INDEX_FILE: join(markers, "evil-index"),
    GIT_OBJECT_DIRECTORY: join(decoy, "objects"),
    GIT_CONFIG_PARAMETERS: `'core.hooksPath'='${hooks}' 'core.fsmonitor'='${script("parameters-fsmonitor")}'`,
    GIT_CONFIG_COUNT: "2",
    GIT_CONFIG_KEY_0: "core.hooksPath",
    GIT_CONFIG_VALUE_0: hooks,
    GIT_CONFIG_KEY_1: "core.fsmonitor",
    GIT_CONFIG_VALUE_1: script("count-fsmonitor"),
    GIT_CONFIG_GLOBAL: join(markers, "evil-gitconfig"),
    GIT_CONFIG_SYSTEM: join(markers, "evil-gitconfig"),
    GIT_EXTERNAL_DIFF: script("external-diff"),
    GIT_EDITOR: script("editor"),
    GIT_SEQUENCE_EDITOR: script("sequence-editor"),
    GIT_PAGER: script("pager"),
    GIT_ASKPASS: script("askpass"),
    GIT_SSH_COMMAND: script("ssh"),
    GIT_TRACE: join(markers, "PWNED-trace"),
    HOME: home,
    XDG_CONFIG_HOME: join(home, ".config"),
  };
}
