// run_shell semantics through ToolRegistry against a real DockerSandbox: exit
// codes as data, head+tail capping, bounded memory under huge output, timeouts
// that kill the whole process tree, and concurrent calls on one sandbox.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Sandbox } from "../../src/sandbox/sandbox.js";
import { toolCaller } from "../helpers/tool-caller.js";
import { createSandboxWorkspace, createTestSandbox, requireDocker } from "../helpers/docker.js";

let workspace: ReturnType<typeof createSandboxWorkspace>;
let sandbox: Sandbox;
const call = toolCaller(() => sandbox);

/** Splits a run_shell result into its parts; fails the test if the layout is not there. */
function parseShell(content: string) {
  const match = /^exit_code: (\S+)[^\n]*\n(timed_out: true[^\n]*\n)?stdout:\n([\s\S]*)\nstderr:\n([\s\S]*)$/.exec(content);
  if (!match) {
    const labels = content.split("\n").filter((line) => /^(exit_code|timed_out|stdout|stderr):|\[\.\.\. /.test(line));
    throw new Error(`not a run_shell result layout (${content.length} chars); label and marker lines: ${JSON.stringify(labels)}`);
  }
  return { exitCode: match[1], timedOut: match[2] !== undefined, stdout: match[3]!, stderr: match[4]! };
}

/** Bytes `seq 1 n` prints. */
function seqBytes(n: number): number {
  let total = 0;
  for (let index = 1; index <= n; index += 1) total += String(index).length + 1;
  return total;
}

beforeAll(async () => {
  await requireDocker();
  workspace = createSandboxWorkspace({ "hello.txt": "hi\n" });
  sandbox = await createTestSandbox(workspace.path);
});

afterAll(async () => {
  await sandbox?.close();
  await workspace?.[Symbol.asyncDispose]();
});

describe("run_shell", () => {
  it("runs in the suite's image without Node (vitest.config.ts: the docker-no-node project), unless RUNNER_TEST_IMAGE says otherwise", async () => {
    if (process.env.RUNNER_TEST_IMAGE) return;
    const parts = parseShell((await call("run_shell", { command: "command -v node npx || echo no-node" })).content);
    expect(parts.stdout).toBe("no-node");
  });

  it("returns a non-zero exit code as data, not as an Error", async () => {
    const result = await call("run_shell", { command: "cat hello.txt; echo oops >&2; exit 3" });
    expect(result.isError).toBeFalsy();
    expect(result.content).not.toMatch(/^Error:/);
    expect(result.content).toMatch(/^exit_code: 3\n/);
    const parts = parseShell(result.content);
    expect(parts).toMatchObject({ exitCode: "3", timedOut: false, stdout: "hi", stderr: "oops" });
    expect(result.details).toMatchObject({ exit_code: 3, timed_out: false });

    const ok = parseShell((await call("run_shell", { command: "true" })).content);
    expect(ok).toMatchObject({ exitCode: "0", stdout: "(empty)", stderr: "(empty)" });
  });

  it("keeps at most 4 MiB a stream, head + tail with a marker naming the omitted size", async () => {
    // 1.5 million lines, about 10 MiB: more than the 4 MiB a stream keeps (the agent loop then cuts to the model's budget).
    const count = 1_500_000;
    const total = seqBytes(count);
    const result = await call("run_shell", { command: `seq 1 ${count}` });
    expect(result.isError).toBeFalsy();
    const { exitCode, stdout } = parseShell(result.content);
    expect(exitCode).toBe("0");
    expect(stdout.startsWith("1\n2\n3\n4\n")).toBe(true);
    expect(stdout.endsWith("\n1499999\n1500000")).toBe(true);
    const marker = /\[\.\.\. (\d+) bytes omitted \.\.\.\]/.exec(stdout);
    expect(marker).not.toBeNull();
    const omitted = Number(marker![1]);
    const kept = Buffer.byteLength(stdout.replace(marker![0], "")) - 2; // minus the marker's own two newlines
    // What was shown plus what was omitted is everything the command printed.
    expect(kept + omitted).toBe(total - 1); // the trailing newline is dropped from the result
    expect(kept).toBeLessThanOrEqual(4 * 1024 * 1024);
    expect(result.details).toMatchObject({ truncated: true, stdout_bytes: total });
  });

  it("when stdout and stderr both overflow, each keeps its head and tail and both are labelled", async () => {
    const count = 100_000;
    const result = await call("run_shell", { command: `seq 1 ${count}; seq 1 ${count} >&2; exit 4` });
    expect(result.isError).toBeFalsy();
    // The layout must survive capping: exit code, stdout tail, stderr label and head.
    const { exitCode, stdout, stderr } = parseShell(result.content);
    expect(exitCode).toBe("4");
    expect(stdout.startsWith("1\n2\n3\n")).toBe(true);
    expect(stdout.endsWith("\n100000")).toBe(true);
    expect(stderr.startsWith("1\n2\n3\n")).toBe(true);
    expect(stderr.endsWith("\n100000")).toBe(true);
  });

  it("500 MB of output comes back capped and the runner's memory stays bounded", async () => {
    const bytes = 500_000_000;
    const rssBefore = process.memoryUsage().rss;
    const result = await call("run_shell", { command: `head -c ${bytes} /dev/zero | tr '\\0' a`, timeout_ms: 120_000 });
    const rssAfter = process.memoryUsage().rss;
    expect(result.isError).toBeFalsy();
    const { exitCode, timedOut, stdout } = parseShell(result.content);
    expect(exitCode).toBe("0");
    expect(timedOut).toBe(false);
    expect(result.content.length).toBeLessThan(4 * 1024 * 1024 + 1024);
    const marker = /\[\.\.\. (\d+) bytes omitted \.\.\.\]/.exec(stdout);
    expect(marker).not.toBeNull();
    const [head, tail] = stdout.split(marker![0]);
    expect(head).toMatch(/^a+\n$/);
    expect(tail).toMatch(/^\na+$/);
    expect(Number(marker![1]) + head!.length - 1 + tail!.length - 1).toBe(bytes);
    expect(result.details).toMatchObject({ stdout_bytes: bytes, truncated: true });
    expect(rssAfter - rssBefore).toBeLessThan(100 * 1024 * 1024);
  });

  it("a timeout returns timed_out with the partial output, quickly, and kills the whole process tree", async () => {
    // Control: a detached (setsid) process is visible to the follow-up check.
    const control = parseShell((await call("run_shell", { command: "setsid sleep 3018 </dev/null >/dev/null 2>&1 & echo $!" })).content);
    const controlPid = Number(control.stdout);
    expect(controlPid).toBeGreaterThan(0);
    const visible = parseShell((await call("run_shell", { command: "ps -eo args" })).content).stdout.split("\n");
    expect(visible).toContain("sleep 3018");
    await call("run_shell", { command: `kill ${controlPid}` });

    const started = Date.now();
    const result = await call("run_shell", {
      command: "echo partial-before-timeout; echo err-before-timeout >&2; setsid sleep 3017 & bash -c 'sleep 3016' & sleep 30",
      timeout_ms: 500,
    });
    const elapsed = Date.now() - started;
    expect(result.isError).toBeFalsy();
    expect(result.content).toMatch(/\ntimed_out: true/);
    expect(result.details).toMatchObject({ timed_out: true });
    const parts = parseShell(result.content);
    expect(parts.timedOut).toBe(true);
    expect(parts.stdout).toBe("partial-before-timeout");
    expect(parts.stderr).toBe("err-before-timeout");
    expect(elapsed).toBeLessThan(10_000);

    const after = parseShell((await call("run_shell", { command: "ps -eo args" })).content).stdout.split("\n");
    expect(after).not.toContain("sleep 3017");
    expect(after).not.toContain("sleep 3016");
    expect(after).not.toContain("sleep 30");
  });

  it("10 concurrent calls on one sandbox each get their own output", async () => {
    // Each command waits until all ten have started: this only finishes if they really run concurrently.
    const barrier = `/tmp/barrier-${Date.now()}`;
    await call("run_shell", { command: `mkdir -p ${barrier}` });
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, index) =>
        call("run_shell", {
          command:
            `echo out-${index}; echo err-${index} >&2; touch ${barrier}/${index}; ` +
            `until [ "$(ls ${barrier} | wc -l)" -ge 10 ]; do sleep 0.02; done; ` +
            `seq 1 ${1000 * (index + 1)} | tail -n 1; exit ${index}`,
          timeout_ms: 20_000,
        }),
      ),
    );
    results.forEach((result, index) => {
      expect(result.isError).toBeFalsy();
      const parts = parseShell(result.content);
      expect(parts).toEqual({
        exitCode: String(index),
        timedOut: false,
        stdout: `out-${index}\n${1000 * (index + 1)}`,
        stderr: `err-${index}`,
      });
    });
  });
});
