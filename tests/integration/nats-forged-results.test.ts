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
import { agencyEvent } from "../../src/agency/agency-event.js";
import { invocationTools } from "../../src/agency/agent-task.js";
import type { AgentDefinition } from "../../src/agency/load-agency.js";
import type { AgencyEvent } from "../../src/bus/event-bus.js";
import type { Sandbox } from "../../src/sandbox/sandbox.js";
import { invocationKey } from "../../src/worker/invocation-job.js";
import { runBranchCandidates, taskSlug } from "../../src/workspace/run-branch-name.js";
import { NatsInvocations } from "../../src/worker/nats-invocations.js";
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

describe("a worker's branch name: only one of the run's names is landed", () => {
  it("a report naming main: the outcome is error/worker_result_invalid naming the worker; main and every branch stay as they were", async () => {
    await using fixture = await submitterFixture();
    const runId = newRunId();
    const handle = fixture.runner.startTask(fixture.task);
    await fixture.lease(runId);
    const run = await handle;
    const refs = () => fixture.files.git("for-each-ref", "--format=%(refname) %(objectname)").trim();
    const before = refs();
    const workerReport = { run_id: runId, task: "forged", status: "succeeded", reason: "verified", branch: "main", base_commit: fixture.head, steps: 1 };
    await fixture.queue.putObject(`run/${runId}/report.json`, Buffer.from(JSON.stringify(workerReport)));
    await fixture.queue.putObject(`run/${runId}/events.jsonl`, Buffer.from(""));
    await fixture.result({
      run_id: runId,
      objects: { report: `run/${runId}/report.json`, events: `run/${runId}/events.jsonl`, patch: null, branch: `run/${runId}/branch.bundle` },
    });
    const report = await run.result;
    expect(report).toMatchObject({ status: "error", reason: "worker_result_invalid", branch: null });
    expect(report.error).toContain(WORKER);
    expect(report.error).toContain('"main"');
    expect(refs()).toBe(before);
  });

  it("a report whose base commit is not the job's (no commits of its own: the branch would be made there): refused, no branch made", async () => {
    await using fixture = await submitterFixture();
    fixture.files.git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "--allow-empty", "-m", "elsewhere", "--no-verify");
    const elsewhere = fixture.files.git("rev-parse", "HEAD").trim();
    fixture.files.git("reset", "-q", "--hard", fixture.head);
    const runId = newRunId();
    const handle = fixture.runner.startTask(fixture.task);
    await fixture.lease(runId);
    const run = await handle;
    const branch = runBranchCandidates(taskSlug(fixture.task), runId)[0]!;
    const workerReport = { run_id: runId, task: "forged", status: "succeeded", reason: "verified", branch, base_commit: elsewhere, steps: 1 };
    await fixture.queue.putObject(`run/${runId}/report.json`, Buffer.from(JSON.stringify(workerReport)));
    await fixture.queue.putObject(`run/${runId}/events.jsonl`, Buffer.from(""));
    await fixture.result({
      run_id: runId,
      objects: { report: `run/${runId}/report.json`, events: `run/${runId}/events.jsonl`, patch: null, branch: `run/${runId}/branch.bundle` },
    });
    const report = await run.result;
    expect(report).toMatchObject({ status: "error", reason: "worker_result_invalid", branch: null });
    expect(report.error).toContain(elsewhere);
    expect(fixture.files.git("branch", "--list", "runner/*").trim()).toBe("");
  });
});

describe("events a worker says the agent emitted are checked on the orchestrator", () => {
  const agencyId = "20261202-061500-abcd";
  const traceId = "0123456789abcdef0123456789abcdef";
  const invocationId = "coder-0123456789ab";
  const agent = { name: "coder", emits: ["code.done"] } as unknown as AgentDefinition;
  const cause = agencyEvent({ agencyId, traceId }, { kind: "outside" }, { type: "plan.ready", id: "outside-1", cause: null });

  /** What the worker's own emit_event queues for one call. */
  async function genuineEvent(): Promise<AgencyEvent> {
    const queued: AgencyEvent[] = [];
    const tool = invocationTools({ agencyId, traceId, invocationId, agent, context: {}, cause, emit: async (event) => queued.push(event) }).find(
      (candidate) => candidate.name === "emit_event",
    )!;
    await tool.execute({ type: "code.done" }, { sandbox: {} as Sandbox, signal: new AbortController().signal, toolCallId: "call-1", defaultTimeoutMs: 1_000 });
    return queued[0]!;
  }

  /** Runs an invocation whose forged result carries `emitted` (JSON lines); returns its report and what was queued for publishing. */
  async function invocationWith(emitted: string) {
    await using fixture = await submitterFixture();
    const invocations = await NatsInvocations.open(fixture.queue, fixture.home);
    try {
      const document = JSON.parse(readFileSync(fixture.files.task, "utf8")) as Record<string, unknown>;
      const queued: AgencyEvent[] = [];
      const run = invocations.start({
        agencyId,
        traceId,
        invocationId,
        agent,
        event: cause,
        context: {},
        task: { ...document, workspace: fixture.files.repo, model: { provider: "scripted", script: join(fixture.files.repo, "..", "script.yaml") } },
        embedding: {},
        emit: async (event) => queued.push(event),
        signal: new AbortController().signal,
      });
      const key = invocationKey(agencyId, invocationId);
      const runId = newRunId();
      await fixture.queue.writeLease({ key, name: "forged", attempts: [fixture.attempt(runId)] }, 0);
      const started = await run;
      const prefix = `run/${runId}`;
      await fixture.queue.putObject(
        `${prefix}/report.json`,
        Buffer.from(JSON.stringify({ run_id: runId, task: "forged", status: "succeeded", reason: "verified", branch: null })),
      );
      await fixture.queue.putObject(`${prefix}/events.jsonl`, Buffer.from(""));
      await fixture.queue.putObject(`${prefix}/emitted.jsonl`, Buffer.from(emitted));
      await fixture.queue.writeResult({
        key,
        name: "forged",
        run_id: runId,
        worker: WORKER,
        status: "succeeded",
        reason: "verified",
        error: null,
        attempts: [],
        objects: {
          report: `${prefix}/report.json`,
          events: `${prefix}/events.jsonl`,
          patch: null,
          branch: `${prefix}/branch.bundle`,
          emitted: `${prefix}/emitted.jsonl`,
        },
      });
      const report = (await started.result)!;
      const stored = JSON.parse(readFileSync(join(fixture.home, "runs", runId, "report.json"), "utf8")) as RunReport;
      return { report, stored, queued };
    } finally {
      await invocations.close();
    }
  }

  it("the event emit_event built is queued; the invocation stands as the worker reported it", async () => {
    const event = await genuineEvent();
    const { report, queued } = await invocationWith(`${JSON.stringify(event)}\n`);
    expect(report.status).toBe("succeeded");
    expect(queued).toEqual([event]);
  });

  it.each<[string, (event: AgencyEvent) => string]>([
    ["hops 0", (event) => JSON.stringify({ ...event, hops: 0 })],
    ["an agency.* type", (event) => JSON.stringify({ ...event, type: "agency.invocation.finished" })],
    ["a forged causationid", (event) => JSON.stringify({ ...event, causationid: "other" })],
    ["a line that is not JSON", () => "{not json"],
    ["101 events", (event) => Array.from({ length: 101 }, () => JSON.stringify(event)).join("\n")],
  ])("%s: nothing is queued, the invocation is error/worker_result_invalid naming the worker, and report.json says so", async (_name, forge) => {
    const { report, stored, queued } = await invocationWith(`${forge(await genuineEvent())}\n`);
    expect(queued).toEqual([]);
    expect(report).toMatchObject({ status: "error", reason: "worker_result_invalid" });
    expect(report.error).toContain(WORKER);
    expect(stored).toMatchObject({ status: "error", reason: "worker_result_invalid" });
  });
});
