// How ToolRegistry answers calls it cannot run (unknown tool, malformed JSON,
// schema-invalid arguments), with the real workspace tools on a real DockerSandbox:
// every one is an `Error:` result naming the problem, and nothing is executed.
import { existsSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Sandbox } from "../../src/sandbox/sandbox.js";
import type { ToolResult } from "../../src/tools/define-tool.js";
import { workspaceTools } from "../../src/tools/builtin/index.js";
import { ToolRegistry } from "../../src/tools/tool-registry.js";
import { toolCaller } from "../helpers/tool-caller.js";
import { createSandboxWorkspace, createTestSandbox, requireDocker } from "../helpers/docker.js";

const TOOL_NAMES = ["read_file", "write_file", "edit_file", "list_dir", "glob", "grep", "run_shell"];

let workspace: ReturnType<typeof createSandboxWorkspace>;
let sandbox: Sandbox;
const registry = new ToolRegistry(workspaceTools());
// A string goes to the registry verbatim, so this sends raw argument text.
const callRaw = toolCaller(() => sandbox);

function expectError(result: ToolResult): void {
  expect(result.isError, result.content).toBe(true);
  expect(result.content).toMatch(/^Error: /);
}

beforeAll(async () => {
  await requireDocker();
  workspace = createSandboxWorkspace({ "a.txt": "a\n" });
  sandbox = await createTestSandbox(workspace.path);
});

afterAll(async () => {
  await sandbox?.close();
  await workspace?.[Symbol.asyncDispose]();
});

describe("ToolRegistry argument handling with the workspace tools", () => {
  it("exposes exactly the DESIGN.md workspace tools, in order, with JSON schemas", () => {
    expect(registry.names()).toEqual(TOOL_NAMES);
    const definitions = registry.definitions();
    expect(definitions.map((definition) => definition.function.name)).toEqual(TOOL_NAMES);
    const editSchema = definitions.find((definition) => definition.function.name === "edit_file")!.function.parameters as {
      required?: string[];
      properties: Record<string, unknown>;
    };
    expect(Object.keys(editSchema.properties).sort()).toEqual(["new_string", "old_string", "path", "replace_all"]);
    expect([...(editSchema.required ?? [])].sort()).toEqual(["new_string", "old_string", "path"]);
  });

  it("an unknown tool is an Error that names it and lists the valid tools", async () => {
    const result = await callRaw("delete_everything", JSON.stringify({ path: "a.txt" }));
    expectError(result);
    expect(result.content).toContain("delete_everything");
    for (const name of TOOL_NAMES) expect(result.content).toContain(name);
  });

  it("malformed JSON arguments are an Error that says so and runs nothing", async () => {
    const result = await callRaw("write_file", '{"path": "from-bad-json.txt", "content": "x"');
    expectError(result);
    expect(result.content).toMatch(/not valid JSON/);
    expect(result.content).toContain("write_file");
    expect(existsSync(join(workspace.path, "from-bad-json.txt"))).toBe(false);

    const notAnObject = await callRaw("read_file", "[1, 2]");
    expectError(notAnObject);
    const nullArguments = await callRaw("read_file", "null");
    expectError(nullArguments);
  });

  it("schema-invalid arguments are an Error naming the field, and nothing runs", async () => {
    const wrongType = await callRaw("read_file", JSON.stringify({ path: 5 }));
    expectError(wrongType);
    expect(wrongType.content).toMatch(/invalid arguments for read_file/);
    expect(wrongType.content).toMatch(/\bpath\b.*(string|number)/);

    const missing = await callRaw("write_file", JSON.stringify({ path: "no-content.txt" }));
    expectError(missing);
    expect(missing.content).toMatch(/\bcontent\b/);
    expect(existsSync(join(workspace.path, "no-content.txt"))).toBe(false);

    const unknownField = await callRaw("run_shell", JSON.stringify({ command: "touch ran.txt", cwd: "/" }));
    expectError(unknownField);
    expect(unknownField.content).toMatch(/cwd/);
    expect(existsSync(join(workspace.path, "ran.txt"))).toBe(false);

    const badNumber = await callRaw("read_file", JSON.stringify({ path: "a.txt", offset: 0 }));
    expectError(badNumber);
    expect(badNumber.content).toMatch(/\boffset\b/);

    const badTimeout = await callRaw("run_shell", JSON.stringify({ command: "touch ran2.txt", timeout_ms: "soon" }));
    expectError(badTimeout);
    expect(badTimeout.content).toMatch(/\btimeout_ms\b/);
    expect(existsSync(join(workspace.path, "ran2.txt"))).toBe(false);
  });

  it("after all those errors the same registry and sandbox still work", async () => {
    const result = await callRaw("read_file", JSON.stringify({ path: "a.txt" }));
    expect(result.isError).toBeFalsy();
    expect(result.content).toMatch(/^\s*1\ta$/);
  });
});
