/**
 * Security invariant 4 (DESIGN.md): processes run as an unprivileged user,
 * with capabilities dropped, no-new-privileges and cpu/memory/pids limits; a
 * timeout kills the whole process tree. One real run (runTask → Docker →
 * scripted model) with distinctive limits probes all of it from inside; the
 * fork bomb goes last so it cannot disturb the other probes.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createGitRepository } from "../helpers/git-repository.js";
import { requireDocker } from "../helpers/docker.js";
import { describeRun, parseShellResult, runScriptedTask, shellTurn, type ScriptedRun } from "./security-harness.js";

const PIDS = 77;
const MEMORY_BYTES = 300 * 1024 * 1024;
const CPUS = 0.5;

/** Lines `key=value` of a probe's output as a map. */
function keyValues(text: string): Map<string, string> {
  const entries = new Map<string, string>();
  for (const line of text.split("\n")) {
    const match = /^([A-Za-z._-]+)[=:]\s*(.*)$/.exec(line);
    if (match) entries.set(match[1]!, match[2]!.trim());
  }
  return entries;
}

/** Command lines (the `args` column of ps) of the processes listed by `ps -eo pid,args`. */
function commandLines(psOutput: string): string[] {
  return psOutput
    .trim()
    .split("\n")
    .slice(1)
    .map((line) => line.trim().replace(/^\d+\s+/, ""));
}

const LIMITS_PROBE = [
  'echo "uid=$(id -u)"; echo "gid=$(id -g)"',
  "grep -E '^(CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status",
  "if [ -f /sys/fs/cgroup/pids.max ]; then " +
    'echo "pids.max=$(cat /sys/fs/cgroup/pids.max)"; echo "memory.max=$(cat /sys/fs/cgroup/memory.max)"; ' +
    'echo "swap.max=$(cat /sys/fs/cgroup/memory.swap.max)"; echo "cpu.max=$(cat /sys/fs/cgroup/cpu.max)"; ' +
    "else " +
    'echo "pids.max=$(cat /sys/fs/cgroup/pids/pids.max)"; echo "memory.max=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes)"; ' +
    'if [ -f /sys/fs/cgroup/memory/memory.memsw.limit_in_bytes ]; then echo "memsw.max=$(cat /sys/fs/cgroup/memory/memory.memsw.limit_in_bytes)"; fi; ' +
    'echo "cpu.max=$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)"; ' +
    "fi",
  // Trying to become root must fail.
  "python3 -c 'import os; os.setuid(0)' 2>/dev/null; echo \"setuid.rc=$?\"",
].join("; ");

const PIDS_EVENTS = "cat /sys/fs/cgroup/pids/pids.events 2>/dev/null || cat /sys/fs/cgroup/pids.events";

describe("security invariant 4: unprivileged, capability-free, limited, and timeouts kill the whole tree", () => {
  let repository: ReturnType<typeof createGitRepository>;
  let run: ScriptedRun;
  const result = (index: number) => parseShellResult(run.toolResults[index]);

  beforeAll(async () => {
    await requireDocker();
    repository = createGitRepository({ "README.md": "probe\n" }, { prefix: "agent-runner-sec-limits-" });
    run = await runScriptedTask({
      repository: repository.root,
      sandbox: { limits: { cpus: CPUS, memory: "300m", pids: PIDS } },
      turns: [
        /* 0 */ shellTurn(LIMITS_PROBE),
        /* 1: a setsid grandchild, a double-forked daemon, a nohup child and the foreground sleep */
        shellTurn("(setsid sleep 1000 &); setsid bash -c 'sleep 1000 & wait' & nohup sleep 1000 >/dev/null 2>&1 & sleep 1000", 2500),
        /* 2 */ shellTurn("ps -eo pid,args"),
        /* 3: a double-forked daemon that also clears its environment */
        shellTurn("(env -i setsid sleep 1001 </dev/null >/dev/null 2>&1 &); sleep 1000", 2000),
        /* 4 */ shellTurn("ps -eo pid,args"),
        /* 5: more memory than the limit */
        shellTurn('python3 -c \'b = bytearray(400 * 1024 * 1024); print("allocated")\'; echo "python.rc=$?"'),
        /* 6 */ shellTurn("echo alive-after-oom"),
        /* 7: a fork bomb-ish loop; bash keeps retrying failed forks, so the timeout ends it */
        shellTurn("for i in $(seq 1 1000); do sleep 30 & done; echo forked-all; wait", 5000),
        /* 8 */ shellTurn(`echo alive-after-fork-bomb; ${PIDS_EVENTS}; ps -eo pid,args`),
      ],
    });
    expect(run.toolResults.length, describeRun(run)).toBe(9);
  });

  afterAll(async () => {
    run?.dispose();
    await repository?.[Symbol.asyncDispose]();
  });

  it("runs as an unprivileged uid (1000 when the workspace is root-owned) that cannot become root", () => {
    const values = keyValues(result(0).stdout);
    const expectedUid = process.getuid!() === 0 ? 1000 : process.getuid!();
    expect(Number(values.get("uid"))).toBe(expectedUid);
    expect(values.get("uid")).not.toBe("0");
    expect(values.get("gid")).not.toBe("0");
    expect(values.get("setuid.rc")).toBe("1");
  });

  it("has no capabilities (CapEff, CapPrm, CapAmb and the bounding set all 0) and NoNewPrivs set", () => {
    const values = keyValues(result(0).stdout);
    expect(values.get("CapEff")).toBe("0000000000000000");
    expect(values.get("CapPrm")).toBe("0000000000000000");
    // The helper drops CAP_SETUID, CAP_SETGID and CAP_SETPCAP from the bounding set its commands inherit.
    expect(values.get("CapBnd")).toBe("0000000000000000");
    expect(values.get("CapAmb")).toBe("0000000000000000");
    expect(values.get("NoNewPrivs")).toBe("1");
  });

  it("applies the task's pids, memory (no extra swap) and cpu limits to the container's cgroup", () => {
    const values = keyValues(result(0).stdout);
    expect(values.get("pids.max")).toBe(String(PIDS));
    expect(values.get("memory.max")).toBe(String(MEMORY_BYTES));
    if (values.has("memsw.max")) expect(values.get("memsw.max")).toBe(String(MEMORY_BYTES));
    if (values.has("swap.max")) expect(values.get("swap.max")).toBe("0");
    const [quota, period] = values.get("cpu.max")!.split(" ").map(Number);
    expect(quota! / period!).toBeCloseTo(CPUS, 5);
  });

  it("on a run_shell timeout kills the whole tree: setsid grandchild, double-forked daemon, nohup child", () => {
    const killed = result(1);
    expect(killed.timedOut, killed.raw).toBe(true);
    const left = commandLines(result(2).stdout).filter((line) => line.includes("sleep 1000"));
    expect(left).toEqual([]);
  });

  it("on a run_shell timeout also kills a double-forked daemon that cleared its environment", () => {
    const killed = result(3);
    expect(killed.timedOut, killed.raw).toBe(true);
    const left = commandLines(result(4).stdout).filter((line) => /sleep 100[01]/.test(line));
    expect(left).toEqual([]);
  });

  it("enforces the memory limit (the allocation is killed) and the sandbox keeps answering", () => {
    const oom = result(5);
    expect(oom.stdout).not.toContain("allocated");
    expect(oom.stdout).toContain("python.rc=137");
    expect(result(6).stdout.trim()).toBe("alive-after-oom");
  });

  it("stops a fork bomb at the pids limit, and the sandbox still answers afterwards with nothing left running", () => {
    const bomb = result(7);
    expect(bomb.stdout).not.toContain("forked-all");
    expect(bomb.stderr).toMatch(/fork: .*Resource temporarily unavailable/);
    expect(bomb.timedOut, bomb.raw).toBe(true);
    const after = result(8);
    expect(after.exitCode).toBe("0");
    expect(after.stdout.startsWith("alive-after-fork-bomb\n")).toBe(true);
    // The pids cgroup counted refused forks: the limit, not luck, stopped the loop.
    const refused = Number(/^max (\d+)$/m.exec(after.stdout)?.[1] ?? "0");
    expect(refused).toBeGreaterThan(0);
    expect(commandLines(after.stdout.slice(after.stdout.indexOf("  PID"))).filter((line) => line === "sleep 30")).toEqual([]);
    expect(run.report.status, describeRun(run)).toBe("succeeded");
  });
});
