/**
 * Batches on NATS workers (issue 25, docs/scale-out.md): `--tasks` scripted
 * tasks whose every model answer comes `--latency-ms` late, run by 1, 2 and 4
 * workers (each `-j 1`) of a 3-node JetStream cluster on loopback (Debian's
 * nats-server), against a local batch at `-j 1` of the same tasks.
 *
 *   npx tsx bench/distributed.bench.ts [--tasks=40] [--latency-ms=1000] [--workers=1,2,4]
 *
 * Prints per row the wall time, the throughput ratio to one worker (goal: 4
 * workers >= 3x), the submit -> first task started latency, and the
 * per-task time against the local batch (goal: <= 1.3x). The workers run in
 * this process on Docker-free Runners (HostDirectorySandboxProvider, the
 * scripted model over HTTP, real git): what is measured is the queue, the
 * bundles and the records, not Docker (bench/batch.bench.ts measures that).
 * On 2 shared cores the workers' own CPU (git, the runner) competes with the
 * model waits: read the ratios, not the seconds.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { connect } from "@nats-io/transport-node";
import { runBatch, type BatchRunner } from "../src/batch/run-batch.js";
import { createRunner } from "../src/runner/runner.js";
import { HostDirectorySandboxProvider } from "../src/sandbox/fake/host-directory-sandbox.js";
import { NatsBatchRunner } from "../src/worker/nats-batch-runner.js";
import { TaskWorker } from "../src/worker/task-worker.js";
import { WorkQueue } from "../src/worker/work-queue.js";
import { createBatch } from "../tests/helpers/nats-batch.js";
import { startNatsCluster } from "../tests/helpers/nats-cluster.js";
import { fakeShell, fakeTierEnvironment, toolCall, writeScriptedTask } from "../tests/helpers/fake-runner.js";
import { option, positiveOption } from "./lib/options.js";

const taskCount = positiveOption("tasks", 40);
const latencyMs = positiveOption("latency-ms", 1000);
const workerCounts = (option("workers") ?? "1,2,4").split(",").map(Number);
const scratch = mkdtempSync(join(tmpdir(), "agent-runner-bench-distributed-"));

/** A Runner of the Docker-free tier on its own home. */
async function fakeTierRunner(name: string) {
  const home = mkdtempSync(join(scratch, `${name}-`));
  return createRunner({ home, sandboxProvider: new HostDirectorySandboxProvider({ exec: fakeShell() }), environment: fakeTierEnvironment(home) });
}

/** Runs the batch of `input` on `runner`; wall time and submit -> first started, ms. */
async function timeBatch(runner: BatchRunner, input: string): Promise<{ wallMs: number; firstStartedMs: number; succeeded: number }> {
  const directory = await createBatch(runner.home, input, { jobs: taskCount });
  const start = performance.now();
  let firstStarted = Number.NaN;
  const report = await runBatch(runner, directory, new AbortController().signal, {
    started: () => {
      if (Number.isNaN(firstStarted)) firstStarted = performance.now() - start;
    },
    finished: () => undefined,
  });
  return { wallMs: performance.now() - start, firstStartedMs: firstStarted, succeeded: report.totals.succeeded };
}

const input = join(scratch, "tasks");
for (let index = 0; index < taskCount; index++) {
  const late = { faults: [{ delay_ms: latencyMs }] };
  writeScriptedTask(join(input, `task-${String(index).padStart(2, "0")}`), {
    script: {
      turns: [
        { tool_calls: [toolCall("run_shell", { command: "echo ok >> out.txt" })], ...late },
        { content: "done", ...late },
      ],
    },
    task: { name: `task-${String(index).padStart(2, "0")}`, verify: { command: "grep -q ok out.txt", timeout_sec: 30 } },
  });
}

const cluster = await startNatsCluster(3);
const rows: { label: string; wallMs: number; firstStartedMs: number; succeeded: number }[] = [];
try {
  // The local baseline: one process, -j 1 (as one worker runs).
  const local = await fakeTierRunner("local");
  {
    const directory = await createBatch(local.home, input, { jobs: 1 });
    const start = performance.now();
    let firstStarted = Number.NaN;
    const report = await runBatch(local, directory, new AbortController().signal, {
      started: () => {
        if (Number.isNaN(firstStarted)) firstStarted = performance.now() - start;
      },
      finished: () => undefined,
    });
    rows.push({ label: "local batch -j 1", wallMs: performance.now() - start, firstStartedMs: firstStarted, succeeded: report.totals.succeeded });
  }
  await local.close();
  for (const count of workerCounts) {
    const pool = `bench${count}`;
    const connections = await Promise.all(Array.from({ length: count + 1 }, () => connect({ servers: cluster.urls })));
    const queues = await Promise.all(connections.map((connection) => WorkQueue.open(connection, { pool })));
    const drain = new AbortController();
    const runners = await Promise.all(queues.slice(1).map((_, index) => fakeTierRunner(`worker${count}-${index}`)));
    const running = runners.map((runner, index) =>
      new TaskWorker({ queue: queues[index + 1]!, runner, jobs: 1, environment: fakeTierEnvironment(runner.home), name: `w${index}` }).run(drain.signal),
    );
    const submitter = await NatsBatchRunner.open(queues[0]!, mkdtempSync(join(scratch, `submitter${count}-`)));
    const measured = await timeBatch(submitter, input);
    rows.push({ label: `${count} worker(s) -j 1`, ...measured });
    await submitter.close();
    drain.abort();
    await Promise.all(running);
    await Promise.all(runners.map((runner) => runner.close()));
    await queues[0]!.destroy();
    await Promise.all(connections.map((connection) => connection.close()));
  }
} finally {
  await cluster.close();
  rmSync(scratch, { recursive: true, force: true });
}

const local = rows[0]!;
const one = rows.find((row) => row.label.startsWith("1 worker"));
console.log(`\n${taskCount} tasks, model answers ${latencyMs} ms late (2 per task); load average ${loadavg()[0]!.toFixed(1)}\n`);
console.log("row                  wall s   tasks/min  vs 1 worker  first started ms     wall vs local  succeeded");
for (const row of rows) {
  const throughput = one ? one.wallMs / row.wallMs : Number.NaN;
  console.log(
    [
      row.label.padEnd(20),
      (row.wallMs / 1000).toFixed(1).padStart(7),
      ((taskCount / row.wallMs) * 60_000).toFixed(1).padStart(10),
      `${throughput.toFixed(2)}x`.padStart(12),
      row.firstStartedMs.toFixed(0).padStart(17),
      `${(row.wallMs / local.wallMs).toFixed(2)}x`.padStart(18),
      String(row.succeeded).padStart(10),
    ].join(" "),
  );
}
const four = rows.find((row) => row.label.startsWith("4 worker"));
if (one && four) console.log(`\ngoal 4 workers >= 3x one worker: ${(one.wallMs / four.wallMs).toFixed(2)}x`);
if (one) console.log(`goal per-task overhead <= 1.3x local (1 worker -j 1 against local -j 1): ${(one.wallMs / local.wallMs).toFixed(2)}x`);
