/**
 * Python's bytecode cache in a sandbox, before and after issue 14: the same
 * import run twice in one sandbox (DockerSandboxProvider, the run's own
 * container environment from `containerEnvironment`), with the environment
 * of before (PYTHONDONTWRITEBYTECODE=1) and of now (PYTHONPYCACHEPREFIX under
 * the container's /tmp). A fresh sandbox per variant and round, rounds
 * interleaved; prints each import's wall time inside the container, ms.
 *
 *   npx tsx bench/bytecode-cache.bench.ts [--rounds=5] [--import=networkx] [--project=DIR]
 *
 * `--project` mounts DIR as the workspace (e.g. the networkx tree of
 * trajectory.bench.ts, so `import networkx` compiles workspace code);
 * without it the import is of the image's own packages (default `pytest`).
 */
import { DockerSandboxProvider } from "../src/sandbox/docker/docker-sandbox-provider.js";
import { containerEnvironment } from "../src/run/run-task.js";
import { benchSpec, createWorkspace, requireDocker, sweepBenchContainers, sweepOnSignals } from "./lib/docker-env.js";
import { median, p90 } from "./lib/stats.js";

function option(name: string): string | undefined {
  return process.argv
    .slice(2)
    .find((argument) => argument.startsWith(`--${name}=`))
    ?.slice(name.length + 3);
}
const rounds = Number(option("rounds") ?? 5);
const module = option("import") ?? "pytest";
const project = option("project");

const docker = await requireDocker();
sweepOnSignals(docker);
const workspace = project ? null : createWorkspace({ "README.md": "bench\n" });
const now = containerEnvironment({ env: {}, pass_env: [], secret_env: [] }, {});
const before = { ...now, PYTHONDONTWRITEBYTECODE: "1" } as Record<string, string>;
delete before.PYTHONPYCACHEPREFIX;
const variants = { "before: PYTHONDONTWRITEBYTECODE=1": before, "now: PYTHONPYCACHEPREFIX=/tmp/.pycache": now };
const samples: Record<string, { first: number[]; second: number[] }> = {};
const provider = new DockerSandboxProvider({ docker });
const timed = `python3 -c 'import time; t = time.perf_counter(); import ${module}; print(round((time.perf_counter() - t) * 1000))'`;
try {
  for (let round = 0; round < rounds; round += 1) {
    for (const [label, env] of Object.entries(variants)) {
      const sandbox = await provider.create({ ...benchSpec(project ?? workspace!.path), env });
      try {
        const first = await sandbox.exec({ command: timed, timeoutMs: 300_000 });
        const second = await sandbox.exec({ command: timed, timeoutMs: 300_000 });
        if (first.exitCode !== 0 || second.exitCode !== 0) throw new Error(`import ${module} failed: ${first.stderr}${second.stderr}`);
        const entry = (samples[label] ??= { first: [], second: [] });
        entry.first.push(Number(first.stdout.trim()));
        entry.second.push(Number(second.stdout.trim()));
      } finally {
        await sandbox.close();
      }
    }
  }
  console.log(`import ${module}, ${rounds} fresh sandboxes per variant (ms inside the container: median / p90)`);
  for (const [label, { first, second }] of Object.entries(samples)) {
    const show = (values: number[]) => `${Math.round(median(values))} / ${Math.round(p90(values))}`;
    console.log(`${label}\tfirst import ${show(first)}\tsecond import ${show(second)}`);
  }
} finally {
  await sweepBenchContainers(docker);
  workspace?.dispose();
}
