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
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import type { Task } from "../src/config/load-task.js";
import { buildBatchReport } from "../src/batch/batch-report.js";
import { BatchDirectory, type BatchPlan, type JournalLine } from "../src/batch/batch-state.js";
import { discoverTasks } from "../src/batch/discover-tasks.js";
import { runBatch } from "../src/batch/run-batch.js";
import { writeBatchReports } from "../src/batch/write-reports.js";
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

/** batch-report.json, junit.xml, summary.md and report.html for `count` synthetic finished tasks; ms. */
function reportWriteTime(count: number): number {
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
  const directory = new BatchDirectory(join(scratch, "synthetic"));
  directory.make();
  const started = performance.now();
  writeBatchReports(directory, buildBatchReport(plan, journal, "/home", { ended: true, interrupted: false, skipReason: "not_run" }));
  return performance.now() - started;
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
  if (parts.has("reports")) {
    const writes = [reportWriteTime(1000), reportWriteTime(1000), reportWriteTime(1000)];
    console.log(`\nwriting every report for 1000 synthetic results: median ${fmt(median(writes))} ms`);
  }
}

try {
  await main();
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
