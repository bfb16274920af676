// Issue 14 items 1 and 5: the in-container side depends on nothing in the
// image. The static helper runs the tools in a glibc image without Node, a
// `FROM scratch` image with only a static busybox (no libc, no bash), an
// image with nothing at all (no shell), and a user's image with its own USER,
// ENTRYPOINT, CMD and WORKDIR; the egress proxy works whatever the task image
// is, and an MCP server started with npx in an image without Node says what is
// missing. Images are built offline here (tests/helpers/test-images.ts).
import { lstatSync, mkdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DockerSandboxProvider, PROXY_IMAGE } from "../../src/sandbox/docker/docker-sandbox-provider.js";
import { PathOutsideWorkspaceError, type NetworkEvent, type Sandbox } from "../../src/sandbox/sandbox.js";
import { allowRules, createSandboxWorkspace, requireDocker, testSandboxSpec } from "../helpers/docker.js";
import { BASE_IMAGE, BUSYBOX_IMAGE, EMPTY_IMAGE, USER_ENTRYPOINT_IMAGE, ensureTestImage } from "../helpers/test-images.js";
import { toolCaller } from "../helpers/tool-caller.js";

/** The helper's pid and every one of its threads' `Uid:`/`Gid:`/`CapEff:` lines (proc(5) status: real, effective, saved, fs). */
const HELPER_THREADS =
  "for p in /proc/[0-9]*; do case \"$(tr '\\0' ' ' < $p/cmdline 2>/dev/null)\" in /run/agent-runner/agent-runner-sandboxd*) h=${p#/proc/};; esac; done; " +
  'for t in /proc/$h/task/*; do grep -E "^(Uid|Gid|CapEff):" $t/status | tr "\\t" " " | tr -s " "; done';

/** What every image must do: commands in the workspace as the sandbox user, a timeout that kills the tree with the output so far, capped output. */
async function expectCommandSemantics(sandbox: Sandbox, uid: number, workdir: string): Promise<void> {
  const who = await sandbox.exec({ command: "pwd; id -u; echo out; echo err >&2; exit 3" });
  expect(who).toMatchObject({ exitCode: 3, stdout: `${workdir}\n${uid}\nout\n`, stderr: "err\n", timedOut: false });

  const started = Date.now();
  const timedOut = await sandbox.exec({ command: "echo before; (sleep 300; echo never) & sleep 300", timeoutMs: 500 });
  expect(timedOut).toMatchObject({ timedOut: true, stdout: "before\n" });
  expect(Date.now() - started).toBeLessThan(10_000);
  const left = await sandbox.exec({ command: "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' '" });
  expect(left.stdout).toContain("/proc/");
  expect(left.stdout).not.toContain("sleep 300");

  const capped = await sandbox.exec({ command: "i=0; while [ $i -lt 3000 ]; do echo line-$i; i=$((i+1)); done", maxOutputBytes: 1000 });
  expect(capped.truncated).toBe(true);
  expect(capped.stdout.startsWith("line-0\nline-1\n")).toBe(true);
  expect(capped.stdout.endsWith("line-2999\n")).toBe(true);
  expect(capped.stdout).toMatch(/\n\[\.\.\. \d+ bytes omitted \.\.\.\]\n/);
}

/** File tools with confinement after resolving links inside the container, atomic writes that never write through links. */
async function expectFileSemantics(sandbox: Sandbox, hostWorkspace: string, uid: number, workdir: string): Promise<void> {
  const written = await sandbox.writeFile("dir/new.txt", Buffer.from("hello\n"));
  expect(written).toEqual({ path: `${workdir}/dir/new.txt`, bytesWritten: 6 });
  expect(lstatSync(join(hostWorkspace, "dir/new.txt")).uid).toBe(uid);
  expect(lstatSync(join(hostWorkspace, "dir")).uid).toBe(uid);
  expect((await sandbox.readFile("dir/new.txt"))!.content.toString()).toBe("hello\n");
  expect(await sandbox.listDir("dir")).toEqual([{ name: "new.txt", type: "file" }]);
  expect(await sandbox.stat("dir")).toMatchObject({ path: `${workdir}/dir`, type: "directory" });
  expect(await sandbox.readFile("missing.txt")).toBeNull();
  await expect(sandbox.readFile("../etc/passwd")).rejects.toBeInstanceOf(PathOutsideWorkspaceError);
  await expect(sandbox.readFile("/etc/passwd")).rejects.toBeInstanceOf(PathOutsideWorkspaceError);
}

describe("the helper in a glibc image without Node (agent-runner/base:bookworm)", () => {
  let workspace: ReturnType<typeof createSandboxWorkspace>;
  let sandbox: Sandbox;

  beforeAll(async () => {
    await requireDocker(BASE_IMAGE);
    workspace = createSandboxWorkspace({ "app.txt": "app\n" });
    // Root's own file, readable by root only: the helper reads as the sandbox user.
    mkdirSync(join(workspace.path, "private"), { mode: 0o755 });
    writeFileSync(join(workspace.path, "private/root-only.txt"), "secret\n", { mode: 0o600 });
    sandbox = await new DockerSandboxProvider().create(testSandboxSpec(workspace.path, { image: BASE_IMAGE }));
  });

  afterAll(async () => {
    await sandbox?.close();
    await workspace?.[Symbol.asyncDispose]();
  });

  it("has no node, and runs commands under bash", async () => {
    const probe = await sandbox.exec({ command: 'command -v node || echo no-node; echo "$BASH_VERSION" | cut -c1' });
    expect(probe.stdout).toBe("no-node\n5\n");
  });

  it("keeps command and file semantics", async () => {
    await expectCommandSemantics(sandbox, 1000, "/workspace");
    await expectFileSemantics(sandbox, workspace.path, 1000, "/workspace");
  });

  it("does every file operation as the sandbox user on every thread: files it writes are the sandbox user's, root's 0600 file is unreadable", async () => {
    // Many concurrent writes spread over the helper's threads.
    await Promise.all(Array.from({ length: 32 }, (_, index) => sandbox.writeFile(`owned/file-${index}.txt`, Buffer.from(`${index}\n`))));
    for (let index = 0; index < 32; index += 1) {
      const stats = statSync(join(workspace.path, `owned/file-${index}.txt`));
      expect({ uid: stats.uid, gid: stats.gid }).toEqual({ uid: 1000, gid: 1000 });
    }
    await expect(sandbox.readFile("private/root-only.txt")).rejects.toThrow(/EACCES: permission denied/);
    await expect(sandbox.writeFile("private/new.txt", Buffer.from("x"))).rejects.toThrow(/EACCES: permission denied/);
    // The kernel's view of each thread: real 0, effective 1000, saved 0, fs 1000; no effective capability.
    const threads = (await sandbox.exec({ command: HELPER_THREADS })).stdout.trim().split("\n");
    const uids = threads.filter((line) => line.startsWith("Uid:"));
    expect(uids.length).toBeGreaterThan(1);
    expect(new Set(uids)).toEqual(new Set(["Uid: 0 1000 0 1000"]));
    expect(new Set(threads.filter((line) => line.startsWith("Gid:")))).toEqual(new Set(["Gid: 0 1000 0 1000"]));
    expect(new Set(threads.filter((line) => line.startsWith("CapEff:")))).toEqual(new Set(["CapEff: 0000000000000000"]));
  });

  it("a timeout's kill of one command's tree spares commands started meanwhile", async () => {
    for (let round = 0; round < 5; round += 1) {
      const timedOut = sandbox.exec({ command: "for i in $(seq 40); do sleep 300 & done; sleep 300", timeoutMs: 400 });
      // A burst of commands spread over the moment the timeout's kill runs.
      const others = Array.from({ length: 30 }, (_, index) =>
        new Promise((resolve) => setTimeout(resolve, 300 + index * 5)).then(() => sandbox.exec({ command: "echo ok" })),
      );
      expect((await timedOut).timedOut).toBe(true);
      for (const other of await Promise.all(others)) expect(other).toMatchObject({ exitCode: 0, stdout: "ok\n" });
    }
  });

  it("survives kill -9 -1 by the agent and keeps answering", async () => {
    // kill(-1) spares only its caller: the background sleep dies, the helper (real uid 0) does not.
    const killed = await sandbox.exec({ command: 'sleep 100 & kill -9 -1; wait $!; echo "sleep-status=$?"' });
    expect(killed.stdout).toBe("sleep-status=137\n");
    expect((await sandbox.exec({ command: "echo still-here" })).stdout).toBe("still-here\n");
  });

  it("grep and glob work without rg in the image: the sandbox helper answers them", async () => {
    expect((await sandbox.exec({ command: "command -v rg || echo no-rg" })).stdout).toBe("no-rg\n");
    const call = toolCaller(() => sandbox);
    const grep = await call("grep", { pattern: "app" });
    expect(grep.isError, grep.content).toBeFalsy();
    expect(grep.content).toBe("app.txt:1:app");
    const glob = await call("glob", { pattern: "*.txt" });
    expect(glob.isError, glob.content).toBeFalsy();
    expect(glob.content.split("\n")).toContain("app.txt");
  });

  it("an MCP server started with npx fails with what the image lacks", async () => {
    await expect(sandbox.spawn({ command: "npx", args: ["-y", "some-mcp-server"] })).rejects.toThrow(
      /"npx" is not in the sandbox image agent-runner\/base:bookworm .*needs Node\.js \(node and npx on PATH\) in the task image/,
    );
    // A command the image has starts as before.
    const cat = await sandbox.spawn({ command: "cat" });
    cat.stdin.end("echoed\n");
    const chunks: Buffer[] = [];
    cat.stdout.on("data", (chunk: Buffer) => chunks.push(chunk));
    await cat.exited;
    expect(Buffer.concat(chunks).toString()).toBe("echoed\n");
  });
});

describe("the egress proxy whatever the task image is", () => {
  it("a task image without Node gets its allow-list: the proxy runs in the runner's image and decides", async () => {
    await requireDocker(BASE_IMAGE);
    await requireDocker(PROXY_IMAGE);
    await using workspace = createSandboxWorkspace({});
    const events: NetworkEvent[] = [];
    await using sandbox = await new DockerSandboxProvider().create(
      testSandboxSpec(workspace.path, {
        image: BASE_IMAGE,
        network: { rules: allowRules(["allowed.test"]), allowCidrs: [] },
        onNetworkEvent: (event) => events.push(event),
      }),
    );
    // Plain bash: one request to the proxy for a host off the list (the proxy refuses it without a lookup).
    const asked = await sandbox.exec({
      command:
        'proxy=${HTTP_PROXY#http://}; exec 3<>/dev/tcp/${proxy%:*}/${proxy##*:}; printf "GET http://denied.test/ HTTP/1.1\\r\\nHost: denied.test\\r\\nConnection: close\\r\\n\\r\\n" >&3; head -n 1 <&3',
      timeoutMs: 20_000,
    });
    expect(asked.stdout).toMatch(/^HTTP\/1\.1 403/);
    expect(events).toContainEqual(expect.objectContaining({ decision: "denied", host: "denied.test", port: 80 }));
  });
});

describe("the helper in FROM scratch + a static busybox (no libc, no bash)", () => {
  let workspace: ReturnType<typeof createSandboxWorkspace>;
  let sandbox: Sandbox;

  beforeAll(async () => {
    await requireDocker();
    const image = await ensureTestImage(BUSYBOX_IMAGE);
    workspace = createSandboxWorkspace({});
    sandbox = await new DockerSandboxProvider().create(testSandboxSpec(workspace.path, { image }));
  });

  afterAll(async () => {
    await sandbox?.close();
    await workspace?.[Symbol.asyncDispose]();
  });

  it("runs commands under /bin/sh (busybox), since there is no bash", async () => {
    const shell = await sandbox.exec({ command: "readlink /proc/$$/exe; [ -e /bin/bash ] || echo no-bash" });
    expect(shell.stdout).toBe("/bin/busybox\nno-bash\n");
  });

  it("keeps command and file semantics", async () => {
    await expectCommandSemantics(sandbox, 1000, "/workspace");
    await expectFileSemantics(sandbox, workspace.path, 1000, "/workspace");
  });

  it("the tools answer through the registry (run_shell, write_file, read_file)", async () => {
    const call = toolCaller(() => sandbox);
    expect((await call("write_file", { path: "t.txt", content: "via tool\n" })).isError).toBeFalsy();
    expect((await call("read_file", { path: "t.txt" })).content).toContain("via tool");
    expect((await call("run_shell", { command: "cat t.txt" })).content).toContain("stdout:\nvia tool");
  });
});

describe("the helper in an image with no shell at all", () => {
  let workspace: ReturnType<typeof createSandboxWorkspace>;
  let sandbox: Sandbox;

  beforeAll(async () => {
    await requireDocker();
    const image = await ensureTestImage(EMPTY_IMAGE);
    workspace = createSandboxWorkspace({ "data.txt": "data\n" });
    sandbox = await new DockerSandboxProvider().create(testSandboxSpec(workspace.path, { image }));
  });

  afterAll(async () => {
    await sandbox?.close();
    await workspace?.[Symbol.asyncDispose]();
  });

  it("run_shell says clearly that there is no shell, as a tool error; the file tools work", async () => {
    const call = toolCaller(() => sandbox);
    const shell = await call("run_shell", { command: "echo hi" });
    expect(shell.isError).toBe(true);
    expect(shell.content).toMatch(/this sandbox image has no shell \(neither \/bin\/bash nor \/bin\/sh exists\)/);
    expect(shell.content).toMatch(/file tools .* still work/);
    await expectFileSemantics(sandbox, workspace.path, 1000, "/workspace");
    expect((await call("read_file", { path: "data.txt" })).content).toContain("data");
  });
});

describe("the helper in a user's image with USER 1234, an ENTRYPOINT, a CMD and WORKDIR /app", () => {
  let workspace: ReturnType<typeof createSandboxWorkspace>;
  let sandbox: Sandbox;

  beforeAll(async () => {
    await requireDocker(BASE_IMAGE);
    const image = await ensureTestImage(USER_ENTRYPOINT_IMAGE);
    workspace = createSandboxWorkspace({ "main.py": "print('app')\n" }, 1234);
    sandbox = await new DockerSandboxProvider().create(testSandboxSpec(workspace.path, { image, workdir: "/app", user: { uid: 1234, gid: 1234 } }));
  });

  afterAll(async () => {
    await sandbox?.close();
    await workspace?.[Symbol.asyncDispose]();
  });

  it("the runner's helper replaces the ENTRYPOINT and CMD; the workspace is at /app, where commands start and paths resolve", async () => {
    await expectCommandSemantics(sandbox, 1234, "/app");
    await expectFileSemantics(sandbox, workspace.path, 1234, "/app");
    expect((await sandbox.readFile("main.py"))!.path).toBe("/app/main.py");
    // /workspace is no special place in this image: outside the workspace.
    await expect(sandbox.readFile("/workspace/main.py")).rejects.toBeInstanceOf(PathOutsideWorkspaceError);
    const spawned = await sandbox.spawn({ command: "pwd" });
    const chunks: Buffer[] = [];
    spawned.stdout.on("data", (chunk: Buffer) => chunks.push(chunk));
    await spawned.exited;
    expect(Buffer.concat(chunks).toString()).toBe("/app\n");
  });
});
