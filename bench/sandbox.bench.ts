/**
 * Sandbox and agent-loop benchmarks: `npx tsx bench/sandbox.bench.ts`
 * (see bench/README.md). Prints, per section, median and p90 over repeated
 * runs and the ratio of medians against a baseline measured in the same run,
 * then the goals. Needs Docker and the sandbox image; touches only loopback
 * and the Docker socket; removes every container it made, also on Ctrl-C.
 *
 * Options: --only=ready,rtt,read,loop   sections to run (default all)
 *          --rounds=N                   repetitions for every section (defaults: ready 20, rtt 40, read 30, loop 20)
 */
import { cpus, loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import { DockerSandboxProvider } from "../src/sandbox/docker/docker-sandbox-provider.js";
import { FakeSandbox } from "../src/sandbox/fake/fake-sandbox.js";
import type { Sandbox } from "../src/sandbox/sandbox.js";
import { BENCH_IMAGE, benchSpec, createWorkspace, requireDocker, sweepBenchContainers, sweepOnSignals, textOfSize } from "./lib/docker-env.js";
import { goal, printTable, type Row } from "./lib/stats.js";
import { benchAgentLoop } from "./sections/agent-loop.js";
import { READ_FILES, benchReadFile } from "./sections/read-file.js";
import { benchReady, printPhases } from "./sections/ready.js";
import { benchRoundTrip } from "./sections/round-trip.js";

const WATCHDOG_MS = 175_000;

function option(name: string): string | undefined {
  const prefix = `--${name}=`;
  return process.argv
    .slice(2)
    .find((argument) => argument.startsWith(prefix))
    ?.slice(prefix.length);
}

const sections = new Set((option("only") ?? "ready,rtt,read,loop").split(",").map((section) => section.trim()));
for (const section of sections) {
  if (!["ready", "rtt", "read", "loop"].includes(section)) throw new Error(`unknown section ${section}; use ready, rtt, read, loop`);
}
const roundsOverride = option("rounds") === undefined ? undefined : Number(option("rounds"));
if (roundsOverride !== undefined && !(Number.isInteger(roundsOverride) && roundsOverride >= 1)) throw new Error("--rounds must be a positive integer");
const rounds = (fallback: number) => roundsOverride ?? fallback;

const docker = await requireDocker();
sweepOnSignals(docker);
const watchdog = setTimeout(() => {
  console.error(`\nbench: still running after ${WATCHDOG_MS / 1000} s; removing containers and giving up`);
  void sweepBenchContainers(docker).finally(() => process.exit(1));
}, WATCHDOG_MS);

const files: Record<string, string> = { "README.md": "# bench workspace\n", "main.py": "print('hi')\n" };
for (const [name, size] of Object.entries(READ_FILES)) files[name] = textOfSize(size);
const workspace = createWorkspace(files);

const version = (await docker.version()) as { Version?: string };
const others = (await docker.listContainers()).length;
console.log(
  `agent-runner bench: node ${process.version}, Docker ${version.Version ?? "?"}, ${cpus().length} CPUs, image ${BENCH_IMAGE}, ` +
    `load ${loadavg()
      .map((value) => value.toFixed(2))
      .join(" ")}, ${others} other container(s) running`,
);
const benchStarted = performance.now();
const sectionTime = (label: string, since: number) => console.log(`   (${label}: ${((performance.now() - since) / 1000).toFixed(1)} s)`);

let readySamples: number[] | undefined;
let toolRoundTrip: number[] | undefined;
let read100k: number[] | undefined;
let failed = false;
try {
  if (sections.has("ready")) {
    const started = performance.now();
    const result = await benchReady(docker, workspace.path, rounds(20));
    printTable("1. container ready (create -> first tool answered) and close", result.rows);
    printPhases(result);
    readySamples = result.readySamples;
    sectionTime("section 1", started);
  }
  if (sections.has("rtt") || sections.has("read") || sections.has("loop")) {
    const provider = new DockerSandboxProvider({ docker });
    const sandbox: Sandbox = await provider.create(benchSpec(workspace.path));
    try {
      if (sections.has("rtt")) {
        const started = performance.now();
        const { rows, daemonExecMs } = await benchRoundTrip(docker, sandbox, rounds(40));
        printTable("2. round trip of `true` on one container", rows);
        const sorted = [...daemonExecMs].sort((a, b) => a - b);
        console.log(`   in-container durationMs reported by the daemon for exec('true'): median ${sorted[Math.floor(sorted.length / 2)] ?? "-"} ms (whole ms)`);
        toolRoundTrip = rows.find((row) => row.name.startsWith("run_shell"))?.samples;
        sectionTime("section 2", started);
      }
      if (sections.has("read")) {
        const started = performance.now();
        const rows: Row[] = await benchReadFile(sandbox, workspace.path, rounds(30));
        printTable("3. read_file", rows);
        read100k = rows.find((row) => row.name.startsWith("read_file 100 KB"))?.samples;
        sectionTime("section 3", started);
      }
      if (sections.has("loop")) {
        const started = performance.now();
        const memory = new FakeSandbox(Object.fromEntries(Object.keys(files).map((name) => [name, "x"])));
        const rows = await benchAgentLoop({ memory, docker: sandbox }, rounds(20), Math.max(rounds(20) * 5, 20));
        printTable("4. agent loop, scripted model, 50 steps of list_dir", rows);
        sectionTime("section 4", started);
      }
    } finally {
      await sandbox.close();
    }
  }
  console.log("\n== goals");
  console.log(goal("tool round trip: run_shell('true') via ToolRegistry", toolRoundTrip, 5));
  console.log(goal("read_file 100 KB via ToolRegistry", read100k, 10));
  console.log(goal("container ready: provider.create + first exec", readySamples, 300));
} catch (error) {
  failed = true;
  console.error(`\nbench failed: ${(error as Error).stack ?? error}`);
} finally {
  clearTimeout(watchdog);
  workspace.dispose();
  const leftovers = await sweepBenchContainers(docker);
  if (leftovers.length) console.log(`swept ${leftovers.length} bench container(s) still listed: ${leftovers.join(", ")}`);
  console.log(
    `\ntotal ${((performance.now() - benchStarted) / 1000).toFixed(1)} s; load now ${loadavg()
      .map((value) => value.toFixed(2))
      .join(" ")}`,
  );
}
process.exit(failed ? 1 : 0);
