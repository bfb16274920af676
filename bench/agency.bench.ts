/**
 * The agency (issue 21), the bus part: how fast the embedded FileEventBus
 * publishes durably and replays. Goals (the issue): >= 20 000 events/s
 * durable publish, 100 000 events replayed in < 1 s.
 *
 *   npx tsx bench/agency.bench.ts [--rounds=7] [--events=20000] [--in-flight=256] [--replay-events=100000] [--dir=PATH]
 *                                 [--only=publish,latency,replay]
 *
 * publish: `--events` publishes with `--in-flight` of them awaiting at once
 * (many agents and outside producers), every one resolved only after its
 * line is flushed: group commit shares one write + fdatasync among the
 * publishes in flight. Baselines on the same lines, same disk, same run:
 * `raw write+fdatasync each` (what a publish would cost without group commit,
 * on a tenth of the lines, reported per 1 000 events) and `raw one write`
 * (all lines in a single write and one fdatasync: the floor).
 *
 * latency: one publish at a time (nothing to share a flush with): the
 * median time of one durable publish, against one raw write + fdatasync.
 *
 * replay: a log of `--replay-events` events (~500 bytes each, published
 * through the bus) opened (recovery scan, id index) and read from sequence 0
 * to the end; baseline: readFile + split + JSON.parse of the same file.
 *
 * The directory defaults to the system temp dir; it must be a real disk
 * (tmpfs makes fdatasync free): pass `--dir` to measure another.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { open, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { createAgencyEvent } from "../src/bus/agency-event.js";
import type { AgencyEvent } from "../src/bus/event-bus.js";
import { BUS_FILES, FileEventBus } from "../src/bus/file-event-bus.js";
import { option, positiveOption } from "./lib/options.js";
import { fmt, median, printTable, type Row } from "./lib/stats.js";

const rounds = positiveOption("rounds", 7);
const eventCount = positiveOption("events", 20_000);
const inFlight = positiveOption("in-flight", 256);
const replayCount = positiveOption("replay-events", 100_000);
const parts = new Set((option("only") ?? "publish,latency,replay").split(","));
const root = mkdtempSync(join(option("dir") ?? tmpdir(), "agency-bench-"));

/** An event as an agent emits one: a hand-off with a small payload (~500 bytes as JSON). */
function benchEvent(index: number): AgencyEvent {
  return createAgencyEvent({
    type: "coding.code.ready",
    source: "agent-runner://agencies/bench/agents/code-executor",
    correlationid: "bench",
    subject: `task-${index % 100}`,
    data: { index, branch: `agency/bench-${index}`, summary: "changed calc.py so add() returns a + b; the tests in tests/test_calc.py pass" },
  });
}

let directoryCount = 0;
const freshDirectory = (): string => join(root, String((directoryCount += 1)));

/** Publishes `events` with at most `limit` awaiting at once. */
async function publishAll(bus: FileEventBus, events: AgencyEvent[], limit: number): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < events.length) await bus.publish(events[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, events.length) }, worker));
}

/** The time of `fn` in ms, after `setup` (untimed). */
async function timed<T>(setup: () => Promise<T>, fn: (value: T) => Promise<unknown>, teardown: (value: T) => Promise<unknown>): Promise<number> {
  const value = await setup();
  const started = performance.now();
  await fn(value);
  const elapsed = performance.now() - started;
  await teardown(value);
  return elapsed;
}

async function rawAppend(lines: string[], each: boolean): Promise<void> {
  const handle = await open(join(freshDirectory()), "a", 0o600);
  try {
    if (each) {
      for (const line of lines) {
        await handle.write(line);
        await handle.datasync();
      }
    } else {
      await handle.write(lines.join(""));
      await handle.datasync();
    }
  } finally {
    await handle.close();
  }
}

const perThousand = (samples: number[], count: number): number[] => samples.map((ms) => (ms * 1000) / count);
const rate = (samples: number[]): string => `${Math.round(1000 / (median(samples) / 1000)).toLocaleString("en")} events/s`;

async function benchPublish(): Promise<void> {
  const events = Array.from({ length: eventCount }, (_, index) => benchEvent(index));
  const lines = events.map((event) => `${JSON.stringify(event)}\n`);
  const eachLines = lines.slice(0, Math.max(1, Math.floor(eventCount / 10)));
  const samples: Record<string, number[]> = { bus: [], each: [], one: [] };
  for (let round = -1; round < rounds; round += 1) {
    const bus = await timed(
      () => FileEventBus.open(freshDirectory()),
      (opened) => publishAll(opened, events, inFlight),
      (opened) => opened.close(),
    );
    const each = await timed(
      async () => eachLines,
      (value) => rawAppend(value, true),
      async () => undefined,
    );
    const one = await timed(
      async () => lines,
      (value) => rawAppend(value, false),
      async () => undefined,
    );
    if (round < 0) continue;
    samples.bus!.push(bus);
    samples.each!.push(each);
    samples.one!.push(one);
  }
  const rows: Row[] = [
    { name: "raw write+fdatasync each", samples: perThousand(samples.each!, eachLines.length) },
    { name: "raw one write", samples: perThousand(samples.one!, lines.length) },
    { name: `bus publish, ${inFlight} in flight`, samples: perThousand(samples.bus!, eventCount), baseline: "raw write+fdatasync each" },
    { name: "bus publish vs floor", samples: perThousand(samples.bus!, eventCount), baseline: "raw one write" },
  ];
  printTable(`durable publish of ${eventCount} events, ms per 1 000 events`, rows);
  console.log(
    `bus: ${rate(rows[2]!.samples)} (goal >= 20,000); raw write+fdatasync each: ${rate(rows[0]!.samples)}; raw one write: ${rate(rows[1]!.samples)}\n`,
  );
}

async function benchLatency(): Promise<void> {
  const count = 200;
  const events = Array.from({ length: count }, (_, index) => benchEvent(index));
  const busSamples: number[] = [];
  const rawSamples: number[] = [];
  const bus = await FileEventBus.open(freshDirectory());
  const raw = await open(freshDirectory(), "a", 0o600);
  for (const [index, event] of events.entries()) {
    let started = performance.now();
    await bus.publish(event);
    busSamples.push(performance.now() - started);
    started = performance.now();
    await raw.write(`${JSON.stringify(event)}\n`);
    await raw.datasync();
    rawSamples.push(performance.now() - started);
    if (index === 0) {
      busSamples.pop();
      rawSamples.pop();
    }
  }
  await bus.close();
  await raw.close();
  printTable("one durable publish at a time, ms", [
    { name: "raw write+fdatasync", samples: rawSamples },
    { name: "bus publish", samples: busSamples, baseline: "raw write+fdatasync" },
  ]);
  console.log();
}

async function benchReplay(): Promise<void> {
  const directory = freshDirectory();
  const writer = await FileEventBus.open(directory);
  await publishAll(
    writer,
    Array.from({ length: replayCount }, (_, index) => benchEvent(index)),
    1024,
  );
  await writer.close();
  const logPath = join(directory, BUS_FILES.log);
  const samples: Record<string, number[]> = { open: [], read: [], raw: [] };
  for (let round = -1; round < rounds; round += 1) {
    let started = performance.now();
    const bus = await FileEventBus.open(directory);
    const opened = performance.now() - started;
    started = performance.now();
    let count = 0;
    for await (const stored of bus.read({ follow: false })) count += stored.event.hops + 1;
    const read = performance.now() - started;
    await bus.close();
    if (count !== replayCount) throw new Error(`replayed ${count} of ${replayCount} events`);
    started = performance.now();
    const parsed = (await readFile(logPath, "utf8"))
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line) as AgencyEvent);
    const raw = performance.now() - started;
    if (parsed.length !== replayCount) throw new Error("the raw read disagrees");
    if (round < 0) continue;
    samples.open!.push(opened);
    samples.read!.push(read);
    samples.raw!.push(raw);
  }
  const total = samples.open!.map((ms, index) => ms + samples.read![index]!);
  printTable(`replay of ${replayCount} events, ms`, [
    { name: "raw readFile+parse", samples: samples.raw! },
    { name: "bus open (recovery scan)", samples: samples.open!, baseline: "raw readFile+parse" },
    { name: "bus read from 0", samples: samples.read!, baseline: "raw readFile+parse" },
    { name: "bus open + read", samples: total, baseline: "raw readFile+parse" },
  ]);
  console.log(`bus open + read of ${replayCount}: ${fmt(median(total))} ms (goal < 1000)\n`);
}

try {
  if (parts.has("publish")) await benchPublish();
  if (parts.has("latency")) await benchLatency();
  if (parts.has("replay")) await benchReplay();
} finally {
  rmSync(root, { recursive: true, force: true });
}
