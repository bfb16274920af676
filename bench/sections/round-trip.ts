/**
 * Section 2: one cheap command, `true`, on one running container, by every
 * route: the runner's tool (ToolRegistry → run_shell → DockerSandbox.exec →
 * daemon channel), raw DockerSandbox.exec, a no-process channel round trip
 * (stat '.'), `docker exec` via the CLI, an Engine API exec via dockerode (the
 * testcontainers recipe), and host spawns as the floor.
 */
import { spawn } from "node:child_process";
import { PassThrough, type Duplex } from "node:stream";
import type Docker from "dockerode";
import type { Sandbox } from "../../src/sandbox/sandbox.js";
import { ToolRegistry } from "../../src/tools/tool-registry.js";
import { workspaceTools } from "../../src/tools/builtin/index.js";
import type { ToolContext } from "../../src/tools/define-tool.js";
import { execFileAsync } from "../lib/docker-env.js";
import { interleave, type Row } from "../lib/stats.js";

export function toolContext(sandbox: Sandbox): ToolContext {
  return { sandbox, signal: new AbortController().signal, toolCallId: "bench", defaultTimeoutMs: 60_000 };
}

function hostSpawn(command: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: "ignore" });
    child.on("error", reject);
    child.on("close", (code) => (code === 0 ? resolve() : reject(new Error(`${command} exited ${code}`))));
  });
}

/** container.exec → start (hijack) → demux → stream end → inspect ExitCode. */
async function dockerodeExec(docker: Docker, container: Docker.Container, cmd: string[]): Promise<number | null> {
  const exec = await container.exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true });
  const stream = (await exec.start({ hijack: true, stdin: false })) as unknown as Duplex;
  const stdout = new PassThrough();
  const stderr = new PassThrough();
  stdout.resume();
  stderr.resume();
  docker.modem.demuxStream(stream, stdout, stderr);
  await new Promise<void>((resolve, reject) => {
    stream.on("end", resolve);
    stream.on("close", resolve);
    stream.on("error", reject);
  });
  const info = await exec.inspect();
  return info.ExitCode;
}

export async function benchRoundTrip(docker: Docker, sandbox: Sandbox, rounds: number): Promise<{ rows: Row[]; daemonExecMs: number[] }> {
  const registry = new ToolRegistry(workspaceTools());
  const context = toolContext(sandbox);
  const container = docker.getContainer(sandbox.id);
  const daemonExecMs: number[] = [];
  const check = (ok: boolean, what: string) => {
    if (!ok) throw new Error(`round-trip bench: ${what} failed`);
  };
  const samples = await interleave(
    {
      tool: async () => {
        const result = await registry.execute("run_shell", '{"command":"true"}', context);
        check(!result.isError && result.content.startsWith("exit_code: 0"), "run_shell");
      },
      exec: async () => {
        const result = await sandbox.exec({ command: "true" });
        daemonExecMs.push(result.durationMs);
        check(result.exitCode === 0, "sandbox.exec");
      },
      stat: async () => {
        check((await sandbox.stat("."))?.type === "directory", "sandbox.stat");
      },
      stopAll: () => sandbox.stopAllProcesses(),
      cli: async () => {
        await execFileAsync("docker", ["exec", sandbox.id, "true"]);
      },
      engine: async () => {
        check((await dockerodeExec(docker, container, ["true"])) === 0, "dockerode exec");
      },
      hostTrue: () => hostSpawn("true", []),
      hostBash: () => hostSpawn("bash", ["-c", "true"]),
    },
    rounds,
    3,
  );
  const rows: Row[] = [
    { name: "host spawn `true`", samples: samples.hostTrue! },
    { name: "host spawn `bash -c true`", samples: samples.hostBash!, baseline: "host spawn `true`" },
    { name: "docker exec <id> true (CLI)", samples: samples.cli!, baseline: "host spawn `true`" },
    { name: "dockerode exec true (Engine API)", samples: samples.engine!, baseline: "host spawn `true`" },
    {
      name: "sandbox.stat('.') (channel only)",
      samples: samples.stat!,
      baseline: "host spawn `true`",
      note: "one JSON line each way over the attach stream, no process",
    },
    {
      name: "sandbox.stopAllProcesses() (idle)",
      samples: samples.stopAll!,
      baseline: "sandbox.stat('.') (channel only)",
      note: "nothing running: one /proc scan in the daemon (run before host git reads the worktree)",
    },
    {
      name: "sandbox.exec('true') (raw)",
      samples: samples.exec!,
      baseline: "dockerode exec true (Engine API)",
      note: "the daemon spawns `bash -c true` in the container",
    },
    { name: "run_shell('true') via ToolRegistry", samples: samples.tool!, baseline: "dockerode exec true (Engine API)" },
  ];
  return { rows, daemonExecMs: daemonExecMs.slice(3) };
}
