/**
 * Subagent benchmarks (issue 4 "Measure"): `npx tsx bench/subagents.bench.ts`
 * (see bench/README.md, "Subagents").
 *
 * 1. wall: 4 worker subagents doing a fixed scripted job (edit their own
 *    file, `sleep 1`, pytest; verify; merge) with the real CLI: all `agent`
 *    calls in one turn (max_parallel 4) vs one call per turn (baseline) and
 *    vs one turn with max_parallel 1; each worker's time split into phases
 *    from events.jsonl and the Docker daemon's container events.
 * 2. ready: worker ready time (snapshot + worktree + container) on a
 *    2000-file repository vs `git worktree add` alone, the runner's worktree
 *    and snapshot steps, and a container start alone, in the same run.
 * 3. memory: cgroup memory of N idle sandboxes and the runner's RSS growth
 *    per sandbox, vs N `sleep` containers.
 *
 * Needs `npm run build` (the CLI is dist/cli/main.js, or RUNNER_BENCH_CLI),
 * a Docker daemon and the sandbox image, and root (like the other benches).
 * Network: only 127.0.0.1 (scripted model servers) and the Docker socket;
 * sandboxes run with network none. Cleanup: temp directories are removed;
 * the runs' containers (by run-id label) and the bench's own containers (by
 * name prefix) are removed at the end and on Ctrl-C.
 *
 * Options: --only=wall,ready,memory   parts (default all three)
 *          --rounds=N           part 1 runs per plan (default 5)
 *          --workers=N          part 1 workers (default 4)
 *          --sleep=S            seconds of each worker's `sleep` step (default 1)
 *          --wall-files=N       part 1: generated files in the repository besides the workers' (default 0)
 *          --ready-rounds=N     part 2 rounds (default 5; each: micro rows x --micro, 2 CLI runs)
 *          --micro=N            part 2 micro repetitions per round (default 3)
 *          --files=N            part 2 generated files (default 2000)
 *          --memory-rounds=N    part 3 rounds (default 3)
 *          --sandboxes=N        part 3 sandboxes per round (default 4)
 *          --idle-ms=N          part 3 idle time before reading (default 3000)
 */
import { cpus, loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import { requireDocker, sweepBenchContainers } from "./lib/docker-env.js";
import { benchSandboxMemory } from "./sections/sandbox-memory.js";
import { cleanUpRuns, SUBAGENT_CLI } from "./sections/subagent-runs.js";
import { benchWorkerReady } from "./sections/worker-ready.js";
import { benchWorkersWall } from "./sections/workers-wall.js";
import { option, positiveOption } from "./lib/options.js";

const PARTS = ["wall", "ready", "memory"];
const parts = new Set((option("only") ?? PARTS.join(",")).split(",").map((part) => part.trim()));
for (const part of parts) if (!PARTS.includes(part)) throw new Error(`unknown part ${part}; use ${PARTS.join(", ")}`);

const load = () =>
  loadavg()
    .map((value) => value.toFixed(2))
    .join(" ");
console.log(`agent-runner subagent bench: node ${process.version}, ${cpus().length} CPUs, load ${load()}, CLI ${SUBAGENT_CLI}`);
const docker = await requireDocker();
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    console.error(`\n${signal}: removing the bench's containers...`);
    void Promise.all([cleanUpRuns(docker), sweepBenchContainers(docker)]).finally(() => process.exit(130));
  });
}
const benchStarted = performance.now();
let failed = false;
try {
  if (parts.has("wall")) {
    const started = performance.now();
    const workers = positiveOption("workers", 4);
    const rounds = positiveOption("rounds", 5);
    console.log(`\n1. ${workers} workers in parallel vs one after another (real CLI, real Docker and git), ${rounds} runs per plan, load ${load()}`);
    await benchWorkersWall(docker, { rounds, workers, sleepSeconds: positiveOption("sleep", 1, { integer: false }), files: Number(option("wall-files") ?? 0) });
    console.log(`   (part 1: ${((performance.now() - started) / 1000).toFixed(1)} s, load now ${load()})`);
  }
  if (parts.has("ready")) {
    const started = performance.now();
    const files = positiveOption("files", 2000);
    console.log(`\n2. worker ready time on a ${files}-file repository, load ${load()}`);
    await benchWorkerReady(docker, {
      rounds: positiveOption("ready-rounds", 5),
      micro: positiveOption("micro", 3),
      files,
      sleepSeconds: positiveOption("sleep", 1, { integer: false }),
    });
    console.log(`   (part 2: ${((performance.now() - started) / 1000).toFixed(1)} s, load now ${load()})`);
  }
  if (parts.has("memory")) {
    const started = performance.now();
    console.log(`\n3. memory per idle sandbox, load ${load()}`);
    await benchSandboxMemory(docker, {
      rounds: positiveOption("memory-rounds", 3),
      sandboxes: positiveOption("sandboxes", 4),
      idleMs: positiveOption("idle-ms", 3000),
    });
    console.log(`   (part 3: ${((performance.now() - started) / 1000).toFixed(1)} s, load now ${load()})`);
  }
} catch (error) {
  failed = true;
  console.error(`\nbench failed: ${(error as Error).stack ?? error}`);
} finally {
  await cleanUpRuns(docker);
  const left = await sweepBenchContainers(docker);
  if (left.length) console.log(`removed leftover containers: ${left.join(", ")}`);
}
console.log(`\ntotal ${((performance.now() - benchStarted) / 1000).toFixed(1)} s; load now ${load()}`);
process.exit(failed ? 1 : 0);
