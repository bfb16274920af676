/**
 * A recorded trajectory of shell commands on a real Python project, side by
 * side (issue 14 "Measure"): through `runner exec` (the built CLI, scripted
 * model, one run_shell call per command) and through a plain loop of Docker
 * execs (dockerode, as the SWE-bench harness does with docker-py) in a
 * `sleep infinity` container of the same image, the repository bind-mounted,
 * default Python settings. Both end as a run does: a host `git commit` of
 * the work and the verify command on a clean checkout in a fresh container.
 *
 *   npx tsx bench/trajectory.bench.ts --project=DIR [--variant=cache|nocache|both] [--rounds=N]
 *
 * DIR: a networkx source tree (bench/README.md says which commit and how it
 * was exported); it is copied into a fresh git repository per run. Needs the
 * built CLI (npm run build), Docker and the image (RUNNER_BENCH_IMAGE).
 * `--rounds` runs of each side, interleaved with a rotating order; medians.
 * `nocache` runs the runner with the environment it had before issue 14
 * (PYTHONDONTWRITEBYTECODE=1, no PYTHONPYCACHEPREFIX). Network: none in any
 * container; the CLI's scripted model listens on 127.0.0.1.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { PassThrough } from "node:stream";
import { fileURLToPath } from "node:url";
import Docker from "dockerode";
import { BENCH_IMAGE } from "./lib/docker-env.js";
import { median } from "./lib/stats.js";

/** The trajectory: what an agent fixing a bug in networkx's cycle code runs (34 commands). */
export const TRAJECTORY = [
  "ls",
  "git status --short | head",
  "git log --oneline -3",
  "head -40 README.rst",
  "ls networkx",
  "ls networkx/algorithms | head -50",
  'grep -rn "def simple_cycles" networkx | head',
  "sed -n 1,80p networkx/algorithms/cycles.py",
  "python -c 'import networkx as nx; print(nx.__version__)'",
  "python -c 'import networkx as nx; G = nx.cycle_graph(5).to_directed(); print(sorted(nx.simple_cycles(G))[:3])'",
  "python -m pytest -q -p no:cacheprovider networkx/algorithms/tests/test_cycles.py",
  'grep -n "def shortest_path" networkx/algorithms/shortest_paths/generic.py',
  "python -m pytest -q -p no:cacheprovider networkx/algorithms/shortest_paths/tests/test_generic.py",
  "python -c 'import networkx as nx; print(nx.shortest_path(nx.path_graph(10), 0, 9))'",
  "wc -l networkx/algorithms/*.py | tail -1",
  "python -m pytest -q -p no:cacheprovider networkx/algorithms/tests/test_dag.py",
  "python -m pytest -q -p no:cacheprovider networkx/classes/tests/test_graph.py",
  "python -m pytest -q -p no:cacheprovider networkx/classes/tests/test_digraph.py",
  'find networkx -name "test_*.py" | wc -l',
  "python -c 'import networkx as nx; print(nx.number_of_edges(nx.complete_graph(50)))'",
  "printf 'import networkx as nx\\nG = nx.DiGraph([(0, 1), (1, 2), (2, 0)])\\nprint(list(nx.simple_cycles(G)))\\n' > /tmp/repro.py && python /tmp/repro.py",
  "python -m pytest -q -p no:cacheprovider networkx/algorithms/tests/test_cluster.py",
  "python -m pytest -q -p no:cacheprovider networkx/generators/tests/test_classic.py",
  "sed -i '1i # checked by the trajectory bench' networkx/algorithms/cycles.py",
  "git diff --stat",
  "python -m pytest -q -p no:cacheprovider networkx/algorithms/tests/test_cycles.py",
  "python -m pytest -q -p no:cacheprovider networkx/algorithms/components/tests",
  "python -c 'import networkx.algorithms.isomorphism'",
  "python -m pytest -q -p no:cacheprovider networkx/algorithms/tests/test_matching.py",
  'grep -n "TODO" networkx/algorithms/cycles.py | head',
  "python -m pytest -q -p no:cacheprovider networkx/readwrite/tests/test_edgelist.py",
  "python -m pytest -q -p no:cacheprovider networkx/algorithms/flow/tests/test_maxflow.py",
  "git status --short",
  "python -m pytest -q -p no:cacheprovider networkx/algorithms/tests/test_cycles.py networkx/algorithms/tests/test_dag.py",
];
const VERIFY = "python -m pytest -q -p no:cacheprovider networkx/algorithms/tests/test_cycles.py networkx/algorithms/tests/test_dag.py";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const CLI = join(ROOT, "dist/cli/main.js");

function option(name: string): string | undefined {
  return process.argv
    .slice(2)
    .find((argument) => argument.startsWith(`--${name}=`))
    ?.slice(name.length + 3);
}

/** A fresh git repository holding a copy of `project`, in its own temporary directory. */
function repositoryCopy(project: string): { directory: string; repo: string } {
  const directory = mkdtempSync(join(tmpdir(), "agent-runner-trajectory-"));
  const repo = join(directory, "repo");
  cpSync(project, repo, { recursive: true });
  const git = (...args: string[]) =>
    execFileSync("git", ["-c", "user.name=bench", "-c", "user.email=bench@localhost", ...args], { cwd: repo, stdio: "ignore" });
  git("init", "-q", "-b", "main");
  git("add", "-A");
  git("commit", "-q", "-m", "project");
  return { directory, repo };
}

interface SideResult {
  toolMs: number;
  /** Each command's time, ms, in trajectory order. */
  commandMs: number[];
  /** How the run's disk limit was held (the runner only). */
  disk?: string;
  wholeMs: number;
  commitMs: number | null;
  verifyMs: number | null;
  exitCodes: (number | null)[];
}

/** `runner exec` of the trajectory: tool time from the run_shell calls' `tool_call.finished` durations. */
function runnerSide(project: string, environment: Record<string, string>): SideResult {
  const { directory } = repositoryCopy(project);
  try {
    writeFileSync(
      join(directory, "allow-all.yaml"),
      "name: allow-all\ndescription: bench\ntools: { allow: ['*'] }\ndefault_command_risk: allow\nconfirmations: allow\n",
    );
    const turns = [...TRAJECTORY.map((command) => ({ tool_calls: [{ name: "run_shell", arguments: { command, timeout_ms: 600_000 } }] })), { content: "done" }];
    writeFileSync(join(directory, "script.yaml"), JSON.stringify({ turns }));
    writeFileSync(
      join(directory, "task.yaml"),
      JSON.stringify({
        name: "trajectory-bench",
        instruction: "replay",
        workspace: "./repo",
        model: { provider: "scripted", script: "./script.yaml" },
        policy: "./allow-all.yaml",
        sandbox: { image: BENCH_IMAGE, limits: { cpus: 2, memory: "2g", pids: 1024 }, env: environment },
        verify: { command: VERIFY, timeout_sec: 600 },
        max_steps: TRAJECTORY.length + 5,
      }),
    );
    const home = join(directory, "home");
    const started = performance.now();
    const cli = spawnSync(process.execPath, [CLI, "exec", join(directory, "task.yaml")], { env: { ...process.env, RUNNER_HOME: home }, encoding: "utf8" });
    const wholeMs = performance.now() - started;
    const runDirectory = /run directory: (\S+)/.exec(cli.stdout)?.[1];
    if (!runDirectory) throw new Error(`runner exec did not start a run (exit ${cli.status}):\n${cli.stdout}\n${cli.stderr}`);
    const events = readFileSync(join(runDirectory, "events.jsonl"), "utf8")
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { type: string; time: string; data: Record<string, unknown> });
    const of = (type: string) => events.filter((event) => event.type === `dev.agent-runner.${type}.v1`);
    const finished = of("tool_call.finished");
    const at = (type: string) => Date.parse(of(type)[0]?.time ?? "");
    const report = JSON.parse(readFileSync(join(runDirectory, "report.json"), "utf8")) as { status: string; reason: string };
    if (report.status !== "succeeded") throw new Error(`the runner's run ended ${report.status} (${report.reason}); see ${runDirectory}`);
    return {
      toolMs: finished.reduce((sum, event) => sum + Number(event.data.duration_ms), 0),
      commandMs: finished.map((event) => Number(event.data.duration_ms)),
      disk: String(of("disk.prepared")[0]?.data.enforcement),
      wholeMs,
      commitMs: at("workspace.committed") - at("agent.finished"),
      verifyMs: at("verify.finished") - at("workspace.committed"),
      exitCodes: finished.map((event) => Number(/^exit_code: (-?\d+)/.exec(String(event.data.result_preview))?.[1] ?? NaN)),
    };
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
}

/** One command by `bash -c` through a Docker exec, as the sandbox user, output drained; resolves with its exit code. */
async function dockerExec(container: Docker.Container, command: string): Promise<number | null> {
  const exec = await container.exec({ Cmd: ["bash", "-c", command], User: "1000:1000", WorkingDir: "/workspace", AttachStdout: true, AttachStderr: true });
  const stream = await exec.start({ hijack: true, stdin: false });
  const sink = new PassThrough();
  sink.resume();
  container.modem.demuxStream(stream, sink, sink);
  await new Promise((resolve) => stream.on("end", resolve));
  return (await exec.inspect()).ExitCode;
}

/** The plain loop: `sleep infinity` container, one Docker exec per command, then host commit and a clean-checkout verify. */
async function loopSide(docker: Docker, project: string): Promise<SideResult> {
  const { directory, repo } = repositoryCopy(project);
  execFileSync("chown", ["-R", "1000:1000", repo]);
  const name = `agent-runner-bench-trajectory-${process.pid}`;
  const started = performance.now();
  const container = await docker.createContainer({
    name,
    Image: BENCH_IMAGE,
    Cmd: ["sleep", "infinity"],
    Entrypoint: [],
    Env: ["HOME=/tmp"],
    HostConfig: { NetworkMode: "none", AutoRemove: true, Binds: [`${repo}:/workspace`], NanoCpus: 2e9, Memory: 2 * 1024 ** 3 },
  });
  let verifyContainer: Docker.Container | null = null;
  try {
    await container.start();
    const exitCodes: (number | null)[] = [];
    const commandMs: number[] = [];
    for (const command of TRAJECTORY) {
      const commandStarted = performance.now();
      exitCodes.push(await dockerExec(container, command));
      commandMs.push(performance.now() - commandStarted);
    }
    const toolMs = commandMs.reduce((sum, value) => sum + value, 0);
    await container.remove({ force: true });
    const commitStarted = performance.now();
    // The files are the sandbox uid's now: git run by root would call them dubious.
    const git = (...args: string[]) =>
      execFileSync("git", ["-c", "safe.directory=*", "-c", "user.name=bench", "-c", "user.email=bench@localhost", ...args], { cwd: repo, encoding: "utf8" });
    git("add", "-A");
    git("commit", "-q", "-m", "work");
    const commitMs = performance.now() - commitStarted;
    const verifyStarted = performance.now();
    const checkout = join(directory, "verify");
    git("worktree", "add", "-q", "--detach", checkout, "HEAD");
    execFileSync("chown", ["-R", "1000:1000", checkout]);
    verifyContainer = await docker.createContainer({
      name: `${name}-verify`,
      Image: BENCH_IMAGE,
      Cmd: ["bash", "-c", VERIFY],
      Entrypoint: [],
      User: "1000:1000",
      WorkingDir: "/workspace",
      Env: ["HOME=/tmp"],
      HostConfig: { NetworkMode: "none", Binds: [`${checkout}:/workspace`], NanoCpus: 2e9, Memory: 2 * 1024 ** 3 },
    });
    await verifyContainer.start();
    const verified = (await verifyContainer.wait()) as { StatusCode: number };
    const verifyMs = performance.now() - verifyStarted;
    if (verified.StatusCode !== 0) throw new Error(`the loop's verify command exited ${verified.StatusCode}`);
    return { toolMs, commandMs, wholeMs: performance.now() - started, commitMs, verifyMs, exitCodes };
  } finally {
    await container.remove({ force: true }).catch(() => undefined);
    await verifyContainer?.remove({ force: true }).catch(() => undefined);
    rmSync(directory, { recursive: true, force: true });
  }
}

const project = option("project");
if (!project) throw new Error("give --project=DIR (a networkx source tree; see bench/README.md)");
const variant = option("variant") ?? "both";
const rounds = Number(option("rounds") ?? 1);
const docker = new Docker();
console.log(
  `trajectory: ${TRAJECTORY.length} commands on ${project}, image ${BENCH_IMAGE}, ${rounds} round(s) interleaved, load ${loadavg()
    .map((load) => load.toFixed(1))
    .join(" ")}`,
);
const sides: [string, () => Promise<SideResult>][] = [["docker exec loop", () => loopSide(docker, project)]];
if (variant !== "nocache") sides.push(["runner exec (bytecode cache in /tmp)", async () => runnerSide(project, {})]);
if (variant !== "cache")
  sides.push(["runner exec (before: PYTHONDONTWRITEBYTECODE=1)", async () => runnerSide(project, { PYTHONDONTWRITEBYTECODE: "1", PYTHONPYCACHEPREFIX: "" })]);
const results = new Map<string, SideResult[]>(sides.map(([label]) => [label, []]));
for (let round = 0; round < rounds; round += 1) {
  // Rotated order: background load hits every side alike.
  for (let index = 0; index < sides.length; index += 1) {
    const [label, run] = sides[(index + round) % sides.length]!;
    results.get(label)!.push(await run());
  }
}
const middle = (values: number[]) => median(values);
const summary = (label: string) => {
  const all = results.get(label)!;
  return {
    toolMs: middle(all.map((result) => result.toolMs)),
    wholeMs: middle(all.map((result) => result.wholeMs)),
    commitMs: middle(all.map((result) => result.commitMs ?? 0)),
    verifyMs: middle(all.map((result) => result.verifyMs ?? 0)),
  };
};
const loop = summary("docker exec loop");
const ms = (value: number) => `${Math.round(value)}`;
console.log(["side (medians)", "tool ms", "x loop", "whole ms", "x loop", "commit ms", "verify ms"].join("\t"));
for (const [label] of sides) {
  const result = summary(label);
  console.log(
    [
      label,
      ms(result.toolMs),
      (result.toolMs / loop.toolMs).toFixed(2),
      ms(result.wholeMs),
      (result.wholeMs / loop.wholeMs).toFixed(2),
      ms(result.commitMs),
      ms(result.verifyMs),
    ].join("\t"),
  );
}
if (process.argv.includes("--detail")) {
  console.log(["command", ...sides.map(([label]) => label)].join("\t"));
  TRAJECTORY.forEach((command, index) =>
    console.log([command.slice(0, 60), ...sides.map(([label]) => ms(median(results.get(label)!.map((result) => result.commandMs[index] ?? 0))))].join("\t")),
  );
}
for (const [label, all] of results) if (all[0]?.disk) console.log(`${label}: disk limit held by ${all.map((result) => result.disk).join(", ")}`);
const codes = (result: SideResult) => result.exitCodes.join(",");
const loopCodes = codes(results.get("docker exec loop")![0]!);
for (const [label, all] of results)
  if (all.some((result) => codes(result) !== loopCodes)) console.log(`note: exit codes differ (${label}): ${all.map(codes).join(" | ")} vs loop ${loopCodes}`);
console.log(
  `load after: ${loadavg()
    .map((load) => load.toFixed(1))
    .join(" ")}`,
);
console.log("goals: runner tool time <= 1.0x the loop's; whole run (host commit + clean-checkout verify) <= 1.3x");
