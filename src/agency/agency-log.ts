import { existsSync, readFileSync, watch } from "node:fs";
import { join } from "node:path";
import { BUS_FILES } from "../bus/file-event-bus.js";
import type { AgencyEvent, StoredEvent } from "../bus/event-bus.js";

/**
 * The events of an agency's log read straight from its file (bus.jsonl),
 * without opening the bus: for `runner agency show/events` while another
 * process runs the agency (the bus has one owner at a time). Only whole lines
 * count: a line still being written, or torn by a crash, is not an event yet.
 */
export function readAgencyLog(directory: string, from = 0): StoredEvent[] {
  const file = join(directory, BUS_FILES.log);
  if (!existsSync(file)) return [];
  const text = readFileSync(file, "utf8");
  const lines = text.split("\n");
  lines.pop(); // after the last newline: empty, or a line not yet whole
  const events: StoredEvent[] = [];
  for (let sequence = from; sequence < lines.length; sequence += 1) {
    events.push({ sequence, event: JSON.parse(lines[sequence]!) as AgencyEvent });
  }
  return events;
}

/** True while a live process owns the agency's bus (it runs the agency). */
export function agencyRunning(directory: string): boolean {
  const lock = join(directory, BUS_FILES.lock);
  if (!existsSync(lock)) return false;
  const pid = Number.parseInt(readFileSync(lock, "utf8"), 10);
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * The log from `from`, then (with `follow`) new events as the owning process
 * writes them, until the agency stops running or `signal` aborts. Wakes on
 * file-system notifications of the agency's directory (fs.watch), not on a timer.
 */
export async function* followAgencyLog(directory: string, options: { from?: number; follow?: boolean; signal?: AbortSignal }): AsyncIterable<StoredEvent> {
  let next = options.from ?? 0;
  if (!options.follow) {
    yield* readAgencyLog(directory, next);
    return;
  }
  let wake: () => void = () => undefined;
  const watcher = watch(directory, () => wake());
  const onAbort = () => wake();
  options.signal?.addEventListener("abort", onAbort);
  try {
    for (;;) {
      const changed = new Promise<void>((resolve) => (wake = resolve));
      const running = agencyRunning(directory);
      for (const stored of readAgencyLog(directory, next)) {
        next = stored.sequence + 1;
        yield stored;
      }
      if (!running || options.signal?.aborted) return;
      await changed;
    }
  } finally {
    watcher.close();
    options.signal?.removeEventListener("abort", onAbort);
  }
}
