/**
 * The static sandbox helper on images with and without Node (issue 14):
 * `npx tsx bench/helper.bench.ts [--rounds=N]`. Per image (the default
 * agent-runner/sandbox:bookworm and agent-runner/base:bookworm, which has no
 * Node), prints medians and ratios of:
 *   - run_shell('true') through the ToolRegistry, beside a host spawn of
 *     `true` and `docker exec <container> true` (CLI) on the same container;
 *   - container ready: provider.create + the first exec answered.
 * Goals (issue 14): round trip <= 1.3x a host spawn, ready <= 300 ms p50, on
 * both images. Needs Docker and both images (`make setup`); touches only the
 * Docker socket; every container runs with network none and is removed.
 */
import { spawn } from "node:child_process";
import { cpus, loadavg } from "node:os";
import { DockerSandboxProvider } from "../src/sandbox/docker/docker-sandbox-provider.js";
import { workspaceTools } from "../src/tools/builtin/index.js";
import { ToolRegistry } from "../src/tools/tool-registry.js";
import { benchSpec, createWorkspace, execFileAsync, requireDocker, sweepBenchContainers, sweepOnSignals } from "./lib/docker-env.js";
import { toolContext } from "./sections/round-trip.js";
import { fmt, goal, interleave, median, printTable, time, type Row } from "./lib/stats.js";

const IMAGES = ["agent-runner/sandbox:bookworm", "agent-runner/base:bookworm"];
const roundsOption = process.argv.slice(2).find((argument) => argument.startsWith("--rounds="));
const rounds = roundsOption ? Number(roundsOption.slice("--rounds=".length)) : 40;
if (!(Number.isInteger(rounds) && rounds >= 1)) throw new Error("--rounds must be a positive integer");

function hostSpawn(command: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: "ignore" });
    child.on("error", reject);
    child.on("close", (code) => (code === 0 ? resolve() : reject(new Error(`${command} exited ${code}`))));
  });
}

const docker = await requireDocker();
for (const image of IMAGES)
  await docker
    .getImage(image)
    .inspect()
    .catch(() => {
      throw new Error(`this bench needs ${image} (run \`make setup\`)`);
    });
sweepOnSignals(docker);
console.log(
  `agent-runner helper bench: node ${process.version}, ${cpus().length} CPUs, load ${loadavg()
    .map((value) => value.toFixed(2))
    .join(" ")}`,
);
const workspace = createWorkspace({ "README.md": "# bench\n" });
const provider = new DockerSandboxProvider({ docker });
const registry = new ToolRegistry(workspaceTools());
const goals: string[] = [];
let failed = false;
try {
  for (const image of IMAGES) {
    const sandbox = await provider.create({ ...benchSpec(workspace.path), image });
    let trip: Record<string, number[]>;
    try {
      const context = toolContext(sandbox);
      trip = await interleave(
        {
          tool: async () => {
            const result = await registry.execute("run_shell", '{"command":"true"}', context);
            if (result.isError || !result.content.startsWith("exit_code: 0")) throw new Error(`run_shell failed: ${result.content}`);
          },
          hostTrue: () => hostSpawn("true", []),
          cli: () => execFileAsync("docker", ["exec", sandbox.id, "true"]),
        },
        rounds,
      );
    } finally {
      await sandbox.close();
    }
    const ready: number[] = [];
    for (let round = 0; round < Math.max(5, Math.round(rounds / 2)); round += 1) {
      let created: Awaited<ReturnType<typeof provider.create>> | null = null;
      ready.push(
        await time(async () => {
          created = await provider.create({ ...benchSpec(workspace.path), image });
          await created.exec({ command: "true" });
        }),
      );
      await (created as Awaited<ReturnType<typeof provider.create>> | null)?.close();
    }
    const rows: Row[] = [
      { name: "host spawn `true`", samples: trip.hostTrue! },
      { name: "run_shell('true') via ToolRegistry", samples: trip.tool!, baseline: "host spawn `true`" },
      { name: "docker exec CLI `true`", samples: trip.cli!, baseline: "host spawn `true`" },
      { name: "container ready (create + first exec)", samples: ready },
    ];
    printTable(`${image}`, rows);
    const ratio = median(trip.tool!) / median(trip.hostTrue!);
    goals.push(
      `  ${image}: run_shell round trip <= 1.3x host spawn: ${ratio <= 1.3 ? "MET " : "MISS"} (${ratio.toFixed(2)}x; ${fmt(median(trip.tool!))} vs ${fmt(median(trip.hostTrue!))} ms)`,
    );
    goals.push(goal(`${image}: container ready`, ready, 300));
  }
  console.log("\n== goals");
  for (const line of goals) console.log(line);
} catch (error) {
  failed = true;
  console.error(`\nbench failed: ${(error as Error).stack ?? error}`);
} finally {
  workspace.dispose();
  const leftovers = await sweepBenchContainers(docker);
  if (leftovers.length) console.log(`swept ${leftovers.length} bench container(s): ${leftovers.join(", ")}`);
  console.log(
    `load now ${loadavg()
      .map((value) => value.toFixed(2))
      .join(" ")}`,
  );
}
process.exit(failed ? 1 : 0);
