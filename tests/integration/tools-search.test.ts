// list_dir / glob / grep semantics through ToolRegistry against a real DockerSandbox.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Sandbox } from "../../src/sandbox/sandbox.js";
import { toolCaller } from "../helpers/tool-caller.js";
import { createSandboxWorkspace, createTestSandbox, requireDocker } from "../helpers/docker.js";

let workspace: ReturnType<typeof createSandboxWorkspace>;
let sandbox: Sandbox;
const call = toolCaller(() => sandbox);

async function shell(command: string): Promise<void> {
  const result = await call("run_shell", { command });
  expect(result.content, command).toMatch(/^exit_code: 0\n/);
}

beforeAll(async () => {
  await requireDocker();
  workspace = createSandboxWorkspace({
    "ls/a.txt": "a\n",
    "ls/sub/inner.txt": "inner\n",
    "g/old.txt": "old\n",
    "g/mid.txt": "mid\n",
    "g/new.txt": "new\n",
    "g/notes.md": "notes\n",
    "g/deep/older.txt": "older\n",
    "h/elsewhere.txt": "elsewhere\n",
    "gr/a.py": "import os\n\ndef foo():\n    return 1\n",
    "gr/b.txt": "nothing here\ndef foo in text\n",
    "gr/sub/c.py": "x = 1\n# def foo later\n",
    "ig/.gitignore": "build/\n*.log\n!keep.log\n",
    "ig/.git/HEAD": "ref: refs/heads/main\nmarker\n",
    "ig/src/app.py": "marker\n",
    "ig/.config/settings.py": "marker\n",
    "ig/build/out.py": "marker\n",
    "ig/debug.log": "marker\n",
    "ig/keep.log": "marker\n",
    "ig/src/.gitignore": "generated.py\n",
    "ig/src/generated.py": "marker\n",
    "many/rows.txt": "row\n".repeat(400),
  });
  sandbox = await createTestSandbox(workspace.path);
});

afterAll(async () => {
  await sandbox?.close();
  await workspace?.[Symbol.asyncDispose]();
});

describe("list_dir", () => {
  it("lists entries sorted, directories suffixed with '/'", async () => {
    await shell("mkdir -p ls/empty && ln -s a.txt ls/alias");
    const result = await call("list_dir", { path: "ls" });
    expect(result.isError).toBeFalsy();
    expect(result.content.split("\n")).toEqual(["a.txt", "alias@", "empty/", "sub/"]);
    const empty = await call("list_dir", { path: "ls/empty" });
    expect(empty.isError).toBeFalsy();
    expect(empty.content).toMatch(/empty/);
    const missing = await call("list_dir", { path: "ls/nope" });
    expect(missing.content).toMatch(/^Error: .*ls\/nope/);
    const file = await call("list_dir", { path: "ls/a.txt" });
    expect(file.content).toMatch(/^Error: .*ls\/a\.txt.*not a directory/);
  });
});

describe("glob", () => {
  it("returns matches newest first and respects the path argument", async () => {
    await shell(
      "touch -d '2020-01-01 00:00:00' g/deep/older.txt && touch -d '2021-01-01 00:00:00' g/old.txt && " +
        "touch -d '2022-01-01 00:00:00' g/mid.txt && touch -d '2023-01-01 00:00:00' g/new.txt && " +
        "touch -d '2024-01-01 00:00:00' h/elsewhere.txt",
    );
    const underG = await call("glob", { pattern: "**/*.txt", path: "g" });
    expect(underG.isError).toBeFalsy();
    const rows = underG.content.split("\n");
    expect(rows.map((row) => row.replace(/^(\/workspace\/)?(g\/)?/, ""))).toEqual(["new.txt", "mid.txt", "old.txt", "deep/older.txt"]);
    expect(underG.content).not.toMatch(/elsewhere|notes\.md/);

    const everywhere = await call("glob", { pattern: "**/*.txt" });
    const all = everywhere.content.split("\n");
    // Without a path the whole workspace is searched: h/ is included, and mtime order holds across directories.
    const order = ["h/elsewhere.txt", "g/new.txt", "g/mid.txt", "g/old.txt", "g/deep/older.txt"].map((path) =>
      all.findIndex((row) => row === path || row.endsWith(`/${path}`)),
    );
    expect(
      order.every((index) => index >= 0),
      everywhere.content,
    ).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);

    const none = await call("glob", { pattern: "*.rs", path: "g" });
    expect(none.isError).toBeFalsy();
    expect(none.content).toMatch(/^No files match/);
  });

  it("paths it returns for a path argument can be passed to read_file", async () => {
    const result = await call("glob", { pattern: "*.md", path: "g" });
    expect(result.isError).toBeFalsy();
    const [first] = result.content.split("\n");
    const read = await call("read_file", { path: first });
    expect(read.content, `glob returned ${JSON.stringify(first)}`).toMatch(/^\s*1\tnotes$/);
  });
});

describe("grep", () => {
  it("returns file:line:text rows, honours the glob filter and reports no matches", async () => {
    const all = await call("grep", { pattern: "def foo", path: "gr" });
    expect(all.isError).toBeFalsy();
    expect(all.content.split("\n").sort()).toEqual(["gr/a.py:3:def foo():", "gr/b.txt:2:def foo in text", "gr/sub/c.py:2:# def foo later"]);

    const python = await call("grep", { pattern: "^def \\w+\\(\\)", path: "gr", glob: "*.py" });
    expect(python.isError).toBeFalsy();
    expect(python.content).toBe("gr/a.py:3:def foo():");

    const fromRoot = await call("grep", { pattern: "return 1" });
    expect(fromRoot.content).toMatch(/^(\.\/)?gr\/a\.py:4: {4}return 1$/);

    const none = await call("grep", { pattern: "no_such_identifier_anywhere", path: "gr" });
    expect(none.isError).toBeFalsy();
    expect(none.content).toMatch(/^No matches/);
  });

  it("rows name the file even when path is a single file", async () => {
    const result = await call("grep", { pattern: "def foo", path: "gr/a.py" });
    expect(result.isError).toBeFalsy();
    expect(result.content).toBe("gr/a.py:3:def foo():");
  });

  it("an invalid regex comes back as an Error", async () => {
    const result = await call("grep", { pattern: "foo(", path: "gr" });
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(/^Error: /);
    expect(result.content).toMatch(/regex|parse/i);
  });

  it("a missing path is an Error", async () => {
    const result = await call("grep", { pattern: "x", path: "gr/nope" });
    expect(result.content).toMatch(/^Error: .*gr\/nope/);
  });
});

describe("grep and glob walk the tree as ripgrep does (in an image without rg, the sandbox helper answers)", () => {
  it("inside a git repository: .gitignore files (nested, with !negation) are respected, .git is skipped, hidden files are searched", async () => {
    const found = await call("grep", { pattern: "marker", path: "ig" });
    expect(found.isError).toBeFalsy();
    expect(found.content.split("\n").sort()).toEqual(["ig/.config/settings.py:1:marker", "ig/keep.log:1:marker", "ig/src/app.py:1:marker"]);
    // glob's pattern is rg's --glob, which overrides .gitignore for the files it matches, not for ignored directories.
    const files = await call("glob", { pattern: "**/*.py", path: "ig" });
    expect(files.content.split("\n").sort()).toEqual(["ig/.config/settings.py", "ig/src/app.py", "ig/src/generated.py"]);
  });

  it("a --glob match overrides .gitignore, as rg's does", async () => {
    const found = await call("grep", { pattern: "marker", path: "ig", glob: "*.log" });
    expect(found.content.split("\n").sort()).toEqual(["ig/debug.log:1:marker", "ig/keep.log:1:marker"]);
  });

  it("stops at 300 rows and says there are more", async () => {
    const found = await call("grep", { pattern: "row", path: "many" });
    const rows = found.content.split("\n");
    expect(rows).toHaveLength(301);
    expect(rows.at(-1)).toMatch(/more matches/);
  });
});
