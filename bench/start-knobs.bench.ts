/**
 * Deeper dive for section 1: which part of the runner's HostConfig costs start
 * time? Creates + starts `sleep 60` with the runner's options minus one knob at
 * a time (interleaved round-robin), times create+start, then force-removes.
 * `npx tsx bench/start-knobs.bench.ts [--rounds=N]` (default 15, ~30 s).
 */
import { performance } from "node:perf_hooks";
import type Docker from "dockerode";
import { sandboxContainerOptions } from "../src/sandbox/docker/docker-sandbox-provider.js";
import { benchScratch, benchSpec, createWorkspace, nextContainerName, requireDocker, sweepBenchContainers, sweepOnSignals } from "./lib/docker-env.js";
import { printTable, type Row } from "./lib/stats.js";
import { SCRATCH_MOUNTS } from "../src/sandbox/docker/disk-watch.js";

const roundsArgument = process.argv.slice(2).find((argument) => argument.startsWith("--rounds="));
const rounds = roundsArgument ? Number(roundsArgument.slice("--rounds=".length)) : 15;

const docker = await requireDocker();
sweepOnSignals(docker);
const workspace = createWorkspace({ "README.md": "x\n" });

/** The runner's exact create options (src's sandboxContainerOptions) running `sleep 60` instead of the daemon. */
function runnerOptions(): Docker.ContainerCreateOptions {
  return { ...sandboxContainerOptions(benchSpec(workspace.path), benchScratch()), Cmd: ["sleep", "60"] };
}

const knobs: Record<string, (options: Docker.ContainerCreateOptions) => void> = {
  "runner HostConfig (sleep)": () => undefined,
  "- Init (no docker-init)": (options) => void (options.HostConfig!.Init = false),
  "- CapDrop/no-new-privileges": (options) => {
    delete options.HostConfig!.CapDrop;
    delete options.HostConfig!.SecurityOpt;
  },
  "- cgroup limits (mem/cpu/pids)": (options) => {
    for (const key of ["PidsLimit", "Memory", "MemorySwap", "NanoCpus"] as const) delete options.HostConfig![key];
  },
  "- workspace bind mount": (options) => void (options.HostConfig!.Mounts = options.HostConfig!.Mounts!.filter((mount) => mount.Target !== "/workspace")),
  "- disk limit: read-only image + scratch mounts": (options) => {
    options.HostConfig!.ReadonlyRootfs = false;
    options.HostConfig!.Mounts = options.HostConfig!.Mounts!.filter((mount) => !SCRATCH_MOUNTS.some((scratch) => scratch.target === mount.Target));
  },
  "- AutoRemove": (options) => void (options.HostConfig!.AutoRemove = false),
  "+ default bridge network": (options) => void (options.HostConfig!.NetworkMode = "bridge"),
};

const create: Record<string, number[]> = {};
const start: Record<string, number[]> = {};
const remove: Record<string, number[]> = {};
try {
  const names = Object.keys(knobs);
  for (let round = -1; round < rounds; round += 1) {
    for (let k = 0; k < names.length; k += 1) {
      const name = names[(k + Math.max(round, 0)) % names.length]!;
      const options = runnerOptions();
      options.name = nextContainerName("knob");
      knobs[name]!(options);
      const t0 = performance.now();
      const container = await docker.createContainer(options);
      const t1 = performance.now();
      await container.start();
      const t2 = performance.now();
      await container.remove({ force: true, v: true });
      const t3 = performance.now();
      if (round < 0) continue;
      (create[name] ??= []).push(t1 - t0);
      (start[name] ??= []).push(t2 - t1);
      (remove[name] ??= []).push(t3 - t2);
    }
  }
  const base = "runner HostConfig (sleep)";
  const rows = (samples: Record<string, number[]>, label: string): Row[] =>
    names.map((name) => ({ name: `${label}: ${name}`, samples: samples[name]!, baseline: name === base ? undefined : `${label}: ${base}` }));
  printTable("start time by HostConfig knob (container.start)", rows(start, "start"));
  printTable("create time by HostConfig knob (createContainer)", rows(create, "create"));
  printTable("remove({force}) time by HostConfig knob", rows(remove, "remove"));
} finally {
  workspace.dispose();
  await sweepBenchContainers(docker);
}
