// Skills on the host side: SKILL.md validation, the built-in and user
// directories (symlinks never lead out of a skill's directory), precedence
// and shadowing, the catalog text and the load_skill tool.
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { FakeSandbox } from "../../src/sandbox/fake/fake-sandbox.js";
import {
  BUILTIN_SKILLS_DIRECTORY,
  MAX_SKILL_FILE_BYTES,
  SkillSet,
  loadSkillTool,
  loadSkills,
  parseSkillFile,
  readHostSkills,
  skillCatalog,
  skillCatalogText,
  userSkillsDirectory,
  type Skill,
  type SkillSource,
} from "../../src/skills/index.js";
import type { ToolContext } from "../../src/tools/define-tool.js";

const temporaryDirectories: string[] = [];

afterEach(() => {
  for (const directory of temporaryDirectories.splice(0)) rmSync(directory, { recursive: true, force: true });
});

/** A temporary directory holding `files` (paths relative to it). */
function directoryWith(files: Record<string, string | Buffer>): string {
  const root = mkdtempSync(join(tmpdir(), "agent-runner-skills-"));
  temporaryDirectories.push(root);
  for (const [path, content] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), content);
  }
  return root;
}

function skillMarkdown(name: string, description: string, body = `Do the ${name} thing.`): string {
  return `---\nname: ${name}\ndescription: ${description}\n---\n\n${body}\n`;
}

function parse(text: string, directory = "my-skill") {
  return parseSkillFile(Buffer.from(text), `/skills/${directory}/SKILL.md`, directory);
}

function errorOf(result: ReturnType<typeof parse>): string {
  if (!("error" in result)) throw new Error(`expected an error, got the skill ${result.name}`);
  return result.error;
}

function context(sandbox = new FakeSandbox()): ToolContext {
  return { sandbox, signal: new AbortController().signal, toolCallId: "call-1", defaultTimeoutMs: 1000 };
}

/** A skill as a source would yield it, for precedence tests without any files. */
function fakeSkill(name: string, source: SkillSource, description = `${name} from ${source}`): Skill {
  return {
    name,
    description,
    body: `body of ${name} from ${source}`,
    source,
    location: `/${source}/${name}/SKILL.md`,
    resources: [],
    resourcesOmitted: 0,
    readResource: async () => ({ error: "none" }),
  };
}

describe("SKILL.md front matter", () => {
  it("accepts name, description and a body; collapses the description's whitespace; normalises line ends", () => {
    const parsed = parse("\uFEFF---\r\nname: my-skill\r\ndescription: >\r\n  Runs the\r\n  tests.\r\nlicense: MIT\r\n---\r\n\r\n# Title\r\n\r\nStep one.\r\n");
    expect(parsed).toEqual({ name: "my-skill", description: "Runs the tests.", body: "# Title\n\nStep one." });
  });

  it("refuses a file without front matter, naming the file and showing the expected shape", () => {
    const error = errorOf(parse("# Just markdown\n"));
    expect(error).toMatch(/^\/skills\/my-skill\/SKILL\.md: must start with YAML front matter between two "---" lines/);
    expect(error).toContain("name: my-skill");
  });

  it("names each missing or misspelt key and lists every problem at once", () => {
    const error = errorOf(parse("---\nname: my-skill\ndescripton: typo\n---\nBody\n"));
    expect(error).toContain("/skills/my-skill/SKILL.md:");
    expect(error).toContain('front matter: unknown key "descripton" (allowed: name, description, license, metadata)');
    expect(error).toMatch(/front matter: description: is required/);
  });

  it("refuses names outside [a-z0-9-] and a name that differs from the directory", () => {
    expect(errorOf(parse(skillMarkdown("My_Skill", "x")))).toMatch(/front matter: name: must use only a-z, 0-9 and single hyphens/);
    expect(errorOf(parse(skillMarkdown("-lead", "x")))).toMatch(/name: must use only/);
    expect(errorOf(parse(skillMarkdown("other-name", "x")))).toContain('name "other-name" must equal the skill\'s directory name "my-skill"');
    expect(errorOf(parse(skillMarkdown("a".repeat(65), "x"), "a".repeat(65)))).toMatch(/name: must be at most 64 characters/);
  });

  it("refuses an empty description, a non-string one, and one over 1024 characters", () => {
    expect(errorOf(parse('---\nname: my-skill\ndescription: "  "\n---\nBody\n'))).toMatch(/description: must not be empty/);
    expect(errorOf(parse("---\nname: my-skill\ndescription: [a, b]\n---\nBody\n"))).toMatch(/description: must be a string/);
    expect(errorOf(parse(skillMarkdown("my-skill", "x".repeat(1025))))).toMatch(/description: must be at most 1024 characters/);
  });

  it("explains invalid YAML, with a hint for an unquoted ': '", () => {
    expect(errorOf(parse("---\nname: my-skill\ndescription: Use it: always\n---\nBody\n"))).toMatch(
      /front matter is not valid YAML: .*\(put a value that contains ": " in quotes\)/,
    );
    expect(errorOf(parse("---\n- a\n- b\n---\nBody\n"))).toMatch(/front matter must be a YAML mapping with name and description/);
  });

  it("refuses an empty body, a file over the size cap, and bytes that are not UTF-8", () => {
    expect(errorOf(parse("---\nname: my-skill\ndescription: x\n---\n\n  \n"))).toMatch(/has no instructions after the front matter/);
    expect(errorOf(parse(skillMarkdown("my-skill", "x", "y".repeat(MAX_SKILL_FILE_BYTES))))).toMatch(
      new RegExp(`is \\d+ bytes; a SKILL.md may have at most ${MAX_SKILL_FILE_BYTES}`),
    );
    const latin1 = Buffer.concat([Buffer.from(skillMarkdown("my-skill", "caf")), Buffer.from([0xe9, 0x0a])]);
    expect(parseSkillFile(latin1, "/x/SKILL.md", "my-skill")).toEqual({ error: "/x/SKILL.md: is not UTF-8 text" });
  });
});

describe("host skill directories", () => {
  it("the built-in skills are all valid, with no problems and no shadowing", async () => {
    const set = await loadSkills({ builtinDirectory: BUILTIN_SKILLS_DIRECTORY });
    expect(set.problems).toEqual([]);
    expect(set.skills.map((skill) => [skill.name, skill.source])).toEqual([
      ["resolve-a-merge-conflict", "builtin"],
      ["run-the-tests-first", "builtin"],
      ["write-a-regression-test", "builtin"],
    ]);
    for (const skill of set.skills) expect(Buffer.byteLength(skill.body)).toBeLessThan(8 * 1024);
    expect(set.get("run-the-tests-first")!.resources).toEqual([{ path: "test-commands.md", size: expect.any(Number) }]);
  });

  it("ignores hidden entries, plain files and directories without SKILL.md; reports a bad SKILL.md by its path", async () => {
    const root = directoryWith({
      "good/SKILL.md": skillMarkdown("good", "Good."),
      "good/notes/extra.md": "extra",
      "good/.hidden": "not listed",
      "no-skill-here/README.md": "just a folder",
      ".hidden-skill/SKILL.md": skillMarkdown("hidden-skill", "Hidden."),
      "README.md": "about these skills",
      "Bad_Name/SKILL.md": skillMarkdown("bad-name", "x"),
      "broken/SKILL.md": "---\nname: broken\n---\nBody\n",
    });
    const result = await readHostSkills(root, "user");
    expect(result.skills.map((skill) => skill.name)).toEqual(["good"]);
    expect(result.skills[0]!.resources).toEqual([{ path: "notes/extra.md", size: 5 }]);
    expect(result.skills[0]!.location).toBe(join(root, "good", "SKILL.md"));
    expect(result.problems.map((problem) => problem.message)).toEqual([
      `${join(root, "Bad_Name")}: "Bad_Name" is not a valid skill name (a-z, 0-9 and single hyphens between them, at most 64 characters); rename the directory`,
      `${join(root, "broken", "SKILL.md")}: front matter: description: is required (one paragraph: what the skill does and when to use it)`,
    ]);
  });

  it("a missing default user directory is no skills; a missing RUNNER_SKILLS_DIR is a problem naming it", async () => {
    const absent = join(directoryWith({}), "absent");
    expect(await readHostSkills(absent, "user")).toEqual({ skills: [], problems: [] });
    const explicit = await loadSkills({ builtinDirectory: null, userDirectory: { path: absent, explicit: true } });
    expect(explicit.problems.map((problem) => problem.message)).toEqual([`${absent}: cannot read the skills directory (it does not exist)`]);
  });

  it("userSkillsDirectory: RUNNER_SKILLS_DIR, else RUNNER_HOME/skills", () => {
    expect(userSkillsDirectory({ RUNNER_SKILLS_DIR: "/opt/skills", RUNNER_HOME: "/h" })).toEqual({ path: "/opt/skills", explicit: true });
    expect(userSkillsDirectory({ RUNNER_HOME: "/h" })).toEqual({ path: "/h/skills", explicit: false });
  });

  it("never reads a SKILL.md or a file through a symlink that leaves the skill's directory", async () => {
    const outside = directoryWith({ "secret.txt": "TOP SECRET", "SKILL.md": skillMarkdown("escape", "Planted.") });
    const root = directoryWith({
      "escape/placeholder": "",
      "linked/SKILL.md": skillMarkdown("linked", "Has links."),
      "linked/inside.md": "inside text",
    });
    symlinkSync(join(outside, "SKILL.md"), join(root, "escape", "SKILL.md"));
    symlinkSync(join(outside, "secret.txt"), join(root, "linked", "secret-link.md"));
    symlinkSync(outside, join(root, "linked", "outside-directory"));
    symlinkSync("inside.md", join(root, "linked", "alias.md"));
    symlinkSync("../linked/inside.md", join(root, "linked", "dotdot-alias.md"));

    const result = await readHostSkills(root, "user");
    expect(result.skills.map((skill) => skill.name)).toEqual(["linked"]);
    expect(result.problems).toHaveLength(1);
    expect(result.problems[0]!.message).toBe(
      `${join(root, "escape", "SKILL.md")}: SKILL.md is a symlink that leads outside the skill's directory; it is not read`,
    );
    const linked = result.skills[0]!;
    // Links that stay inside are files of the skill; the ones leading out are not listed.
    expect(linked.resources.map((resource) => resource.path)).toEqual(["alias.md", "dotdot-alias.md", "inside.md"]);

    const tool = loadSkillTool(SkillSet.fromSources([result]));
    expect((await tool.execute({ name: "linked", file: "alias.md" }, context())).content).toBe("[skill file] linked/alias.md\ninside text");
    const refused = await tool.execute({ name: "linked", file: "secret-link.md" }, context());
    expect(refused.content).toMatch(/^Error: skill linked has no file "secret-link.md"/);
    expect(refused.content).not.toContain("TOP SECRET");

    // A listed file swapped for a link to the outside after loading is refused at read time.
    unlinkSync(join(root, "linked", "inside.md"));
    symlinkSync(join(outside, "secret.txt"), join(root, "linked", "inside.md"));
    const swapped = await tool.execute({ name: "linked", file: "inside.md" }, context());
    expect(swapped.content).toBe("Error: cannot read linked/inside.md: inside.md is a symlink that leads outside the skill's directory; it is not read");
  });

  it("a skill directory that is itself a symlink (the user's own arrangement) is used, bounded by its target", async () => {
    const elsewhere = directoryWith({ "shared/SKILL.md": skillMarkdown("shared", "Shared skill."), "shared/ref.md": "ref" });
    const root = directoryWith({});
    symlinkSync(join(elsewhere, "shared"), join(root, "shared"));
    const result = await readHostSkills(root, "user");
    expect(result.problems).toEqual([]);
    expect(result.skills.map((skill) => [skill.name, skill.resources.map((resource) => resource.path)])).toEqual([["shared", ["ref.md"]]]);
  });
});

describe("precedence and shadowing", () => {
  it("built-in beats user beats workspace; the losers are listed as shadowed, never silently dropped", () => {
    const set = SkillSet.fromSources([
      { skills: [fakeSkill("shared", "workspace"), fakeSkill("repo-only", "workspace"), fakeSkill("mine", "workspace")], problems: [] },
      { skills: [fakeSkill("shared", "builtin")], problems: [] },
      { skills: [fakeSkill("shared", "user"), fakeSkill("mine", "user")], problems: [] },
    ]);
    expect(set.skills.map((skill) => [skill.name, skill.source])).toEqual([
      ["mine", "user"],
      ["repo-only", "workspace"],
      ["shared", "builtin"],
    ]);
    expect(set.shadowed).toEqual([
      { name: "shared", source: "user", location: "/user/shared/SKILL.md", shadowedBy: "builtin" },
      { name: "mine", source: "workspace", location: "/workspace/mine/SKILL.md", shadowedBy: "user" },
      { name: "shared", source: "workspace", location: "/workspace/shared/SKILL.md", shadowedBy: "builtin" },
    ]);
  });

  it("from real directories: a user skill named like a built-in one loses to it, and load_skill says so", async () => {
    const user = directoryWith({
      "run-the-tests-first/SKILL.md": skillMarkdown("run-the-tests-first", "My override.", "Never run tests."),
      "my-own/SKILL.md": skillMarkdown("my-own", "Mine."),
    });
    const set = await loadSkills({ userDirectory: { path: user, explicit: true } });
    expect(set.get("run-the-tests-first")!.source).toBe("builtin");
    expect(set.get("my-own")!.source).toBe("user");
    expect(set.shadowed).toEqual([
      { name: "run-the-tests-first", source: "user", location: join(user, "run-the-tests-first", "SKILL.md"), shadowedBy: "builtin" },
    ]);
    const result = await loadSkillTool(set).execute({ name: "run-the-tests-first" }, context());
    expect(result.content).not.toContain("Never run tests.");
    expect(result.content).toContain(
      `Note: the user skills directory also has a skill named run-the-tests-first (${join(user, "run-the-tests-first", "SKILL.md")}); it is not used, the built-in one takes precedence.`,
    );
  });
});

describe("catalog", () => {
  const sources = () => [
    { skills: [fakeSkill("zeta", "workspace", "Last\n  by   name."), fakeSkill("alpha", "workspace", "Repo alpha.")], problems: [] },
    { skills: [fakeSkill("beta", "builtin", "Built in.")], problems: [] },
    { skills: [fakeSkill("alpha", "user", "User alpha."), fakeSkill("mid", "user", "In the middle.")], problems: [] },
  ];

  it("lists name and description only, sorted by name, byte-identical for the same skills in any order", () => {
    const text = skillCatalogText(SkillSet.fromSources(sources()));
    expect(text).toBe(
      [
        "Skills (playbooks for recurring kinds of work): when one fits what you are about to do, call load_skill with its name first and follow it.",
        "- alpha: User alpha.",
        "- beta: Built in.",
        "- mid: In the middle.",
        "- zeta: Last by name.",
      ].join("\n"),
    );
    expect(skillCatalogText(SkillSet.fromSources(sources().reverse()))).toBe(text);
    expect(text).not.toMatch(/workspace|\/user\//);
    expect(skillCatalog(SkillSet.fromSources(sources())).map((entry) => [entry.name, entry.source])).toEqual([
      ["alpha", "user"],
      ["beta", "builtin"],
      ["mid", "user"],
      ["zeta", "workspace"],
    ]);
  });

  it("is empty without skills, and the built-in catalog does not change between loads", async () => {
    expect(skillCatalogText(SkillSet.empty())).toBe("");
    const first = skillCatalogText(await loadSkills());
    expect(skillCatalogText(await loadSkills())).toBe(first);
    expect(
      first
        .split("\n")
        .slice(1)
        .map((line) => line.split(":")[0]),
    ).toEqual(["- resolve-a-merge-conflict", "- run-the-tests-first", "- write-a-regression-test"]);
  });
});

describe("load_skill", () => {
  it("returns [skill] <name>, the body and the list of the skill's other files; the result is not truncated", async () => {
    const body = `# Big\n\n${"Line of instructions.\n".repeat(1400)}End.`;
    const root = directoryWith({
      "big/SKILL.md": skillMarkdown("big", "A big one.", body),
      "big/reference/guide.md": "G".repeat(3000),
      "big/check.sh": "#!/bin/sh\necho ok\n",
    });
    const set = await loadSkills({ builtinDirectory: null, userDirectory: { path: root, explicit: true } });
    const result = await loadSkillTool(set).execute({ name: "big" }, context());
    expect(result.isError).toBeFalsy();
    expect(result.content).toBe(
      [
        `[skill] big\n${body}`,
        'Other files of this skill (read one with load_skill {"name": "big", "file": "<path>"}):\n- check.sh (18 bytes)\n- reference/guide.md (2.9 KiB)',
      ].join("\n\n"),
    );
    expect(result.details).toEqual({ skill: "big", source: "user", location: join(root, "big", "SKILL.md") });
  });

  it("an unknown name is an Error listing the available skills", async () => {
    const set = SkillSet.fromSources([{ skills: [fakeSkill("b-skill", "builtin"), fakeSkill("a-skill", "user")], problems: [] }]);
    const result = await loadSkillTool(set).execute({ name: "c-skill" }, context());
    expect(result).toMatchObject({ isError: true, content: 'Error: no skill named "c-skill". Available skills: a-skill, b-skill.' });
    expect((await loadSkillTool(SkillSet.empty()).execute({ name: "x" }, context())).content).toBe(
      'Error: no skill named "x". No skills are available in this run.',
    );
  });

  it("with file: returns that file as an ordinary result; unknown and binary files are Errors", async () => {
    const root = directoryWith({
      "kit/SKILL.md": skillMarkdown("kit", "A kit."),
      "kit/notes.md": "note text\n",
      "kit/logo.png": Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0x01]),
    });
    const tool = loadSkillTool(await loadSkills({ builtinDirectory: null, userDirectory: { path: root, explicit: true } }));
    const notes = await tool.execute({ name: "kit", file: "notes.md" }, context());
    expect(notes.content).toBe("[skill file] kit/notes.md\nnote text\n");
    expect(notes.content.startsWith("[skill]")).toBe(false);
    expect((await tool.execute({ name: "kit", file: "../kit/notes.md" }, context())).content).toBe(
      'Error: skill kit has no file "../kit/notes.md". Its files: logo.png, notes.md.',
    );
    expect((await tool.execute({ name: "kit", file: "logo.png" }, context())).content).toMatch(/^Error: kit\/logo.png is a binary file \(6 bytes\)/);
  });

  it("names no skill in its description, so the tool list does not depend on the skills", () => {
    const one = loadSkillTool(SkillSet.empty());
    const other = loadSkillTool(SkillSet.fromSources([{ skills: [fakeSkill("zzz-unique", "builtin")], problems: [] }]));
    expect(other.description).toBe(one.description);
    expect(one.description).not.toContain("zzz-unique");
  });
});
