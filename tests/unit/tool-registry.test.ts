import { describe, expect, it } from "vitest";
import { FakeSandbox } from "../../src/sandbox/fake/fake-sandbox.js";
import { workspaceTools } from "../../src/tools/builtin/index.js";
import { capText, ToolRegistry } from "../../src/tools/tool-registry.js";

const context = (sandbox: FakeSandbox) => ({ sandbox, signal: new AbortController().signal, toolCallId: "t", defaultTimeoutMs: 1000 });

describe("ToolRegistry", () => {
  it("describes the DESIGN.md tools with JSON Schemas in a stable order", () => {
    const definitions = new ToolRegistry(workspaceTools()).definitions();
    expect(definitions.map((definition) => definition.function.name)).toEqual([
      "read_file",
      "write_file",
      "edit_file",
      "list_dir",
      "glob",
      "grep",
      "run_shell",
    ]);
    const edit = definitions.find((definition) => definition.function.name === "edit_file")!.function.parameters;
    expect(edit).toMatchObject({ type: "object", required: ["path", "old_string", "new_string"], additionalProperties: false });
    expect(Object.keys(edit.properties as object)).toEqual(["path", "old_string", "new_string", "replace_all"]);
    expect(JSON.stringify(definitions)).toBe(JSON.stringify(new ToolRegistry(workspaceTools()).definitions()));
  });

  it("turns a path outside the workspace into an Error result", async () => {
    const registry = new ToolRegistry(workspaceTools());
    const result = await registry.execute("read_file", JSON.stringify({ path: "../etc/passwd" }), context(new FakeSandbox()));
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(/^Error: path "\.\.\/etc\/passwd" resolves to "\/etc\/passwd", outside the workspace/);
  });

  it("edit_file refuses 0 and several matches, naming the count and lines, and leaves the file alone", async () => {
    const sandbox = new FakeSandbox({ "a.txt": "x = 1\ny = 2\nx = 1\n" });
    const registry = new ToolRegistry(workspaceTools());
    const many = await registry.execute("edit_file", JSON.stringify({ path: "a.txt", old_string: "x = 1", new_string: "x = 3" }), context(sandbox));
    expect(many.content).toMatch(/^Error: old_string matches 2 times in a\.txt \(lines 1, 3\)/);
    const none = await registry.execute("edit_file", JSON.stringify({ path: "a.txt", old_string: "z", new_string: "q" }), context(sandbox));
    expect(none.content).toMatch(/^Error: old_string not found in a\.txt \(0 matches\)/);
    expect(sandbox.files.get("/workspace/a.txt")?.toString()).toBe("x = 1\ny = 2\nx = 1\n");
    const all = await registry.execute(
      "edit_file",
      JSON.stringify({ path: "a.txt", old_string: "x = 1", new_string: "$& $1 $$", replace_all: true }),
      context(sandbox),
    );
    expect(all.isError).toBeUndefined();
    expect(sandbox.files.get("/workspace/a.txt")?.toString()).toBe("$& $1 $$\ny = 2\n$& $1 $$\n");
  });

  it("caps long results keeping head and tail with the omitted size", () => {
    const text = `${"a".repeat(100)}${"b".repeat(100)}`;
    expect(capText(text, 50)).toBe(`${"a".repeat(25)}\n[... 150 characters omitted ...]\n${"b".repeat(25)}`);
    expect(capText("short", 50)).toBe("short");
  });
});

describe("terminal output", () => {
  it("neutralises escape sequences and NUL from model or repository text", async () => {
    const { oneLine } = await import("../../src/terminal-text.js");
    expect(oneLine("ok\u001b[1A\u001b[Kstatus: succeeded\u0000\u009b", 200)).toBe("ok\\x1b[1A\\x1b[Kstatus: succeeded\\x00\\x9b");
    expect(oneLine("a\n\tb", 200)).toBe("a b");
  });
});
