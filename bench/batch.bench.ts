/**
 * `runner batch` (issue 15, Measure): the runner's own time per task at
 * `-j 4`, the batch's wall time and throughput, peak RSS of the batch
 * process, and the time to write every report for 1 000 synthetic results.
 *
 *   npx tsx bench/batch.bench.ts [--tasks=10] [--jobs=4] [--only=overhead,throughput,reports]
 *                                 [--throughput-tasks=8] [--latency-ms=1000]
 *
 * throughput: the same batch of `--throughput-tasks` tasks at -j 1, 2, 4 and
 * 8, each model answer delayed `--latency-ms` (the scripted `delay_ms`
 * fault), so the wall time is mostly model time: the ratio to -j 1 is how
 * well runs overlap (goal: -j 4 at least 3x -j 1).
 *
 * Each task is scripted (the scripted model on 127.0.0.1 answers at once),
 * 3 `run_shell true` steps on a one-file repository, no verify command: a
 * run's duration_ms is then the runner's own time (worktree, disk, sandbox,
 * tool calls, commit, clean-up) with model time and verify time ~0.
 * Real Docker, in this process through runBatch and createRunner.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import type { Task } from "../src/config/load-task.js";
import { buildBatchReport } from "../src/batch/batch-report.js";
import { BatchDirectory, type BatchPlan, type JournalLine } from "../src/batch/batch-state.js";
import { discoverTasks } from "../src/batch/discover-tasks.js";
import { runBatch } from "../src/batch/run-batch.js";
import { writeBatchReports } from "../src/batch/write-reports.js";
import { cloudEventType, type RunEvent } from "../src/events/event-catalogue.js";
import { createRunner } from "../src/runner/runner.js";
import { option, positiveOption } from "./lib/options.js";
import { fmt, median, p90, printTable } from "./lib/stats.js";

const taskCount = positiveOption("tasks", 10);
const jobs = positiveOption("jobs", 4);
const throughputTasks = positiveOption("throughput-tasks", 8);
const latencyMs = positiveOption("latency-ms", 1000);
const parts = new Set((option("only") ?? "overhead,throughput,reports").split(","));
const scratch = mkdtempSync(join(tmpdir(), "agent-runner-bench-batch-"));

/** A task of 3 `run_shell true` steps on a one-file repository; each model answer comes `latency` ms late. */
function makeTask(root: string, name: string, latency = 0): void {
  const directory = join(root, name);
  const repo = join(directory, "repo");
  mkdirSync(repo, { recursive: true });
  writeFileSync(join(repo, "a.txt"), "a\n");
  const git = (...args: string[]) => execFileSync("git", ["-c", "user.name=bench", "-c", "user.email=bench@localhost", ...args], { cwd: repo });
  git("init", "-q");
  git("add", "-A");
  git("commit", "-qm", "initial");
  const late = latency > 0 ? { faults: [{ delay_ms: latency }] } : {};
  const turns = [1, 2, 3].map(() => ({ tool_calls: [{ name: "run_shell", arguments: { command: "true" } }], ...late }));
  writeFileSync(join(directory, "script.yaml"), JSON.stringify({ turns: [...turns, { content: "Done.", ...late }] }));
  writeFileSync(
    join(directory, "task.yaml"),
    JSON.stringify({ name, instruction: "x", workspace: "./repo", model: { provider: "scripted", script: "./script.yaml" } }),
  );
}

/**
 * A finished run's directory as report.html and junit.xml read it: an
 * events.jsonl of `toolCalls` tool calls (started and finished, 200-character
 * arguments and results), verify, the commit and the merge, and a patch.diff
 * of `diffLines` changed lines.
 */
function writeSyntheticRun(runDirectory: string, runId: string, toolCalls: number, diffLines: number): void {
  mkdirSync(runDirectory, { recursive: true });
  const start = Date.now();
  const events: RunEvent[] = [
    { type: "run.started", data: { run_id: runId, task: "t", workspace: "/w", branch: `agent/${runId}`, base_commit: "0".repeat(40) } },
    { type: "sandbox.created", data: { sandbox_id: "s", image: "agent-runner/sandbox:bookworm", ready_ms: 400, uid: 1000 } },
  ];
  for (let call = 0; call < toolCalls; call += 1) {
    const id = `call-${call}`;
    events.push(
      {
        type: "tool_call.started",
        data: { agent_id: "main", step: call, tool_call_id: id, name: "run_shell", arguments: JSON.stringify({ command: "x".repeat(200) }) },
      },
      {
        type: "tool_call.finished",
        data: {
          agent_id: "main",
          step: call,
          tool_call_id: id,
          name: "run_shell",
          is_error: call % 7 === 0,
          duration_ms: 120,
          result_preview: "y".repeat(200),
        },
      },
    );
  }
  events.push(
    { type: "verify.started", data: { agent_id: "main", command: "npm test" } },
    {
      type: "verify.finished",
      data: {
        agent_id: "main",
        command: "npm test",
        exit_code: 0,
        passed: true,
        timed_out: false,
        duration_ms: 900,
        output_tail: "ok\n".repeat(50),
        sandbox_lost: null,
      },
    },
    {
      type: "workspace.committed",
      data: { branch: `agent/${runId}`, commit: "f".repeat(40), changed: true, left_out: [], left_out_count: 0, timed_out: false },
    },
    { type: "run.finished", data: { status: "succeeded", exit_code: 0, duration_ms: 4000 } },
  );
  const lines = events.map((event, index) =>
    JSON.stringify({
      specversion: "1.0",
      id: `${runId}-${index}`,
      source: "/bench",
      type: cloudEventType(event.type),
      time: new Date(start + index * 100).toISOString(),
      data: event.data,
    }),
  );
  writeFileSync(join(runDirectory, "events.jsonl"), `${lines.join("\n")}\n`);
  const hunk = Array.from({ length: diffLines }, (_, line) => (line % 2 ? `+added line ${line} ${"z".repeat(50)}` : `-removed line ${line} ${"z".repeat(50)}`));
  writeFileSync(
    join(runDirectory, "patch.diff"),
    `diff --git a/f.ts b/f.ts\nindex 1..2 100644\n--- a/f.ts\n+++ b/f.ts\n@@ -1,${diffLines} +1,${diffLines} @@\n${hunk.join("\n")}\n`,
  );
}

/**
 * Every report (batch-report.json, junit.xml, summary.md, report.html with
 * its timelines and diffs) for `count` synthetic finished tasks whose run
 * directories are real files here (30 tool calls and a 200-line diff each);
 * wall ms and CPU ms (user + system) per write, the run directories written once before.
 */
function reportWriteTimes(count: number, rounds: number): { ms: number[]; cpuMs: number[]; htmlBytes: number; junitBytes: number } {
  const home = join(scratch, "synthetic-home");
  const ids = Array.from({ length: count }, (_, index) => `suite/task-${String(index).padStart(4, "0")}/task.yaml`);
  const plan: BatchPlan = {
    batch_id: "bench",
    created_at: new Date().toISOString(),
    input: { path: "/in", kind: "directory", root: "/in" },
    options: { jobs: 4, attempts: 1, retries: 1, min_pass_rate: 0.8, max_errors: 10, filter: null, shard: null, limit: null, junit: null, summary: null },
    tasks: ids.map((id) => ({ id, task_file: `/in/${id}`, task: { name: "t" } as Task })),
    discovered: count,
  };
  const at = new Date().toISOString();
  const journal: JournalLine[] = ids.flatMap((id, index): JournalLine[] => [
    { type: "attempt.started", at, task: id, attempt: 1, try: 1, run_id: `run-${index}` },
    {
      type: "attempt.finished",
      at,
      task: id,
      attempt: 1,
      try: 1,
      run_id: `run-${index}`,
      status: index % 4 === 0 ? "failed" : "succeeded",
      reason: index % 4 === 0 ? "verify_failed" : "verified",
      error: index % 4 === 0 ? "x".repeat(2000) : null,
      steps: 5,
      tokens: { prompt: 5000, completion: 300, cached: 1000 },
      duration_ms: 4000 + index,
      patch: "patch.diff",
    },
  ]);
  for (let index = 0; index < count; index += 1) writeSyntheticRun(join(home, "runs", `run-${index}`), `run-${index}`, 30, 200);
  const directory = new BatchDirectory(join(scratch, "synthetic"));
  directory.make();
  const ms: number[] = [];
  const cpuMs: number[] = [];
  for (let round = 0; round < rounds; round += 1) {
    const started = performance.now();
    const cpu = process.cpuUsage();
    writeBatchReports(directory, buildBatchReport(plan, journal, home, { ended: true, interrupted: false, skipReason: "not_run" }));
    ms.push(performance.now() - started);
    const used = process.cpuUsage(cpu);
    cpuMs.push((used.user + used.system) / 1000);
  }
  return { ms, cpuMs, htmlBytes: statSync(directory.file("report.html")).size, junitBytes: statSync(directory.file("junit.xml")).size };
}

function printReportWrites(): void {
  const writes = reportWriteTimes(1000, 3);
  console.log(
    `writing every report for 1000 synthetic results (30 tool calls and a 200-line diff each): median ${fmt(median(writes.ms))} ms ` +
      `(rounds ${writes.ms.map(fmt).join(", ")}), CPU time median ${fmt(median(writes.cpuMs))} ms (wall time over CPU time is the machine's load); report.html ${fmt(writes.htmlBytes / 1024 / 1024)} MiB, junit.xml ${fmt(writes.junitBytes / 1024)} KiB`,
  );
}

/** Runs every task under `tasks` as one batch at `-j jobsAt` on a fresh Runner; the report and the wall time, ms. */
async function timedBatch(tasks: string, id: string, jobsAt: number) {
  const home = join(scratch, `home-${id}`);
  const discovered = await discoverTasks(tasks);
  const plan: BatchPlan = {
    batch_id: id,
    created_at: new Date().toISOString(),
    input: { path: tasks, kind: discovered.kind, root: discovered.root },
    options: { jobs: jobsAt, attempts: 1, retries: 0, min_pass_rate: 1, max_errors: 0, filter: null, shard: null, limit: null, junit: null, summary: null },
    tasks: discovered.tasks,
    discovered: discovered.tasks.length,
  };
  const directory = BatchDirectory.of(home, plan.batch_id);
  directory.create(plan);
  const runner = await createRunner({ home });
  const started = performance.now();
  const report = await runBatch(runner, directory, new AbortController().signal);
  const wall = performance.now() - started;
  await runner.close();
  if (report.status !== "passed") throw new Error(`the batch did not pass: ${JSON.stringify(report.totals)}`);
  return { report, wall };
}

async function main(): Promise<void> {
  console.log(
    `agent-runner bench (batch): node ${process.version}, load ${loadavg()
      .map((value) => value.toFixed(2))
      .join(" ")}, ${taskCount} tasks, -j ${jobs}`,
  );
  if (parts.has("overhead")) {
    const tasks = join(scratch, "tasks");
    for (let index = 0; index < taskCount; index += 1) makeTask(tasks, `task-${index}`);
    const { report, wall } = await timedBatch(tasks, "bench-batch", jobs);
    const durations = report.tasks.map((task) => task.attempts[0]!.duration_ms!);
    printTable(`runner's own time per task at -j ${jobs} (run duration_ms; model and verify ~0)`, [{ name: "per task", samples: durations }]);
    console.log(
      `\nbatch wall ${fmt(wall)} ms for ${taskCount} tasks: ${fmt(wall / taskCount)} ms per task, ${((taskCount / wall) * 60_000).toFixed(1)} tasks/min`,
    );
    console.log(`per task p50 ${fmt(median(durations))} ms, p90 ${fmt(p90(durations))} ms`);
    console.log(`peak RSS of this process ${fmt(process.resourceUsage().maxRSS / 1024)} MiB`);
  }
  if (parts.has("throughput")) {
    const tasks = join(scratch, "throughput-tasks");
    for (let index = 0; index < throughputTasks; index += 1) makeTask(tasks, `task-${index}`, latencyMs);
    console.log(`\nthroughput: ${throughputTasks} tasks of 4 model calls, each answered ${latencyMs} ms late`);
    let baseline = 0;
    for (const jobsAt of [1, 2, 4, 8]) {
      const { wall } = await timedBatch(tasks, `throughput-j${jobsAt}`, jobsAt);
      if (jobsAt === 1) baseline = wall;
      const perMinute = (throughputTasks / wall) * 60_000;
      console.log(`-j ${jobsAt}: wall ${fmt(wall)} ms, ${perMinute.toFixed(1)} tasks/min, ${(baseline / wall).toFixed(2)}x -j 1`);
    }
  }
  if (parts.has("reports")) printReportWrites();
}

try {
  await main();
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
