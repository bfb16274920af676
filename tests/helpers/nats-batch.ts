/**
 * Batches for the NATS worker tests: task directories of the Docker-free
 * tier (scripted model, fake shell verify), a batch plan over them, and
 * in-process workers on fake-tier Runners.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { connect } from "@nats-io/transport-node";
import { BatchDirectory, type BatchOptions, type BatchPlan } from "../../src/batch/batch-state.js";
import { discoverTasks } from "../../src/batch/discover-tasks.js";
import type { BatchReport } from "../../src/batch/batch-report.js";
import { newRunId } from "../../src/run/run-id.js";
import { TaskWorker } from "../../src/worker/task-worker.js";
import { WorkQueue, type WorkQueueOptions } from "../../src/worker/work-queue.js";
import { fakeRunner, fakeShell, fakeTierEnvironment, toolCall, writeScriptedTask, type Gates } from "./fake-runner.js";

/**
 * `count` task directories under `root` (`task-00`, …): each agent appends
 * `ok` to out.txt; tasks whose index `fails(index)` verify a word that is not
 * there (status failed), the others succeed.
 */
export function writeBatchTasks(root: string, count: number, fails: (index: number) => boolean = (index) => index % 3 === 2): void {
  for (let index = 0; index < count; index++) {
    const name = `task-${String(index).padStart(2, "0")}`;
    writeScriptedTask(join(root, name), {
      script: { turns: [{ tool_calls: [toolCall("run_shell", { command: "echo ok >> out.txt" })] }, { content: "done" }] },
      task: { name, verify: { command: fails(index) ? "grep -q nope out.txt" : "grep -q ok out.txt", timeout_sec: 30 } },
    });
  }
}

/** A new batch of every task under `input` in `home` (as `runner batch run` makes one). */
export async function createBatch(home: string, input: string, options: Partial<BatchOptions> = {}): Promise<BatchDirectory> {
  const discovered = await discoverTasks(input);
  const plan: BatchPlan = {
    batch_id: newRunId(),
    created_at: new Date().toISOString(),
    input: { path: input, kind: discovered.kind, root: discovered.root },
    options: {
      jobs: 64,
      attempts: 1,
      retries: 0,
      min_pass_rate: 0,
      max_errors: 1000,
      filter: null,
      shard: null,
      limit: null,
      junit: null,
      summary: null,
      ...options,
    },
    tasks: discovered.tasks,
    discovered: discovered.tasks.length,
  };
  const directory = BatchDirectory.of(home, plan.batch_id);
  directory.create(plan);
  return directory;
}

/** Each task's status and reason, by name. */
export function outcomes(report: BatchReport): Record<string, string> {
  return Object.fromEntries(report.tasks.map((task) => [task.name, `${task.status}/${task.reason}`]));
}

/** The JUnit test cases of a batch: name and whether it has a failure or error element, in order. */
export function junitCases(directory: BatchDirectory): string[] {
  const xml = readFileSync(directory.file("junit.xml"), "utf8");
  return [...xml.matchAll(/<testcase\b[^>]*\bname="([^"]*)"[^>]*?(\/>|>([\s\S]*?)<\/testcase>)/g)].map(
    (match) => `${match[1]} ${/<failure\b/.test(match[3] ?? "") ? "failure" : /<error\b/.test(match[3] ?? "") ? "error" : "pass"}`,
  );
}

/** An in-process worker on a fake-tier Runner of its own (`gates` open its agents' `wait-for`s); `stop()` drains it and closes everything. */
export async function startFakeWorker(
  servers: string[],
  queueOptions: WorkQueueOptions,
  options: { jobs?: number; name?: string; environment?: NodeJS.ProcessEnv; gates?: Gates } = {},
) {
  const fake = await fakeRunner({ exec: fakeShell(options.gates) });
  const connection = await connect({ servers, maxReconnectAttempts: -1 });
  const { onWait: _onWait, ...settings } = queueOptions;
  const waits: string[] = [];
  const queue = await WorkQueue.open(connection, { ...settings, onWait: (reason) => waits.push(reason) });
  const drain = new AbortController();
  const worker = new TaskWorker({
    queue,
    runner: fake.runner,
    jobs: options.jobs ?? 2,
    environment: { ...fakeTierEnvironment(fake.home), ...options.environment },
    ...(options.name ? { name: options.name } : {}),
  });
  const running = worker.run(drain.signal);
  return {
    home: fake.home,
    provider: fake.provider,
    queue,
    running,
    /** Why this worker's calls waited (no leader, no quorum). */
    waits,
    async stop() {
      drain.abort();
      await running;
      await connection.close();
      await fake[Symbol.asyncDispose]();
    },
  };
}
