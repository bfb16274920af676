// Path confinement of the file tools, through ToolRegistry against a real
// DockerSandbox: `..`, absolute paths and symlinks that resolve outside
// /workspace are refused, and a write through a hard link or symlink that
// already sits in the workspace never changes a file outside it on the host.
import { chownSync, linkSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Sandbox } from "../../src/sandbox/sandbox.js";
import type { ToolResult } from "../../src/tools/define-tool.js";
import { toolCaller } from "../helpers/tool-caller.js";
import { createSandboxWorkspace, createTestSandbox, requireDocker } from "../helpers/docker.js";
import { temporaryDirectory } from "../helpers/git-repository.js";

const OUTSIDE_CONTENT = "outside secret: do not change\n";

let workspace: ReturnType<typeof createSandboxWorkspace>;
let outside: ReturnType<typeof temporaryDirectory>;
let sandbox: Sandbox;
const call = toolCaller(() => sandbox);

function expectOutsideRefusal(result: ToolResult, path: string): void {
  expect(result.isError, result.content).toBe(true);
  expect(result.content).toMatch(/^Error: /);
  expect(result.content).toContain(`"${path}"`);
  expect(result.content).toMatch(/outside/);
}

/** An outside file, writable by the sandbox user (uid 1000) so that a write that reached it would succeed. */
function outsideFile(name: string): string {
  const path = join(outside.path, name);
  writeFileSync(path, OUTSIDE_CONTENT, { mode: 0o666 });
  chownSync(path, 1000, 1000);
  return path;
}

beforeAll(async () => {
  await requireDocker();
  workspace = createSandboxWorkspace({
    "inside.txt": "inside\n",
    "real.txt": "real content\n",
  });
  // Another temporary directory on the same file system as the workspace.
  outside = temporaryDirectory("agent-runner-test-outside-");
  chownSync(outside.path, 1000, 1000);
  // Pre-existing links, made on the host before the sandbox starts.
  linkSync(outsideFile("hard-write.txt"), join(workspace.path, "hard-write.txt"));
  linkSync(outsideFile("hard-edit.txt"), join(workspace.path, "hard-edit.txt"));
  symlinkSync(outsideFile("sym-write.txt"), join(workspace.path, "sym-write.txt"));
  symlinkSync(outsideFile("sym-edit.txt"), join(workspace.path, "sym-edit.txt"));
  symlinkSync(outside.path, join(workspace.path, "sym-dir"));
  sandbox = await createTestSandbox(workspace.path);
});

afterAll(async () => {
  await sandbox?.close();
  await workspace?.[Symbol.asyncDispose]();
  await outside?.[Symbol.asyncDispose]();
});

describe("path confinement", () => {
  it("refuses ../etc/passwd, /etc/passwd and /workspace/../etc/hosts for read_file and write_file", async () => {
    for (const path of ["../etc/passwd", "/etc/passwd", "/workspace/../etc/hosts"]) {
      expectOutsideRefusal(await call("read_file", { path }), path);
      expectOutsideRefusal(await call("write_file", { path, content: "x" }), path);
      expectOutsideRefusal(await call("edit_file", { path, old_string: "root", new_string: "toor" }), path);
    }
  });

  it("refuses paths through a workspace symlink to /etc (read_file link/passwd, write_file link/x)", async () => {
    const made = await call("run_shell", { command: "ln -s /etc link && readlink link" });
    expect(made.content).toMatch(/^exit_code: 0\nstdout:\n\/etc\n/);
    expectOutsideRefusal(await call("read_file", { path: "link/passwd" }), "link/passwd");
    expectOutsideRefusal(await call("write_file", { path: "link/x", content: "x" }), "link/x");
    expectOutsideRefusal(await call("edit_file", { path: "link/passwd", old_string: "root", new_string: "toor" }), "link/passwd");
    expectOutsideRefusal(await call("list_dir", { path: "link" }), "link");
    const check = await call("run_shell", { command: "test -e /etc/x && echo present || echo absent" });
    expect(check.content).toMatch(/stdout:\nabsent\n/);
  });

  it("refuses list_dir, glob and grep with a path outside the workspace", async () => {
    for (const path of ["..", "/etc", "/workspace/../etc", "link"]) {
      expectOutsideRefusal(await call("list_dir", { path }), path);
      expectOutsideRefusal(await call("glob", { pattern: "*", path }), path);
      expectOutsideRefusal(await call("grep", { pattern: "root", path }), path);
    }
  });

  it("searching the workspace does not follow a symlink out of it", async () => {
    await call("run_shell", { command: "ln -sfn /etc link2" });
    const grep = await call("grep", { pattern: "^root:" });
    expect(grep.isError).toBeFalsy();
    expect(grep.content).toMatch(/^No matches/);
    const glob = await call("glob", { pattern: "**/passwd" });
    expect(glob.isError).toBeFalsy();
    expect(glob.content).toMatch(/^No files match/);
  });

  it("a symlink to another workspace file works for read_file, write_file and edit_file", async () => {
    const made = await call("run_shell", { command: "ln -s real.txt alias.txt && mkdir -p sub && ln -s ../real.txt sub/alias.txt" });
    expect(made.content).toMatch(/^exit_code: 0\n/);
    expect((await call("read_file", { path: "alias.txt" })).content).toMatch(/^\s*1\treal content$/);
    expect((await call("read_file", { path: "sub/alias.txt" })).content).toMatch(/^\s*1\treal content$/);
    const edit = await call("edit_file", { path: "alias.txt", old_string: "real content", new_string: "edited content" });
    expect(edit.isError, edit.content).toBeFalsy();
    expect(readFileSync(join(workspace.path, "real.txt"), "utf8")).toBe("edited content\n");
    const write = await call("write_file", { path: "sub/alias.txt", content: "written through alias\n" });
    expect(write.isError, write.content).toBeFalsy();
    expect(readFileSync(join(workspace.path, "real.txt"), "utf8")).toBe("written through alias\n");
  });
});

describe("writes through pre-existing links never change a host file outside the workspace", () => {
  it("write_file and edit_file on a hard link replace the workspace path only", async () => {
    const hostWrite = join(outside.path, "hard-write.txt");
    const hostEdit = join(outside.path, "hard-edit.txt");
    // Sanity: the links really share the outside inode before the tools run.
    expect(statSync(join(workspace.path, "hard-write.txt")).ino).toBe(statSync(hostWrite).ino);
    expect(statSync(join(workspace.path, "hard-edit.txt")).ino).toBe(statSync(hostEdit).ino);

    const write = await call("write_file", { path: "hard-write.txt", content: "new content\n" });
    const edit = await call("edit_file", { path: "hard-edit.txt", old_string: "do not change", new_string: "CHANGED" });

    expect(readFileSync(hostWrite, "utf8")).toBe(OUTSIDE_CONTENT);
    expect(readFileSync(hostEdit, "utf8")).toBe(OUTSIDE_CONTENT);
    expect(write.isError, write.content).toBeFalsy();
    expect(edit.isError, edit.content).toBeFalsy();
    expect(readFileSync(join(workspace.path, "hard-write.txt"), "utf8")).toBe("new content\n");
    expect(readFileSync(join(workspace.path, "hard-edit.txt"), "utf8")).toBe("outside secret: CHANGED\n");
  });

  it("a symlink to an absolute host path outside the workspace: refused, host file unchanged", async () => {
    const hostWrite = join(outside.path, "sym-write.txt");
    const hostEdit = join(outside.path, "sym-edit.txt");
    const before = readdirSync(outside.path).sort();

    const read = await call("read_file", { path: "sym-write.txt" });
    const write = await call("write_file", { path: "sym-write.txt", content: "new content\n" });
    const edit = await call("edit_file", { path: "sym-edit.txt", old_string: "do not change", new_string: "CHANGED" });
    const writeInDir = await call("write_file", { path: "sym-dir/planted.txt", content: "planted\n" });

    // The invariant: nothing outside the workspace changed on the host.
    expect(readFileSync(hostWrite, "utf8")).toBe(OUTSIDE_CONTENT);
    expect(readFileSync(hostEdit, "utf8")).toBe(OUTSIDE_CONTENT);
    expect(readdirSync(outside.path).sort()).toEqual(before);

    // The contract: every one of these calls is refused with an Error.
    expect(read.content).toMatch(/^Error: /);
    expect(edit.content).toMatch(/^Error: /);
    expect(writeInDir.content).toMatch(/^Error: /);
    expect(write.content).toMatch(/^Error: /);
  });
});
