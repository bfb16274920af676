/**
 * Batches on NATS JetStream (docs/scale-out.md) on a real 3-node cluster of
 * Debian's nats-server on loopback, with workers in this process on
 * Docker-free Runners (the host-directory sandbox, the scripted model, real
 * git): the queue, idempotency, leases, dead letters and the submitter's
 * records. The real CLI with real Docker is tests/e2e/nats-worker-cli.test.ts.
 */
import { randomUUID } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { execFileSync, spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runBatch } from "../../src/batch/run-batch.js";
import { NatsBatchRunner } from "../../src/worker/nats-batch-runner.js";
import { WorkQueue, type WorkQueueOptions } from "../../src/worker/work-queue.js";
import { fakeRunner, fakeShell, Gates, toolCall, writeScriptedTask } from "../helpers/fake-runner.js";
import { ROOT } from "../helpers/runner-cli.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { createBatch, junitCases, outcomes, startFakeWorker, writeBatchTasks } from "../helpers/nats-batch.js";
import { startNatsCluster, type NatsCluster } from "../helpers/nats-cluster.js";

const CHILD = fileURLToPath(new URL("../helpers/nats-worker-child.ts", import.meta.url));

let cluster: NatsCluster;
beforeAll(async () => {
  cluster = await startNatsCluster(3);
}, 60_000);
afterAll(async () => {
  await cluster?.close();
});

/** A pool of its own per test (on `on`, default the shared cluster), with short timings; `dispose` deletes its streams, bucket and store. */
async function pool(options: WorkQueueOptions = {}, on: NatsCluster = cluster) {
  const settings: WorkQueueOptions = { pool: `t${randomUUID().slice(0, 8)}`, ackWaitMs: 3_000, maxDeliver: 3, redeliveryDelayMs: 200, ...options };
  const connection = await connect({ servers: on.urls, maxReconnectAttempts: -1 });
  const queue = await WorkQueue.open(connection, settings);
  return {
    settings,
    queue,
    async [Symbol.asyncDispose]() {
      await queue.destroy();
      await connection.close();
    },
  };
}

/** A worker process (tests/helpers/nats-worker-child.ts) that SIGKILLs itself when an agent runs `dieAt`; `ready` resolves once it pulls. */
function childWorker(home: string, poolName: string, dieAt: string) {
  const child = spawn(process.execPath, ["--import", "tsx", CHILD, home, cluster.url, poolName, dieAt], {
    cwd: ROOT,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = once(child, "exit").then(([code, signal]) => ({ code: code as number | null, signal: signal as NodeJS.Signals | null, stderr }));
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (chunk: Buffer) => chunk.toString().includes("ready") && resolve());
    void exited.then((exit) => reject(new Error(`the worker exited before it was ready: ${JSON.stringify(exit)}`)));
  });
  return { child, ready, exited };
}

/** One task directory under `root`/`name` whose agent appends ok to out.txt, runs `command`, and stops; verify checks out.txt. */
function writeTaskRunning(root: string, name: string, command: string): void {
  writeScriptedTask(join(root, name), {
    script: {
      turns: [
        { tool_calls: [toolCall("run_shell", { command: "echo ok >> out.txt" })] },
        { tool_calls: [toolCall("run_shell", { command })] },
        { content: "done" },
      ],
    },
    task: { name, verify: { command: "grep -q ok out.txt", timeout_sec: 30 } },
  });
}

describe("runner batch run --nats over workers", () => {
  it("3 workers, 30 tasks: every task has exactly one result, and the reports equal a local batch's", async () => {
    await using input = temporaryDirectory("nats-batch-input-");
    writeBatchTasks(input.path, 30);
    await using queue = await pool();
    const workers = await Promise.all([0, 1, 2].map((index) => startFakeWorker(cluster.urls, queue.settings, { jobs: 3, name: `w${index}` })));
    await using submitter = temporaryDirectory("nats-submitter-");
    const directory = await createBatch(submitter.path, input.path);
    const remote = await NatsBatchRunner.open(queue.queue, submitter.path);
    let report;
    try {
      report = await runBatch(remote, directory, new AbortController().signal);
    } finally {
      await remote.close();
      await Promise.all(workers.map((worker) => worker.stop()));
    }

    await using local = await fakeRunner({ exec: fakeShell() });
    const localDirectory = await createBatch(local.home, input.path);
    const localReport = await runBatch(local.runner, localDirectory, new AbortController().signal);

    expect(report.totals).toMatchObject({ tasks: 30, succeeded: 20, failed: 10, error: 0, runs: 30 });
    expect(outcomes(report)).toEqual(outcomes(localReport));
    expect(junitCases(directory)).toEqual(junitCases(localDirectory));
    for (const file of ["batch-report.json", "junit.xml", "summary.md", "report.html"] as const) expect(existsSync(directory.file(file))).toBe(true);
    // Exactly one run per task, spread over the workers, each with its records and its branch in the user's repository.
    const ranOn = workers.map((worker) => worker.provider.commands.filter((command) => command.agentId === "verify").length);
    expect(ranOn.reduce((sum, count) => sum + count, 0)).toBe(30);
    expect(ranOn.filter((count) => count > 0).length).toBeGreaterThan(1);
    for (const task of report.tasks) {
      expect(task.attempts).toHaveLength(1);
      const attempt = task.attempts[0]!;
      const runReport = JSON.parse(readFileSync(join(attempt.run_dir!, "report.json"), "utf8"));
      expect(runReport).toMatchObject({ run_id: attempt.run_id, task: task.name, deliveries: [{ delivery: 1, run_id: attempt.run_id, reason: null }] });
      const repository = join(input.path, task.name, "repo");
      // The branch the worker's run recorded, made in the user's repository under that name.
      expect(runReport.branch).toMatch(/^runner\//);
      const branchFile = execFileSync("git", ["-C", repository, "show", `refs/heads/${runReport.branch}:out.txt`], { encoding: "utf8" });
      expect(branchFile).toBe("ok\n");
      expect(runReport.head_commit).toBe(execFileSync("git", ["-C", repository, "rev-parse", `refs/heads/${runReport.branch}`], { encoding: "utf8" }).trim());
    }
  }, 240_000);

  it("a resubmitted batch within the dedupe window starts no task twice: two submitters at once, and a third after", async () => {
    await using input = temporaryDirectory("nats-dedupe-input-");
    writeBatchTasks(input.path, 6);
    await using queue = await pool();
    const workers = await Promise.all([0, 1].map((index) => startFakeWorker(cluster.urls, queue.settings, { jobs: 3, name: `w${index}` })));
    const submit = async () => {
      const home = temporaryDirectory("nats-submitter-");
      const directory = await createBatch(home.path, input.path);
      const remote = await NatsBatchRunner.open(queue.queue, home.path);
      try {
        return { home, report: await runBatch(remote, directory, new AbortController().signal) };
      } finally {
        await remote.close();
      }
    };
    const verifications = () => workers.reduce((sum, worker) => sum + worker.provider.commands.filter((command) => command.agentId === "verify").length, 0);
    try {
      const [first, second] = await Promise.all([submit(), submit()]);
      const runIds = (report: typeof first.report) => report.tasks.map((task) => task.attempts.map((attempt) => attempt.run_id));
      expect(runIds(second.report)).toEqual(runIds(first.report));
      expect(outcomes(second.report)).toEqual(outcomes(first.report));
      expect(verifications()).toBe(6);
      const third = await submit();
      expect(runIds(third.report)).toEqual(runIds(first.report));
      expect(verifications()).toBe(6);
      // Each submitter has the records of every run (copied from the object store) and the same report.json.
      for (const submitter of [first, second, third]) {
        for (const task of submitter.report.tasks) expect(existsSync(join(task.attempts[0]!.run_dir!, "events.jsonl"))).toBe(true);
        await submitter.home[Symbol.asyncDispose]();
      }
    } finally {
      await Promise.all(workers.map((worker) => worker.stop()));
    }
  }, 180_000);

  it("a task that kills its worker every time reaches max_deliver and is reported error with each attempt's reason", async () => {
    await using input = temporaryDirectory("nats-dead-input-");
    writeTaskRunning(input.path, "crasher", "crash-the-worker");
    await using queue = await pool({ ackWaitMs: 2_000, maxDeliver: 3 });
    await using workerHome = temporaryDirectory("nats-child-home-");
    await using submitter = temporaryDirectory("nats-submitter-");
    const directory = await createBatch(submitter.path, input.path);
    const remote = await NatsBatchRunner.open(queue.queue, submitter.path);
    const batch = runBatch(remote, directory, new AbortController().signal);
    try {
      for (let delivery = 1; delivery <= 3; delivery++) {
        const worker = childWorker(workerHome.path, queue.settings.pool!, "crash-the-worker");
        expect((await worker.exited).signal).toBe("SIGKILL");
      }
      // A worker that pulls after the last delivery's ack_wait: JetStream then sends the max-deliveries advisory.
      const last = childWorker(workerHome.path, queue.settings.pool!, "crash-the-worker");
      const report = await batch;
      last.child.kill("SIGTERM");
      expect((await last.exited).code).toBe(0);
      const task = report.tasks[0]!;
      expect(task).toMatchObject({ status: "error", reason: "deliveries_exhausted" });
      expect(task.error).toContain("max_deliver 3");
      for (const delivery of [1, 2, 3])
        expect(task.error).toMatch(new RegExp(`delivery ${delivery} \\(child-\\d+, run [\\w-]+\\): child-\\d+: its worker stopped answering`));
      // Recorded once, and the dead task no longer waits in the queue.
      const info = await queue.queue.manager.streams.info(queue.queue.tasksStream);
      expect(info.state.messages).toBe(0);
      expect(report.totals).toMatchObject({ tasks: 1, error: 1, runs: 1 });
    } finally {
      await remote.close();
    }
  }, 180_000);

  it("kill -9 of a worker mid-task: another worker gets the task within ack_wait + a few seconds and finishes it; the dead worker's run is swept when it restarts", async () => {
    await using input = temporaryDirectory("nats-kill-input-");
    writeTaskRunning(input.path, "survivor", "crash-once");
    await using queue = await pool({ ackWaitMs: 3_000 });
    await using deadHome = temporaryDirectory("nats-child-home-");
    await using submitter = temporaryDirectory("nats-submitter-");
    const directory = await createBatch(submitter.path, input.path);
    const remote = await NatsBatchRunner.open(queue.queue, submitter.path);
    const batch = runBatch(remote, directory, new AbortController().signal);
    let other: Awaited<ReturnType<typeof startFakeWorker>> | null = null;
    try {
      const dying = childWorker(deadHome.path, queue.settings.pool!, "crash-once");
      expect((await dying.exited).signal).toBe("SIGKILL");
      const diedAt = Date.now();
      // The other worker answers crash-once like any unknown command (exit 127): the agent goes on.
      other = await startFakeWorker(cluster.urls, queue.settings, { name: "survivor-worker" });
      const report = await batch;
      const task = report.tasks[0]!;
      expect(task).toMatchObject({ status: "succeeded", reason: "verified" });
      const runReport = JSON.parse(readFileSync(join(task.attempts[0]!.run_dir!, "report.json"), "utf8"));
      expect(runReport.deliveries).toHaveLength(2);
      expect(runReport.deliveries[0]).toMatchObject({ delivery: 1, worker: expect.stringMatching(/^child-/) });
      expect(runReport.deliveries[0].reason).toContain("stopped answering");
      expect(runReport.deliveries[1]).toMatchObject({ delivery: 2, worker: "survivor-worker", reason: null, run_id: task.attempts[0]!.run_id });
      const redeliveredAfter = Date.parse(runReport.deliveries[1].started_at) - diedAt;
      expect(redeliveredAfter).toBeLessThan(queue.settings.ackWaitMs! + 5_000);
      // The dead worker's run: swept (committed, reported runner_died) when a worker starts again on its home.
      const deadRun = runReport.deliveries[0].run_id as string;
      expect(existsSync(join(deadHome.path, "runs", deadRun, "report.json"))).toBe(false);
      const restarted = childWorker(deadHome.path, queue.settings.pool!, "never-run");
      await restarted.ready;
      expect(JSON.parse(readFileSync(join(deadHome.path, "runs", deadRun, "report.json"), "utf8"))).toMatchObject({ status: "error", reason: "runner_died" });
      restarted.child.kill("SIGTERM");
      expect((await restarted.exited).code).toBe(0);
    } finally {
      await remote.close();
      await other?.stop();
    }
  }, 180_000);

  it("a task longer than 3 × ack_wait is not redelivered while its worker lives", async () => {
    await using input = temporaryDirectory("nats-long-input-");
    writeTaskRunning(input.path, "long", "wait-for long");
    await using queue = await pool({ ackWaitMs: 1_500 });
    const gates = new Gates();
    const busy = await startFakeWorker(cluster.urls, queue.settings, { name: "busy", gates });
    const idle = await startFakeWorker(cluster.urls, queue.settings, { name: "idle" });
    await using submitter = temporaryDirectory("nats-submitter-");
    const directory = await createBatch(submitter.path, input.path);
    const remote = await NatsBatchRunner.open(queue.queue, submitter.path);
    try {
      const batch = runBatch(remote, directory, new AbortController().signal);
      const leases = await queue.queue.keyValue.watch({ key: "lease.>" });
      for await (const entry of leases) if (entry.operation === "PUT" && entry.json<{ attempts: { run_id: string | null }[] }>().attempts[0]?.run_id) break;
      leases.stop();
      // The run now waits at its gate for 3.5 × ack_wait: the worker's working() keeps the delivery its own.
      await new Promise((resolve) => setTimeout(resolve, queue.settings.ackWaitMs! * 3.5));
      const consumer = await queue.queue.manager.consumers.info(queue.queue.tasksStream, "workers");
      expect(consumer.num_redelivered).toBe(0);
      expect(consumer.num_ack_pending).toBe(1);
      expect(idle.provider.commands).toHaveLength(0);
      gates.open("long");
      const report = await batch;
      expect(report.tasks[0]).toMatchObject({ status: "succeeded", reason: "verified" });
      const runReport = JSON.parse(readFileSync(join(report.tasks[0]!.attempts[0]!.run_dir!, "report.json"), "utf8"));
      expect(runReport.deliveries).toEqual([expect.objectContaining({ delivery: 1, worker: "busy", reason: null })]);
    } finally {
      await remote.close();
      await Promise.all([busy.stop(), idle.stop()]);
    }
  }, 120_000);

  it("secret_env values are never published: a worker without the variable refuses the task, naming it; one with it runs the task", async () => {
    await using input = temporaryDirectory("nats-secret-input-");
    writeTaskRunning(input.path, "secretive", "echo done >> log.txt");
    const taskFile = join(input.path, "secretive", "task.yaml");
    const document = JSON.parse(readFileSync(taskFile, "utf8"));
    writeFileSync(taskFile, JSON.stringify({ ...document, sandbox: { ...document.sandbox, secret_env: ["DEPLOY_TOKEN"] } }));
    const secret = `s3cr3t-${randomUUID()}`;
    await using queue = await pool({ maxDeliver: 3, redeliveryDelayMs: 100 });
    const without = await startFakeWorker(cluster.urls, queue.settings, { name: "no-secret" });
    await using submitter = temporaryDirectory("nats-submitter-");
    const directory = await createBatch(submitter.path, input.path);
    const remote = await NatsBatchRunner.open(queue.queue, submitter.path);
    process.env.DEPLOY_TOKEN = secret;
    let holder: Awaited<ReturnType<typeof startFakeWorker>> | null = null;
    try {
      const batch = runBatch(remote, directory, new AbortController().signal);
      const leases = await queue.queue.keyValue.watch({ key: "lease.>" });
      for await (const entry of leases) if (entry.operation === "PUT" && entry.json<{ attempts: { reason: string | null }[] }>().attempts[0]?.reason) break;
      leases.stop();
      await without.stop();
      holder = await startFakeWorker(cluster.urls, queue.settings, { name: "has-secret", environment: { DEPLOY_TOKEN: secret } });
      const report = await batch;
      expect(report.tasks[0]).toMatchObject({ status: "succeeded", reason: "verified" });
      const runReport = JSON.parse(readFileSync(join(report.tasks[0]!.attempts[0]!.run_dir!, "report.json"), "utf8"));
      expect(runReport.deliveries[0]).toMatchObject({ delivery: 1, worker: "no-secret", run_id: null });
      expect(runReport.deliveries[0].reason).toContain("refused the task: DEPLOY_TOKEN not set in its environment");
      expect(runReport.deliveries.at(-1)).toMatchObject({ worker: "has-secret", reason: null });
      // Nothing the submitter published or the workers stored holds the value: the jobs, the bucket, the events.
      const stored: string[] = [];
      for (const stream of [queue.queue.tasksStream, queue.queue.eventsStream, `KV_runner_${queue.settings.pool}`]) {
        const info = await queue.queue.manager.streams.info(stream);
        for (let sequence = info.state.first_seq; sequence <= info.state.last_seq; sequence++) {
          const message = await queue.queue.manager.streams.getMessage(stream, { seq: sequence }).catch(() => null);
          if (message) stored.push(message.string());
        }
      }
      expect(stored.length).toBeGreaterThan(3);
      expect(stored.filter((text) => text.includes(secret))).toEqual([]);
      expect(stored.some((text) => text.includes("DEPLOY_TOKEN"))).toBe(true);
    } finally {
      delete process.env.DEPLOY_TOKEN;
      await remote.close();
      await holder?.stop();
    }
  }, 120_000);
});

describe("a pool on a 3-node cluster that loses servers", () => {
  it("the stream leader's server killed: work goes on after the election, nothing lost or run twice; two of three down: everyone waits, says why, and finishes after a restart", async () => {
    await using three = await startNatsCluster(3);
    await using input = temporaryDirectory("nats-failover-input-");
    writeBatchTasks(input.path, 8);
    // ack_wait longer than an election: a worker whose heartbeats wait for a leader keeps its task.
    await using queue = await pool({ ackWaitMs: 15_000, waitForQuorumMs: 120_000 }, three);
    const workers = await Promise.all([0, 1].map((index) => startFakeWorker(three.urls, queue.settings, { jobs: 2, name: `w${index}` })));
    const verifications = () => workers.reduce((sum, worker) => sum + worker.provider.commands.filter((command) => command.agentId === "verify").length, 0);
    const waits: string[] = [];
    const submitterConnection = await connect({ servers: three.urls, maxReconnectAttempts: -1 });
    const submitterQueue = await WorkQueue.open(submitterConnection, { ...queue.settings, onWait: (reason) => waits.push(reason) });
    await using submitter = temporaryDirectory("nats-submitter-");
    const remote = await NatsBatchRunner.open(submitterQueue, submitter.path);
    try {
      const streamInfo = await submitterQueue.manager.streams.info(submitterQueue.tasksStream);
      expect(streamInfo.config.num_replicas).toBe(3);
      const batch = runBatch(remote, await createBatch(submitter.path, input.path), new AbortController().signal);
      // Once tasks are running, the tasks stream's leader goes.
      const leases = await submitterQueue.keyValue.watch({ key: "lease.>" });
      for await (const entry of leases) if (entry.operation === "PUT") break;
      leases.stop();
      const leader = (await submitterQueue.manager.streams.info(submitterQueue.tasksStream)).cluster?.leader;
      const leaderIndex = Number(/^n(\d+)$/.exec(leader ?? "")?.[1]);
      expect(Number.isInteger(leaderIndex)).toBe(true);
      await three.stop(leaderIndex);
      const report = await batch;
      expect(report.totals).toMatchObject({ tasks: 8, succeeded: 6, failed: 2, error: 0 });
      expect(verifications()).toBe(8);
      await three.start(leaderIndex);

      // Two of three down: no quorum. A new batch waits (saying why) and finishes once they are back.
      await using more = temporaryDirectory("nats-failover-more-");
      writeBatchTasks(more.path, 2, () => false);
      const others = [0, 1, 2].filter((index) => index !== leaderIndex);
      await Promise.all(others.map((index) => three.stop(index)));
      const second = runBatch(remote, await createBatch(submitter.path, more.path), new AbortController().signal);
      const told = await new Promise<string>((resolve) => {
        const check = setInterval(() => waits.length > 0 && (clearInterval(check), resolve(waits[0]!)), 50);
      });
      expect(told).toMatch(/waiting for a JetStream leader \(a quorum of the cluster's servers\)/);
      await Promise.all(others.map((index) => three.start(index)));
      const secondReport = await second;
      expect(secondReport.totals).toMatchObject({ tasks: 2, succeeded: 2, error: 0 });
      expect(verifications()).toBe(10);
    } finally {
      await remote.close();
      await Promise.all(workers.map((worker) => worker.stop()));
      await submitterConnection.close();
    }
  }, 300_000);
});
