/**
 * Long-run bench, part 2: `runner resume` after `kill -9`, with the real CLI
 * (dist/cli/main.js), real Docker and a scripted model, on a copy of
 * examples/fix-median in a temporary git repository.
 *
 * Kill round: `runner exec` of a script that runs the tests, reads stats.py,
 * then calls `run_shell sleep 600`; when events.jsonl shows that
 * tool_call.started the runner gets SIGKILL. The bench waits until the
 * run's container has ended itself (its stdin closed), then times
 * `runner resume <id>` until it exits (must be 0): sweep of the dead run
 * (commit of the worktree, report `runner_died`), checks, worktree
 * re-created on the branch, new container and model server, the sleep call
 * replayed as interrupted, the remaining turns (edit, tests, final answer),
 * commit, verification in a fresh container, report.
 *
 * Baseline, same rounds (order alternating): `runner exec` of the same task
 * without the sleep step (5 model calls, 4 tool calls, verification).
 * Phases come from the events' `time` (ms) against the wall clock at spawn.
 * Also timed: `runner --version` (node start + loading the CLI's modules).
 */
import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import type Docker from "dockerode";
import { LABEL_RUN_ID } from "../../src/sandbox/docker/labels.js";
import { removeRunContainers, requireDocker } from "../lib/docker-env.js";
import { fmt, median, printTable, type Row } from "../lib/stats.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
export const RESUME_CLI = join(ROOT, "dist/cli/main.js");
const EXAMPLE = join(ROOT, "examples/fix-median");
const EVENT = (type: string) => `dev.agent-runner.${type}.v1`;

const PYTEST = { name: "run_shell", arguments: { command: "python3 -m pytest -q" } };
const EDIT = {
  name: "edit_file",
  arguments: {
    path: "stats.py",
    old_string: "    return ordered[middle]\n",
    new_string: "    if len(ordered) % 2 == 1:\n        return ordered[middle]\n    return (ordered[middle - 1] + ordered[middle]) / 2\n",
  },
};

/** The fix-median trajectory; with `sleep`, a `sleep 600` call between reading and editing. */
function script(sleep: boolean): string {
  const turns: unknown[] = [
    { tool_calls: [PYTEST] },
    { expect: { tool_result_matches: "failed" }, tool_calls: [{ name: "read_file", arguments: { path: "stats.py" } }] },
  ];
  if (sleep) {
    turns.push({
      expect: { tool_result_matches: "return ordered\\[middle\\]" },
      tool_calls: [{ name: "run_shell", arguments: { command: "sleep 600", timeout_ms: 900_000 } }],
    });
    // After the resume the sleep's result is the synthetic "interrupted" one.
    turns.push({ expect: { tool_result_matches: "\\[interrupted\\]" }, tool_calls: [EDIT] });
  } else {
    turns.push({ expect: { tool_result_matches: "return ordered\\[middle\\]" }, tool_calls: [EDIT] });
  }
  turns.push({ expect: { tool_result_matches: "replaced 1 occurrence" }, tool_calls: [PYTEST] });
  turns.push({ expect: { tool_result_matches: "5 passed" }, content: "Fixed median() for even-length input. All 5 tests pass." });
  return `${JSON.stringify({ turns }, null, 2)}\n`; // JSON is YAML
}

interface Fixture {
  directory: string;
  task: string;
  home: string;
}

const fixtures: Fixture[] = [];
const children = new Set<ChildProcess>();
const runIds = new Set<string>();

function fixture(sleep: boolean): Fixture {
  const directory = mkdtempSync(join(tmpdir(), "agent-runner-bench-resume-"));
  cpSync(EXAMPLE, directory, { recursive: true });
  const repo = join(directory, "repo");
  const git = (...args: string[]) =>
    execFileSync("git", ["-c", "user.name=bench", "-c", "user.email=bench@localhost", ...args], { cwd: repo, stdio: "ignore" });
  git("init", "-q", "-b", "main");
  git("add", "-A");
  git("commit", "-q", "-m", "initial");
  writeFileSync(join(directory, "script.yaml"), script(sleep));
  const created = { directory, task: join(directory, "task.yaml"), home: join(directory, "home") };
  fixtures.push(created);
  return created;
}

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** Date.now() at spawn (compared with event times). */
  spawnedAt: number;
  elapsedMs: number;
}

function startCli(args: string[], home: string, environment: Record<string, string> = {}): { child: ChildProcess; done: Promise<Exit> } {
  const spawnedAt = Date.now();
  const started = performance.now();
  const child = spawn(process.execPath, [RESUME_CLI, ...args], {
    env: { ...process.env, RUNNER_HOME: home, ...environment },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.add(child);
  let stdout = "";
  let stderr = "";
  child.stdout!.on("data", (chunk) => (stdout += chunk));
  child.stderr!.on("data", (chunk) => (stderr += chunk));
  const done = new Promise<Exit>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code, signal) => {
      children.delete(child);
      resolve({ code, signal, stdout, stderr, spawnedAt, elapsedMs: performance.now() - started });
    });
  });
  return { child, done };
}

interface Envelope {
  type: string;
  time: string;
  data: Record<string, unknown>;
}

function runDirectoryOf(home: string): string | null {
  const runs = join(home, "runs");
  if (!existsSync(runs)) return null;
  const ids = readdirSync(runs);
  return ids.length === 1 ? join(runs, ids[0]!) : null;
}

function readEvents(runDirectory: string): Envelope[] {
  const path = join(runDirectory, "events.jsonl");
  if (!existsSync(path)) return [];
  const events: Envelope[] = [];
  for (const line of readFileSync(path, "utf8").split("\n")) {
    if (!line.trim()) continue;
    try {
      events.push(JSON.parse(line) as Envelope);
    } catch {
      // a line being written
    }
  }
  return events;
}

/** ms from `spawnedAt` to the first event of `type` (after `from` events). */
function at(events: Envelope[], type: string, spawnedAt: number): number {
  const event = events.find((candidate) => candidate.type === EVENT(type));
  return event ? Date.parse(event.time) - spawnedAt : Number.NaN;
}

interface Phases {
  total: number;
  start: number;
  sandbox: number;
  agent: number;
  finish: number;
  exit: number;
}

/** Splits a CLI run by its events: start (spawn → run.started/resumed), sandbox, agent, commit+verify+report, exit. */
function phases(events: Envelope[], exit: Exit, first: "run.started" | "run.resumed"): Phases {
  const started = at(events, first, exit.spawnedAt);
  const sandbox = at(events, "sandbox.created", exit.spawnedAt);
  const agent = at(events, "agent.finished", exit.spawnedAt);
  const finished = at(events, "run.finished", exit.spawnedAt);
  return {
    total: exit.elapsedMs,
    start: started,
    sandbox: sandbox - started,
    agent: agent - sandbox,
    finish: finished - agent,
    exit: exit.elapsedMs - finished,
  };
}

function check(condition: boolean, what: string, exit?: Exit): void {
  if (!condition)
    throw new Error(`resume bench: ${what}${exit ? `\nexit ${exit.code} ${exit.signal ?? ""}\n${exit.stderr.slice(-2000)}\n${exit.stdout.slice(-2000)}` : ""}`);
}

async function freshExec(): Promise<Phases> {
  const { task, home } = fixture(false);
  const exit = await startCli(["exec", task], home).done;
  const runDirectory = runDirectoryOf(home);
  if (runDirectory) runIds.add(runDirectory.split("/").at(-1)!);
  check(exit.code === 0 && runDirectory !== null, "runner exec (fresh) did not exit 0", exit);
  const report = JSON.parse(readFileSync(join(runDirectory!, "report.json"), "utf8")) as { status: string; reason: string; steps: number };
  check(report.status === "succeeded" && report.reason === "verified" && report.steps === 5, `fresh run report ${JSON.stringify(report)}`);
  return phases(readEvents(runDirectory!), exit, "run.started");
}

/** Wall-clock time (ms) of the CLI's info log line saying the dead run was swept, from its stderr (RUNNER_LOG_LEVEL=info). */
function sweptAt(stderr: string): number {
  for (const line of stderr.split("\n")) {
    if (!line.includes("committed and removed the worktrees")) continue;
    try {
      return (JSON.parse(line) as { time: number }).time;
    } catch {
      // not a log line
    }
  }
  return Number.NaN;
}

interface KillRound {
  resume: Phases;
  /** spawn → the sweep's log line (module loading, container sweep, commit and removal of the dead run's worktree). */
  sweepMs: number;
  /** That line → run.resumed (run lookup, repository and image checks, worktree re-added, run.json). */
  reopenMs: number;
  /** sandbox.created → tool_call.interrupted: tool registry, result store, loop start, replay of the unfinished turn. */
  replayMs: number;
  /** The resumed report's `steps` and `context.requests`. */
  reportSteps: number;
  reportRequests: number;
  /** spawn → tool_call.started of the sleep. */
  untilSleepMs: number;
  /** SIGKILL sent → no container of the run listed any more. */
  containerGoneMs: number;
  worktree: string;
}

async function killAndResume(docker: Docker): Promise<KillRound> {
  const { task, home } = fixture(true);
  const first = startCli(["exec", task], home);
  const spawned = performance.now();
  let runDirectory: string | null = null;
  let untilSleepMs = Number.NaN;
  const deadline = spawned + 60_000;
  let exited = false;
  void first.done.then(() => (exited = true));
  while (performance.now() < deadline && !exited) {
    runDirectory ??= runDirectoryOf(home);
    if (runDirectory) {
      const sleeping = readEvents(runDirectory).find(
        (event) => event.type === EVENT("tool_call.started") && String(event.data.arguments).includes("sleep 600"),
      );
      if (sleeping) {
        untilSleepMs = performance.now() - spawned;
        break;
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  if (Number.isNaN(untilSleepMs)) {
    first.child.kill("SIGKILL");
    check(false, "the run never reached `sleep 600`", await first.done);
  }
  const killedAt = performance.now();
  first.child.kill("SIGKILL");
  const killed = await first.done;
  check(killed.signal === "SIGKILL", "the runner was not killed by SIGKILL", killed);
  const runId = runDirectory!.split("/").at(-1)!;
  runIds.add(runId);
  // The container ends itself when the runner's attach connection drops; a later resume would find it gone.
  let containerGoneMs = Number.NaN;
  while (performance.now() - killedAt < 30_000) {
    const listed = await docker.listContainers({ all: true, filters: { label: [`${LABEL_RUN_ID}=${runId}`] } });
    if (listed.length === 0) {
      containerGoneMs = performance.now() - killedAt;
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const before = readEvents(runDirectory!).length;
  // info level: the sweep logs one line (with its time) when it has committed the dead run's worktree.
  const exit = await startCli(["resume", runId], home, { RUNNER_LOG_LEVEL: "info" }).done;
  check(exit.code === 0, `runner resume ${runId} did not exit 0`, exit);
  const report = JSON.parse(readFileSync(join(runDirectory!, "report.json"), "utf8")) as {
    status: string;
    reason: string;
    resumes: number;
    steps: number;
    context: { requests: number };
  };
  check(
    report.status === "succeeded" && report.reason === "verified" && report.resumes === 1 && report.steps === 6,
    `resumed run report ${JSON.stringify(report)}`,
  );
  const events = readEvents(runDirectory!).slice(before);
  check(
    events.some((event) => event.type === EVENT("tool_call.interrupted")),
    "no tool_call.interrupted for the sleep after the resume",
  );
  check(
    !events.some((event) => event.type === EVENT("tool_call.started") && String(event.data.arguments).includes("sleep 600")),
    "the sleep ran again after the resume",
  );
  const resumed = events.find((event) => event.type === EVENT("run.resumed"));
  const swept = sweptAt(exit.stderr);
  const resumePhases = phases(events, exit, "run.resumed");
  return {
    resume: resumePhases,
    sweepMs: swept - exit.spawnedAt,
    reopenMs: resumePhases.start - (swept - exit.spawnedAt),
    replayMs: at(events, "tool_call.interrupted", exit.spawnedAt) - at(events, "sandbox.created", exit.spawnedAt),
    reportSteps: report.steps,
    reportRequests: report.context.requests,
    untilSleepMs,
    containerGoneMs,
    worktree: String(resumed?.data.worktree ?? "?"),
  };
}

async function versionOnly(): Promise<number> {
  const home = mkdtempSync(join(tmpdir(), "agent-runner-bench-version-"));
  try {
    const exit = await startCli(["--version"], home).done;
    check(exit.code === 0, "runner --version failed", exit);
    return exit.elapsedMs;
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

async function cleanUp(docker: Docker): Promise<string[]> {
  for (const child of children) if (child.pid !== undefined && child.exitCode === null) child.kill("SIGKILL");
  const removed = await removeRunContainers(docker, runIds);
  for (const created of fixtures.splice(0)) rmSync(created.directory, { recursive: true, force: true });
  return removed;
}

/** Runs part 2 and prints its tables; returns false when a round did not go as scripted. */
export async function benchResume(rounds: number): Promise<boolean> {
  if (!existsSync(RESUME_CLI)) throw new Error(`${RESUME_CLI} is missing: run \`npm run build\` (make build) first`);
  const docker = await requireDocker();
  const onSignal = () => {
    void cleanUp(docker).finally(() => process.exit(130));
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  try {
    const fresh: Phases[] = [];
    const kills: KillRound[] = [];
    const version: number[] = [];
    // Warm-up round (untimed): image and page caches, docker's first container of the run.
    await versionOnly();
    await freshExec();
    await killAndResume(docker);
    await cleanUp(docker);
    for (let round = 0; round < rounds; round += 1) {
      const order = round % 2 === 0 ? ["fresh", "kill", "version"] : ["kill", "version", "fresh"];
      for (const kind of order) {
        if (kind === "fresh") fresh.push(await freshExec());
        else if (kind === "kill") kills.push(await killAndResume(docker));
        else version.push(await versionOnly());
      }
      console.log(
        `   round ${round + 1}: exec ${fmt(fresh.at(-1)!.total)} ms, resume ${fmt(kills.at(-1)!.resume.total)} ms ` +
          `(spawn -> run.resumed ${fmt(kills.at(-1)!.resume.start)} ms, worktree ${kills.at(-1)!.worktree}), container gone ${fmt(kills.at(-1)!.containerGoneMs)} ms after SIGKILL`,
      );
      const leftovers = await cleanUp(docker);
      if (leftovers.length) console.log(`   removed leftover containers: ${leftovers.join(", ")}`);
    }
    const resume = kills.map((kill) => kill.resume);
    const pick = (list: Phases[], key: keyof Phases) => list.map((entry) => entry[key]);
    const rows: Row[] = [
      { name: "runner --version", samples: version, note: "node start + loading the CLI's modules: the floor of both starts" },
      { name: "runner exec, fresh task (baseline)", samples: pick(fresh, "total"), note: "spawn -> exit 0: 5 model calls, 4 tool calls, verify" },
      {
        name: "runner resume after kill -9",
        samples: pick(resume, "total"),
        baseline: "runner exec, fresh task (baseline)",
        note: "spawn -> exit 0: sweep, reopen, replay, 3 model calls, 2 tool calls, verify",
      },
      {
        name: "  exec: spawn -> run.started",
        samples: pick(fresh, "start"),
        baseline: "runner --version",
        note: "checkReady + sweep (nothing to do) + worktree add",
      },
      {
        name: "  resume: spawn -> run.resumed",
        samples: pick(resume, "start"),
        baseline: "  exec: spawn -> run.started",
        note: "sweep (commit + remove the dead run's worktree) + checks + worktree re-add",
      },
      {
        name: "    resume: spawn -> sweep done (log line)",
        samples: kills.map((kill) => kill.sweepMs),
        baseline: "runner --version",
        note: "module loading + container sweep + commit and removal of the dead run's worktree",
      },
      {
        name: "    resume: sweep done -> run.resumed",
        samples: kills.map((kill) => kill.reopenMs),
        note: "run lookup + repository and image checks + worktree re-added + run.json",
      },
      { name: "  exec: run.started -> sandbox.created", samples: pick(fresh, "sandbox") },
      { name: "  resume: run.resumed -> sandbox.created", samples: pick(resume, "sandbox"), baseline: "  exec: run.started -> sandbox.created" },
      { name: "  exec: sandbox.created -> agent.finished", samples: pick(fresh, "agent") },
      {
        name: "  resume: sandbox.created -> agent.finished",
        samples: pick(resume, "agent"),
        baseline: "  exec: sandbox.created -> agent.finished",
        note: "replay of the interrupted sleep + the remaining turns",
      },
      {
        name: "    resume: sandbox.created -> tool_call.interrupted",
        samples: kills.map((kill) => kill.replayMs),
        note: "tools and result store set up, loop start, the unfinished turn replayed (events' ms resolution)",
      },
      { name: "  exec: agent.finished -> run.finished", samples: pick(fresh, "finish") },
      {
        name: "  resume: agent.finished -> run.finished",
        samples: pick(resume, "finish"),
        baseline: "  exec: agent.finished -> run.finished",
        note: "commit, patch, verify in a fresh container, report",
      },
      { name: "  exec: run.finished -> exit", samples: pick(fresh, "exit") },
      { name: "  resume: run.finished -> exit", samples: pick(resume, "exit"), baseline: "  exec: run.finished -> exit" },
    ];
    printTable("2. resume after kill -9 vs fresh exec (ms from the wall clock at spawn and the events' times)", rows);
    console.log(
      `   kill rounds: spawn -> sleep 600 started, median ${fmt(median(kills.map((kill) => kill.untilSleepMs)))} ms; container gone after SIGKILL, median ${fmt(median(kills.map((kill) => kill.containerGoneMs)))} ms (max ${fmt(Math.max(...kills.map((kill) => kill.containerGoneMs)))})`,
    );
    console.log(`   worktree at resume: ${[...new Set(kills.map((kill) => kill.worktree))].join(", ")}`);
    console.log(
      `   resumed report: steps ${[...new Set(kills.map((kill) => kill.reportSteps))].join(", ")}, context.requests ${[...new Set(kills.map((kill) => kill.reportRequests))].join(", ")} (requests count only the resuming process)`,
    );
    return true;
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    const leftovers = await cleanUp(docker);
    if (leftovers.length) console.log(`   removed leftover containers: ${leftovers.join(", ")}`);
  }
}
