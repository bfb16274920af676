/**
 * The `.git` alias rules (CVE-2014-9390, CVE-2019-1353) against git's own
 * test tables, and against git itself: every case is also given to the host's
 * `git update-index` with core.protectHFS and core.protectNTFS on, which must
 * refuse exactly the paths refusedGitPath() refuses.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { refusedGitPath } from "../../src/workspace/git-path-names.js";

const u200c = "\u200c";

/** t/t1014-read-tree-confusing.sh and t/t1450-fsck.sh (`fsck notices <name>`): names read-tree and fsck refuse, as file and as directory. */
const DOTGIT_NAMES = [
  ".git",
  ".GIT",
  `${u200c}.Git`,
  `.gI${u200c}T`,
  `.GiT${u200c}`,
  ".Git",
  "git~1",
  ".git. ",
  ".git.",
  ".\\.GIT\\foobar",
  ".git\\foobar",
  ".git...:alternate-stream",
  // CVE-2019-1353: NTFS alternate data streams and backslash separators (t0060 `is_ntfs_dotgit`-style cases).
  ".git::$INDEX_ALLOCATION",
  "GIT~1",
  ".git ",
  "a\\.git",
];

/** t/t0060-path-utils.sh 'match .gitmodules': names git treats as `.gitmodules` (refused as symlinks). */
const GITMODULES_NAMES = [
  ".gitmodules",
  `.git${u200c}modules`,
  ".Gitmodules",
  ".gitmoduleS",
  ".gitmodules ",
  ".gitmodules.",
  ".gitmodules  ",
  ".gitmodules. ",
  ".gitmodules .",
  ".gitmodules..",
  ".gitmodules   ",
  ".gitmodules.  ",
  ".gitmodules . ",
  ".gitmodules  .",
  ".Gitmodules ",
  ".Gitmodules.",
  ".Gitmodules  ",
  ".Gitmodules. ",
  ".Gitmodules .",
  ".Gitmodules..",
  ".Gitmodules   ",
  ".Gitmodules.  ",
  ".Gitmodules . ",
  ".Gitmodules  .",
  "GITMOD~1",
  "gitmod~1",
  "GITMOD~2",
  "gitmod~3",
  "GITMOD~4",
  "GITMOD~1 ",
  "gitmod~2.",
  "GITMOD~3  ",
  "gitmod~4. ",
  "GITMOD~1 .",
  "gitmod~2   ",
  "GITMOD~3.  ",
  "gitmod~4 . ",
  "GI7EBA~1",
  "gi7eba~9",
  "GI7EB~10",
  "GI7EB~11",
  "GI7EB~99",
  "GI7E~100",
  "GI7E~101",
  "GI7E~999",
  "~1000000",
  "~9999999",
  ".gitmodules:$DATA",
  "gitmod~4 . :$DATA",
];

/** t0060 'match .gitmodules' after `--not`, t1450 'fsck allows .Ňit', and ordinary dot-names: all accepted. */
const ACCEPTED_NAMES = [
  ".gitmodules x",
  ".gitmodules .x",
  " .gitmodules",
  "..gitmodules",
  "gitmodules",
  ".gitmodule",
  ".gitmodules x ",
  "GI7EBA~",
  "GI7EBA~0",
  "GI7EBA~~1",
  "GI7EBA~X",
  "Gx7EBA~1",
  "GI7EBX~1",
  "GI7EB~1",
  "GI7EB~01",
  "GI7EB~1X",
  ".gitmodules,:$DATA",
  ".\u0147it",
  ".github",
  ".gitignore",
  ".gitattributes",
  "git",
  "git~2",
  ".git-blame-ignore-revs",
  "x.git",
  "a.git/b",
];

function bytes(text: string): Buffer {
  return Buffer.from(text, "utf8");
}

describe("refusedGitPath (port of git's verify_path with protectHFS and protectNTFS)", () => {
  it.each(DOTGIT_NAMES)("refuses %j as a file, as a directory and below a directory", (name) => {
    expect(refusedGitPath(bytes(name), false)?.reason).toBe("dotgit_name");
    expect(refusedGitPath(bytes(`${name}/config`), false)).toMatchObject({ reason: "dotgit_name" });
    expect(refusedGitPath(bytes(`src/${name}/hooks/pre-commit`), false)?.reason).toBe("dotgit_name");
  });

  it("reports the refused leading part, so everything below it is left out with it", () => {
    const path = bytes("src/.GIT/hooks/post-checkout");
    const refused = refusedGitPath(path, false)!;
    expect(path.subarray(0, refused.prefixLength).toString()).toBe("src/.GIT");
    const backslash = bytes("lib/x\\.git/config");
    expect(backslash.subarray(0, refusedGitPath(backslash, false)!.prefixLength).toString()).toBe("lib/x\\.git");
  });

  it.each(GITMODULES_NAMES)("refuses %j as a symlink, accepts it as a file", (name) => {
    expect(refusedGitPath(bytes(name), true)?.reason).toBe("gitmodules_symlink");
    expect(refusedGitPath(bytes(`sub/${name}`), true)?.reason).toBe("gitmodules_symlink");
    expect(refusedGitPath(bytes(name), false)).toBeNull();
  });

  it.each(ACCEPTED_NAMES)("accepts %j as a file and as a symlink", (name) => {
    expect(refusedGitPath(bytes(name), false)).toBeNull();
    expect(refusedGitPath(bytes(name), true)).toBeNull();
  });

  it("works on bytes: malformed UTF-8 is no `.git`, but `.git` followed by malformed UTF-8 reads as `.git` on HFS+ (as in git)", () => {
    expect(refusedGitPath(Buffer.from([0x2e, 0x67, 0xff, 0x69, 0x74]), false)).toBeNull();
    expect(refusedGitPath(Buffer.from([0x62, 0x61, 0x64, 0xff, 0xfe]), false)).toBeNull();
    expect(refusedGitPath(Buffer.from([0x2e, 0x67, 0x69, 0x74, 0xff]), false)?.reason).toBe("dotgit_name");
  });

  it("refuses the paths git can never store: empty, `.`, `..`, empty components", () => {
    for (const path of ["", ".", "..", "a/./b", "a/../b", "a//b", "a/"]) expect(refusedGitPath(bytes(path), false)?.reason, path).toBe("invalid_path");
  });
});

describe("refusedGitPath agrees with the host's git (update-index with core.protectHFS/NTFS)", () => {
  let repository: string;
  let blob: string;
  const git = (args: string[], input?: Buffer) =>
    spawnSync("git", ["-c", "core.protectHFS=true", "-c", "core.protectNTFS=true", ...args], {
      cwd: repository,
      input,
      env: { PATH: process.env.PATH, HOME: repository, GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" },
    });
  beforeAll(() => {
    repository = mkdtempSync(join(tmpdir(), "agent-runner-git-names-"));
    execFileSync("git", ["init", "-q", repository]);
    blob = git(["hash-object", "-w", "--stdin"], Buffer.from("x\n")).stdout.toString().trim();
  });
  afterAll(() => {
    rmSync(repository, { recursive: true, force: true });
  });

  /** Whether git refuses `path` as an index entry of `mode` (100644 file, 120000 symlink). */
  function gitRefuses(path: Buffer, mode: "100644" | "120000"): boolean {
    rmSync(join(repository, ".git", "index"), { force: true });
    const entry = Buffer.concat([Buffer.from(`${mode} ${blob}\t`), path, Buffer.from([0])]);
    return git(["update-index", "-z", "--add", "--index-info"], entry).status !== 0 || git(["ls-files", "-z"]).stdout.length === 0;
  }

  const cases = [...DOTGIT_NAMES, ...GITMODULES_NAMES, ...ACCEPTED_NAMES].flatMap((name) => [name, `dir/${name}`, `${name}/leaf`]);
  it("for every table entry, as a file and as a symlink", () => {
    const disagreements: string[] = [];
    for (const name of cases) {
      for (const mode of ["100644", "120000"] as const) {
        const path = bytes(name);
        const ours = refusedGitPath(path, mode === "120000") !== null;
        if (ours !== gitRefuses(path, mode)) disagreements.push(`${mode} ${JSON.stringify(name)}: ours ${ours ? "refuses" : "accepts"}`);
      }
    }
    for (const raw of [
      [0x2e, 0x67, 0x69, 0x74, 0xff],
      [0x2e, 0x67, 0xff, 0x69, 0x74],
      [0x2e, 0x67, 0xe2, 0x80, 0x8c, 0x69, 0x74, 0x2f, 0x78],
    ]) {
      const path = Buffer.from(raw);
      if ((refusedGitPath(path, false) !== null) !== gitRefuses(path, "100644")) disagreements.push(`bytes ${path.toString("hex")}`);
    }
    expect(disagreements).toEqual([]);
  });
});
