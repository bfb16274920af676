/**
 * What the submitter does with a worker's lease and result it cannot trust
 * (docs/scale-out.md "What the submitter checks of a worker's result"): on a
 * real loopback nats-server, the test plays the worker, writing leases,
 * results and objects into the pool's bucket and store as whoever holds the
 * pool's credentials could. Real git; no Docker.
 */
import { randomUUID } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadTaskFile, type Task } from "../../src/config/load-task.js";
import { RunnerError } from "../../src/errors.js";
import { newRunId } from "../../src/run/run-id.js";
import type { RunReport } from "../../src/run/run-report.js";
import { NatsBatchRunner } from "../../src/worker/nats-batch-runner.js";
import { taskKey, wireTask } from "../../src/worker/task-job.js";
import { WorkQueue, type LeaseAttempt, type TaskResult } from "../../src/worker/work-queue.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { startNatsCluster, type NatsCluster } from "../helpers/nats-cluster.js";
import { writeScriptedTask, type TaskDirectory } from "../helpers/runner-cli.js";

let cluster: NatsCluster;
beforeAll(async () => {
  cluster = await startNatsCluster(1);
}, 60_000);
afterAll(async () => {
  await cluster?.close();
});

const WORKER = "evil-host:666";

/**
 * A submitter (NatsBatchRunner in `home`) of one task in a pool of its own, nobody working the pool: the test
 * writes what a worker would. `escaped` is where a run id of `../../escaped` would land (beside `home`).
 */
async function submitterFixture() {
  const directory = temporaryDirectory("nats-forged-");
  const home = join(directory.path, "home");
  const files: TaskDirectory = writeScriptedTask(join(directory.path, "task"), { script: { turns: [{ content: "done" }] }, task: { name: "forged" } });
  const task: Task = loadTaskFile(files.task);
  const connection = await connect({ servers: cluster.urls });
  const queue = await WorkQueue.open(connection, { pool: `f${randomUUID().slice(0, 8)}`, replicas: 1 });
  const runner = await NatsBatchRunner.open(queue, home);
  const { policy: _policy, ...wire } = wireTask(task);
  const head = files.git("rev-parse", "HEAD").trim();
  const key = taskKey({ ...wire, base_commit: head }, 1);
  const attempt = (runId: unknown): LeaseAttempt => ({
    delivery: 1,
    worker: WORKER,
    run_id: runId as string,
    started_at: new Date().toISOString(),
    reason: null,
  });
  return {
    home,
    files,
    task,
    queue,
    key,
    head,
    escaped: join(directory.path, "escaped"),
    attempt,
    /** Writes the lease naming `runId` as the worker's run. */
    lease: (runId: unknown) => queue.writeLease({ key, name: task.name!, attempts: [attempt(runId)] }, 0),
    /** Writes the task's result. */
    result: (fields: Partial<TaskResult>) =>
      queue.writeResult({
        key,
        name: task.name!,
        run_id: null,
        worker: WORKER,
        status: "succeeded",
        reason: "verified",
        error: null,
        attempts: [],
        objects: null,
        ...fields,
      }),
    async [Symbol.asyncDispose]() {
      await runner.close();
      await queue.destroy();
      await connection.close();
      await directory[Symbol.asyncDispose]();
    },
    runner,
  };
}

describe("a worker's run id is a path on the submitter: only a run id is accepted", () => {
  it("a lease naming ../../escaped as its run: the task is an infrastructure error naming the worker, and nothing is written", async () => {
    await using fixture = await submitterFixture();
    const started = fixture.runner.startTask(fixture.task).then(
      () => null,
      (error: unknown) => error,
    );
    await fixture.lease("../../escaped");
    const error = await started;
    expect(error).toBeInstanceOf(RunnerError);
    expect((error as RunnerError).reason).toBe("worker_result_invalid");
    expect((error as RunnerError).message).toContain(WORKER);
    expect(existsSync(fixture.escaped)).toBe(false);
  });

  it("a result naming ../../escaped after a good lease: the run's outcome is error/worker_result_invalid, nothing is written anywhere", async () => {
    await using fixture = await submitterFixture();
    const runId = newRunId();
    const handle = fixture.runner.startTask(fixture.task);
    await fixture.lease(runId);
    const run = await handle;
    expect(run.id).toBe(runId);
    await fixture.result({ run_id: "../../escaped", status: "error", reason: "deliveries_exhausted", error: "gone" });
    const report = await run.result;
    expect(report).toMatchObject({ run_id: runId, status: "error", reason: "worker_result_invalid" });
    expect(report.error).toContain(WORKER);
    expect(existsSync(fixture.escaped)).toBe(false);
    expect(existsSync(join(fixture.home, "runs", runId))).toBe(false);
  });

  it("a worker's report.json naming another run id: the records go under the checked run id, and report.json says that one", async () => {
    await using fixture = await submitterFixture();
    const runId = newRunId();
    const handle = fixture.runner.startTask(fixture.task);
    await fixture.lease(runId);
    const run = await handle;
    const workerReport = {
      run_id: "../../escaped",
      task: "forged",
      status: "succeeded",
      reason: "verified",
      branch: null,
      base_commit: fixture.head,
      steps: 1,
    };
    await fixture.queue.putObject(`run/${runId}/report.json`, Buffer.from(JSON.stringify(workerReport)));
    await fixture.queue.putObject(`run/${runId}/events.jsonl`, Buffer.from(""));
    await fixture.result({
      run_id: runId,
      objects: { report: `run/${runId}/report.json`, events: `run/${runId}/events.jsonl`, patch: null, branch: `run/${runId}/branch.bundle` },
    });
    const report = await run.result;
    expect(report.run_id).toBe(runId);
    const stored = JSON.parse(readFileSync(join(fixture.home, "runs", runId, "report.json"), "utf8")) as RunReport;
    expect(stored.run_id).toBe(runId);
    expect(existsSync(fixture.escaped)).toBe(false);
  });
});
