/**
 * `runner batch` (issue 15, Measure): the runner's own time per task at
 * `-j 4`, the batch's wall time and throughput, peak RSS of the batch
 * process, and the time to write every report for 1 000 synthetic results.
 *
 *   npx tsx bench/batch.bench.ts [--tasks=10] [--jobs=4]
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
import { positiveOption } from "./lib/options.js";
import { fmt, median, p90, printTable } from "./lib/stats.js";

const taskCount = positiveOption("tasks", 10);
const jobs = positiveOption("jobs", 4);
const scratch = mkdtempSync(join(tmpdir(), "agent-runner-bench-batch-"));

function makeTask(root: string, name: string): void {
  const directory = join(root, name);
  const repo = join(directory, "repo");
  mkdirSync(repo, { recursive: true });
  writeFileSync(join(repo, "a.txt"), "a\n");
  const git = (...args: string[]) => execFileSync("git", ["-c", "user.name=bench", "-c", "user.email=bench@localhost", ...args], { cwd: repo });
  git("init", "-q");
  git("add", "-A");
  git("commit", "-qm", "initial");
  const turns = [1, 2, 3].map(() => ({ tool_calls: [{ name: "run_shell", arguments: { command: "true" } }] }));
  writeFileSync(join(directory, "script.yaml"), JSON.stringify({ turns: [...turns, { content: "Done." }] }));
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

async function main(): Promise<void> {
  console.log(
    `agent-runner bench (batch): node ${process.version}, load ${loadavg()
      .map((value) => value.toFixed(2))
      .join(" ")}, ${taskCount} tasks, -j ${jobs}`,
  );
  const tasks = join(scratch, "tasks");
  for (let index = 0; index < taskCount; index += 1) makeTask(tasks, `task-${index}`);
  const home = join(scratch, "home");
  const discovered = await discoverTasks(tasks);
  const plan: BatchPlan = {
    batch_id: "bench-batch",
    created_at: new Date().toISOString(),
    input: { path: tasks, kind: discovered.kind, root: discovered.root },
    options: { jobs, attempts: 1, retries: 0, min_pass_rate: 1, max_errors: 0, filter: null, shard: null, limit: null, junit: null, summary: null },
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
  const durations = report.tasks.map((task) => task.attempts[0]!.duration_ms!);
  printTable(`runner's own time per task at -j ${jobs} (run duration_ms; model and verify ~0)`, [{ name: "per task", samples: durations }]);
  console.log(
    `\nbatch wall ${fmt(wall)} ms for ${taskCount} tasks: ${fmt(wall / taskCount)} ms per task, ${((taskCount / wall) * 60_000).toFixed(1)} tasks/min`,
  );
  console.log(`per task p50 ${fmt(median(durations))} ms, p90 ${fmt(p90(durations))} ms`);
  console.log(`peak RSS of this process ${fmt(process.resourceUsage().maxRSS / 1024)} MiB`);
  const writes = [reportWriteTime(1000), reportWriteTime(1000), reportWriteTime(1000)];
  console.log(`writing every report for 1000 synthetic results: median ${fmt(median(writes))} ms`);
}

try {
  await main();
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
