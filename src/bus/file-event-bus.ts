import { mkdir, open, rename, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { checkAgencyEvent } from "./agency-event.js";
import { applyCursorRecord, ConsumerCursor, isCursorRecord, type CursorRecord } from "./consumer-cursor.js";
import { dropInInbox, INBOX, InboxDrain } from "./bus-inbox.js";
import { LockHeldError, lockFile } from "./directory-lock.js";
import type { AgencyEvent, Delivery, EventBus, StoredEvent } from "./event-bus.js";
import { GroupCommitFile } from "./group-commit-file.js";
import { recoverJsonLines } from "./json-lines-file.js";
import { logLine, readLogLineId } from "./log-line.js";
import { readBusLog } from "./read-bus-log.js";

/** The files of a bus directory (the agency's `$RUNNER_HOME/agencies/<id>/`). */
export const BUS_FILES = {
  /** The log: one CloudEvents JSON object a line; line n (0-based) is sequence n. */
  log: "bus.jsonl",
  /** Consumer cursors: acks, deliveries and snapshots (see CursorRecord), compacted on open. */
  consumers: "consumers.jsonl",
  /** The pid of the process that has the bus open. */
  lock: "bus.lock",
  /** Events other processes hand to the owner (see FileEventBus.publishTo). */
  inbox: INBOX,
} as const;

/** Bytes of log a reader parses at a time. */
const READ_CHUNK_BYTES = 1024 * 1024;

/** JetStream's durable-name rule (no whitespace, `.`, `*`, `>`), narrowed to letters, digits, `-` and `_`: a name means the same on both backends. */
/** Consumer names both backends can hold: JetStream durable names (no `.`, `*`, `>` or white space). */
const CONSUMER_NAME = /^[A-Za-z0-9_-]{1,128}$/;

const readCursorLine = (line: Buffer): CursorRecord | null => {
  const value: unknown = JSON.parse(line.toString("utf8"));
  return isCursorRecord(value) ? value : null;
};

/** A one-shot wake-up for waiting readers (Promise.withResolvers is Node 22+). */
class Signal {
  fire: () => void = () => undefined;
  readonly promise = new Promise<void>((resolve) => {
    this.fire = resolve;
  });
}

/** A promise that settles when `signal` aborts, and a way to stop listening. */
function abortWaiter(signal: AbortSignal | undefined): { promise: Promise<void>; dispose: () => void } {
  if (!signal) return { promise: new Promise<void>(() => undefined), dispose: () => undefined };
  let listener = (): void => undefined;
  const promise = new Promise<void>((resolve) => {
    listener = () => resolve();
    signal.addEventListener("abort", listener, { once: true });
  });
  return { promise, dispose: () => signal.removeEventListener("abort", listener) };
}

/**
 * The embedded {@link EventBus} (`bus: file`): an append-only JSON Lines log
 * of CloudEvents plus a JSON Lines file of consumer cursors, in one directory,
 * owned by one process at a time (BUS_FILES.lock).
 *
 * Why hand-written, not a library: the log *is* the CloudEvents JSONL that
 * `runner agency events --json` prints and a user reads with `tail`/`jq`,
 * like a run's events.jsonl, so a line-per-event file is the record either
 * way. SQLite (better-sqlite3) would add a native module that needs a
 * prebuilt binary or a compiler at install time — Node 20 has no built-in
 * `node:sqlite` (22.5+) — and its synchronous API would block the event loop
 * on every commit's flush; LevelDB/LMDB bindings are native too. No pure-JS
 * embedded log with fsync'd group commit and durable consumers exists. What
 * is ours is small: group commit (GroupCommitFile), torn-tail recovery
 * (recoverJsonLines) and the JetStream-shaped cursor (ConsumerCursor).
 *
 * Guarantees: `publish` resolves after the event's line is written and
 * fdatasync'd (a batch of concurrent publishes shares one write and one
 * flush); readers see only flushed events, so nothing a reader saw is lost
 * by a crash. On open a torn last line (a killed process, a power loss
 * mid-write) is cut off ({@link droppedTailBytes}); damage before the last
 * line is an error, never silently skipped. Every event id is kept in
 * memory for publish dedupe; every event's byte offset too (8 bytes each),
 * events themselves are read from the file. Like a connection to a broker,
 * an open bus keeps its process alive (it watches its inbox for events from
 * other processes): `close` it to let the process end.
 */
export class FileEventBus implements EventBus {
  private readonly logPath: string;
  /** offsets[n]: where sequence n's line starts, for every sequence given out (flushed or in flight); `assignedBytes` is where the next starts. */
  private readonly offsets: number[] = [];
  private assignedBytes: number;
  /** Events flushed to disk: readers see sequences below this. */
  private committed: number;
  private readonly activeConsumers = new Set<string>();
  private readonly readsInFlight = new Set<Promise<AgencyEvent[]>>();
  private changed = new Signal();
  private failure: Error | null = null;
  private closing: Promise<void> | null = null;
  private inbox: InboxDrain | null = null;

  private constructor(
    readonly directory: string,
    /** Bytes of a torn last line the open cut off the log (0 when it ended cleanly). */
    readonly droppedTailBytes: number,
    logOffsets: number[],
    logBytes: number,
    private readonly sequenceById: Map<string, number>,
    private readonly cursors: Map<string, ConsumerCursor>,
    private readonly log: GroupCommitFile,
    private readonly consumersFile: GroupCommitFile,
    /** One handle every reader reads from at explicit offsets, so a reader left suspended holds no file. */
    private readonly reader: FileHandle,
    private readonly unlock: () => Promise<void>,
  ) {
    this.logPath = join(directory, BUS_FILES.log);
    this.offsets = logOffsets;
    this.assignedBytes = logBytes;
    this.committed = logOffsets.length;
  }

  /**
   * Opens (creating) the bus in `directory`: takes the lock, recovers the log
   * and the cursors (dropping a torn last line of each), compacts the
   * cursors file, publishes what waits in the inbox. Throws LockHeldError
   * when a live process (this one included) has the bus open, and an Error
   * naming file and line when a file is damaged before its last line.
   */
  static async open(directory: string): Promise<FileEventBus> {
    await mkdir(directory, { recursive: true, mode: 0o700 });
    const unlock = await lockFile(join(directory, BUS_FILES.lock), `the event bus in ${directory}`);
    const opened: { close(): Promise<void> }[] = [];
    try {
      const offsets: number[] = [];
      const sequenceById = new Map<string, number>();
      const logRecovery = await recoverJsonLines(join(directory, BUS_FILES.log), readLogLineId, (id, offset) => {
        // A second line with a known id (only a hand-edited log has one) keeps the first's sequence, as a publish would.
        if (!sequenceById.has(id)) sequenceById.set(id, offsets.length);
        offsets.push(offset);
      });
      const cursors = new Map<string, ConsumerCursor>();
      const consumersPath = join(directory, BUS_FILES.consumers);
      await recoverJsonLines(consumersPath, readCursorLine, (record) => applyCursorRecord(cursors, record));
      await compactCursors(consumersPath, cursors);
      const log = await GroupCommitFile.open(join(directory, BUS_FILES.log));
      opened.push(log);
      const consumersFile = await GroupCommitFile.open(consumersPath);
      opened.push(consumersFile);
      const reader = await open(join(directory, BUS_FILES.log), "r");
      opened.push(reader);
      const bus = new FileEventBus(directory, logRecovery.droppedBytes, offsets, logRecovery.bytes, sequenceById, cursors, log, consumersFile, reader, unlock);
      bus.inbox = await InboxDrain.start(directory, (event) => bus.publish(event));
      return bus;
    } catch (error) {
      await Promise.allSettled(opened.map((file) => file.close()));
      await unlock();
      throw error;
    }
  }

  /**
   * Publishes `event` into the file bus in `directory` from any process,
   * resolving with its sequence once it is stored: directly when no process
   * has the bus open (opened, published, closed), else through the bus's
   * inbox, which the owner drains at once (`runner agency publish` into a
   * running agency). Throws EventRejectedError as `publish` does, before
   * anything is written. If the owner closes before it drains the inbox, the
   * event waits there for the next open and this waits with it, until
   * `signal` aborts (then it throws; the event may still be published later).
   */
  static async publishTo(directory: string, event: AgencyEvent, options: { signal?: AbortSignal } = {}): Promise<number> {
    checkAgencyEvent(event);
    let bus: FileEventBus;
    try {
      bus = await FileEventBus.open(directory);
    } catch (error) {
      if (!(error instanceof LockHeldError)) throw error;
      for await (const stored of readBusLog(directory, { follow: false })) if (stored.event.id === event.id) return stored.sequence;
      await dropInInbox(directory, event);
      for await (const stored of readBusLog(directory, { signal: options.signal })) if (stored.event.id === event.id) return stored.sequence;
      throw new Error(`stopped waiting for event ${event.id} to be stored; it waits in ${join(directory, INBOX)} for the bus's owner`);
    }
    try {
      return await bus.publish(event);
    } finally {
      await bus.close();
    }
  }

  async publish(event: AgencyEvent): Promise<number> {
    this.assertOpen();
    const line = logLine(event);
    const lineBytes = line === null ? undefined : Buffer.byteLength(line);
    checkAgencyEvent(event, lineBytes);
    const known = this.sequenceById.get(event.id);
    if (known !== undefined) {
      await this.waitCommitted(known);
      return known;
    }
    // checkAgencyEvent refuses what JSON cannot hold, so the line is there.
    const sequence = this.offsets.length;
    this.offsets.push(this.assignedBytes);
    this.assignedBytes += lineBytes!;
    this.sequenceById.set(event.id, sequence);
    try {
      await this.log.append(line!, true);
    } catch (error) {
      this.failure ??= error as Error;
      this.notify();
      throw error;
    }
    if (sequence >= this.committed) {
      this.committed = sequence + 1;
      this.notify();
    }
    return sequence;
  }

  async *read(options: { from?: number; follow?: boolean; signal?: AbortSignal } = {}): AsyncIterable<StoredEvent> {
    const from = options.from ?? 0;
    if (!Number.isSafeInteger(from) || from < 0) throw new RangeError(`read: from must be a sequence number (an integer ≥ 0), got ${String(from)}`);
    const follow = options.follow ?? true;
    const end = follow ? Infinity : this.committed;
    const signal = options.signal;
    let next = from;
    while (!this.closing && !signal?.aborted && next < end) {
      if (next < this.committed) {
        const events = await this.readChunk(next, Math.min(end, this.committed));
        for (const event of events) {
          if (this.closing || signal?.aborted) return;
          yield { sequence: next, event };
          next += 1;
        }
        continue;
      }
      if (this.failure) throw this.failure;
      const aborted = abortWaiter(signal);
      try {
        await Promise.race([this.changed.promise, aborted.promise]);
      } finally {
        aborted.dispose();
      }
    }
  }

  /** Sequences `from` up to `limit` (exclusive), at most about READ_CHUNK_BYTES of them (at least one), parsed. */
  private readChunk(from: number, limit: number): Promise<AgencyEvent[]> {
    // close() waits for reads in flight before it closes the handle they read from.
    const reading = this.readChunkFrom(this.reader, from, limit);
    this.readsInFlight.add(reading);
    void reading.then(
      () => this.readsInFlight.delete(reading),
      () => this.readsInFlight.delete(reading),
    );
    return reading;
  }

  private async readChunkFrom(handle: FileHandle, from: number, limit: number): Promise<AgencyEvent[]> {
    const start = this.offsets[from]!;
    let to = from + 1;
    while (to < limit && this.offsets[to]! - start < READ_CHUNK_BYTES) to += 1;
    const endByte = to < this.offsets.length ? this.offsets[to]! : this.assignedBytes;
    const buffer = Buffer.allocUnsafe(endByte - start);
    let filled = 0;
    while (filled < buffer.length) {
      const { bytesRead } = await handle.read(buffer, filled, buffer.length - filled, start + filled);
      if (bytesRead === 0)
        throw new Error(`${this.logPath} ended at byte ${start + filled}, before sequence ${to - 1}'s end: was it changed by another program?`);
      filled += bytesRead;
    }
    const lines = buffer.toString("utf8").split("\n");
    lines.pop();
    return lines.map((line) => JSON.parse(line) as AgencyEvent);
  }

  async *consume(name: string, options: { signal?: AbortSignal } = {}): AsyncIterable<Delivery> {
    checkConsumerName(name);
    this.assertOpen();
    if (this.activeConsumers.has(name)) {
      throw new Error(`consumer ${name} is already being consumed; one consume per name at a time: end the other one (break or abort) first`);
    }
    this.activeConsumers.add(name);
    try {
      const cursor = this.cursor(name);
      for await (const stored of this.read({ from: cursor.ackFloor, signal: options.signal })) {
        if (cursor.isAcked(stored.sequence)) continue;
        const deliveryCount = cursor.deliver(stored.sequence);
        // Written (not flushed) before it is handed out: a killed process still counts it on the next open.
        await this.consumersFile.append(`${JSON.stringify({ consumer: name, delivered: stored.sequence } satisfies CursorRecord)}\n`, false);
        yield { ...stored, deliveryCount };
      }
    } finally {
      this.activeConsumers.delete(name);
    }
  }

  async ack(name: string, sequence: number): Promise<void> {
    checkConsumerName(name);
    this.assertOpen();
    if (!Number.isSafeInteger(sequence) || sequence < 0 || sequence >= this.committed) {
      throw new RangeError(`ack ${name}: sequence must be one of the stored events (0 to ${this.committed - 1}), got ${String(sequence)}`);
    }
    const cursor = this.cursor(name);
    if (cursor.isAcked(sequence)) return;
    await this.consumersFile.append(`${JSON.stringify({ consumer: name, ack: sequence } satisfies CursorRecord)}\n`, true);
    cursor.ack(sequence);
  }

  async ackFloor(name: string): Promise<number> {
    checkConsumerName(name);
    return this.cursors.get(name)?.ackFloor ?? 0;
  }

  nextSequence(): Promise<number> {
    return Promise.resolve(this.committed);
  }

  close(): Promise<void> {
    this.closing ??= (async () => {
      this.notify();
      try {
        await this.inbox?.stop();
        await Promise.all([this.log.close(), this.consumersFile.close()]);
        await Promise.allSettled([...this.readsInFlight]);
        await this.reader.close();
      } finally {
        await this.unlock();
      }
    })();
    return this.closing;
  }

  private cursor(name: string): ConsumerCursor {
    let cursor = this.cursors.get(name);
    if (!cursor) {
      cursor = new ConsumerCursor();
      this.cursors.set(name, cursor);
    }
    return cursor;
  }

  private assertOpen(): void {
    if (this.closing) throw new Error(`the event bus in ${this.directory} is closed`);
    if (this.failure) throw new Error(`the event bus in ${this.directory} failed (${this.failure.message}); close and reopen it to recover`);
  }

  /** Wakes every waiting reader. */
  private notify(): void {
    this.changed.fire();
    this.changed = new Signal();
  }

  /** Resolves when `sequence` is flushed (a duplicate publish of an event still in flight). */
  private async waitCommitted(sequence: number): Promise<void> {
    while (sequence >= this.committed) {
      if (this.failure) throw this.failure;
      if (this.closing) throw new Error(`the event bus in ${this.directory} closed before sequence ${sequence} was stored`);
      await this.changed.promise;
    }
  }
}

export function checkConsumerName(name: string): void {
  if (typeof name !== "string" || !CONSUMER_NAME.test(name)) {
    throw new RangeError(`consumer name ${JSON.stringify(name)}: use 1 to 128 letters, digits, '-' or '_' (JetStream's durable-name rule)`);
  }
}

/**
 * Rewrites the cursors file as one snapshot line per consumer (write a
 * temporary file, flush, rename over, flush the directory): the file of acks
 * and deliveries grows with every event, its snapshot with the consumers.
 */
async function compactCursors(path: string, cursors: Map<string, ConsumerCursor>): Promise<void> {
  const lines = [...cursors].map(([name, cursor]) => `${JSON.stringify(cursor.snapshot(name))}\n`).join("");
  const temporary = `${path}.tmp`;
  const handle = await open(temporary, "w", 0o600);
  try {
    await handle.writeFile(lines);
    await handle.sync();
  } finally {
    await handle.close();
  }
  await rename(temporary, path);
  const directory = await open(join(path, ".."), "r");
  try {
    await directory.sync();
  } finally {
    await directory.close();
  }
}
