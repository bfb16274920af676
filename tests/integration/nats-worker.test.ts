/**
 * Batches on NATS JetStream (docs/scale-out.md) on a real 3-node cluster of
 * Debian's nats-server on loopback, with workers in this process on
 * Docker-free Runners (the host-directory sandbox, the scripted model, real
 * git): the queue, idempotency, leases, dead letters and the submitter's
 * records. The real CLI with real Docker is tests/e2e/nats-worker-cli.test.ts.
 */
import { randomUUID } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { execFileSync } from "node:child_process";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runBatch } from "../../src/batch/run-batch.js";
import { NatsBatchRunner } from "../../src/worker/nats-batch-runner.js";
import { WorkQueue, type WorkQueueOptions } from "../../src/worker/work-queue.js";
import { fakeRunner, fakeShell } from "../helpers/fake-runner.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { createBatch, junitCases, outcomes, startFakeWorker, writeBatchTasks } from "../helpers/nats-batch.js";
import { startNatsCluster, type NatsCluster } from "../helpers/nats-cluster.js";

let cluster: NatsCluster;
beforeAll(async () => {
  cluster = await startNatsCluster(3);
}, 60_000);
afterAll(async () => {
  await cluster?.close();
});

/** A pool of its own per test, with short timings; `dispose` deletes its streams, bucket and store. */
async function pool(options: WorkQueueOptions = {}) {
  const settings: WorkQueueOptions = { pool: `t${randomUUID().slice(0, 8)}`, ackWaitMs: 3_000, maxDeliver: 3, redeliveryDelayMs: 200, ...options };
  const connection = await connect({ servers: cluster.urls });
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
      const branchFile = execFileSync("git", ["-C", repository, "show", `refs/heads/runner/${attempt.run_id}:out.txt`], { encoding: "utf8" });
      expect(branchFile).toBe("ok\n");
      expect(runReport.head_commit).toBe(execFileSync("git", ["-C", repository, "rev-parse", `runner/${attempt.run_id}`], { encoding: "utf8" }).trim());
    }
  }, 240_000);
});
