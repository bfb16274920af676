import { closeSync, existsSync, openSync, readSync, watch, type FSWatcher } from "node:fs";
import { join } from "node:path";
import type { RunEnvelope } from "../events/event-catalogue.js";

/** Bytes of events.jsonl read at once at most (whole lines of them). */
const READ_BYTES = 1 << 20;

/**
 * The events of the run in `directory` from sequence `from`, read from its
 * events.jsonl while another process runs it, until report.json exists and
 * nothing is left to read. It wakes on the directory's changes (fs.watch:
 * inotify on Linux, so an event appended arrives in about a millisecond, not
 * at the next poll) and, in case the file system reports no changes (some
 * network and container mounts), every `pollMs` all the same.
 */
export async function* followEventsFile(directory: string, from: number, options: { pollMs: number }): AsyncGenerator<RunEnvelope> {
  const file = join(directory, "events.jsonl");
  const changes = directoryChanges(directory);
  let offset = 0;
  let sequence = 0;
  try {
    for (;;) {
      const ended = existsSync(join(directory, "report.json"));
      const { text, bytes } = readFrom(file, offset);
      offset += bytes;
      for (const line of text.split("\n")) {
        if (!line) continue;
        if (sequence++ >= from) yield JSON.parse(line) as RunEnvelope;
      }
      if (ended && bytes === 0) return;
      if (bytes === 0) await changes.next(options.pollMs);
    }
  } finally {
    changes.close();
  }
}

/** Changes in `directory`: `next(ms)` resolves at the first change since the last call, or after `ms`. */
function directoryChanges(directory: string): { next(ms: number): Promise<void>; close(): void } {
  let changed = false;
  let wake: (() => void) | null = null;
  let watcher: FSWatcher | null = null;
  try {
    watcher = watch(directory, () => {
      changed = true;
      wake?.();
    });
    // A watch that fails later (the directory removed) leaves the poll.
    watcher.on("error", () => watcher?.close());
  } catch {
    // No watch on this file system: the poll alone.
  }
  return {
    next(ms) {
      if (changed) {
        changed = false;
        return Promise.resolve();
      }
      return new Promise((resolve) => {
        const done = () => {
          clearTimeout(timer);
          wake = null;
          changed = false;
          resolve();
        };
        const timer = setTimeout(done, ms);
        wake = done;
      });
    },
    close: () => watcher?.close(),
  };
}

/** Whole lines of `file` from byte `offset` (up to {@link READ_BYTES} of them; a line still being written waits for its newline). */
function readFrom(file: string, offset: number): { text: string; bytes: number } {
  if (!existsSync(file)) return { text: "", bytes: 0 };
  const descriptor = openSync(file, "r");
  try {
    const chunk = Buffer.alloc(READ_BYTES);
    const read = readSync(descriptor, chunk, 0, chunk.length, offset);
    const bytes = chunk.subarray(0, read).lastIndexOf(0x0a) + 1;
    return { text: chunk.subarray(0, bytes).toString("utf8"), bytes };
  } finally {
    closeSync(descriptor);
  }
}
