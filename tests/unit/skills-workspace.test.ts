// The workspace skill source against a fake sandbox that answers the two git
// commands it runs (ls-tree of the base commit, cat-file of listed blobs):
// what it asks git for, and how it treats what the tree holds. The real git
// in a real container is in tests/integration/skills-workspace.test.ts.
import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import type { ExecRequest } from "../../src/sandbox/sandbox.js";
import { FakeSandbox } from "../../src/sandbox/fake/fake-sandbox.js";
import { MAX_SKILL_FILE_BYTES, SkillSet, loadSkillTool, readWorkspaceSkills } from "../../src/skills/index.js";

const BASE = "a".repeat(40);
const GIT_DIRECTORY = "/home/me/project/.git";

interface TreeEntry {
  mode?: string;
  type?: string;
  content: string | Buffer;
}

/** A sandbox whose git knows one commit, BASE, with `tree` (paths relative to the top level). */
function gitSandbox(tree: Record<string, TreeEntry | string>) {
  const objects = new Map<string, Buffer>();
  const entries = Object.entries(tree).map(([path, entry]) => {
    const { mode = "100644", type = "blob", content } = typeof entry === "string" ? { content: entry } : entry;
    const bytes = Buffer.from(content);
    const objectId = createHash("sha1").update(path).update(bytes).digest("hex");
    objects.set(objectId, bytes);
    return { path, mode, type, objectId, size: bytes.length };
  });
  const sandbox = new FakeSandbox({}, (request: ExecRequest) => {
    if (request.command.includes(" ls-tree ")) {
      if (!request.command.includes(` ${BASE} `)) return { exitCode: 128, stderr: "fatal: Not a valid object name" };
      const rows = entries
        .filter((entry) => entry.path.startsWith("skills/"))
        .map((entry) => `${entry.mode} ${entry.type} ${entry.objectId} ${entry.type === "blob" ? String(entry.size).padStart(7) : "      -"}\t${entry.path}\0`);
      return { stdout: rows.join("") };
    }
    if (request.command.includes(" cat-file blob ")) {
      const ids = /for object in ([0-9a-f ]+); do/.exec(request.command)![1]!.trim().split(" ");
      return { stdout: ids.map((id) => `${objects.get(id)!.toString("base64")}\n`).join("") };
    }
    return { exitCode: 127, stderr: `unexpected command: ${request.command}` };
  });
  return sandbox;
}

function skillMarkdown(name: string, description: string, body = `Do the ${name} thing.`): string {
  return `---\nname: ${name}\ndescription: ${description}\n---\n${body}\n`;
}

describe("workspace skills (base commit, read through the sandbox)", () => {
  it("reads skills/<name>/SKILL.md of the base commit with git on the read-only git directory, never the working tree", async () => {
    const sandbox = gitSandbox({
      "skills/lint/SKILL.md": skillMarkdown("lint", "Run the linters."),
      "skills/lint/rules.md": "rule one\n",
      "skills/lint/.secret": "hidden files are not listed",
      "skills/README.md": "not a skill",
      "skills/deep/nested/SKILL.md": skillMarkdown("nested", "Too deep: not a skill."),
      "src/app.py": "print(1)\n",
    });
    // A planted working-tree file that must never be read.
    sandbox.files.set("/workspace/skills/planted/SKILL.md", Buffer.from(skillMarkdown("planted", "Planted.")));
    const result = await readWorkspaceSkills({ sandbox, baseCommit: BASE, gitDirectory: GIT_DIRECTORY });
    expect(result.problems).toEqual([]);
    expect(result.skills.map((skill) => [skill.name, skill.source, skill.location, skill.resources])).toEqual([
      ["lint", "workspace", `${BASE}:skills/lint/SKILL.md`, [{ path: "rules.md", size: 9 }]],
    ]);
    const [listing, blobs] = sandbox.commands;
    expect(listing!.command).toContain(
      `git --git-dir='${GIT_DIRECTORY}' -c safe.directory='*' -c core.fsmonitor=false ls-tree -r -l -z --full-tree ${BASE} -- skills/`,
    );
    expect(listing!.command).toMatch(/^unset GIT_DIR GIT_WORK_TREE /);
    expect(listing!.env).toMatchObject({ GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1", GIT_NO_REPLACE_OBJECTS: "1" });
    expect(blobs!.command).toMatch(/cat-file blob "\$object" \| base64 -w 0/);
    expect(sandbox.commands).toHaveLength(2);

    const tool = loadSkillTool(SkillSet.fromSources([result]));
    expect((await tool.execute({ name: "lint" }, toolContext(sandbox))).content).toContain(
      '[skill] lint\nDo the lint thing.\n\nOther files of this skill (read one with load_skill {"name": "lint", "file": "<path>"}):\n- rules.md (9 bytes)',
    );
    expect((await tool.execute({ name: "lint", file: "rules.md" }, toolContext(sandbox))).content).toBe("[skill file] lint/rules.md\nrule one\n");
  });

  it("refuses symlinked and oversized SKILL.md files without reading them, and reports invalid ones", async () => {
    const sandbox = gitSandbox({
      "skills/linked/SKILL.md": { mode: "120000", content: "/etc/passwd" },
      "skills/huge/SKILL.md": skillMarkdown("huge", "Huge.", "x".repeat(MAX_SKILL_FILE_BYTES)),
      "skills/Bad_Name/SKILL.md": skillMarkdown("bad-name", "x"),
      "skills/typo/SKILL.md": "---\nname: typo\ndesc: x\n---\nBody\n",
      "skills/ok/SKILL.md": skillMarkdown("ok", "Fine."),
      "skills/ok/link.md": { mode: "120000", content: "../../secret" },
      "skills/ok/vendor": { mode: "160000", type: "commit", content: "" },
    });
    const result = await readWorkspaceSkills({ sandbox, baseCommit: BASE, gitDirectory: GIT_DIRECTORY });
    expect(result.skills.map((skill) => [skill.name, skill.resources])).toEqual([["ok", []]]);
    expect(result.problems.map((problem) => problem.message)).toEqual([
      `${BASE}:skills/Bad_Name/SKILL.md: "Bad_Name" is not a valid skill name (a-z, 0-9 and single hyphens between them, at most 64 characters); rename the directory`,
      expect.stringMatching(new RegExp(`^${BASE}:skills/huge/SKILL.md: is \\d+ bytes; a SKILL.md may have at most ${MAX_SKILL_FILE_BYTES}`)),
      `${BASE}:skills/linked/SKILL.md: is not a regular file (a symlink or a submodule); it is not read`,
      `${BASE}:skills/typo/SKILL.md:\n  - front matter: description: is required (one paragraph: what the skill does and when to use it)\n  - front matter: unknown key "desc" (allowed: name, description, license, metadata)`,
    ]);
    // Only the two SKILL.md files that passed the checks were read.
    expect(/for object in ([0-9a-f ]+); do/.exec(sandbox.commands[1]!.command)![1]!.trim().split(" ")).toHaveLength(2);
  });

  it("a base commit git does not know is a problem, not a crash; no skills/ is no skills", async () => {
    const sandbox = gitSandbox({ "src/app.py": "" });
    expect(await readWorkspaceSkills({ sandbox, baseCommit: BASE, gitDirectory: GIT_DIRECTORY })).toEqual({ skills: [], problems: [] });
    const unknown = await readWorkspaceSkills({ sandbox, baseCommit: "b".repeat(40), gitDirectory: GIT_DIRECTORY });
    expect(unknown.problems.map((problem) => problem.message)).toEqual([
      `${"b".repeat(40)}:skills/: cannot list the base commit's skills (git exit 128): fatal: Not a valid object name`,
    ]);
  });

  it("refuses a git directory inside /workspace (the agent can rewrite it) and a base that is not an object id", async () => {
    const sandbox = gitSandbox({});
    await expect(readWorkspaceSkills({ sandbox, baseCommit: BASE, gitDirectory: "/workspace/.git" })).rejects.toThrow(
      /gitDirectory must be an absolute path outside \/workspace/,
    );
    await expect(readWorkspaceSkills({ sandbox, baseCommit: BASE, gitDirectory: "/workspace/../workspace/x" })).rejects.toThrow(/outside \/workspace/);
    await expect(readWorkspaceSkills({ sandbox, baseCommit: "HEAD; rm -rf /", gitDirectory: GIT_DIRECTORY })).rejects.toThrow(
      /baseCommit must be a full object id/,
    );
    expect(sandbox.commands).toEqual([]);
  });
});

function toolContext(sandbox: FakeSandbox) {
  return { sandbox, signal: new AbortController().signal, toolCallId: "call-1", defaultTimeoutMs: 1000 };
}
