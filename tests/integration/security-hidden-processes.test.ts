/**
 * Security round 2, the critical items: a sandbox process that hides from the
 * daemon (non-dumpable, so its /proc/<pid>/environ cannot be read; setsid;
 * double-forked) must still die on a timeout and on stop-all; the daemon
 * itself can be neither signalled, stopped, ptraced nor read by the agent;
 * a daemon that stops answering loses the sandbox instead of hanging the
 * runner; and host git never reads a worktree while such a process could
 * still swap a directory for a symlink to a host directory (CVE-2018-15664's
 * class). Real Docker, real git, the real scripted model server.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { DockerSandboxProvider } from "../../src/sandbox/docker/docker-sandbox-provider.js";
import { HELPER_CONTAINER_PATH } from "../../src/sandbox/docker/helper-path.js";
import { RecoveringSandbox } from "../../src/sandbox/recovering-sandbox.js";
import { createSandboxWorkspace, requireDocker, testSandboxSpec } from "../helpers/docker.js";
import { createGitRepository } from "../helpers/git-repository.js";
import { describeRun, inspectGit, parseShellResult, randomToken, runScriptedTask, shellTurn } from "./security-harness.js";

/**
 * Python (the sandbox image has python3) that makes itself non-dumpable
 * (prctl PR_SET_DUMPABLE = 4, value 0), leaves its session and double-forks,
 * then runs `body`.
 */
function hidden(body: string): string {
  const script = ["import ctypes, os, sys, time", "ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)", "os.setsid()", "if os.fork(): os._exit(0)", body].join("\n");
  return `python3 -c ${shellQuote(script)}`;
}

function shellQuote(text: string): string {
  return `'${text.replaceAll("'", "'\\''")}'`;
}

/** The processes of a container as the host sees them (`docker top`), one `pid args` line each. */
function containerProcesses(containerId: string): string[] {
  return execFileSync("docker", ["top", containerId, "-eo", "pid,args"], { encoding: "utf8" }).trim().split("\n").slice(1);
}

/** Finds the helper's pid inside the container (its command line starts with the helper's path). */
const DAEMON_PID = `d=$(for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q '^${HELPER_CONTAINER_PATH} ' && echo \${p#/proc/}; done | head -1)`;

describe("processes that hide from the daemon", () => {
  it("a non-dumpable, setsid'd, double-forked process dies with its command's timeout", async () => {
    await requireDocker();
    await using workspace = createSandboxWorkspace({});
    await using sandbox = await new DockerSandboxProvider().create(testSandboxSpec(workspace.path));
    const result = await sandbox.exec({ command: `${hidden("time.sleep(1001)")}; sleep 1000`, timeoutMs: 2000 });
    expect(result.timedOut).toBe(true);
    expect(containerProcesses(sandbox.id).filter((line) => line.includes("python3"))).toEqual([]);
  });

  it("stopAllProcesses kills a non-dumpable process left running by a command that returned", async () => {
    await requireDocker();
    await using workspace = createSandboxWorkspace({});
    await using sandbox = await new DockerSandboxProvider().create(testSandboxSpec(workspace.path));
    const announce = "open('/tmp/pid.tmp', 'w').write(str(os.getpid())); os.rename('/tmp/pid.tmp', '/tmp/hidden-pid'); time.sleep(1002)";
    const started = await sandbox.exec({
      command: `${hidden(announce)} </dev/null >/dev/null 2>&1; for i in $(seq 100); do [ -e /tmp/hidden-pid ] && break; sleep 0.05; done; cat /proc/$(cat /tmp/hidden-pid)/environ >/dev/null; echo "environ=$?"`,
      timeoutMs: 10_000,
    });
    // It really is hidden: its environment (where the command marker lives) cannot be read.
    expect(started.stdout).toContain("environ=1");
    expect(containerProcesses(sandbox.id).some((line) => line.includes("python3"))).toBe(true);
    await sandbox.stopAllProcesses();
    expect(containerProcesses(sandbox.id).filter((line) => line.includes("python3"))).toEqual([]);
    expect((await sandbox.exec({ command: "echo usable" })).stdout).toBe("usable\n");
  });
});

describe("the daemon is out of the agent's reach", () => {
  it("cannot be signalled, stopped, ptraced, or have its environment or memory read; kill -9 -1 leaves it answering", async () => {
    await requireDocker();
    await using workspace = createSandboxWorkspace({});
    await using sandbox = await new DockerSandboxProvider().create(testSandboxSpec(workspace.path));
    const probe = [
      DAEMON_PID,
      'echo "found=${d:+yes}"',
      'kill -STOP "$d" 2>/dev/null; echo "stop=$?"',
      'kill -KILL "$d" 2>/dev/null; echo "kill=$?"',
      'cat /proc/$d/environ >/dev/null 2>&1; echo "environ=$?"',
      `python3 -c ${shellQuote("import ctypes, sys\nlibc = ctypes.CDLL(None, use_errno=True)\nprint('ptrace=%d/%d' % (libc.ptrace(16, int(sys.argv[1]), 0, 0), ctypes.get_errno()))")} "$d"`,
      `python3 -c ${shellQuote("import sys\ntry:\n    open('/proc/%s/mem' % sys.argv[1], 'rb')\n    print('mem=open')\nexcept OSError as error:\n    print('mem=%d' % error.errno)")} "$d"`,
      'grep -E "^(Uid|Gid):" /proc/$d/status',
    ].join("\n");
    const result = await sandbox.exec({ command: probe, timeoutMs: 20_000 });
    expect(result.stdout).toContain("found=yes");
    expect(result.stdout).toContain("stop=1");
    expect(result.stdout).toContain("kill=1");
    expect(result.stdout).toContain("environ=1");
    expect(result.stdout).toContain("ptrace=-1/1"); // EPERM
    expect(result.stdout).toContain("mem=13"); // EACCES
    // Root as real and saved uid, the sandbox user as effective uid.
    expect(result.stdout).toMatch(/Uid:\t0\t1000\t0\t1000/);
    await sandbox.exec({ command: "sleep 1003 >/dev/null 2>&1 &" });
    await sandbox.exec({ command: "kill -9 -1", timeoutMs: 10_000 });
    // A plain DockerSandbox (no recovery): an answer here means the same daemon is still there.
    expect((await sandbox.exec({ command: "echo still-answering" })).stdout).toBe("still-answering\n");
    expect(containerProcesses(sandbox.id).filter((line) => line.includes("sleep 1003"))).toEqual([]);
  });
});

describe("every channel request has a deadline", () => {
  const DEADLINE_MS = 1500;

  /** Stops the daemon from outside (root in the container may signal it; the agent may not). */
  function stopDaemon(containerId: string): void {
    execFileSync("docker", ["exec", "-u", "0", containerId, "sh", "-c", `${DAEMON_PID}; kill -STOP "$d"`]);
  }

  it("a stopped daemon loses the sandbox within the deadline; file operations and commands go on in a new one", async () => {
    await requireDocker();
    await using workspace = createSandboxWorkspace({ "kept.txt": "kept\n" });
    const provider = new DockerSandboxProvider({ operationDeadlineMs: DEADLINE_MS });
    const restarts: string[] = [];
    await using sandbox = await RecoveringSandbox.create(provider, testSandboxSpec(workspace.path), (id) => restarts.push(id));
    const first = sandbox.id;
    stopDaemon(first);
    const started = Date.now();
    const file = await sandbox.readFile("kept.txt");
    expect(file?.content.toString()).toBe("kept\n");
    expect(restarts).toHaveLength(1);
    expect(Date.now() - started).toBeLessThan(DEADLINE_MS + 20_000);
    // A command without a timeout is watched by the heartbeat.
    stopDaemon(sandbox.id);
    const command = await sandbox.exec({ command: "sleep 600" });
    expect(command.stderr).toContain("sandbox was restarted");
    expect(restarts).toHaveLength(2);
    expect((await sandbox.exec({ command: "cat kept.txt" })).stdout).toBe("kept\n");
  });

  it("a frozen sandbox is not lost, however long the freeze lasts", async () => {
    await requireDocker();
    await using workspace = createSandboxWorkspace({});
    const provider = new DockerSandboxProvider({ operationDeadlineMs: DEADLINE_MS });
    await using sandbox = await provider.create(testSandboxSpec(workspace.path));
    const running = sandbox.exec({ command: "sleep 1; echo survived" });
    // Held frozen for twice the deadline (the freeze itself is what is under test, not a synchronisation).
    await sandbox.freeze(() => new Promise((resolve) => setTimeout(resolve, DEADLINE_MS * 2)));
    expect((await running).stdout).toBe("survived\n");
    expect(await sandbox.stat(".")).toMatchObject({ type: "directory" });
  });
});

describe("host git never reads a worktree while an agent's process can still run", () => {
  it("ensureWorkspaceIdle refuses while a sandbox mounting the path writable runs, and passes while it is frozen or gone", async () => {
    await requireDocker();
    await using workspace = createSandboxWorkspace({});
    await using other = createSandboxWorkspace({});
    const provider = new DockerSandboxProvider();
    const sandbox = await provider.create(testSandboxSpec(workspace.path));
    await using readOnly = await provider.create(testSandboxSpec(other.path, { agentId: "reader", workspace: { hostPath: other.path, readOnly: true } }));
    await expect(provider.ensureWorkspaceIdle(workspace.path)).rejects.toThrow(/still mounts .* writable/);
    await sandbox.freeze(() => provider.ensureWorkspaceIdle(workspace.path));
    // A read-only mount cannot swap anything.
    expect((await readOnly.exec({ command: "ln -s / swapped 2>/dev/null; echo $?" })).stdout).toBe("1\n");
    await provider.ensureWorkspaceIdle(other.path);
    await sandbox.close();
    await provider.ensureWorkspaceIdle(workspace.path);
  });

  // A host directory the agent would like to read: host git runs as the runner's user and could.
  const canaryDirectory = mkdtempSync(join(tmpdir(), "agent-runner-canary-"));
  const canary = randomToken("HOST-CANARY-");
  writeFileSync(join(canaryDirectory, "secret.txt"), `${canary}\n`);
  afterAll(() => rmSync(canaryDirectory, { recursive: true, force: true }));

  /**
   * A hidden process that keeps swapping 40 directories (each holding a
   * decoy secret.txt) for symlinks to the host's canary directory and back,
   * as fast as it can, so any host git walk of the worktree meets swaps.
   */
  function swapperTurns(): ReturnType<typeof shellTurn>[] {
    const body = [
      "names = ['d%02d' % i for i in range(40)]",
      "for name in names:",
      "    os.makedirs(name, exist_ok=True)",
      "    open(name + '/secret.txt', 'w').write('decoy\\n')",
      "open('/tmp/swapper-ready', 'w').close()",
      "while True:",
      "    for name in names:",
      "        os.rename(name, name + '.real')",
      `        os.symlink(${JSON.stringify(canaryDirectory)}, name)`,
      "    for name in names:",
      "        os.unlink(name)",
      "        os.rename(name + '.real', name)",
    ].join("\n");
    return [
      shellTurn(
        `${hidden(body)} </dev/null >/dev/null 2>&1; for i in $(seq 200); do [ -e /tmp/swapper-ready ] && break; sleep 0.05; done; echo swapper-started`,
        20_000,
      ),
      shellTurn("ps -eo args | grep -c '[o]s.symlink'"),
    ];
  }

  function expectNoCanary(repository: string, branch: string, runDirectory: string): void {
    const everything = inspectGit(repository, ["log", "-p", "--all", "--format=%H"]);
    expect(everything).not.toContain(canary);
    expect(readFileSync(join(runDirectory, "patch.diff"), "utf8")).not.toContain(canary);
    // What was committed is the agent's decoys (or symlinks), never the host file.
    const tree = inspectGit(repository, ["ls-tree", "-r", branch]);
    expect(tree).toMatch(/d\d\d/);
  }

  it("the main run's commit: the container is gone before host git reads the worktree", async () => {
    await requireDocker();
    await using repository = createGitRepository({ "README.md": "probe\n" }, { prefix: "agent-runner-race-main-" });
    const run = await runScriptedTask({ repository: repository.root, turns: swapperTurns() });
    try {
      expect(run.toolResults, describeRun(run)).toHaveLength(2);
      expect(run.toolResults[0]).toContain("swapper-started");
      // The swapper was still running when the agent gave its final answer.
      expect(parseShellResult(run.toolResults[1]).stdout.trim()).toBe("1");
      expect(run.report.status, describeRun(run)).toBe("succeeded");
      expectNoCanary(repository.root, run.report.branch!, run.runDirectory);
    } finally {
      run.dispose();
    }
  });

  it("a worker's commit: its container is gone before host git reads its worktree", async () => {
    await requireDocker();
    await using repository = createGitRepository({ "README.md": "probe\n" }, { prefix: "agent-runner-race-worker-" });
    const run = await runScriptedTask({
      repository: repository.root,
      turns: [{ tool_calls: [{ name: "agent", arguments: { mode: "worker", description: "swap", prompt: "swap directories", verify: "true" } }] }],
      subagents: { swap: { turns: swapperTurns() } },
    });
    try {
      expect(run.report.status, describeRun(run)).toBe("succeeded");
      const worker = (run.report.agents as { id: string; status: string; branch: string }[]).find((agent) => agent.id === "w1");
      expect(worker?.status, describeRun(run)).toBe("merged");
      expectNoCanary(repository.root, worker!.branch, run.runDirectory);
    } finally {
      run.dispose();
    }
  });
});
