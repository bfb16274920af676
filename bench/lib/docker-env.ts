/**
 * Docker fixtures for the benchmarks: the image, a workspace owned by the
 * sandbox uid, a SandboxSpec like the tests', unique names under one
 * per-process prefix, and a sweep that force-removes everything carrying that
 * prefix (called in `finally` and on SIGINT/SIGTERM). Only the local Docker
 * socket is used; every container runs with network "none" except the
 * `docker run` CLI baseline, which runs `sleep` and never uses its network.
 */
import { execFile } from "node:child_process";
import { chownSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import Docker from "dockerode";
import type { SandboxSpec } from "../../src/sandbox/sandbox.js";
import { LABEL_RUN_ID } from "../../src/sandbox/docker/labels.js";
import { createScratchDirectory } from "../../src/sandbox/docker/disk-watch.js";
import { requireDocker as requireDockerAndImage } from "../../tests/helpers/docker.js";

export const execFileAsync = promisify(execFile);

export const BENCH_IMAGE = process.env.RUNNER_BENCH_IMAGE ?? "agent-runner/sandbox:bookworm";
export const SANDBOX_UID = 1000;

/** Every container this process creates has this in its name. */
export const BENCH_PREFIX = `bench-${process.pid}-${Date.now().toString(36)}`;
let counter = 0;

/** A fresh run id; provider containers are named `agent-runner-<runId>-main`. */
export function nextRunId(): string {
  counter += 1;
  return `${BENCH_PREFIX}-${counter}`;
}

/** A fresh container name for containers the bench creates itself. */
export function nextContainerName(kind: string): string {
  counter += 1;
  return `agent-runner-${BENCH_PREFIX}-${kind}${counter}`;
}

/** The tests' pre-flight check, with the bench's image. */
export function requireDocker(): Promise<Docker> {
  return requireDockerAndImage(BENCH_IMAGE);
}

export interface BenchWorkspace {
  path: string;
  dispose(): void;
}

/** A temporary host directory holding `files`, owned by the sandbox uid so the container can use it. */
export function createWorkspace(files: Record<string, string | Buffer>): BenchWorkspace {
  const root = mkdtempSync(join(tmpdir(), "agent-runner-bench-ws-"));
  for (const [name, content] of Object.entries(files)) {
    writeFileSync(join(root, name), content);
    chownSafe(join(root, name));
  }
  chownSafe(root);
  return { path: root, dispose: () => rmSync(root, { recursive: true, force: true }) };
}

function chownSafe(path: string): void {
  try {
    chownSync(path, SANDBOX_UID, SANDBOX_UID);
  } catch {
    // not root: reads still work, the benchmarks do not write
  }
}

/** `lines` of ~80 characters until `bytes` is reached: text the read_file tool accepts. */
export function textOfSize(bytes: number): string {
  const parts: string[] = [];
  let size = 0;
  for (let line = 1; size < bytes; line += 1) {
    const text = `line ${String(line).padStart(6, "0")}: ${"the quick brown fox jumps over the lazy dog ".repeat(2).slice(0, 66)}\n`;
    parts.push(text);
    size += text.length;
  }
  return parts.join("").slice(0, bytes);
}

/** Parent of the bench containers' writable directories outside /workspace. */
const BENCH_SCRATCH_DIRECTORY = join(tmpdir(), `agent-runner-bench-scratch-${process.pid}`);

let benchScratchPath: string | null = null;

/**
 * One scratch directory (the container's /tmp, /var/tmp, /run/lock) for the
 * containers a bench creates itself from `sandboxContainerOptions`; removed by
 * {@link sweepBenchContainers}.
 */
export function benchScratch(): string {
  benchScratchPath ??= createScratchDirectory(BENCH_SCRATCH_DIRECTORY);
  return benchScratchPath;
}

export function benchSpec(workspace: string, runId = nextRunId()): SandboxSpec {
  return {
    runId,
    agentId: "main",
    image: BENCH_IMAGE,
    workspace: { hostPath: workspace },
    readOnlyMounts: [],
    env: { HOME: "/tmp", PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", LANG: "C.UTF-8" },
    user: { uid: SANDBOX_UID, gid: SANDBOX_UID },
    network: null,
    limits: { cpus: 1, memoryBytes: 512 * 1024 * 1024, pids: 256, fileSizeBytes: 1024 ** 3 },
    disk: { limitBytes: 10 * 1024 ** 3, enforcement: "monitor", scratchDirectory: BENCH_SCRATCH_DIRECTORY },
  };
}

/** Force-removes every container whose name carries this process's prefix; returns "name (state)" of each. Never throws. */
export async function sweepBenchContainers(docker: Docker): Promise<string[]> {
  try {
    const containers = await docker.listContainers({ all: true, filters: { name: [BENCH_PREFIX] } });
    await Promise.all(
      containers.map((info) =>
        docker
          .getContainer(info.Id)
          .remove({ force: true, v: true })
          .catch(() => undefined),
      ),
    );
    return containers.map((info) => `${info.Names[0]?.replace(/^\//, "") ?? info.Id.slice(0, 12)} (${info.Status})`);
  } catch {
    return [];
  } finally {
    rmSync(BENCH_SCRATCH_DIRECTORY, { recursive: true, force: true });
    benchScratchPath = null;
  }
}

/** Sweeps on SIGINT/SIGTERM too, then exits 130. */
export function sweepOnSignals(docker: Docker): void {
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => {
      console.error(`\n${signal}: removing bench containers...`);
      void sweepBenchContainers(docker).finally(() => process.exit(130));
    });
  }
}

/** Force-removes every container labelled with one of `runIds` (best effort); returns their names. */
export async function removeRunContainers(docker: Docker, runIds: Iterable<string>): Promise<string[]> {
  const removed: string[] = [];
  for (const runId of runIds) {
    try {
      for (const info of await docker.listContainers({ all: true, filters: { label: [`${LABEL_RUN_ID}=${runId}`] } })) {
        await docker
          .getContainer(info.Id)
          .remove({ force: true, v: true })
          .catch(() => undefined);
        removed.push(info.Names[0] ?? info.Id.slice(0, 12));
      }
    } catch {
      // best effort
    }
  }
  return removed;
}
