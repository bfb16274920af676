import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connectMcpServers, mcpServersSchema, type McpServers } from "../../src/mcp/index.js";
import type { Sandbox } from "../../src/sandbox/sandbox.js";
import type { Tool } from "../../src/tools/define-tool.js";
import { createSandboxWorkspace, createTestSandbox, requireDocker } from "../helpers/docker.js";

/**
 * The MCP servers from npm preinstalled in the sandbox image
 * (sandbox-images/mcp-servers), run inside a sandbox with no network at all.
 */

// A 1x1 PNG.
const PNG = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==", "base64");

describe("MCP servers from npm in the sandbox (network none)", () => {
  let workspace: ReturnType<typeof createSandboxWorkspace>;
  let sandbox: Sandbox;
  let mcp: McpServers;
  const call = async (name: string, args: Record<string, unknown> = {}) => {
    const tool = mcp.tools.find((candidate) => candidate.name === name) as Tool | undefined;
    if (!tool) throw new Error(`no tool ${name} among ${mcp.tools.map((candidate) => candidate.name).join(", ")}`);
    return tool.execute(args, { sandbox, signal: new AbortController().signal, toolCallId: "t", defaultTimeoutMs: 10_000 });
  };

  beforeAll(async () => {
    await requireDocker();
    workspace = createSandboxWorkspace({ "notes.txt": "hello from the workspace\n", "src/app.md": "# App\n", "src/data.txt": "x\n", "logo.png": PNG });
    sandbox = await createTestSandbox(workspace.path);
    // A symlink out of the workspace, made inside the sandbox.
    await sandbox.exec({ command: "ln -s /etc etc-link" });
    mcp = await connectMcpServers(
      mcpServersSchema.parse({
        files: { command: "mcp-server-filesystem", args: ["/workspace"] },
        everything: { command: "mcp-server-everything", env: { EVERYTHING_TEST_MARK: "mark-42" } },
      }),
      { sandbox },
    );
  });

  afterAll(async () => {
    await mcp?.close();
    await sandbox?.close();
    await workspace?.[Symbol.asyncDispose]();
  });

  it("runs in a sandbox that has no network interface but loopback", async () => {
    expect((await sandbox.exec({ command: "ls /sys/class/net" })).stdout.trim()).toBe("lo");
    expect(mcp.status().map((status) => [status.name, status.state, status.transport])).toEqual([
      ["files", "connected", "sandbox"],
      ["everything", "connected", "sandbox"],
    ]);
    expect(mcp.tools.map((tool) => tool.name)).toEqual(
      expect.arrayContaining([
        "mcp__files__read_text_file",
        "mcp__files__list_directory",
        "mcp__everything__echo",
        "mcp__everything__get-sum",
        "mcp__everything__get-tiny-image",
      ]),
    );
    expect(mcp.tools.find((tool) => tool.name === "mcp__files__read_text_file")).toMatchObject({ readOnly: true });
    expect(mcp.tools.find((tool) => tool.name === "mcp__files__write_file")).toMatchObject({ readOnly: false });
  });

  it("server-filesystem lists and reads workspace files", async () => {
    const listing = await call("mcp__files__list_directory", { path: "/workspace" });
    expect(listing.isError).toBeUndefined();
    expect(listing.content.split("\n")).toEqual(expect.arrayContaining(["[FILE] notes.txt", "[DIR] src", "[FILE] logo.png"]));
    const read = await call("mcp__files__read_text_file", { path: "/workspace/notes.txt" });
    expect(read.content).toBe("hello from the workspace\n");
    const relative = await call("mcp__files__read_text_file", { path: "src/app.md" });
    expect(relative.content).toBe("# App\n");
  });

  it("server-filesystem refuses paths outside /workspace, through .. and through a symlink", async () => {
    for (const path of ["/etc/passwd", "/workspace/../etc/passwd", "/workspace/etc-link/passwd"]) {
      const result = await call("mcp__files__read_text_file", { path });
      expect(result.isError, path).toBe(true);
      expect(result.content, path).toMatch(/^Error: Access denied - .*outside allowed directories/);
      expect(result.content, path).not.toContain("root:x:0:0");
    }
  });

  it("server-filesystem writes as the sandbox user, searches with globs, diffs an edit (its dependencies run on node 18)", async () => {
    const written = await call("mcp__files__write_file", { path: "/workspace/out.txt", content: "written by MCP\n" });
    expect(written.content).toMatch(/Successfully wrote to \/workspace\/out\.txt/);
    expect((await sandbox.exec({ command: "stat -c '%u %s' out.txt" })).stdout.trim()).toBe("1000 15");
    expect((await sandbox.readFile("out.txt"))?.content.toString()).toBe("written by MCP\n");
    const found = await call("mcp__files__search_files", { path: "/workspace", pattern: "**/*.{md,txt}" });
    expect(found.content.split("\n").sort()).toEqual(["/workspace/notes.txt", "/workspace/out.txt", "/workspace/src/app.md", "/workspace/src/data.txt"]);
    const tree = await call("mcp__files__directory_tree", { path: "/workspace/src", excludePatterns: ["*.txt"] });
    expect(JSON.parse(tree.content)).toEqual([{ name: "app.md", type: "file" }]);
    const diff = await call("mcp__files__edit_file", { path: "/workspace/notes.txt", edits: [{ oldText: "hello", newText: "goodbye" }], dryRun: true });
    expect(diff.content).toContain("-hello from the workspace");
    expect(diff.content).toContain("+goodbye from the workspace");
    expect((await sandbox.readFile("notes.txt"))?.content.toString()).toBe("hello from the workspace\n");
  });

  it("server-filesystem's image result becomes a placeholder, never base64", async () => {
    const image = await call("mcp__files__read_media_file", { path: "/workspace/logo.png" });
    expect(image.content).toBe(`[image: image/png, ${PNG.length} bytes; not shown]`);
  });

  it("server-everything: echo, get-sum, an image, a structured result, resource links", async () => {
    expect((await call("mcp__everything__echo", { message: "hi there" })).content).toBe("Echo: hi there");
    expect((await call("mcp__everything__get-sum", { a: 2, b: 3 })).content).toMatch(/\b5\b/);
    const image = await call("mcp__everything__get-tiny-image");
    expect(image.content).toMatch(/\[image: image\/png, [\d.]+ (bytes|KiB); not shown\]/);
    expect(image.content.length).toBeLessThan(500);
    const structured = await call("mcp__everything__get-structured-content", { location: "Chicago" });
    expect(structured.isError).toBeUndefined();
    expect(structured.content).toMatch(/temperature/);
    const links = await call("mcp__everything__get-resource-links", { count: 2 });
    expect(links.content).toMatch(/\[resource link: .* <[a-z]+:\/\/[^>]+>/);
  });

  it("server-everything: invalid arguments come back as an Error: result", async () => {
    const result = await call("mcp__everything__echo", {});
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(/^Error: .*message/i);
    const sum = await call("mcp__everything__get-sum", { a: "two", b: 3 });
    expect(sum.isError).toBe(true);
  });

  it("server-everything sees the sandbox's environment plus its own env, not the daemon's", async () => {
    const result = await call("mcp__everything__get-env");
    const environment = JSON.parse(result.content) as Record<string, string>;
    expect(environment.EVERYTHING_TEST_MARK).toBe("mark-42");
    expect(environment.HOME).toBe("/tmp");
    expect(environment.PWD ?? "/workspace").toBe("/workspace");
    expect(environment).not.toHaveProperty("RUNNER_INLINE_SCRIPT");
    expect(environment.RUNNER_EXEC_ID).toMatch(/^spawn-/);
  });
});

describe("MCP call timeout against server-everything", () => {
  it("cancels a call that runs too long with an Error: result; the server keeps serving", async () => {
    await requireDocker();
    await using workspace = createSandboxWorkspace();
    await using sandbox = await createTestSandbox(workspace.path);
    await using mcp = await connectMcpServers(mcpServersSchema.parse({ everything: { command: "mcp-server-everything", timeout_ms: 1500 } }), { sandbox });
    const context = { sandbox, signal: new AbortController().signal, toolCallId: "t", defaultTimeoutMs: 10_000 };
    const slow = mcp.tools.find((tool) => tool.name === "mcp__everything__trigger-long-running-operation")!;
    const started = Date.now();
    const result = await slow.execute({ duration: 20, steps: 4 }, context);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(result).toMatchObject({
      isError: true,
      content: 'Error: MCP tool "trigger-long-running-operation" of server everything did not answer within 1500 ms; the call was cancelled',
    });
    const echo = mcp.tools.find((tool) => tool.name === "mcp__everything__echo")!;
    expect((await echo.execute({ message: "still here" }, context)).content).toBe("Echo: still here");
  });
});
