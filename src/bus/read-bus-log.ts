import { watch, type FSWatcher } from "node:fs";
import { open, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import type { AgencyEvent, StoredEvent } from "./event-bus.js";
import { isStoredEvent } from "./log-line.js";

/** Bytes read at a time. */
const CHUNK_BYTES = 1024 * 1024;

/**
 * The events of the file bus in `directory` (its bus.jsonl), read without
 * opening the bus: for another process than the one that has it open —
 * `runner agency events <id> -f` next to a running `runner agency run`, or
 * `runner agency show` of a finished agency. From sequence `from` (default
 * 0), in order; with `follow` (default true) it then waits for new lines
 * (inotify through fs.watch, no polling) until `signal` aborts.
 *
 * It reads whole lines only: a line the owner is still writing, or one a
 * crash tore, is not handed out (the next open of the bus cuts a torn one).
 * It sees an event once it is written, which can be a moment before its
 * publish resolves (after the flush); an event is lost only if the machine
 * loses power in that moment. Throws when a whole line is not an event,
 * naming the file and the line.
 */
export async function* readBusLog(directory: string, options: { from?: number; follow?: boolean; signal?: AbortSignal } = {}): AsyncIterable<StoredEvent> {
  const from = options.from ?? 0;
  if (!Number.isSafeInteger(from) || from < 0) throw new RangeError(`from must be a sequence number (an integer ≥ 0), got ${String(from)}`);
  const follow = options.follow ?? true;
  const signal = options.signal;
  const path = join(directory, "bus.jsonl");
  let changed = false;
  let wake: (() => void) | null = null;
  const onChange = (): void => {
    changed = true;
    wake?.();
  };
  let watcher: FSWatcher | null = null;
  if (follow) {
    // The directory, not the file: the file may not exist yet. Set up before the first read, so no write falls between.
    // Persistent: a process awaiting the next event must stay alive for it.
    watcher = watch(directory, (_event, name) => {
      if (name === null || name === "bus.jsonl") onChange();
    });
    watcher.on("error", onChange);
  }
  signal?.addEventListener("abort", onChange, { once: true });
  let handle: FileHandle | null = null;
  // The end of the whole lines read: a partial line is read again once it is whole (or cut by a recovery).
  let position = 0;
  let sequence = 0;
  let chunkBytes = CHUNK_BYTES;
  try {
    for (;;) {
      if (signal?.aborted) return;
      changed = false;
      handle ??= await open(path, "r").catch((error: NodeJS.ErrnoException) => {
        if (error.code === "ENOENT") return null;
        throw error;
      });
      while (handle) {
        const chunk = Buffer.allocUnsafe(chunkBytes);
        const { bytesRead } = await handle.read(chunk, 0, chunkBytes, position);
        const lastNewline = bytesRead === 0 ? -1 : chunk.lastIndexOf(10, bytesRead - 1);
        if (lastNewline === -1) {
          // A line longer than the chunk: read it with a bigger one.
          if (bytesRead === chunkBytes) chunkBytes *= 2;
          else break;
          continue;
        }
        const events: StoredEvent[] = [];
        for (let start = 0; start <= lastNewline;) {
          const newline = chunk.indexOf(10, start);
          if (sequence >= from) events.push({ sequence, event: parseLine(path, chunk.toString("utf8", start, newline), sequence) });
          sequence += 1;
          start = newline + 1;
        }
        position += lastNewline + 1;
        for (const event of events) {
          if (signal?.aborted) return;
          yield event;
        }
      }
      if (!follow) return;
      if (!changed) {
        await new Promise<void>((resolve) => {
          wake = resolve;
          if (changed || signal?.aborted) resolve();
        });
        wake = null;
      }
    }
  } finally {
    watcher?.close();
    signal?.removeEventListener("abort", onChange);
    await handle?.close();
  }
}

function parseLine(path: string, line: string, sequence: number): AgencyEvent {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    value = null;
  }
  if (!isStoredEvent(value)) throw new Error(`${path}: line ${sequence + 1} is not an event; open the bus (FileEventBus.open) to recover a torn last line`);
  return value;
}
