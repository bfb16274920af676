/**
 * What `sandbox.limits.disk` costs (issue 10 item 8): `npx tsx bench/disk-limit.bench.ts [--rounds=N]`
 * (default 15, ~1 min; as root, like the tests: the run's own filesystem is a loop mount).
 *
 *  1. Container ready time (DockerSandboxProvider.create → first exec answered),
 *     interleaved: the runner as it is (read-only image; /tmp, /var/tmp and
 *     /run/lock bound from a fresh scratch directory) against the same provider
 *     whose createContainer gets a writable image and no scratch mounts (what it
 *     did before). close() is not timed (alike for both).
 *  2. The run's own filesystem, once per run: openRunDisk (sparse image,
 *     mkfs.ext4, loop mount) for 10 GiB (the default) and 64 MiB, and closeRunDisk (umount, rm).
 *  3. The monitor's measurement (the fallback when the runner is not root):
 *     DockerSandbox.measureDisk walking a workspace of 1k, 10k and 50k files.
 */
import { chownSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Docker from "dockerode";
import { DockerSandboxProvider } from "../src/sandbox/docker/docker-sandbox-provider.js";
import type { DockerSandbox } from "../src/sandbox/docker/docker-sandbox.js";
import { SCRATCH_MOUNTS } from "../src/sandbox/docker/disk-watch.js";
import type { Sandbox, SandboxSpec } from "../src/sandbox/sandbox.js";
import { closeRunDisk, openRunDisk } from "../src/workspace/run-disk.js";
import { benchSpec, createWorkspace, requireDocker, SANDBOX_UID, sweepBenchContainers, sweepOnSignals } from "./lib/docker-env.js";
import { interleave, printTable, time, type Row } from "./lib/stats.js";

const roundsArgument = process.argv.slice(2).find((argument) => argument.startsWith("--rounds="));
const rounds = roundsArgument ? Number(roundsArgument.slice("--rounds=".length)) : 15;
if (process.getuid?.() !== 0) throw new Error("run this bench as root: the run's own filesystem is a loop mount");

const docker = await requireDocker();
sweepOnSignals(docker);
const workspace = createWorkspace({ "README.md": "x\n" });
const scratchRoot = mkdtempSync(join(tmpdir(), "agent-runner-bench-disk-"));

/** A dockerode whose createContainer drops what the disk limit adds: the image stays writable, no scratch mounts. */
function dockerWithoutDiskOptions(): Docker {
  const plain = new Docker();
  const create = plain.createContainer.bind(plain);
  plain.createContainer = ((options: Docker.ContainerCreateOptions) =>
    create({
      ...options,
      HostConfig: {
        ...options.HostConfig,
        ReadonlyRootfs: false,
        Mounts: options.HostConfig!.Mounts!.filter((mount) => !SCRATCH_MOUNTS.some((scratch) => scratch.target === mount.Target)),
      },
    })) as Docker["createContainer"];
  return plain;
}

function spec(workspacePath: string, enforcement: SandboxSpec["disk"]["enforcement"]): SandboxSpec {
  return { ...benchSpec(workspacePath), disk: { limitBytes: 10 * 1024 ** 3, enforcement, scratchDirectory: scratchRoot } };
}

/** Samples of create → first exec only; each sandbox is closed afterwards, untimed. */
async function readySamples(providers: Record<string, DockerSandboxProvider>): Promise<Record<string, number[]>> {
  const samples: Record<string, number[]> = {};
  const variants = Object.fromEntries(
    Object.entries(providers).map(([name, provider]) => [
      name,
      async () => {
        let sandbox: Sandbox | null = null;
        const elapsed = await time(async () => {
          sandbox = await provider.create(spec(workspace.path, "filesystem"));
          const result = await sandbox.exec({ command: "true" });
          if (result.exitCode !== 0) throw new Error(`first exec exited ${result.exitCode}`);
        });
        (samples[name] ??= []).push(elapsed);
        await (sandbox as Sandbox | null)?.close();
      },
    ]),
  );
  await interleave(variants, rounds, 2);
  // The warm-up rounds recorded samples too: keep the timed ones.
  return Object.fromEntries(Object.entries(samples).map(([name, values]) => [name, values.slice(-rounds)]));
}

function chownTree(root: string): void {
  chownSync(root, SANDBOX_UID, SANDBOX_UID);
  for (const entry of readdirSync(root, { withFileTypes: true })) {
    const path = join(root, entry.name);
    if (entry.isDirectory()) chownTree(path);
    else chownSync(path, SANDBOX_UID, SANDBOX_UID);
  }
}

try {
  const now = "ready: read-only image + scratch mounts (now)";
  const before = "ready: writable image, no scratch mounts (before)";
  const ready = await readySamples({ [now]: new DockerSandboxProvider(), [before]: new DockerSandboxProvider({ docker: dockerWithoutDiskOptions() }) });
  printTable("1. container ready (provider.create → first exec), ms", [
    { name: before, samples: ready[before]! },
    { name: now, samples: ready[now]!, baseline: before },
  ]);

  const opened: string[] = [];
  const openDisk = (limitBytes: number) => async () => {
    const directory = mkdtempSync(join(scratchRoot, "run-"));
    const disk = await openRunDisk(directory, limitBytes);
    if (disk.enforcement !== "filesystem") throw new Error(`no filesystem of the run's own: ${disk.detail}`);
    opened.push(directory);
  };
  const disk = await interleave(
    {
      "openRunDisk 10 GiB (truncate, mkfs.ext4, mount)": openDisk(10 * 1024 ** 3),
      "openRunDisk 64 MiB": openDisk(64 * 1024 ** 2),
      "closeRunDisk (umount, rm)": async () => {
        const directory = opened.shift();
        if (directory) await closeRunDisk(directory);
      },
    },
    rounds,
    1,
  );
  for (const directory of opened.splice(0)) await closeRunDisk(directory);
  printTable(
    "2. the run's own filesystem, once per run, ms",
    Object.entries(disk).map(([name, samples]) => ({ name, samples })),
  );

  const walks: Row[] = [];
  for (const count of [1_000, 10_000, 50_000]) {
    const tree = join(scratchRoot, `tree-${count}`);
    for (let index = 0; index < count; index += 1) {
      const directory = join(tree, `d${Math.floor(index / 100)}`);
      if (index % 100 === 0) mkdirSync(directory, { recursive: true });
      writeFileSync(join(directory, `f${index}.txt`), "x".repeat(200));
    }
    chownTree(tree);
    const sandbox = (await new DockerSandboxProvider().create(spec(tree, "monitor"))) as DockerSandbox;
    try {
      const samples = await interleave({ walk: () => sandbox.measureDisk() }, Math.min(rounds, 10), 1);
      walks.push({ name: `monitor: measureDisk, ${count} files`, samples: samples.walk! });
    } finally {
      await sandbox.close();
      rmSync(tree, { recursive: true, force: true });
    }
  }
  printTable("3. the monitor's measurement (fallback), ms", walks);
} finally {
  workspace.dispose();
  await sweepBenchContainers(docker);
  rmSync(scratchRoot, { recursive: true, force: true });
}
