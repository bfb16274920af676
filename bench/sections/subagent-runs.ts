/**
 * Subagent bench fixtures: a repository with one small module and test per
 * worker (optionally plus N generated files in nested directories), scripted
 * trajectories for 1-4 worker subagents, the real CLI (`runner exec`) run on
 * a fresh copy of that repository with a fresh RUNNER_HOME, and the split of
 * every worker's time into phases from the run's events.jsonl.
 *
 * Worker k (k = 1..workers) fixes `mod<k>.py` (`x + 0` → `x + k`): edit_file,
 * `run_shell sleep <s>` (an I/O-bound build step), `run_shell python3 -m
 * pytest -q test_mod<k>.py`, final answer; its verify command is
 * `python3 -m pytest -q test_mod<k>.py` (distinct per worker, so the
 * `verify.*` events, which carry no agent id, can be attributed). The main
 * agent then runs the tests of all workers and answers.
 *
 * Cleanup: every run's containers are found by the run-id label and
 * force-removed ({@link removeRunContainers}); temp directories are removed.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import type Docker from "dockerode";
import { LABEL_RUN_ID } from "../../src/sandbox/docker/labels.js";
import { removeRunContainers } from "../lib/docker-env.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
/** The CLI the runs use: `RUNNER_BENCH_CLI`, else this checkout's dist/ (`npm run build`). */
export const SUBAGENT_CLI = process.env.RUNNER_BENCH_CLI ?? join(ROOT, "dist/cli/main.js");
const EVENT_PREFIX = "dev.agent-runner.";

export interface Envelope {
  type: string;
  time: string;
  data: Record<string, unknown>;
}

/** `dev.agent-runner.tool_call.started.v1` → `tool_call.started`. */
function shortType(envelope: Envelope): string {
  return envelope.type.slice(EVENT_PREFIX.length).replace(/\.v\d+$/, "");
}

function eventTime(envelope: Envelope): number {
  return Date.parse(envelope.time);
}

const GIT_IDENTITY = ["-c", "user.name=bench", "-c", "user.email=bench@localhost", "-c", "commit.gpgsign=false"];

export function git(repo: string, args: string[]): string {
  return execFileSync("git", [...GIT_IDENTITY, ...args], { cwd: repo, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
}

/** A committed repository to copy for each run. */
export interface RepoTemplate {
  /** Holds `repo/` (with its .git). */
  directory: string;
  repo: string;
  workers: number;
  extraFiles: number;
  /** Files tracked by git. */
  trackedFiles: number;
  dispose(): void;
}

/** Directory of generated file `index`: 10 top-level packages × 20 sub-packages, ~10 files each at 2000. */
function generatedPath(index: number): string {
  return join("lib", `pkg${index % 10}`, `sub${Math.floor(index / 10) % 20}`, `m${index}.py`);
}

/**
 * Creates and commits a repository: `mod<k>.py` + `test_mod<k>.py` for each
 * worker, and `extraFiles` small Python files (~200 bytes) under lib/.
 */
export function makeTemplate(workers: number, extraFiles: number): RepoTemplate {
  const directory = mkdtempSync(join(tmpdir(), "agent-runner-bench-sub-template-"));
  const repo = join(directory, "repo");
  mkdirSync(repo);
  for (let k = 1; k <= workers; k += 1) {
    writeFileSync(join(repo, `mod${k}.py`), `def value${k}(x):\n    return x + 0\n`);
    writeFileSync(join(repo, `test_mod${k}.py`), `from mod${k} import value${k}\n\n\ndef test_value${k}():\n    assert value${k}(1) == ${1 + k}\n`);
  }
  for (let index = 0; index < extraFiles; index += 1) {
    const path = join(repo, generatedPath(index));
    mkdirSync(join(path, ".."), { recursive: true });
    writeFileSync(
      path,
      `"""Generated module ${index}."""\n\n\ndef f${index}(x):\n    return x * ${index % 7} + ${index}\n\n\nVALUE_${index} = f${index}(${index})\n`,
    );
  }
  writeFileSync(join(repo, "pytest.ini"), "[pytest]\naddopts = -p no:cacheprovider\n");
  git(repo, ["init", "-q", "-b", "main"]);
  git(repo, ["add", "-A"]);
  git(repo, ["commit", "-q", "-m", "initial"]);
  const trackedFiles = git(repo, ["ls-files"]).split("\n").filter(Boolean).length;
  return { directory, repo, workers, extraFiles, trackedFiles, dispose: () => rmSync(directory, { recursive: true, force: true }) };
}

/**
 * How the main agent delegates:
 * - `parallel`: all worker `agent` calls in one turn (they run at once, up to max_parallel 4);
 * - `serial-turns`: one `agent` call per turn, so each worker starts when the previous one was merged;
 * - `max-parallel-1`: the `parallel` script with `max_parallel: 1` (calls of one turn queue for one slot);
 * - `single`: one worker (worker ready time).
 */
export type Plan = "parallel" | "serial-turns" | "max-parallel-1" | "single";

const description = (k: number) => `fix mod${k}`;
const testCommand = (k: number) => `python3 -m pytest -q test_mod${k}.py`;
const MERGED = "merged into your branch";

function agentCall(k: number) {
  return {
    name: "agent",
    arguments: {
      mode: "worker",
      description: description(k),
      prompt: `value${k} in mod${k}.py must return x + ${k}; fix it. Check with ${testCommand(k)}`,
      verify: testCommand(k),
    },
  };
}

/** The scripted trajectory (JSON, which is YAML) of a plan. */
function scriptFor(plan: Plan, workers: number, sleepSeconds: number): string {
  const count = plan === "single" ? 1 : workers;
  const ks = Array.from({ length: count }, (_, index) => index + 1);
  const allTests = { name: "run_shell", arguments: { command: "python3 -m pytest -q test_mod*.py" } };
  const turns: unknown[] = [];
  if (plan === "serial-turns") {
    ks.forEach((k, index) => turns.push({ ...(index > 0 ? { expect: { tool_result_matches: MERGED } } : {}), tool_calls: [agentCall(k)] }));
    turns.push({ expect: { tool_result_matches: MERGED }, tool_calls: [allTests] });
  } else {
    turns.push({ tool_calls: ks.map(agentCall) });
    turns.push({ expect: { tool_result_matches: ks.map(() => MERGED).join("[\\s\\S]*") }, tool_calls: [allTests] });
  }
  turns.push({ expect: { tool_result_matches: `${count} passed` }, content: `All ${count} fixes were verified and merged.` });
  const subagents: Record<string, unknown> = {};
  for (const k of ks) {
    subagents[description(k)] = {
      turns: [
        { tool_calls: [{ name: "edit_file", arguments: { path: `mod${k}.py`, old_string: "x + 0", new_string: `x + ${k}` } }] },
        { expect: { tool_result_matches: "replaced 1 occurrence" }, tool_calls: [{ name: "run_shell", arguments: { command: `sleep ${sleepSeconds}` } }] },
        { tool_calls: [{ name: "run_shell", arguments: { command: testCommand(k) } }] },
        { expect: { tool_result_matches: "1 passed" }, content: `value${k} now adds ${k}.` },
      ],
    };
  }
  return `${JSON.stringify({ turns, subagents }, null, 2)}\n`;
}

function taskYaml(plan: Plan): string {
  return [
    `name: bench-subagents-${plan}`,
    "instruction: Each mod<k>.py has one bug; fix them all, one worker subagent each.",
    "workspace: ./repo",
    "model:",
    "  provider: scripted",
    "  script: ./script.yaml",
    "verify:",
    "  command: python3 -m pytest -q test_mod*.py",
    "  timeout_sec: 300",
    "max_steps: 20",
    `max_parallel: ${plan === "max-parallel-1" ? 1 : 4}`,
    "",
  ].join("\n");
}

/** Clock ticks per second of /proc/<pid>/stat times (USER_HZ; 100 on Linux). */
const TICKS = 100;

function readNumber(path: string): number {
  try {
    return Number(readFileSync(path, "utf8").trim());
  } catch {
    return Number.NaN;
  }
}

/** utime + stime (+ cutime + cstime: waited-for children, e.g. the runner's git processes) of a pid, in seconds; NaN when gone. */
function processSeconds(pid: number, withChildren: boolean): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat
      .slice(stat.lastIndexOf(")") + 2)
      .split(" ")
      .map(Number);
    // fields[0] is field 3 (state): utime is field 14, stime 15, cutime 16, cstime 17.
    const own = fields[11]! + fields[12]!;
    return (withChildren ? own + fields[13]! + fields[14]! : own) / TICKS;
  } catch {
    return Number.NaN;
  }
}

function pidsOf(names: string[]): number[] {
  try {
    return execFileSync("pidof", names, { encoding: "utf8" })
      .trim()
      .split(/\s+/)
      .map(Number)
      .filter((pid) => pid > 0);
  } catch {
    return [];
  }
}

/** containerd-shim processes (one per container), by pid: the container id from `-id`. */
const shimContainer = new Map<number, string>();
const otherPids = new Set<number>();
/** Every live shim's own CPU seconds, keyed by its container id. */
function shimSeconds(): Map<string, number> {
  const result = new Map<string, number>();
  for (const name of readdirSync("/proc")) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || otherPids.has(pid)) continue;
    if (!shimContainer.has(pid)) {
      try {
        const comm = readFileSync(`/proc/${pid}/comm`, "utf8");
        const id = comm.startsWith("containerd-shim") ? /(?:^|\0)-id\0([0-9a-f]{64})/.exec(readFileSync(`/proc/${pid}/cmdline`, "utf8"))?.[1] : undefined;
        if (id) shimContainer.set(pid, id);
        else otherPids.add(pid);
      } catch {
        continue;
      }
    }
    const id = shimContainer.get(pid);
    if (id === undefined) continue;
    // Own time only: the shim is the container's subreaper, so its children's time would hold the whole
    // container's CPU once its init is reaped (already counted in the container's cgroup).
    const seconds = processSeconds(pid, false);
    if (Number.isFinite(seconds)) result.set(id, seconds);
    else shimContainer.delete(pid);
  }
  return result;
}

const CPUACCT_DOCKER = "/sys/fs/cgroup/cpuacct/docker";
/** Every live container's CPU seconds (cgroup v1 cpuacct), keyed by container id; empty elsewhere. */
function containerSeconds(): Map<string, number> {
  const result = new Map<string, number>();
  let names: string[] = [];
  try {
    names = readdirSync(CPUACCT_DOCKER);
  } catch {
    return result;
  }
  for (const name of names) {
    if (!/^[0-9a-f]{64}$/.test(name)) continue;
    const seconds = readNumber(join(CPUACCT_DOCKER, name, "cpuacct.usage")) / 1e9;
    if (Number.isFinite(seconds)) result.set(name, seconds);
  }
  return result;
}

interface CpuSample {
  at: number;
  /** Whole machine, seconds of all CPUs (from /proc/stat jiffies). */
  busy: number;
  total: number;
  /** Each live container's cgroup CPU seconds, by container id. */
  containers: Map<string, number>;
  /** dockerd + containerd, seconds. */
  engine: number;
  /** The runner process and the children it waited for (git), seconds. */
  runner: number;
  /** Each live containerd-shim's own CPU seconds, by container id. */
  shims: Map<string, number>;
  /** This bench process (the sampling itself), seconds. */
  bench: number;
}

/** CPU time split (core-seconds) over a window: whole machine, the runner, the run's containers and their shims, dockerd + containerd. */
export interface CpuSplit {
  /** Share (0-1) of all CPUs busy. */
  busyShare: number;
  machine: number;
  runner: number;
  containers: number;
  engine: number;
  /** containerd-shim processes' own time (runc, their short-lived child, is in `rest`). */
  shims: number;
  /** The bench process (sampling). */
  bench: number;
}

/**
 * Samples every 50 ms how much CPU time the whole machine, the runner (CLI
 * pid, with its waited-for children: git), each Docker container (cgroup v1
 * cpuacct `docker/<id>`), each containerd-shim (own time; the container id
 * from its `-id` argument), dockerd + containerd and this process (the
 * sampling) have used, so a window's CPU can be split. Containers and shims
 * are counted for the run's own container ids only; the engine's share
 * cannot be split by container. Whatever is left (runc, which the shims run
 * and reap, the kernel's own threads, other users' work) is machine − the rest.
 */
export class CpuSampler {
  private readonly samples: CpuSample[] = [];
  private timer: NodeJS.Timeout | null = null;
  private readonly enginePids = pidsOf(["dockerd", "containerd"]);
  private runnerPid: number | null = null;
  private lastRunner = 0;

  start(intervalMs = 50): void {
    this.sample();
    this.timer = setInterval(() => this.sample(), intervalMs);
  }

  /** The runner's pid (sampled from now on). */
  watch(pid: number): void {
    this.runnerPid = pid;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  private sample(): void {
    const line = readFileSync("/proc/stat", "utf8").split("\n")[0]!;
    const fields = line.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal
    const idle = fields[3]! + fields[4]!;
    const total = fields.slice(0, 8).reduce((sum, value) => sum + value, 0);
    const runner = this.runnerPid === null ? 0 : processSeconds(this.runnerPid, true);
    // After the runner exits its counters are gone: keep the last value.
    if (Number.isFinite(runner)) this.lastRunner = runner;
    this.samples.push({
      at: Date.now(),
      busy: (total - idle) / TICKS,
      total: total / TICKS,
      containers: containerSeconds(),
      engine: this.enginePids.reduce((sum, pid) => sum + processSeconds(pid, false), 0),
      runner: this.lastRunner,
      shims: shimSeconds(),
      bench: (process.cpuUsage().user + process.cpuUsage().system) / 1e6,
    });
  }

  /**
   * CPU used between two wall-clock times (the nearest samples inside), with
   * containers and shims counted only for the given container ids (the run's
   * own); NaNs when the window is too short.
   */
  between(from: number, to: number, containerIds: Set<string>): CpuSplit {
    const inside = this.samples.filter((sample) => sample.at >= from && sample.at <= to);
    const first = inside[0];
    const last = inside.at(-1);
    if (!first || !last || first === last)
      return {
        busyShare: Number.NaN,
        machine: Number.NaN,
        runner: Number.NaN,
        containers: Number.NaN,
        engine: Number.NaN,
        shims: Number.NaN,
        bench: Number.NaN,
      };
    // A container (or shim) gone inside the window counts with the last value seen; one that appeared inside it, from 0.
    const latestOf = (pick: (sample: CpuSample) => Map<string, number>) => {
      const latest = new Map<string, number>();
      for (const sample of inside) for (const [id, seconds] of pick(sample)) if (containerIds.has(id)) latest.set(id, seconds);
      return latest;
    };
    const used = (pick: (sample: CpuSample) => Map<string, number>) => {
      let total = 0;
      for (const [id, seconds] of latestOf(pick)) total += seconds - (pick(first).get(id) ?? 0);
      return total;
    };
    return {
      busyShare: (last.busy - first.busy) / (last.total - first.total),
      machine: last.busy - first.busy,
      runner: last.runner - first.runner,
      containers: used((sample) => sample.containers),
      engine: last.engine - first.engine,
      shims: used((sample) => sample.shims),
      bench: last.bench - first.bench,
    };
  }
}

/** A container event from the Docker daemon (`docker events`), time in ms since the epoch (from timeNano). */
export interface ContainerEvent {
  /** Full container id. */
  id: string;
  time: number;
  action: string;
  name: string;
  runId: string | null;
}

/**
 * Collects the daemon's container events (create, start, pause, unpause,
 * die, destroy) while a run goes on, so phases the runner does not log
 * (container created/started, the parent frozen for a snapshot or a merge,
 * a verify container removed) can be placed on the same clock.
 */
export class DockerEventLog {
  readonly events: ContainerEvent[] = [];
  private stream: (NodeJS.ReadableStream & { destroy(): void }) | null = null;
  private pending = "";

  async start(docker: Docker): Promise<void> {
    this.stream = (await docker.getEvents({ filters: { type: ["container"] } })) as unknown as NodeJS.ReadableStream & { destroy(): void };
    this.stream.on("data", (chunk: Buffer) => {
      this.pending += chunk.toString("utf8");
      const lines = this.pending.split("\n");
      this.pending = lines.pop()!;
      for (const line of lines) this.add(line);
    });
    this.stream.on("error", () => undefined);
  }

  private add(line: string): void {
    if (!line.trim()) return;
    try {
      const raw = JSON.parse(line) as {
        id?: string;
        Action?: string;
        status?: string;
        timeNano?: number;
        time?: number;
        Actor?: { Attributes?: Record<string, string> };
      };
      const attributes = raw.Actor?.Attributes ?? {};
      this.events.push({
        id: raw.id ?? "",
        time: raw.timeNano !== undefined ? raw.timeNano / 1e6 : (raw.time ?? 0) * 1000,
        action: raw.Action ?? raw.status ?? "?",
        name: attributes.name ?? "",
        runId: attributes[LABEL_RUN_ID] ?? null,
      });
    } catch {
      // not an event line
    }
  }

  /** Waits for events already sent to arrive (the daemon writes them asynchronously), then stops. */
  async stop(): Promise<void> {
    if (!this.stream) return;
    await new Promise((resolve) => setTimeout(resolve, 150));
    this.stream?.destroy();
    this.stream = null;
  }

  /** Events of one container (`agent-runner-<run>-<agent>`), in time order. */
  of(runId: string, agentId: string): ContainerEvent[] {
    const name = `agent-runner-${runId}-${agentId}`;
    return this.events.filter((event) => event.runId === runId && event.name === name).sort((a, b) => a.time - b.time);
  }
}

export interface CliRun {
  plan: Plan;
  runId: string;
  events: Envelope[];
  /** Date.now() at spawn. */
  spawnedAt: number;
  elapsedMs: number;
  cpu: CpuSampler;
  docker: DockerEventLog;
}

const children = new Set<ChildProcess>();
const runIds = new Set<string>();
const scratch = new Set<string>();

/**
 * Runs `runner exec` of a plan on a fresh copy of the template (fresh
 * RUNNER_HOME) and checks it did what its script says: exit 0, succeeded and
 * verified, every worker merged. Throws otherwise (with the CLI's output tail).
 */
export async function runPlan(docker: Docker, template: RepoTemplate, plan: Plan, sleepSeconds: number): Promise<CliRun> {
  if (!existsSync(SUBAGENT_CLI)) throw new Error(`${SUBAGENT_CLI} is missing: run \`npm run build\` (make build) first`);
  const directory = mkdtempSync(join(tmpdir(), "agent-runner-bench-sub-run-"));
  scratch.add(directory);
  const dockerEvents = new DockerEventLog();
  const cpu = new CpuSampler();
  try {
    cpSync(template.repo, join(directory, "repo"), { recursive: true });
    // The copy's files have new inodes and times: refresh the index as a user's checkout would have it.
    git(join(directory, "repo"), ["update-index", "-q", "--refresh"]);
    writeFileSync(join(directory, "script.yaml"), scriptFor(plan, template.workers, sleepSeconds));
    writeFileSync(join(directory, "task.yaml"), taskYaml(plan));
    const home = join(directory, "home");
    await dockerEvents.start(docker);
    cpu.start();
    const spawnedAt = Date.now();
    const started = performance.now();
    const child = spawn(process.execPath, [SUBAGENT_CLI, "exec", join(directory, "task.yaml")], {
      env: { ...process.env, RUNNER_HOME: home },
      stdio: ["ignore", "pipe", "pipe"],
    });
    children.add(child);
    if (child.pid !== undefined) cpu.watch(child.pid);
    let output = "";
    child.stdout!.on("data", (chunk) => (output = (output + chunk).slice(-20_000)));
    child.stderr!.on("data", (chunk) => (output = (output + chunk).slice(-20_000)));
    const code = await new Promise<number | null>((resolve, reject) => {
      child.on("error", reject);
      child.on("close", (exitCode) => resolve(exitCode));
    });
    const elapsedMs = performance.now() - started;
    children.delete(child);
    cpu.stop();
    await dockerEvents.stop();
    const runs = join(home, "runs");
    const ids = existsSync(runs) ? readdirSync(runs) : [];
    ids.forEach((id) => runIds.add(id));
    const fail = (what: string) => new Error(`subagent bench (${plan}): ${what}\nexit ${code}\n${output.slice(-3000)}`);
    if (ids.length !== 1) throw fail(`expected one run directory, found ${ids.length}`);
    const runDirectory = join(runs, ids[0]!);
    if (!existsSync(join(runDirectory, "report.json"))) throw fail("no report.json");
    const report = JSON.parse(readFileSync(join(runDirectory, "report.json"), "utf8")) as {
      status: string;
      reason: string;
      agents: { id: string; status: string }[];
    };
    const workers = plan === "single" ? 1 : template.workers;
    if (code !== 0 || report.status !== "succeeded" || report.reason !== "verified") throw fail(`report ${report.status}/${report.reason}`);
    if (report.agents.length !== workers || report.agents.some((agent) => agent.status !== "merged")) {
      throw fail(`agents ${JSON.stringify(report.agents.map((agent) => [agent.id, agent.status]))}`);
    }
    const events = readFileSync(join(runDirectory, "events.jsonl"), "utf8")
      .split("\n")
      .filter((line) => line.trim())
      .map((line) => JSON.parse(line) as Envelope);
    return { plan, runId: ids[0]!, events, spawnedAt, elapsedMs, cpu, docker: dockerEvents };
  } finally {
    cpu.stop();
    await dockerEvents.stop();
    rmSync(directory, { recursive: true, force: true });
    scratch.delete(directory);
  }
}

/**
 * One worker's time, ms, from events.jsonl and the daemon's container events
 * (see bench/README.md). Phases add up: prep + container = ready; ready +
 * loop + commit + verify + merge + cleanup + back = total. Sub-phases that
 * rely on container events are NaN when an event was not seen.
 */
export interface WorkerPhases {
  agentId: string;
  /** main's agent tool_call.started → task.started: snapshot (lock, parent frozen, commit) + `git worktree add` (+ the wait for a slot). */
  prep: number;
  /** of prep: call started → the parent paused for this worker's snapshot (waiting for the parent's git lock). */
  prepLock: number;
  /** of prep: parent paused → unpaused (the snapshot commit on the host). */
  prepSnapshot: number;
  /** of prep: unpaused → task.started (`git worktree add`, ownership, task start; with max_parallel 1 also the wait for a slot). */
  prepWorktree: number;
  /** subagent.started → its first model_call.started. */
  container: number;
  /** of container: subagent.started → container `create` event (sandbox spec with git mounts, image check, create). */
  containerCreate: number;
  /** of container: create → `start` event (attach, start: containerd + runc). */
  containerStart: number;
  /** of container: start → first model call (the in-container daemon's hello, loop set-up). */
  containerHello: number;
  /** prep + container: the agent call until the worker's first model call. */
  ready: number;
  /** first model_call.started → agent.finished: the worker's loop. */
  loop: number;
  /** of the loop: time inside tool calls (sum of tool_call.finished duration_ms). */
  tools: number;
  /** agent.finished → verify.started: stopAllProcesses, host commit, the worker's container closed. */
  commit: number;
  /** verify.started → start of the command: detached checkout + fresh container. */
  verifySetup: number;
  /** the verify command itself (verify.finished duration_ms). */
  verifyExec: number;
  /** verify.finished → subagent.finished. */
  merge: number;
  /** of merge: verify.finished → the verify container's `destroy` event. */
  mergeVerifyClose: number;
  /** of merge: destroy → the parent paused for this merge (checkout removed, waiting for the parent's git lock). */
  mergeLock: number;
  /** of merge: paused → unpaused (parent's commit + merge-tree + git merge --no-ff). */
  mergeGit: number;
  /** subagent.finished → task.finished: the worker's worktree removed (+ `git worktree prune`). */
  cleanup: number;
  /** main's tool_call.started → tool_call.finished. */
  total: number;
  /** Absolute times, for spans. */
  startedAt: number;
  finishedAt: number;
}

function argumentsOf(envelope: Envelope): Record<string, unknown> {
  try {
    return JSON.parse(String(envelope.data.arguments)) as Record<string, unknown>;
  } catch {
    return {};
  }
}

/** Splits every worker's time into phases; throws when a runner event is missing. */
export function workerPhases(run: CliRun): WorkerPhases[] {
  const { events } = run;
  const of = (type: string) => events.filter((event) => shortType(event) === type);
  const agentCalls = of("tool_call.started").filter((event) => event.data.agent_id === "main" && event.data.name === "agent");
  const parent = run.docker.of(run.runId, "main");
  const pauses = parent.filter((event) => event.action === "pause");
  const unpauseAfter = (time: number) => parent.find((event) => event.action === "unpause" && event.time >= time)?.time ?? Number.NaN;
  // The parent's git lock is FIFO and every worker's snapshot takes it once, in call order: a call's
  // snapshot is the first pause after it started that no earlier call took (merges come later).
  const taken = new Set<ContainerEvent>();
  const snapshotPauses = agentCalls.map((call) => {
    const pause = pauses.find((event) => event.time >= eventTime(call) && !taken.has(event));
    if (pause) taken.add(pause);
    return pause;
  });
  return agentCalls.map((call, index) => {
    const args = argumentsOf(call);
    const verifyCommand = String(args.verify);
    const taskStarted = of("task.started").find((event) => event.data.description === args.description && event.data.kind === "agent");
    if (!taskStarted) throw new Error(`no task.started for ${String(args.description)}`);
    const agentId = String(taskStarted.data.agent_id);
    const mine = (type: string) => of(type).filter((event) => event.data.agent_id === agentId);
    const first = (type: string, list = mine(type)) => {
      const found = list[0];
      if (!found) throw new Error(`no ${type} for ${agentId}`);
      return eventTime(found);
    };
    const verifyFinished = of("verify.finished").find((event) => event.data.command === verifyCommand);
    if (!verifyFinished) throw new Error(`no verify.finished for ${agentId}`);
    const finishedCall = of("tool_call.finished").find((event) => event.data.tool_call_id === call.data.tool_call_id && event.data.agent_id === "main");
    if (!finishedCall) throw new Error(`no tool_call.finished for ${agentId}'s agent call`);
    const callStart = eventTime(call);
    const tasked = eventTime(taskStarted);
    const subagentStarted = first("subagent.started");
    const firstModel = first("model_call.started");
    const agentFinished = first("agent.finished");
    const verifyStarted = first(
      "verify.started",
      of("verify.started").filter((event) => event.data.command === verifyCommand),
    );
    const verifyExec = Number(verifyFinished.data.duration_ms);
    const verifyEnd = eventTime(verifyFinished);
    const subagentFinished = first("subagent.finished");
    // Container events: the worker's own container and its verify container.
    const own = run.docker.of(run.runId, agentId);
    const at = (list: ContainerEvent[], action: string) => list.find((event) => event.action === action)?.time ?? Number.NaN;
    const created = at(own, "create");
    const startedContainer = at(own, "start");
    const verifyDestroyed = at(run.docker.of(run.runId, `${agentId}-verify`), "destroy");
    const snapshotPause = snapshotPauses[index]?.time ?? Number.NaN;
    const snapshotUnpause = unpauseAfter(snapshotPause);
    // The merge's freeze: the last pause in this worker's merge window that was also unpaused inside it.
    const mergePause = pauses.filter((event) => event.time >= verifyEnd && unpauseAfter(event.time) <= subagentFinished).at(-1)?.time ?? Number.NaN;
    return {
      agentId,
      prep: tasked - callStart,
      prepLock: snapshotPause - callStart,
      prepSnapshot: snapshotUnpause - snapshotPause,
      prepWorktree: tasked - snapshotUnpause,
      container: firstModel - subagentStarted,
      containerCreate: created - subagentStarted,
      containerStart: startedContainer - created,
      containerHello: firstModel - startedContainer,
      ready: firstModel - callStart,
      loop: agentFinished - firstModel,
      tools: mine("tool_call.finished").reduce((sum, event) => sum + Number(event.data.duration_ms), 0),
      commit: verifyStarted - agentFinished,
      verifySetup: verifyEnd - verifyExec - verifyStarted,
      verifyExec,
      merge: subagentFinished - verifyEnd,
      mergeVerifyClose: verifyDestroyed - verifyEnd,
      mergeLock: mergePause - verifyDestroyed,
      mergeGit: unpauseAfter(mergePause) - mergePause,
      cleanup: first("task.finished") - subagentFinished,
      total: eventTime(finishedCall) - callStart,
      startedAt: callStart,
      finishedAt: eventTime(finishedCall),
    };
  });
}

/** A whole run's phases, ms. */
export interface RunPhases {
  total: number;
  /** spawn → run.started: node + CLI modules, checks, sweep, the main worktree. */
  start: number;
  /** run.started → sandbox.created: the main container (and the scripted model server). */
  mainSandbox: number;
  /** first agent call started → last agent call finished. */
  workers: number;
  /** CPU used during `workers`. */
  workersCpu: CpuSplit;
  /** last agent call finished → main's agent.finished (the main's test run and answer). */
  afterWorkers: number;
  /** main's agent.finished → run.finished: commit, patch, verify in a fresh container, report. */
  finish: number;
}

export function runPhases(run: CliRun, workers: WorkerPhases[]): RunPhases {
  const find = (type: string, agentId?: string) => {
    const found = run.events.find((event) => shortType(event) === type && (agentId === undefined || event.data.agent_id === agentId));
    if (!found) throw new Error(`no ${type}${agentId ? ` for ${agentId}` : ""}`);
    return eventTime(found);
  };
  const from = Math.min(...workers.map((worker) => worker.startedAt));
  const to = Math.max(...workers.map((worker) => worker.finishedAt));
  const mainFinished = find("agent.finished", "main");
  return {
    total: run.elapsedMs,
    start: find("run.started") - run.spawnedAt,
    mainSandbox: find("sandbox.created") - find("run.started"),
    workers: to - from,
    workersCpu: run.cpu.between(from, to, new Set(run.docker.events.filter((event) => event.runId === run.runId).map((event) => event.id))),
    afterWorkers: mainFinished - to,
    finish: find("run.finished") - mainFinished,
  };
}

/** Kills CLI children still running, force-removes every container of the bench's runs, deletes scratch directories. */
export async function cleanUpRuns(docker: Docker): Promise<string[]> {
  for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
  const removed = await removeRunContainers(docker, runIds);
  runIds.clear();
  for (const directory of scratch) rmSync(directory, { recursive: true, force: true });
  scratch.clear();
  return removed;
}
