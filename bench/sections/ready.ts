/**
 * Section 1: container ready time (create → first tool answered) and close().
 *
 * Rows, all interleaved round-robin so background load hits them alike:
 *  - the runner: DockerSandboxProvider.create + sandbox.exec('true'), then close();
 *    the Engine API calls it makes are timed by wrapping dockerode (phase-trace.ts);
 *  - baselines: `docker run -d --rm <image> sleep 60` / `docker rm -f` via the CLI,
 *    the Engine floor (create + start of `sleep` with the runner's own create
 *    options from `sandboxContainerOptions`, stdin off), and a host `node -e 0`.
 */
import { spawn } from "node:child_process";
import { performance } from "node:perf_hooks";
import type Docker from "dockerode";
import { DockerSandboxProvider, sandboxContainerOptions } from "../../src/sandbox/docker/docker-sandbox-provider.js";
import type { Sandbox } from "../../src/sandbox/sandbox.js";
import { BENCH_IMAGE, benchScratch, benchSpec, execFileAsync, nextContainerName } from "../lib/docker-env.js";
import { instrument, phaseEnd, phaseMs, traced } from "../lib/phase-trace.js";
import { fmt, median, type Row } from "../lib/stats.js";

const PHASES = ["inspectImage", "create", "attach", "start", "hello", "firstExec"] as const;
type PhaseName = (typeof PHASES)[number];

interface Attempt {
  ready: number;
  close: number;
  /** close() started → the container is gone (`wait({condition: "removed"})`). */
  removed?: number;
  phases: Partial<Record<PhaseName, number>>;
}

export interface ReadyResult {
  rows: Row[];
  /** Per variant, per phase: samples. */
  phases: Record<string, Partial<Record<PhaseName, number[]>>>;
  readySamples: number[];
}

/**
 * The runner's exact create options (name `agent-runner-<bench runId>-main`,
 * the runner's labels, so a later runner start sweeps them if the bench is
 * killed) running `sleep 60` with no stdin: what the Engine costs without the
 * daemon, the attach and the first exec.
 */
function floorOptions(spec: ReturnType<typeof benchSpec>): Docker.ContainerCreateOptions {
  return {
    ...sandboxContainerOptions(spec, benchScratch()),
    Cmd: ["sleep", "60"],
    AttachStdin: false,
    AttachStdout: false,
    AttachStderr: false,
    OpenStdin: false,
    StdinOnce: false,
  };
}

function hostSpawn(command: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: "ignore" });
    child.on("error", reject);
    child.on("close", (code) => (code === 0 ? resolve() : reject(new Error(`${command} exited ${code}`))));
  });
}

export async function benchReady(docker: Docker, workspace: string, rounds: number): Promise<ReadyResult> {
  instrument(docker);
  const provider = new DockerSandboxProvider({ docker });
  const live = new Set<Sandbox>();

  const attempts: Record<string, Attempt[]> = {};
  const record = (name: string, attempt: Attempt) => (attempts[name] ??= []).push(attempt);

  const variants: Record<string, () => Promise<Attempt>> = {
    async runner() {
      const spec = benchSpec(workspace);
      const run = await traced(async () => {
        const sandbox = await provider.create(spec);
        live.add(sandbox);
        const created = performance.now();
        const result = await sandbox.exec({ command: "true" });
        if (result.exitCode !== 0) throw new Error(`first exec exited ${result.exitCode}`);
        return { sandbox, created };
      });
      const closeStart = performance.now();
      await run.value.sandbox.close();
      live.delete(run.value.sandbox);
      const close = performance.now() - closeStart;
      // close() ends stdin first, so AutoRemove races its remove(); a 409
      // ("removal in progress") lets it return before the container is gone.
      await docker
        .getContainer(run.value.sandbox.id)
        .wait({ condition: "removed" })
        .catch(() => undefined);
      const removed = performance.now() - closeStart;
      const { phases } = run;
      if (!Number.isFinite(phaseMs(phases, "create"))) {
        throw new Error("phase trace: provider.create did not go through the instrumented dockerode instance (did its constructor change?)");
      }
      return {
        ready: run.end - run.start,
        close,
        removed,
        phases: {
          inspectImage: phaseMs(phases, "inspectImage"),
          create: phaseMs(phases, "create"),
          attach: phaseMs(phases, "attach"),
          start: phaseMs(phases, "start"),
          hello: run.value.created - phaseEnd(phases, "start"),
          firstExec: run.end - run.value.created,
        },
      };
    },
    async cli() {
      const name = nextContainerName("cli");
      const started = performance.now();
      const { stdout } = await execFileAsync("docker", ["run", "-d", "--rm", "--name", name, BENCH_IMAGE, "sleep", "60"]);
      const ready = performance.now() - started;
      const closeStart = performance.now();
      await execFileAsync("docker", ["rm", "-f", stdout.trim()]);
      return { ready, close: performance.now() - closeStart, phases: {} };
    },
    async floor() {
      const phases: Attempt["phases"] = {};
      const started = performance.now();
      const container = await docker.createContainer(floorOptions(benchSpec(workspace)));
      phases.create = performance.now() - started;
      try {
        await container.start();
      } catch (error) {
        await container.remove({ force: true, v: true }).catch(() => undefined);
        throw error;
      }
      const ready = performance.now() - started;
      phases.start = ready - phases.create;
      const closeStart = performance.now();
      await container.remove({ force: true, v: true });
      return { ready, close: performance.now() - closeStart, phases };
    },
    async hostNode() {
      const started = performance.now();
      await hostSpawn("node", ["-e", "0"]);
      return { ready: performance.now() - started, close: Number.NaN, phases: {} };
    },
  };

  try {
    const names = Object.keys(variants);
    const warmup = 1;
    for (let round = -warmup; round < rounds; round += 1) {
      for (let k = 0; k < names.length; k += 1) {
        const name = names[(k + Math.max(round, 0)) % names.length]!;
        const attempt = await variants[name]!();
        if (round >= 0) record(name, attempt);
      }
    }
  } finally {
    await Promise.all([...live].map((sandbox) => sandbox.close().catch(() => undefined)));
  }

  const samples = (name: string, key: "ready" | "close" | "removed") => (attempts[name] ?? []).map((attempt) => attempt[key] ?? Number.NaN);
  const cli = "docker run -d --rm sleep 60 (CLI)";
  const rows: Row[] = [
    { name: cli, samples: samples("cli", "ready") },
    { name: "docker rm -f (CLI)", samples: samples("cli", "close") },
    { name: "host spawn `node -e 0`", samples: samples("hostNode", "ready"), note: "node start-up outside Docker: the floor of the daemon's hello" },
    {
      name: "engine floor: create+start `sleep`",
      samples: samples("floor", "ready"),
      baseline: cli,
      note: "dockerode, sandboxContainerOptions with Cmd sleep, no stdin/attach/daemon",
    },
    { name: "engine floor: remove({force})", samples: samples("floor", "close"), baseline: "docker rm -f (CLI)" },
    { name: "ready: provider.create + first exec", samples: samples("runner", "ready"), baseline: cli },
    { name: "  same samples, vs engine floor", samples: samples("runner", "ready"), baseline: "engine floor: create+start `sleep`" },
    { name: "close(): DockerSandbox.close", samples: samples("runner", "close"), baseline: "docker rm -f (CLI)" },
    {
      name: "close() until the container is gone",
      samples: samples("runner", "removed"),
      baseline: "docker rm -f (CLI)",
      note: "close() + wait({condition: removed})",
    },
  ];
  const phases: ReadyResult["phases"] = {};
  for (const [label, name] of [
    ["runner (provider)", "runner"],
    ["engine floor", "floor"],
  ] as const) {
    const perPhase: Partial<Record<PhaseName, number[]>> = {};
    for (const phase of PHASES) {
      const values = (attempts[name] ?? [])
        .map((attempt) => attempt.phases[phase])
        .filter((value): value is number => value !== undefined && Number.isFinite(value));
      if (values.length) perPhase[phase] = values;
    }
    phases[label] = perPhase;
  }
  return { rows, phases, readySamples: samples("runner", "ready") };
}

export function printPhases(result: ReadyResult): void {
  const header = ["variant (median ms)", ...PHASES, "sum"];
  const lines = Object.entries(result.phases).map(([label, perPhase]) => {
    const cells = PHASES.map((phase) => (perPhase[phase] ? fmt(median(perPhase[phase]!)) : "-"));
    const sum = PHASES.reduce((total, phase) => total + (perPhase[phase] ? median(perPhase[phase]!) : 0), 0);
    return [label, ...cells, fmt(sum)];
  });
  const widths = header.map((cell, column) => Math.max(cell.length, ...lines.map((line) => line[column]!.length)));
  const render = (cells: string[]) => cells.map((cell, column) => (column === 0 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!))).join("  ");
  console.log("\n-- ready-time phases (median of each phase; hello = start returned -> daemon hello; firstExec = exec('true') answered)");
  console.log(render(header));
  for (const line of lines) console.log(render(line));
}
