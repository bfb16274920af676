import { spawn } from "node:child_process";
import { appendFile, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { StoredEvent } from "../../../src/bus/event-bus.ts";
import { BUS_FILES, FileEventBus } from "../../../src/bus/file-event-bus.ts";
import { readBusLog } from "../../../src/bus/read-bus-log.ts";
import { describeEventBusConformance, testEvent } from "../../helpers/event-bus-conformance.ts";

const CHILD = fileURLToPath(new URL("../../helpers/bus-child.ts", import.meta.url));

describeEventBusConformance("FileEventBus", async () => {
  const directory = await mkdtemp(join(tmpdir(), "file-event-bus-"));
  return {
    open: () => FileEventBus.open(directory),
    dispose: () => rm(directory, { recursive: true, force: true }),
  };
});

async function storedEvents(bus: FileEventBus): Promise<StoredEvent[]> {
  const events: StoredEvent[] = [];
  for await (const event of bus.read({ follow: false })) events.push(event);
  return events;
}

/**
 * Runs tests/helpers/bus-child.ts in `mode` on `directory`, hands each stdout
 * line to `onLine` until it returns true, then kills the child with SIGKILL
 * and resolves with every line read.
 */
async function runChildUntil(mode: "publish" | "consume", directory: string, onLine: (line: string) => boolean): Promise<string[]> {
  const child = spawn(process.execPath, ["--import", "tsx", CHILD, mode, directory], { stdio: ["ignore", "pipe", "pipe"] });
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on("exit", (code, signal) => resolve({ code, signal })),
  );
  const lines: string[] = [];
  for await (const line of createInterface({ input: child.stdout })) {
    lines.push(line);
    if (onLine(line)) {
      child.kill("SIGKILL");
      break;
    }
  }
  const exit = await exited;
  if (exit.signal !== "SIGKILL") throw new Error(`the child ended by itself (code ${exit.code}): ${stderr}`);
  return lines;
}

describe("FileEventBus on disk", () => {
  let directory: string;

  beforeEach(async () => {
    directory = await mkdtemp(join(tmpdir(), "file-event-bus-disk-"));
  });

  afterEach(async () => {
    await rm(directory, { recursive: true, force: true });
  });

  it("keeps one CloudEvents JSON object a line in bus.jsonl", async () => {
    const bus = await FileEventBus.open(directory);
    const event = testEvent("coding.task.ready", { data: { issue: 7 } });
    await bus.publish(event);
    await bus.close();
    expect(await readFile(join(directory, BUS_FILES.log), "utf8")).toBe(`${JSON.stringify(event)}\n`);
  });

  it("finds every id again on open, whatever the id holds and however the event's attributes are ordered", async () => {
    let bus = await FileEventBus.open(directory);
    const quoted = testEvent("quoted", { id: 'outside "42" \\ \\"x' });
    const { specversion, id, ...rest } = testEvent("reordered");
    const reordered = { ...rest, id, specversion };
    await bus.publish(quoted);
    await bus.publish(reordered);
    await bus.publish(testEvent("last"));
    await bus.close();
    bus = await FileEventBus.open(directory);
    expect(await bus.publish({ ...quoted })).toBe(0);
    expect(await bus.publish({ ...reordered })).toBe(1);
    expect(await bus.nextSequence()).toBe(3);
    expect((await storedEvents(bus))[0]!.event).toEqual(quoted);
    await bus.close();
  });

  it("drops a torn last line on open, and the next publish takes its sequence", async () => {
    let bus = await FileEventBus.open(directory);
    const kept = [testEvent("kept"), testEvent("kept")];
    for (const event of kept) await bus.publish(event);
    await bus.close();
    const logPath = join(directory, BUS_FILES.log);
    const whole = (await stat(logPath)).size;
    await appendFile(logPath, JSON.stringify(testEvent("torn")).slice(0, 40));
    bus = await FileEventBus.open(directory);
    expect(bus.droppedTailBytes).toBe(40);
    expect((await stat(logPath)).size).toBe(whole);
    expect(await bus.nextSequence()).toBe(2);
    const next = testEvent("after");
    expect(await bus.publish(next)).toBe(2);
    expect((await storedEvents(bus)).map((stored) => stored.event)).toEqual([...kept, next]);
    await bus.close();
  });

  it("drops a whole last line that is not an event (a power loss's zeroed tail)", async () => {
    let bus = await FileEventBus.open(directory);
    await bus.publish(testEvent("kept"));
    await bus.close();
    await appendFile(join(directory, BUS_FILES.log), "\0\0\0\0\n");
    bus = await FileEventBus.open(directory);
    expect(bus.droppedTailBytes).toBe(5);
    expect(await bus.nextSequence()).toBe(1);
    await bus.close();
  });

  it("refuses to open a log damaged before its last line, naming the line", async () => {
    const lines = [testEvent("one"), testEvent("two")].map((event) => JSON.stringify(event));
    await writeFile(join(directory, BUS_FILES.log), `${lines[0]}\nnot json\n${lines[1]}\n`);
    await expect(FileEventBus.open(directory)).rejects.toThrow(/bus\.jsonl: line 2 is not a readable record/);
    // The failed open let go of the lock.
    await writeFile(join(directory, BUS_FILES.log), `${lines[0]}\n`);
    const bus = await FileEventBus.open(directory);
    expect(await bus.nextSequence()).toBe(1);
    await bus.close();
  });

  it("drops a torn last line of the cursors file and keeps the acks before it", async () => {
    let bus = await FileEventBus.open(directory);
    for (let index = 0; index < 3; index += 1) await bus.publish(testEvent("work"));
    await bus.ack("worker", 0);
    await bus.ack("worker", 1);
    await bus.close();
    await appendFile(join(directory, BUS_FILES.consumers), '{"consumer":"worker","ack":');
    bus = await FileEventBus.open(directory);
    expect(await bus.ackFloor("worker")).toBe(2);
    await bus.close();
  });

  it("lets one owner at a time open a directory, and takes over the lock of a process that is gone", async () => {
    const bus = await FileEventBus.open(directory);
    await expect(FileEventBus.open(directory)).rejects.toThrow(/already open in this process/);
    await bus.close();
    // A pid no process has (above the kernel's pid_max limit of 2^22).
    await writeFile(join(directory, BUS_FILES.lock), `${2 ** 22 + 1}\n`);
    const reopened = await FileEventBus.open(directory);
    expect(await reopened.nextSequence()).toBe(0);
    await reopened.close();
  });

  it("loses no publish that resolved when the publishing process is killed with SIGKILL", async () => {
    const published = new Map<number, string>();
    await runChildUntil("publish", directory, (line) => {
      const [, sequence, id] = line.split(" ");
      published.set(Number(sequence), id!);
      return published.size >= 300;
    });
    const bus = await FileEventBus.open(directory);
    const log = await storedEvents(bus);
    expect(log.length).toBeGreaterThanOrEqual(published.size);
    expect(log.map((stored) => stored.sequence)).toEqual(log.map((_, index) => index));
    for (const [sequence, id] of published) expect(log[sequence]?.event.id).toBe(id);
    // The log goes on where it stopped.
    expect(await bus.publish(testEvent("after"))).toBe(log.length);
    await bus.close();
  });

  it("redelivers what a killed consumer had not acked, counting the delivery it had", async () => {
    let bus = await FileEventBus.open(directory);
    for (let index = 0; index < 20; index += 1) await bus.publish(testEvent("work", { data: { index } }));
    await bus.close();
    const lines = await runChildUntil("consume", directory, (line) => line === "acked 19");
    expect(lines.filter((line) => line.startsWith("delivered"))).toHaveLength(20);
    bus = await FileEventBus.open(directory);
    expect(await bus.ackFloor("worker")).toBe(0);
    const again = bus.consume("worker")[Symbol.asyncIterator]();
    const redelivered = [];
    for (let index = 0; index < 10; index += 1) redelivered.push((await again.next()).value);
    expect(redelivered.map((delivery) => [delivery.sequence, delivery.deliveryCount])).toEqual(Array.from({ length: 10 }, (_, index) => [index * 2, 2]));
    await again.return?.();
    await bus.close();
  });

  it("lets another reader follow the log without opening the bus: whole lines only, live ones as they are written", async () => {
    const bus = await FileEventBus.open(directory);
    const events = [testEvent("one"), testEvent("two"), testEvent("three")];
    for (const event of events) await bus.publish(event);
    const all: StoredEvent[] = [];
    for await (const stored of readBusLog(directory, { follow: false })) all.push(stored);
    expect(all).toEqual(events.map((event, sequence) => ({ sequence, event })));
    const controller = new AbortController();
    const iterator = readBusLog(directory, { from: 2, signal: controller.signal })[Symbol.asyncIterator]();
    expect((await iterator.next()).value).toEqual({ sequence: 2, event: events[2] });
    const waiting = iterator.next();
    const live = testEvent("live");
    await bus.publish(live);
    expect((await waiting).value).toEqual({ sequence: 3, event: live });
    const waitingAgain = iterator.next();
    controller.abort();
    expect(await waitingAgain).toEqual({ done: true, value: undefined });
    await bus.close();
    await appendFile(join(directory, BUS_FILES.log), '{"specversion":"1.0","id":"torn');
    const afterTear: StoredEvent[] = [];
    for await (const stored of readBusLog(directory, { follow: false })) afterTear.push(stored);
    expect(afterTear).toHaveLength(4);
  });

  it("publishes from outside: directly when no process has the bus open, through the inbox when one has", async () => {
    expect(await FileEventBus.publishTo(directory, testEvent("while.idle"))).toBe(0);
    const bus = await FileEventBus.open(directory);
    const reader = bus.read({ from: 1 })[Symbol.asyncIterator]();
    const outside = testEvent("while.running", { id: "webhook-7" });
    expect(await FileEventBus.publishTo(directory, outside)).toBe(1);
    expect((await reader.next()).value).toEqual({ sequence: 1, event: outside });
    // A retry of the same outside event is the same event.
    expect(await FileEventBus.publishTo(directory, { ...outside })).toBe(1);
    expect(await bus.nextSequence()).toBe(2);
    await expect(FileEventBus.publishTo(directory, testEvent("big", { data: "x".repeat(20_000) }))).rejects.toMatchObject({ reason: "too_large" });
    await reader.return?.();
    await bus.close();
    // Closing waits for the drain, which removes each file once its event is stored.
    expect(await readdir(join(directory, BUS_FILES.inbox))).toEqual([]);
  });

  it("takes a publish from another process while this one has the bus open", async () => {
    const bus = await FileEventBus.open(directory);
    await bus.publish(testEvent("first"));
    const reader = bus.read({ from: 1 })[Symbol.asyncIterator]();
    const child = spawn(process.execPath, ["--import", "tsx", CHILD, "publish-to", directory, "from-outside"], { stdio: ["ignore", "pipe", "inherit"] });
    let stdout = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.on("close", resolve));
    expect(code).toBe(0);
    expect(stdout).toBe("published 1\n");
    expect((await reader.next()).value).toMatchObject({ sequence: 1, event: { id: "from-outside", type: "outside.event" } });
    await reader.return?.();
    await bus.close();
  });

  it("publishes what an earlier owner left in the inbox when it opens, and sets aside what it cannot", async () => {
    const left = testEvent("left.behind");
    await mkdir(join(directory, BUS_FILES.inbox));
    await writeFile(join(directory, BUS_FILES.inbox, "a.json"), JSON.stringify(left));
    await writeFile(join(directory, BUS_FILES.inbox, "b.json"), JSON.stringify({ ...testEvent("bad"), hops: -1 }));
    const bus = await FileEventBus.open(directory);
    expect((await storedEvents(bus)).map((stored) => stored.event)).toEqual([left]);
    expect((await readdir(join(directory, BUS_FILES.inbox))).sort()).toEqual(["b.json.rejected", "b.json.rejected.txt"]);
    expect(await readFile(join(directory, BUS_FILES.inbox, "b.json.rejected.txt"), "utf8")).toMatch(/hops/);
    await bus.close();
  });
});
