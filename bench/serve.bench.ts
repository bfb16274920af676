/**
 * `runner serve` (issue 23 "Bench"): how long an event takes from the run
 * emitting it to an SSE client receiving it, p50/p99, with 1 and 50 clients
 * on one run; and the server's RSS with 50 clients following a 10 000-event
 * run. Baseline row: the same emit → receive through the Runner's own
 * `RunHandle.events()` in-process (no HTTP), measured in the same run; and,
 * for 50 clients, the stream as it was before the shared frame log (one
 * iterator of the run's events and one chunk copy per client,
 * `runEventStream`), on a route of the bench's own.
 *
 *   npx tsx bench/serve.bench.ts [--events=1000] [--interval-ms=5] [--client=http|fetch]
 *
 * Goals (issue 23): p50 <= 5 ms and p99 <= 50 ms at 50 clients; RSS growth
 * <= 50 MiB. The run is a stand-in for a Runner's run: a RunHandle over the
 * Runner's own EventReplay, fed by this script (so "emitted" is the moment of
 * `push`), behind the real server app, over a loopback socket (@hono/node-server).
 * Clients are fetch() readers in a second node process, so the RSS is the
 * server's (this process: the server, the run's replay and this script).
 * Needs no Docker and no model.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { RunEnvelope } from "../src/events/event-catalogue.js";
import { EventReplay } from "../src/runner/event-replay.js";
import type { AgencyRunner } from "../src/agency/agency.js";
import type { RunHandle } from "../src/runner/runner.js";
import { runEventStream } from "../src/server/event-streams.js";
import { listen } from "../src/server/listen.js";
import { createServerApp } from "../src/server/server-app.js";
import { stepLines, syntheticRun } from "../tests/helpers/synthetic-run.js";
import { writeScriptedTask } from "../tests/helpers/runner-cli.js";
import { positiveOption } from "./lib/options.js";
import { printTable, type Row } from "./lib/stats.js";

const EVENTS = positiveOption("events", 1000);
const INTERVAL_MS = positiveOption("interval-ms", 5);
const TOKEN = "bench-token-0123456789";
/** The clients' HTTP stack: `http` (node:http, default) or `fetch` (undici and web streams: three times the client CPU a message, which 50 clients in one process pay one after another). */
const CLIENT = process.argv.find((argument) => argument.startsWith("--client="))?.slice("--client=".length) ?? "http";
if (CLIENT !== "http" && CLIENT !== "fetch") throw new Error(`--client: expected http or fetch, got ${CLIENT}`);

const home = mkdtempSync(join(tmpdir(), "agent-runner-bench-serve-"));
const tasks = mkdtempSync(join(tmpdir(), "agent-runner-bench-serve-tasks-"));
const { task } = writeScriptedTask(tasks, { script: { turns: [{ content: "Done." }] } });

let counter = 0;
let current: { replay: EventReplay; pushed: Map<number, number> } | null = null;

/** The Runner the server sees: start() makes a run directory and a handle over an EventReplay this script feeds. */
const runner = {
  home,
  async startTask(): Promise<RunHandle> {
    const id = `20261201-000000-b${String(counter++).padStart(3, "0")}`;
    const run = syntheticRun(home, id, "bench", tasks);
    const replay = new EventReplay();
    current = { replay, pushed: new Map() };
    return {
      id,
      directory: run.directory,
      task: {} as RunHandle["task"],
      events: ({ from = 0 } = {}) => replay.subscribe(from),
      result: new Promise(() => undefined),
      cancel: async () => replay.end(),
      resumed: null,
    };
  },
  async close() {},
} as unknown as AgencyRunner;

const server = createServerApp({ runner, token: TOKEN, tasksRoots: [tasks] });
// The "before" row: the stream as it was before the shared frames, one iterator of the run's events per client.
server.app.get("/bench/per-client/:id/events", (c) => runEventStream(c, current!.replay.subscribe(0), 0));
const listening = await listen(server.app, "127.0.0.1", 0);
const headers = { authorization: `Bearer ${TOKEN}` };

async function startRun(): Promise<string> {
  const response = await fetch(`${listening.url}/v1/runs`, {
    method: "POST",
    headers: { ...headers, "content-type": "application/json" },
    body: JSON.stringify({ task_file: task }),
  });
  if (response.status !== 201) throw new Error(`POST /v1/runs: ${response.status} ${await response.text()}`);
  return ((await response.json()) as { id: string }).id;
}

/**
 * Clients in a process of their own (so the RSS measured here is the
 * server's): `clients` fetch() readers of the run's SSE stream, each
 * recording when (epoch ms, `performance.timeOrigin + now()`, comparable
 * across processes of one machine) every event arrived. Resolves once all
 * are connected with `done`, which resolves with each event's receive times.
 */
async function clientProcess(path: string, clients: number, expected: number, record: boolean) {
  const code = `
    const [url, token, clients, expected, record, kind] = [process.argv[1], process.argv[2], Number(process.argv[3]), Number(process.argv[4]), process.argv[5] === "1", process.argv[6]];
    const received = [];
    let connected = 0;
    const http = await import("node:http");
    // node:http: what a non-browser SSE client (the eventsource package) reads with; bytes scanned for the blank line, no text decoding until a message is whole.
    if (kind === "http") await Promise.all(Array.from({ length: clients }, () => new Promise((resolve, reject) => {
      const request = http.get(url, { headers: { authorization: "Bearer " + token }, agent: false }, (response) => {
        if (++connected === clients) process.stdout.write("connected\\n");
        let buffer = Buffer.alloc(0), count = 0;
        response.on("data", (chunk) => {
          const now = performance.timeOrigin + performance.now();
          buffer = buffer.length ? Buffer.concat([buffer, chunk]) : chunk;
          let end;
          while ((end = buffer.indexOf("\\n\\n")) >= 0) {
            const block = buffer.subarray(0, end);
            buffer = buffer.subarray(end + 2);
            if (block[0] !== 0x69) continue; // "id: "
            if (record) received.push(Number(block.subarray(4, block.indexOf(10)).toString("latin1")), now);
            if (++count === expected) { request.destroy(); resolve(); }
          }
        });
        response.on("end", resolve);
      });
      request.on("error", (error) => (error.code === "ECONNRESET" ? resolve() : reject(error)));
    })));
    else await Promise.all(Array.from({ length: clients }, async () => {
      const response = await fetch(url, { headers: { authorization: "Bearer " + token } });
      if (++connected === clients) process.stdout.write("connected\\n");
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "", count = 0;
      while (count < expected) {
        const { value, done } = await reader.read();
        if (done) break;
        const now = performance.timeOrigin + performance.now();
        buffer += value;
        let end;
        while ((end = buffer.indexOf("\\n\\n")) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const match = /^id: (\\d+)$/m.exec(block);
          if (!match) continue;
          if (record) received.push(Number(match[1]), now);
          count++;
        }
      }
      await reader.cancel();
    }));
    process.stdout.write(JSON.stringify(received) + "\\n");
  `;
  const child = spawn(
    process.execPath,
    ["--input-type=module", "-e", code, `${listening.url}${path}`, TOKEN, String(clients), String(expected), record ? "1" : "0", CLIENT],
    {
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  let output = "";
  let connected!: () => void;
  const ready = new Promise<void>((resolve) => (connected = resolve));
  child.stdout.on("data", (chunk) => {
    output += chunk;
    if (output.includes("connected\n")) connected();
  });
  const done = new Promise<number[]>((resolve, reject) =>
    child.on("close", (code) => (code === 0 ? resolve(JSON.parse(output.split("\n")[1]!) as number[]) : reject(new Error(`clients exited ${code}`)))),
  );
  await Promise.race([ready, done]);
  return { done };
}

function envelopes(count: number, runId: string): RunEnvelope[] {
  const out: RunEnvelope[] = [];
  for (let sequence = 0; out.length < count; sequence += 4)
    out.push(...stepLines(runId, sequence, sequence / 4).map((line) => JSON.parse(line) as RunEnvelope));
  return out.slice(0, count);
}

/** Emits `count` events `intervalMs` apart (0: as fast as the event loop takes them, 200 a tick) with `clients` connected; returns the latencies and this process's RSS. */
async function measure(
  clients: number,
  count: number,
  intervalMs: number,
  options: { record?: boolean; perClient?: boolean } = {},
): Promise<{ latencies: number[]; rssBefore: number; rssPeak: number; cpuPerEventUs: number }> {
  const id = await startRun();
  const path = options.perClient ? `/bench/per-client/${id}/events` : `/v1/runs/${id}/events`;
  const readers = await clientProcess(path, clients, count, options.record ?? true);
  global.gc?.();
  const rssBefore = process.memoryUsage().rss;
  let rssPeak = rssBefore;
  const events = envelopes(count, id);
  const { replay, pushed } = current!;
  const cpuBefore = process.cpuUsage();
  const watch = setInterval(() => {
    const usage = process.memoryUsage();
    if (usage.rss > rssPeak) rssPeak = usage.rss;
  }, 20);
  for (let index = 0; index < events.length; index++) {
    pushed.set(index, performance.timeOrigin + performance.now());
    replay.push(events[index]!);
    if (intervalMs > 0) await new Promise((resolve) => setTimeout(resolve, intervalMs));
    else if (index % 200 === 199) await new Promise((resolve) => setImmediate(resolve));
  }
  replay.end();
  const received = await readers.done;
  const cpu = process.cpuUsage(cpuBefore);
  clearInterval(watch);
  rssPeak = Math.max(rssPeak, process.memoryUsage().rss);
  const latencies: number[] = [];
  for (let index = 0; index < received.length; index += 2) latencies.push(received[index + 1]! - pushed.get(received[index]!)!);
  return { latencies, rssBefore, rssPeak, cpuPerEventUs: (cpu.user + cpu.system) / count };
}

/** Baseline: the same emit → receive through RunHandle.events() in-process. */
async function baseline(count: number, intervalMs: number): Promise<number[]> {
  const replay = new EventReplay();
  const pushed = new Map<number, number>();
  const latencies: number[] = [];
  const reading = (async () => {
    let index = 0;
    for await (const _envelope of replay.subscribe(0)) latencies.push(performance.now() - pushed.get(index++)!);
  })();
  const events = envelopes(count, "baseline");
  for (let index = 0; index < events.length; index++) {
    pushed.set(index, performance.now());
    replay.push(events[index]!);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
  replay.end();
  await reading;
  return latencies;
}

function percentile(samples: number[], q: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? NaN;
}

/** The RSS measurement of one stream in a new process of this script (`--rss=per-client|shared`). */
function rssProcess(variant: "per-client" | "shared"): Promise<{ rssBefore: number; rssPeak: number }> {
  const child = spawn(process.execPath, [...process.execArgv, process.argv[1]!, `--rss=${variant}`, `--client=${CLIENT}`], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  let output = "";
  child.stdout.on("data", (chunk) => (output += chunk));
  return new Promise((resolve, reject) =>
    child.on("close", (code) => (code === 0 ? resolve(JSON.parse(output.trim().split("\n").at(-1)!)) : reject(new Error(`--rss=${variant} exited ${code}`)))),
  );
}

const RSS_VARIANT = process.argv.find((argument) => argument.startsWith("--rss="))?.slice("--rss=".length);

try {
  if (RSS_VARIANT) {
    const run = await measure(50, 10_000, 0, { record: false, perClient: RSS_VARIANT === "per-client" });
    console.log(JSON.stringify({ rssBefore: run.rssBefore, rssPeak: run.rssPeak }));
  } else {
    await main();
  }
} finally {
  await server.close().catch(() => undefined);
  await listening.close();
  rmSync(home, { recursive: true, force: true });
  rmSync(tasks, { recursive: true, force: true });
}
process.exit(0);

/** The latency rows, then the RSS of each stream in a process of its own, then the goals. */
async function main(): Promise<void> {
  const base = await baseline(EVENTS, INTERVAL_MS);
  const one = await measure(1, EVENTS, INTERVAL_MS);
  const fiftyBefore = await measure(50, EVENTS, INTERVAL_MS, { perClient: true });
  const fifty = await measure(50, EVENTS, INTERVAL_MS);
  const rows: Row[] = [
    { name: "in-process RunHandle.events()", samples: base },
    { name: "SSE, 1 client", samples: one.latencies, baseline: "in-process RunHandle.events()" },
    { name: "SSE, 50 clients, per-client iterator (before)", samples: fiftyBefore.latencies, baseline: "in-process RunHandle.events()" },
    { name: "SSE, 50 clients", samples: fifty.latencies, baseline: "SSE, 50 clients, per-client iterator (before)" },
  ];
  printTable(`event emitted → received (${EVENTS} events, one every ${INTERVAL_MS} ms)`, rows);
  for (const row of rows) console.log(`   ${row.name}: p50 ${percentile(row.samples, 0.5).toFixed(2)} ms, p99 ${percentile(row.samples, 0.99).toFixed(2)} ms`);
  // CPU time of this process (the server, the run's replay, this loop) per event: what load on the machine does not change.
  for (const [name, run] of [
    ["SSE, 1 client", one],
    ["SSE, 50 clients, per-client iterator (before)", fiftyBefore],
    ["SSE, 50 clients", fifty],
  ] as const)
    console.log(
      `   ${name}: server CPU ${run.cpuPerEventUs.toFixed(0)} µs per event (${(run.cpuPerEventUs / (name === "SSE, 1 client" ? 1 : 50)).toFixed(1)} µs per event per client)`,
    );
  // Each in a fresh process: RSS does not shrink back, so a second measurement in this one would start at the first's peak.
  const bigBefore = await rssProcess("per-client");
  const big = await rssProcess("shared");
  const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);
  console.log(`\n== RSS, 50 clients following a 10 000-event run (events pushed as fast as the loop takes them; a fresh server process each)`);
  for (const [name, run] of [
    ["per-client iterator (before)", bigBefore],
    ["shared frames", big],
  ] as const)
    console.log(`   ${name}: before ${mib(run.rssBefore)} MiB, peak ${mib(run.rssPeak)} MiB, growth ${mib(run.rssPeak - run.rssBefore)} MiB`);
  const p50 = percentile(fifty.latencies, 0.5);
  const p99 = percentile(fifty.latencies, 0.99);
  console.log("\nGoals (issue 23):");
  console.log(`  50 clients p50 <= 5 ms: ${p50 <= 5 ? "MET " : "MISS"} (${p50.toFixed(2)} ms)`);
  console.log(`  50 clients p99 <= 50 ms: ${p99 <= 50 ? "MET " : "MISS"} (${p99.toFixed(2)} ms)`);
  console.log(`  RSS growth <= 50 MiB: ${big.rssPeak - big.rssBefore <= 50 * 1024 * 1024 ? "MET " : "MISS"} (${mib(big.rssPeak - big.rssBefore)} MiB)`);
}
