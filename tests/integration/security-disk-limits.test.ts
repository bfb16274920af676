/**
 * `sandbox.limits.disk` (issue 10, item 8, in the container): what a task
 * writes is bounded in /workspace and in the container's own file system.
 * Real runs (runTask → Docker → scripted model):
 *  - filesystem enforcement (the runner is root: the run's own loop-mounted
 *    filesystem): a write past the limit in /tmp, /var/tmp or /workspace is
 *    refused (ENOSPC), the rest of the image is read-only, sparse files cost
 *    only their blocks, and the run reports that the limit was reached;
 *  - monitor enforcement (the fallback for a runner that is not root, forced
 *    here): a writer that keeps going past the limit is stopped and the run
 *    ends `failed` / `disk_limit_exceeded` with its partial work committed;
 *  - a normal task under the limit is unaffected.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createGitRepository, temporaryDirectory } from "../helpers/git-repository.js";
import { createSandboxWorkspace, requireDocker, testSandboxSpec } from "../helpers/docker.js";
import { DockerSandboxProvider } from "../../src/sandbox/docker/docker-sandbox-provider.js";
import type { DockerSandbox } from "../../src/sandbox/docker/docker-sandbox.js";
import type { RunEvent } from "../../src/events/run-events.js";
import { describeRun, inspectGit, parseShellResult, runScriptedTask, shellTurn, type ScriptedRun } from "./security-harness.js";

const MIB = 1024 * 1024;
const LIMIT = "64m";
const LIMIT_BYTES = 64 * MIB;

/** A filesystem-enforced run needs a root runner (loop mounts); CI runs as root. */
function requireRoot(): void {
  if (process.getuid?.() !== 0) throw new Error("the filesystem-enforced disk limit needs a root runner (loop mounts); run these tests as root, as CI does");
}

/**
 * Removes what the previous probe left, then writes 100 MiB (more than the 64 MiB
 * limit) to `path` and prints the outcome and the size that landed. The file
 * stays until the next probe: the disk is full when the command ends.
 */
function overfill(path: string): string {
  return `rm -f /tmp/fill /workspace/fill /var/tmp/fill; head -c 100M /dev/zero > ${path}; echo "rc=$?"; echo "size=$(stat -c %s ${path})"`;
}

/** Writes 1 MiB files to `directory` without end; only something outside the command can stop it. */
function endlessWriter(directory: string): string {
  return `mkdir -p ${directory}/fill; i=0; while :; do head -c 1M /dev/zero > ${directory}/fill/$i; i=$((i+1)); sleep 0.02; done; echo writer-ended`;
}

function diskEvents(events: RunEvent[]): Extract<RunEvent, { type: "disk.limit_reached" }>[] {
  return events.filter((event): event is Extract<RunEvent, { type: "disk.limit_reached" }> => event.type === "disk.limit_reached");
}

describe("sandbox.limits.disk, filesystem enforcement: writes past the limit are refused in /tmp, /var/tmp and /workspace", () => {
  let repository: ReturnType<typeof createGitRepository>;
  let run: ScriptedRun;
  const events: RunEvent[] = [];
  const result = (index: number) => parseShellResult(run.toolResults[index]);

  beforeAll(async () => {
    requireRoot();
    await requireDocker();
    repository = createGitRepository({ "app.txt": "hello\n" }, { prefix: "agent-runner-sec-disk-" });
    run = await runScriptedTask({
      repository: repository.root,
      // file_size is raised so that only the disk limit is under test (RLIMIT_FSIZE would refuse the sparse file).
      sandbox: { limits: { disk: LIMIT, file_size: "2048g" } },
      events: { emit: (event) => events.push(event) },
      turns: [
        /* 0 */ shellTurn(overfill("/tmp/fill")),
        /* 1 */ shellTurn(overfill("/workspace/fill")),
        /* 2 */ shellTurn(overfill("/var/tmp/fill")),
        /* 3: the image's own file system, where the sandbox user could write before */
        shellTurn('rm -f /var/tmp/fill; for path in /home/agent/x /usr/local/x /x; do touch "$path" 2>&1; done; echo "home=$HOME"'),
        /* 4: a 1 TiB sparse file costs only its blocks, in /workspace and in /tmp */
        shellTurn('truncate -s 1T /workspace/sparse && truncate -s 1T /tmp/sparse; echo "rc=$?"; du -k /workspace/sparse /tmp/sparse; rm -f /workspace/sparse'),
      ],
    });
    expect(run.toolResults.length, describeRun(run)).toBe(5);
  });

  afterAll(async () => {
    run?.dispose();
    await repository?.[Symbol.asyncDispose]();
  });

  it.each([
    [0, "/tmp"],
    [1, "/workspace"],
    [2, "/var/tmp"],
  ])("refuses the write past the limit (tool result %i, %s) with ENOSPC", (index) => {
    const { stdout, stderr } = result(index);
    expect(stderr, describeRun(run)).toContain("No space left on device");
    expect(stdout).toMatch(/^rc=1$/m);
    const size = Number(/^size=(\d+)$/m.exec(stdout)?.[1]);
    expect(size).toBeGreaterThan(0);
    expect(size).toBeLessThan(LIMIT_BYTES);
  });

  it("keeps the rest of the image read-only (HOME is /tmp)", () => {
    const { stdout } = result(3);
    expect(stdout.match(/Read-only file system/g)).toHaveLength(3);
    expect(stdout).toContain("home=/tmp");
  });

  it("counts allocated blocks: a 1 TiB sparse file is allowed", () => {
    const { stdout } = result(4);
    expect(stdout, result(4).raw).toMatch(/^rc=0$/m);
    expect(stdout).toMatch(/^0\t\/workspace\/sparse$/m);
    expect(stdout).toMatch(/^0\t\/tmp\/sparse$/m);
  });

  it("reports that the limit was reached (event and report.json) and lets the run go on", () => {
    expect(run.report.status, describeRun(run)).toBe("succeeded");
    expect(run.report.disk).toEqual({ limit_bytes: LIMIT_BYTES, enforcement: "filesystem", detail: null, limit_reached: true, used_bytes: expect.any(Number) });
    const reached = diskEvents(events);
    expect(reached.length).toBeGreaterThanOrEqual(1);
    expect(reached[0]!.data).toMatchObject({ agent_id: "main", limit_bytes: LIMIT_BYTES, enforcement: "filesystem", action: "refused" });
    expect(events.find((event) => event.type === "disk.prepared")?.data).toEqual({ limit_bytes: LIMIT_BYTES, enforcement: "filesystem", detail: null });
  });
});

describe.each([
  ["/workspace", "fill"],
  ["/tmp", null],
])("sandbox.limits.disk, monitor enforcement: a writer that keeps going in %s is stopped and the run fails", (directory, committedPath) => {
  let repository: ReturnType<typeof createGitRepository>;
  let run: ScriptedRun;
  const events: RunEvent[] = [];

  beforeAll(async () => {
    await requireDocker();
    repository = createGitRepository({ "app.txt": "hello\n" }, { prefix: "agent-runner-sec-disk-monitor-" });
    run = await runScriptedTask({
      repository: repository.root,
      diskEnforcement: "monitor",
      sandbox: { limits: { disk: LIMIT } },
      events: { emit: (event) => events.push(event) },
      turns: [shellTurn(endlessWriter(directory), 120_000), shellTurn("echo the-run-went-on")],
    });
  });

  afterAll(async () => {
    run?.dispose();
    await repository?.[Symbol.asyncDispose]();
  });

  it("stops the writer (not its timeout) and ends the run failed / disk_limit_exceeded", () => {
    expect(run.report.status, describeRun(run)).toBe("failed");
    expect(run.report.reason).toBe("disk_limit_exceeded");
    expect(run.report.error).toBeNull();
    expect(run.toolResults.join("\n")).not.toContain("the-run-went-on");
    expect(run.toolResults.join("\n")).not.toContain("writer-ended");
    expect(run.report.disk).toMatchObject({ limit_bytes: LIMIT_BYTES, enforcement: "monitor", limit_reached: true });
    expect(run.report.disk!.detail).toMatch(/forced/);
    expect(run.report.disk!.used_bytes).toBeGreaterThan(LIMIT_BYTES);
    const reached = diskEvents(events);
    expect(reached).toHaveLength(1);
    expect(reached[0]!.data).toMatchObject({ agent_id: "main", limit_bytes: LIMIT_BYTES, enforcement: "monitor", action: "stopped" });
    expect(events.find((event) => event.type === "disk.prepared")?.data).toMatchObject({ enforcement: "monitor" });
  });

  it("commits the partial work on the run branch", () => {
    expect(run.report.head_commit).not.toBeNull();
    const files = inspectGit(repository.root, ["ls-tree", "-r", "--name-only", run.report.head_commit!]).trim().split("\n");
    expect(files).toContain("app.txt");
    if (committedPath) expect(files.some((file) => file.startsWith(`${committedPath}/`))).toBe(true);
  });
});

describe("sandbox.limits.disk, monitor enforcement: what is measured", () => {
  it("counts allocated blocks of /workspace and the container's writable directories, not a sparse file's length", async () => {
    await requireDocker();
    await using workspace = createSandboxWorkspace({ "README.md": "x\n" });
    await using scratch = temporaryDirectory("agent-runner-test-scratch-");
    const sandbox = (await new DockerSandboxProvider().create(
      testSandboxSpec(workspace.path, {
        disk: { limitBytes: 10 * 1024 ** 3, enforcement: "monitor", scratchDirectory: scratch.path },
        limits: { cpus: 1, memoryBytes: 512 * MIB, pids: 256, fileSizeBytes: 2 * 1024 ** 4 },
      }),
    )) as DockerSandbox;
    try {
      const before = await sandbox.measureDisk();
      const wrote = await sandbox.exec({
        command:
          "truncate -s 1T /workspace/sparse && head -c 3M /dev/urandom > /workspace/real && head -c 2M /dev/urandom > /tmp/real && head -c 1M /dev/urandom > /var/tmp/real",
      });
      expect(wrote.exitCode, wrote.stderr).toBe(0);
      const after = await sandbox.measureDisk();
      const grown = after.usedBytes - before.usedBytes;
      expect(grown).toBeGreaterThanOrEqual(6 * MIB);
      expect(grown).toBeLessThan(7 * MIB);
    } finally {
      await sandbox.close();
    }
  });
});

describe("sandbox.limits.disk: a normal task under the limit is unaffected", () => {
  let repository: ReturnType<typeof createGitRepository>;
  let run: ScriptedRun;
  const events: RunEvent[] = [];

  beforeAll(async () => {
    requireRoot();
    await requireDocker();
    repository = createGitRepository({ "app.txt": "hello\n" }, { prefix: "agent-runner-sec-disk-normal-" });
    run = await runScriptedTask({
      repository: repository.root,
      events: { emit: (event) => events.push(event) },
      turns: [
        shellTurn(
          'set -e; echo changed > app.txt; mkdir -p build "$HOME/.cache"; head -c 5M /dev/urandom > build/blob; ' +
            'python3 -c "import tempfile; f = tempfile.NamedTemporaryFile(); f.write(b\\"x\\" * 4096); f.flush(); print(\\"tempfile-ok\\")"; ' +
            'echo lock > /run/lock/probe; echo cache > "$HOME/.cache/probe"; mktemp -p /var/tmp >/dev/null; git status --porcelain; echo all-ok',
        ),
      ],
      verify: { command: "grep -q changed app.txt && test -s build/blob" },
    });
  });

  afterAll(async () => {
    run?.dispose();
    await repository?.[Symbol.asyncDispose]();
  });

  it("writes where a task normally writes, verifies and succeeds, with the default 10g limit reported and not reached", () => {
    const { stdout, exitCode } = parseShellResult(run.toolResults[0]);
    expect(exitCode, describeRun(run)).toBe("0");
    expect(stdout).toContain("tempfile-ok");
    expect(stdout).toContain(" M app.txt");
    expect(stdout).toContain("all-ok");
    expect(run.report.status, describeRun(run)).toBe("succeeded");
    expect(run.report.reason).toBe("verified");
    expect(run.report.disk).toEqual({ limit_bytes: 10 * 1024 ** 3, enforcement: "filesystem", detail: null, limit_reached: false, used_bytes: null });
    expect(diskEvents(events)).toEqual([]);
  });
});

describe("sandbox.limits.disk too small for the repository's checkout", () => {
  it("ends the run before any sandbox with a message naming the field and the fix", async () => {
    requireRoot();
    await requireDocker();
    await using repository = createGitRepository({ "big.bin": "x".repeat(80 * MIB) }, { prefix: "agent-runner-sec-disk-small-" });
    const run = await runScriptedTask({ repository: repository.root, sandbox: { limits: { disk: LIMIT } }, turns: [shellTurn("echo never")] });
    try {
      expect(run.report.status, describeRun(run)).toBe("error");
      expect(run.report.reason, run.report.error ?? "").toBe("invalid_task");
      expect(run.report.error).toMatch(/^sandbox\.limits\.disk \(64 MiB\) cannot hold the repository's checkout \(80 MiB or more\); raise it$/);
      expect(run.eventTypes).not.toContain("sandbox.created");
    } finally {
      run.dispose();
    }
  });
});

describe("sandbox.limits.disk filled by the agent's worktree: no room for the verification checkout", () => {
  it("ends the run failed (the agent's doing), not error, and says the checkout did not fit", async () => {
    requireRoot();
    await requireDocker();
    await using repository = createGitRepository({ "app.txt": "hello\n" }, { prefix: "agent-runner-sec-disk-verify-" });
    // 40 MiB that does not compress, committed: the checkout of it needs another 40 MiB of the 64 MiB disk.
    const run = await runScriptedTask({
      repository: repository.root,
      sandbox: { limits: { disk: LIMIT } },
      turns: [shellTurn('head -c 40M /dev/urandom > /workspace/blob.bin; echo "rc=$?"')],
      verify: { command: "true" },
    });
    try {
      expect(parseShellResult(run.toolResults[0]).stdout, describeRun(run)).toMatch(/^rc=0$/m);
      expect(run.report.status, describeRun(run)).toBe("failed");
      expect(run.report.reason).toBe("verify_failed");
      expect(run.report.verify).toMatchObject({ exit_code: null, passed: false, timed_out: false });
      expect(run.report.verify!.output_tail).toMatch(/does not fit on the run's disk \(sandbox\.limits\.disk\).*did not run/);
    } finally {
      run.dispose();
    }
  });
});
