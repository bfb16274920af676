/**
 * `runner logs` of a run on a NATS worker (docs/scale-out.md "Following a run
 * on a worker") against the same run's records on this disk: one run of
 * `--events` CloudEvents (a tool call start and finish per step, then
 * run.finished) published to `RUNNER_EVENTS_<pool>` of a one-node
 * nats-server on loopback, as a worker publishes them, and written as
 * events.jsonl + report.json in a RUNNER_HOME. Runs the built CLI
 * (`npm run build` first) `--runs` times each way, `--json` (no rendering)
 * and the progress view, and prints the medians and the ratio remote / local.
 *
 *   npx tsx bench/remote-logs.bench.ts [--events=2000] [--runs=5]
 *
 * Both include the CLI's start (~what `runner logs` of a local run costs);
 * the remote one adds the connection, the events stream's consumer and the
 * report object read.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { connect } from "@nats-io/transport-node";
import { cloudEventType } from "../src/events/event-catalogue.js";
import { WorkQueue } from "../src/worker/work-queue.js";
import { startNatsCluster } from "../tests/helpers/nats-cluster.js";
import { CLI } from "../tests/helpers/runner-cli.js";
import { positiveOption } from "./lib/options.js";

const events = positiveOption("events", 2000);
const runs = positiveOption("runs", 5);
const runId = "20260101-000000-bench1";

function envelope(sequence: number, type: string, data: Record<string, unknown>): string {
  return JSON.stringify({
    specversion: "1.0",
    id: `${runId}-${sequence}`,
    source: `agent-runner://runs/${runId}`,
    type: cloudEventType(type as never),
    time: new Date(Date.UTC(2026, 0, 1, 0, 0, sequence / 10)).toISOString(),
    datacontenttype: "application/json",
    data,
  });
}

const lines = [envelope(0, "run.started", { run_id: runId, task: "bench", branch: `runner/${runId}`, workspace: "/tmp/x", base_commit: "0".repeat(40) })];
for (let step = 1; lines.length < events - 1; step++) {
  const call = { agent_id: "main", step, tool_call_id: `call_${step}`, name: "run_shell" };
  lines.push(envelope(lines.length, "tool_call.started", { ...call, arguments: JSON.stringify({ command: `echo ${step}` }) }));
  lines.push(envelope(lines.length, "tool_call.finished", { ...call, is_error: false, duration_ms: 3, result_preview: `${step}\n`, details: {} }));
}
lines.push(envelope(lines.length, "run.finished", { status: "succeeded", exit_code: 0, duration_ms: 1000 }));
const report = { run_id: runId, task: "bench", status: "succeeded", reason: "verified", steps: events / 2, patch: null, usage: {}, duration_ms: 1000 };

const root = mkdtempSync(join(tmpdir(), "remote-logs-bench-"));
await using cluster = await startNatsCluster(1);
const connection = await connect({ servers: cluster.urls });
const queue = await WorkQueue.open(connection, { pool: "bench" });
try {
  for (const line of lines) await queue.client.publish(queue.eventsSubject(runId), line);
  await queue.putObject(`run/${runId}/report.json`, Buffer.from(JSON.stringify(report)));
  const local = join(root, "local");
  mkdirSync(join(local, "runs", runId), { recursive: true });
  writeFileSync(join(local, "runs", runId, "events.jsonl"), `${lines.join("\n")}\n`);
  writeFileSync(join(local, "runs", runId, "report.json"), JSON.stringify(report));
  const remote = join(root, "remote");
  mkdirSync(remote);

  const median = (args: string[], home: string): number => {
    const times: number[] = [];
    for (let run = 0; run < runs; run++) {
      const started = performance.now();
      execFileSync(process.execPath, [CLI, ...args], { env: { ...process.env, RUNNER_HOME: home }, stdio: ["ignore", "ignore", "ignore"] });
      times.push(performance.now() - started);
    }
    return times.sort((a, b) => a - b)[Math.floor(times.length / 2)]!;
  };
  const remoteFlags = ["--nats", cluster.url, "--pool", "bench"];
  console.log(`runner logs of one run of ${lines.length} events, median of ${runs} runs each (CLI start included)`);
  for (const [label, args] of [
    ["-f --json", ["logs", "-f", "--json", runId]],
    ["-f (progress view)", ["logs", "-f", runId]],
  ] as const) {
    const localMs = median([...args], local);
    const remoteMs = median([...args, ...remoteFlags], remote);
    console.log(
      `${label.padEnd(20)} local ${localMs.toFixed(0).padStart(6)} ms   remote ${remoteMs.toFixed(0).padStart(6)} ms   remote/local ${(remoteMs / localMs).toFixed(2)}x`,
    );
  }
} finally {
  await queue.destroy();
  await connection.close();
  rmSync(root, { recursive: true, force: true });
}
