/**
 * HostDirectorySandboxProvider (issue 11 item 5): sandboxes over a real host
 * directory for the Docker-free run tier. Files are confined as the
 * in-container daemon confines them (tests/integration/tools-paths.test.ts
 * has the Docker side), writes are atomic, read-only workspaces refuse
 * writes, no command ever runs on the host, and ensureWorkspaceIdle answers
 * as the Docker provider does.
 */
import { chmodSync, existsSync, linkSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { text } from "node:stream/consumers";
import { describe, expect, it } from "vitest";
import { SandboxError } from "../../src/errors.js";
import { HostDirectorySandboxProvider, type HostDirectorySandbox } from "../../src/sandbox/fake/host-directory-sandbox.js";
import { NotAFileError, PathOutsideWorkspaceError, type SandboxSpec } from "../../src/sandbox/sandbox.js";
import { temporaryDirectory } from "../helpers/git-repository.js";

function spec(hostPath: string, overrides: Partial<SandboxSpec> = {}): SandboxSpec {
  return {
    runId: "unit",
    agentId: "main",
    image: "agent-runner/sandbox:bookworm",
    workspace: { hostPath },
    readOnlyMounts: [],
    env: {},
    user: { uid: 1000, gid: 1000 },
    network: null,
    limits: { cpus: 1, memoryBytes: 512 * 1024 ** 2, pids: 256, fileSizeBytes: 1024 ** 3 },
    disk: { limitBytes: 1024 ** 3, enforcement: "monitor", scratchDirectory: join(hostPath, "..", "scratch") },
    ...overrides,
  };
}

async function sandboxIn(path: string, provider = new HostDirectorySandboxProvider(), overrides: Partial<SandboxSpec> = {}): Promise<HostDirectorySandbox> {
  return (await provider.create(spec(path, overrides))) as HostDirectorySandbox;
}

describe("HostDirectorySandbox files: the real directory, confined like the daemon", () => {
  it("writes, reads, stats and lists the host directory, answering with /workspace paths", async () => {
    await using workspace = temporaryDirectory();
    const sandbox = await sandboxIn(workspace.path);
    expect(await sandbox.writeFile("src/deep/a.txt", Buffer.from("alpha\n"))).toEqual({ path: "/workspace/src/deep/a.txt", bytesWritten: 6 });
    expect(readFileSync(join(workspace.path, "src/deep/a.txt"), "utf8")).toBe("alpha\n");
    expect(await sandbox.readFile("/workspace/src/deep/a.txt", { maxBytes: 3 })).toEqual({
      path: "/workspace/src/deep/a.txt",
      content: Buffer.from("alp"),
      size: 6,
    });
    expect(await sandbox.readFile("missing.txt")).toBeNull();
    expect(await sandbox.stat("src")).toMatchObject({ path: "/workspace/src", type: "directory" });
    expect(await sandbox.stat("nope/deeper")).toBeNull();
    writeFileSync(join(workspace.path, "b.txt"), "");
    expect(await sandbox.listDir(".")).toEqual([
      { name: "b.txt", type: "file" },
      { name: "src", type: "directory" },
    ]);
    expect(await sandbox.listDir("nope")).toBeNull();
    await expect(sandbox.readFile("src")).rejects.toBeInstanceOf(NotAFileError);
    await expect(sandbox.writeFile("src", Buffer.from("x"))).rejects.toBeInstanceOf(NotAFileError);
  });

  it("a write is a fresh inode keeping the mode: a hard link at the target keeps the old bytes", async () => {
    await using workspace = temporaryDirectory();
    await using elsewhere = temporaryDirectory();
    const sandbox = await sandboxIn(workspace.path);
    writeFileSync(join(elsewhere.path, "outside.txt"), "host file\n");
    linkSync(join(elsewhere.path, "outside.txt"), join(workspace.path, "linked.txt"));
    chmodSync(join(workspace.path, "linked.txt"), 0o755);
    await sandbox.writeFile("linked.txt", Buffer.from("agent bytes\n"));
    expect(readFileSync(join(elsewhere.path, "outside.txt"), "utf8")).toBe("host file\n");
    expect(readFileSync(join(workspace.path, "linked.txt"), "utf8")).toBe("agent bytes\n");
    expect(statSync(join(workspace.path, "linked.txt")).mode & 0o777).toBe(0o755);
  });

  it("refuses paths that leave the workspace: .., absolute paths elsewhere, symlinks out (relative, absolute, dangling)", async () => {
    await using workspace = temporaryDirectory();
    await using elsewhere = temporaryDirectory();
    const sandbox = await sandboxIn(workspace.path);
    writeFileSync(join(elsewhere.path, "secret.txt"), "host secret\n");
    symlinkSync(elsewhere.path, join(workspace.path, "to-host"));
    symlinkSync("../..", join(workspace.path, "up"));
    symlinkSync(join(elsewhere.path, "planted.txt"), join(workspace.path, "dangling-out"));
    for (const path of ["../x", "/etc/passwd", "/tmp/x", "to-host/secret.txt", "up/etc/passwd", "dangling-out"]) {
      await expect(sandbox.readFile(path), path).rejects.toBeInstanceOf(PathOutsideWorkspaceError);
      await expect(sandbox.writeFile(path, Buffer.from("x")), path).rejects.toBeInstanceOf(PathOutsideWorkspaceError);
      await expect(sandbox.stat(path), path).rejects.toBeInstanceOf(PathOutsideWorkspaceError);
    }
    await expect(sandbox.listDir("to-host")).rejects.toBeInstanceOf(PathOutsideWorkspaceError);
    expect(existsSync(join(elsewhere.path, "planted.txt"))).toBe(false);
    expect(readFileSync(join(elsewhere.path, "secret.txt"), "utf8")).toBe("host secret\n");
  });

  it("follows symlinks that stay inside: an absolute target is the container's path, a dangling one is created by a write", async () => {
    await using workspace = temporaryDirectory();
    const sandbox = await sandboxIn(workspace.path);
    mkdirSync(join(workspace.path, "real"));
    writeFileSync(join(workspace.path, "real/file.txt"), "inside\n");
    symlinkSync("/workspace/real", join(workspace.path, "absolute"));
    symlinkSync("real/new.txt", join(workspace.path, "dangling"));
    expect(await sandbox.readFile("absolute/file.txt")).toMatchObject({ path: "/workspace/real/file.txt", content: Buffer.from("inside\n") });
    expect(await sandbox.stat("absolute")).toMatchObject({ path: "/workspace/real", type: "directory" });
    expect(await sandbox.writeFile("dangling", Buffer.from("made\n"))).toMatchObject({ path: "/workspace/real/new.txt" });
    expect(readFileSync(join(workspace.path, "real/new.txt"), "utf8")).toBe("made\n");
    expect(await sandbox.listDir(".")).toContainEqual({ name: "dangling", type: "symlink" });
  });

  it("a read-only workspace refuses writes with EROFS and keeps its files; reads work", async () => {
    await using workspace = temporaryDirectory();
    writeFileSync(join(workspace.path, "kept.txt"), "original\n");
    const sandbox = await sandboxIn(workspace.path, undefined, { workspace: { hostPath: workspace.path, readOnly: true } });
    await expect(sandbox.writeFile("kept.txt", Buffer.from("changed\n"))).rejects.toThrow(/^EROFS: read-only file system/);
    await expect(sandbox.writeFile("new/file.txt", Buffer.from("x"))).rejects.toThrow(/^EROFS/);
    expect(readFileSync(join(workspace.path, "kept.txt"), "utf8")).toBe("original\n");
    expect(existsSync(join(workspace.path, "new"))).toBe(false);
    expect(await sandbox.readFile("kept.txt")).toMatchObject({ content: Buffer.from("original\n") });
  });
});

describe("HostDirectorySandbox commands: answered by the test, never run on the host", () => {
  it("without a handler a command exits 127 and does nothing; every command is recorded with its sandbox", async () => {
    await using workspace = temporaryDirectory();
    const provider = new HostDirectorySandboxProvider();
    const sandbox = await sandboxIn(workspace.path, provider);
    const marker = join(workspace.path, "ran");
    const result = await sandbox.exec({ command: `touch ${marker}` });
    expect(result).toMatchObject({ exitCode: 127, signal: null, timedOut: false });
    expect(result.stderr).toContain("runs no command");
    expect(existsSync(marker)).toBe(false);
    expect(provider.commands).toEqual([{ sandboxId: sandbox.id, agentId: "main", request: { command: `touch ${marker}` } }]);
    expect(provider.created).toEqual([sandbox]);
  });

  it("a handler's answer, with byte counts; a kill by signal, timeout or stopAllProcesses ends a command that never returns", async () => {
    await using workspace = temporaryDirectory();
    const provider = new HostDirectorySandboxProvider({
      exec: ({ request, sandbox }) =>
        request.command === "hang" ? new Promise(() => undefined) : sandbox.readFile("f.txt").then((file) => ({ stdout: `${file?.content}é` })),
    });
    const sandbox = await sandboxIn(workspace.path, provider);
    writeFileSync(join(workspace.path, "f.txt"), "content ");
    expect(await sandbox.exec({ command: "cat f.txt" })).toMatchObject({ exitCode: 0, stdout: "content é", stdoutBytes: 10, stderr: "" });

    const aborting = new AbortController();
    const aborted = sandbox.exec({ command: "hang", signal: aborting.signal });
    aborting.abort();
    expect(await aborted).toMatchObject({ exitCode: null, signal: "SIGKILL", timedOut: false });
    expect(await sandbox.exec({ command: "never started", signal: aborting.signal })).toMatchObject({ exitCode: null, signal: "SIGKILL" });
    expect(provider.commands.map((command) => command.request.command)).toEqual(["cat f.txt", "hang"]);
    expect(await sandbox.exec({ command: "hang", timeoutMs: 20 })).toMatchObject({ exitCode: null, signal: "SIGKILL", timedOut: true });
    const stopped = sandbox.exec({ command: "hang" });
    await sandbox.stopAllProcesses();
    expect(await stopped).toMatchObject({ signal: "SIGKILL" });
    // Still usable after stopAllProcesses; not after close.
    expect(await sandbox.exec({ command: "cat f.txt" })).toMatchObject({ exitCode: 0 });
    const closing = sandbox.exec({ command: "hang" });
    await sandbox.close();
    expect(await closing).toMatchObject({ signal: "SIGKILL" });
    await expect(sandbox.exec({ command: "cat f.txt" })).rejects.toBeInstanceOf(SandboxError);
    await expect(sandbox.readFile("f.txt")).rejects.toBeInstanceOf(SandboxError);
  });

  it("spawn runs the test's in-process program; an unknown one exits 127 as in the real sandbox", async () => {
    await using workspace = temporaryDirectory();
    const provider = new HostDirectorySandboxProvider({ programs: { greeter: (io) => (io.stdout.write("hello\n"), io.exit(0)) } });
    const sandbox = await sandboxIn(workspace.path, provider);
    const greeter = await sandbox.spawn({ command: "greeter" });
    expect(await text(greeter.stdout)).toBe("hello\n");
    expect(await greeter.exited).toEqual({ exitCode: 0, signal: null });
    expect(await (await sandbox.spawn({ command: "missing" })).exited).toEqual({ exitCode: 127, signal: null });
  });

  it("refuses a sandbox as uid 0 or on a workspace that is not a directory (SandboxError)", async () => {
    await using workspace = temporaryDirectory();
    const provider = new HostDirectorySandboxProvider();
    await expect(provider.create(spec(workspace.path, { user: { uid: 0, gid: 0 } }))).rejects.toBeInstanceOf(SandboxError);
    await expect(provider.create(spec(join(workspace.path, "missing")))).rejects.toBeInstanceOf(SandboxError);
    expect(provider.created).toEqual([]);
  });
});

describe("HostDirectorySandboxProvider.ensureWorkspaceIdle", () => {
  it("busy while a writable sandbox on the path is open (not while frozen, nor for a read-only one); idle once closed", async () => {
    await using workspace = temporaryDirectory();
    await using other = temporaryDirectory();
    const provider = new HostDirectorySandboxProvider();
    await sandboxIn(workspace.path, provider, { agentId: "e1", workspace: { hostPath: workspace.path, readOnly: true } });
    await provider.ensureWorkspaceIdle(workspace.path);
    const writer = await sandboxIn(workspace.path, provider);
    await expect(provider.ensureWorkspaceIdle(workspace.path)).rejects.toThrow(
      new SandboxError(
        `sandbox ${writer.id} (running) still mounts ${workspace.path} writable; host git does not read a worktree while the agent's processes can run`,
        { reason: "sandbox_not_idle" },
      ),
    );
    await provider.ensureWorkspaceIdle(other.path);
    expect(await writer.freeze(() => provider.ensureWorkspaceIdle(workspace.path).then(() => "idle while frozen"))).toBe("idle while frozen");
    await expect(provider.ensureWorkspaceIdle(workspace.path)).rejects.toBeInstanceOf(SandboxError);
    await writer.close();
    await provider.ensureWorkspaceIdle(workspace.path);
  });

  it("a sandbox that lingers after close (lingerAfterClose) keeps its workspace busy until release()", async () => {
    await using workspace = temporaryDirectory();
    const provider = new HostDirectorySandboxProvider({ lingerAfterClose: (made) => made.agentId === "w1" });
    const lingering = await sandboxIn(workspace.path, provider, { agentId: "w1" });
    await lingering.close();
    await expect(provider.ensureWorkspaceIdle(workspace.path)).rejects.toThrow(`sandbox ${lingering.id} (not removed) still mounts`);
    provider.release();
    await provider.ensureWorkspaceIdle(workspace.path);
  });
});
