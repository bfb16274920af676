/**
 * `runner logs [-f]` of a run on a NATS worker (docs/scale-out.md "Following a
 * run on a worker"): the real CLI (dist/cli/main.js) in a second process, a
 * real nats-server on loopback, a worker in this process on a Docker-free
 * Runner (host-directory sandbox, scripted model), and a submitter whose batch
 * records tell the CLI where the run is.
 */
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runBatch, type BatchProgress } from "../../src/batch/run-batch.js";
import { cloudEventType } from "../../src/events/event-catalogue.js";
import { newRunId } from "../../src/run/run-id.js";
import { NatsBatchRunner } from "../../src/worker/nats-batch-runner.js";
import { PoolRunEvents } from "../../src/worker/pool-run-events.js";
import { WorkQueue, type WorkQueueOptions } from "../../src/worker/work-queue.js";
import { Gates, toolCall, writeScriptedTask } from "../helpers/fake-runner.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { createBatch, startFakeWorker } from "../helpers/nats-batch.js";
import { startNatsCluster, type NatsCluster } from "../helpers/nats-cluster.js";
import { ROOT, runCli, startCli, waitFor } from "../helpers/runner-cli.js";

const CHILD = fileURLToPath(new URL("../helpers/nats-worker-child.ts", import.meta.url));

let cluster: NatsCluster;
beforeAll(async () => {
  cluster = await startNatsCluster(1);
}, 60_000);
afterAll(async () => {
  await cluster?.close();
});

async function pool() {
  const settings: WorkQueueOptions = { pool: `l${randomUUID().slice(0, 8)}`, ackWaitMs: 5_000, maxDeliver: 2, redeliveryDelayMs: 200 };
  const connection = await connect({ servers: cluster.urls, maxReconnectAttempts: -1 });
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

/** One task whose agent appends ok to out.txt, then runs `command` (waits at gate `live`), then stops; verify checks out.txt. */
function writeGatedTask(root: string, name: string, command = "wait-for live"): void {
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

const RUN_FINISHED = cloudEventType("run.finished");

describe("runner logs of a run on a NATS worker", () => {
  it("-f from a second process follows the run live (a tool call shown before run.finished exists), ends with the summary; the batch shows the start while it runs; a finished run replays", async () => {
    await using input = temporaryDirectory("nats-logs-input-");
    writeGatedTask(input.path, "followed");
    await using queue = await pool();
    const gates = new Gates();
    const worker = await startFakeWorker(cluster.urls, queue.settings, { name: "w-logs", gates });
    await using submitter = temporaryDirectory("nats-logs-submitter-");
    const directory = await createBatch(submitter.path, input.path, {
      nats: { servers: cluster.urls, pool: queue.settings.pool!, ack_wait_ms: null, max_deliver: null },
    });
    const remote = await NatsBatchRunner.open(queue.queue, submitter.path);
    const lines: string[] = [];
    let started!: (runId: string) => void;
    const runStarted = new Promise<string>((resolve) => (started = resolve));
    const progress: BatchProgress = {
      started: (task, _attempt, _try, runId) => {
        lines.push(`start ${task} ${runId}`);
        started(runId);
      },
      finished: (task) => lines.push(`finished ${task}`),
    };
    try {
      const batch = runBatch(remote, directory, new AbortController().signal, progress);
      const runId = await runStarted;
      // The start shows while the task runs on the worker (its gate is closed: it cannot have finished).
      expect(lines).toEqual([`start followed ${runId}`]);

      const following = startCli(["logs", "-f", runId], { RUNNER_HOME: submitter.path });
      await waitFor("the first tool call's line", () => following.output().stdout.includes("run_shell echo ok >> out.txt → exit 0"), {
        process: following,
      });
      // The line came from the stream while the run still waits at its gate: no run.finished on the stream yet.
      const last = await queue.queue.manager.streams.getMessage(queue.queue.eventsStream, { last_by_subj: queue.queue.eventsSubject(runId) });
      expect(last?.json<{ type: string }>().type).not.toBe(RUN_FINISHED);
      expect(following.exited).toBeNull();
      expect(following.output().stderr).toContain(`run ${runId} ran on a worker of pool ${queue.settings.pool}`);

      gates.open("live");
      const result = await following.result;
      expect(result.code, result.stderr).toBe(0);
      expect(result.stdout).toContain("run_shell wait-for live → exit 0");
      expect(result.stdout.trimEnd().split("\n").at(-1)).toBe(
        `status: succeeded (verified); runner show ${runId} (once the batch has copied the run's records)`,
      );
      const report = await batch;
      expect(report.tasks[0]).toMatchObject({ status: "succeeded", reason: "verified" });
      expect(lines).toEqual([`start followed ${runId}`, "finished followed"]);

      // Finished: on the submitter from the copied records; on another machine (no records) from the stream, with --nats.
      const local = await runCli(["logs", "-f", runId], { RUNNER_HOME: submitter.path });
      expect(local.code, local.stderr).toBe(0);
      expect(local.stdout.trimEnd().split("\n").at(-1)).toBe(`status: succeeded (verified); runner show ${runId}`);
      await using elsewhere = temporaryDirectory("nats-logs-elsewhere-");
      const replay = await runCli(["logs", "-f", "--json", runId.slice(0, -2), "--nats", cluster.url, "--pool", queue.settings.pool!], {
        RUNNER_HOME: elsewhere.path,
      });
      expect(replay.code, replay.stderr).toBe(0);
      expect(replay.stdout).toBe(readFileSync(join(submitter.path, "runs", runId, "events.jsonl"), "utf8"));
      const snapshot = await runCli(["logs", runId, "--nats", cluster.url, "--pool", queue.settings.pool!], { RUNNER_HOME: elsewhere.path });
      expect(snapshot.code, snapshot.stderr).toBe(0);
      expect(snapshot.stdout).toContain("run_shell wait-for live → exit 0");
    } finally {
      await remote.close();
      await worker.stop();
    }
  }, 120_000);

  it("an event sent by reference is fetched from the stored events.jsonl, or left out with a line saying where it is", async () => {
    await using input = temporaryDirectory("nats-logs-input-");
    writeGatedTask(input.path, "referenced");
    await using queue = await pool();
    const gates = new Gates();
    gates.open("live");
    const worker = await startFakeWorker(cluster.urls, queue.settings, { name: "w-ref", gates });
    await using submitter = temporaryDirectory("nats-logs-submitter-");
    const remote = await NatsBatchRunner.open(queue.queue, submitter.path);
    let events: string[];
    let runReport: string;
    try {
      const report = await runBatch(remote, await createBatch(submitter.path, input.path), new AbortController().signal);
      events = readFileSync(join(report.tasks[0]!.attempts[0]!.run_dir!, "events.jsonl"), "utf8").trimEnd().split("\n");
      runReport = readFileSync(join(report.tasks[0]!.attempts[0]!.run_dir!, "report.json"), "utf8");
    } finally {
      await remote.close();
      await worker.stop();
    }
    // A run's messages as a worker publishes them (src/worker/task-worker.ts publishEvents), the first tool call's
    // finished event sent as a reference, as one over 16 KiB is.
    const runId = `20260101-000000-ref${randomUUID().slice(0, 6)}`;
    const index = events.findIndex((line) => JSON.parse(line).type === cloudEventType("tool_call.finished"));
    const big = JSON.parse(events[index]!) as { id: string; type: string };
    for (const [sequence, line] of events.entries()) {
      const payload = sequence === index ? JSON.stringify({ reference: `run/${runId}/events.jsonl`, sequence, id: big.id, type: big.type }) : line;
      await queue.queue.client.publish(queue.queue.eventsSubject(runId), payload);
    }
    await queue.queue.putObject(`run/${runId}/report.json`, Buffer.from(runReport));
    await using elsewhere = temporaryDirectory("nats-logs-elsewhere-");
    const flags = ["--nats", cluster.url, "--pool", queue.settings.pool!];
    const without = await runCli(["logs", "-f", runId, ...flags], { RUNNER_HOME: elsewhere.path });
    expect(without.code, without.stderr).toBe(0);
    expect(without.stdout).toContain(
      `event ${big.type} (#${index}) is over 16 KiB and left out here; the run's events.jsonl has it (runner logs ${runId} once the batch has copied the run's records)`,
    );
    expect(without.stdout).not.toContain("run_shell echo ok >> out.txt → exit 0");

    await queue.queue.putObject(`run/${runId}/events.jsonl`, Buffer.from(`${events.join("\n")}\n`));
    const fetched = await runCli(["logs", "-f", "--json", runId, ...flags], { RUNNER_HOME: elsewhere.path });
    expect(fetched.code, fetched.stderr).toBe(0);
    expect(fetched.stdout).toBe(`${events.join("\n")}\n`);
  }, 120_000);

  it("-f of a run whose worker died (kill -9) ends once the task went on as another run, naming it, exit 3", async () => {
    await using input = temporaryDirectory("nats-logs-input-");
    writeGatedTask(input.path, "orphaned", "crash-the-worker");
    await using queue = await pool();
    await using workerHome = temporaryDirectory("nats-logs-child-home-");
    await using submitter = temporaryDirectory("nats-logs-submitter-");
    const directory = await createBatch(submitter.path, input.path, {
      nats: { servers: cluster.urls, pool: queue.settings.pool!, ack_wait_ms: null, max_deliver: null },
    });
    const remote = await NatsBatchRunner.open(queue.queue, submitter.path);
    let started!: (runId: string) => void;
    const runStarted = new Promise<string>((resolve) => (started = resolve));
    const batch = runBatch(remote, directory, new AbortController().signal, {
      started: (_task, _attempt, _try, runId) => started(runId),
      finished: () => undefined,
    });
    // A worker process that SIGKILLs itself when the agent runs crash-the-worker (tests/helpers/nats-worker-child.ts).
    const child = spawn(process.execPath, ["--import", "tsx", CHILD, workerHome.path, cluster.url, queue.settings.pool!, "crash-the-worker"], {
      cwd: ROOT,
      stdio: ["ignore", "ignore", "ignore"],
    });
    let survivor: Awaited<ReturnType<typeof startFakeWorker>> | null = null;
    try {
      const deadRun = await runStarted;
      expect((await once(child, "exit"))[1]).toBe("SIGKILL");
      const following = startCli(["logs", "-f", deadRun], { RUNNER_HOME: submitter.path });
      await waitFor("the dead run's events", () => following.output().stdout.includes("run_shell echo ok >> out.txt → exit 0"), { process: following });
      expect(following.exited).toBeNull();
      // Another worker takes the task once ack_wait passed; the dead worker answers crash-the-worker no more (exit 127 here).
      survivor = await startFakeWorker(cluster.urls, queue.settings, { name: "survivor" });
      const result = await following.result;
      expect(result.code).toBe(3);
      const report = await batch;
      const nextRun = report.tasks[0]!.attempts[0]!.run_id!;
      expect(nextRun).not.toBe(deadRun);
      expect(result.stderr).toMatch(
        new RegExp(
          `run ${deadRun} on child-\\d+ will not finish: child-\\d+: its worker stopped answering .*; the task went on as run ${nextRun} on survivor: runner logs -f ${nextRun}`,
        ),
      );
    } finally {
      child.kill("SIGKILL");
      await remote.close();
      await survivor?.stop();
    }
  }, 120_000);

  it("a run id nobody knows: a clear error naming what was looked at", async () => {
    await using queue = await pool();
    await using home = temporaryDirectory("nats-logs-unknown-");
    const bare = await runCli(["logs", "-f", "20990101-000000-nobody"], { RUNNER_HOME: home.path });
    expect(bare.code).toBe(2);
    expect(bare.stderr).toContain(
      `no run 20990101-000000-nobody: not in ${join(home.path, "runs")} and not in the records of the 0 NATS batch(es) in ${join(home.path, "batches")}; for a run on a worker that another machine submitted give --nats URL --pool NAME`,
    );
    const onPool = await runCli(["logs", "-f", "20990101-000000-nobody", "--nats", cluster.url, "--pool", queue.settings.pool!], { RUNNER_HOME: home.path });
    expect(onPool.code).toBe(2);
    expect(onPool.stderr).toContain(`and no events of it on RUNNER_EVENTS_${queue.settings.pool} at ${cluster.url}`);
    const typo = await runCli(["logs", "20990101-000000-nobody", "--nats", cluster.url, "--pool", "no-such-pool"], { RUNNER_HOME: home.path });
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain(`pool no-such-pool: no stream RUNNER_EVENTS_no-such-pool at ${cluster.url} (check --pool`);
  }, 60_000);

  it("messages anyone with the pool's credentials can publish: one that is not JSON is skipped with a note; --json prints each event on one line; a stored events.jsonl over the cap is not read", async () => {
    await using queue = await pool();
    await using home = temporaryDirectory("nats-logs-forged-");
    const runId = newRunId();
    const envelope = (id: string) => ({ specversion: "1.0", id, source: "urn:example:worker", type: "dev.example.note", data: { text: "a\nb" } });
    const subject = queue.queue.eventsSubject(runId);
    await queue.queue.client.publish(subject, JSON.stringify(envelope("e1"), null, 2));
    await queue.queue.client.publish(subject, "{not json");
    await queue.queue.client.publish(subject, "42");
    await queue.queue.client.publish(subject, JSON.stringify(envelope("e2")));
    const logs = await runCli(["logs", "--json", runId, "--nats", cluster.url, "--pool", queue.settings.pool!], { RUNNER_HOME: home.path });
    expect(logs.code).toBe(0);
    const lines = logs.stdout.split("\n").filter(Boolean);
    expect(lines.map((line) => JSON.parse(line) as unknown)).toEqual([envelope("e1"), envelope("e2")]);
    expect(logs.stderr.match(/is not a JSON object: skipped/g)).toHaveLength(2);

    const reference = `run/${runId}/events.jsonl`;
    await queue.queue.putObject(reference, Buffer.from(`${JSON.stringify(envelope("e3"))}\n`));
    const events = await PoolRunEvents.open(queue.queue.connection, queue.settings.pool!, cluster.urls);
    expect(await events.storedEvents(reference)).toEqual({ lines: [JSON.stringify(envelope("e3"))] });
    expect(await events.storedEvents(reference, 10)).toEqual({ lines: null, bytes: Buffer.byteLength(`${JSON.stringify(envelope("e3"))}\n`) });
  }, 60_000);
});
