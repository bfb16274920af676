import { open, type FileHandle } from "node:fs/promises";

interface Waiter {
  resolve: () => void;
  reject: (error: Error) => void;
}

/**
 * An append-only file with group commit: appends made while a write and its
 * fdatasync are in flight are queued and go out together in the next single
 * write + fdatasync, so N concurrent durable appends cost one disk flush, not
 * N (the write-ahead-log technique of databases; SQLite's WAL and
 * JetStream's file store batch the same way).
 *
 * An append resolves once its bytes are written (`durable: false`: they
 * survive the process being killed, not a power loss) or written and flushed
 * (`durable: true`). Bytes land in the order `append` was called. After a
 * failed write or flush the file's tail is unknown: every queued and later
 * append rejects with that error (reopening the file recovers; the readers
 * drop a torn last line).
 */
export class GroupCommitFile {
  private queue: string[] = [];
  private queueDurable = false;
  private queueWaiters: Waiter[] = [];
  private flushing: Promise<void> | null = null;
  private failure: Error | null = null;
  private closed = false;
  private closing: Promise<void> | null = null;

  private constructor(
    readonly path: string,
    private readonly handle: FileHandle,
  ) {}

  /** Opens (creating, mode 0600) `path` for appending. */
  static async open(path: string): Promise<GroupCommitFile> {
    return new GroupCommitFile(path, await open(path, "a", 0o600));
  }

  /** Appends `text` (whole lines, newline included); see the class for when it resolves. Rejects after `close` or a failed write. */
  append(text: string, durable: boolean): Promise<void> {
    if (this.failure) return Promise.reject(this.failure);
    if (this.closed) return Promise.reject(new Error(`${this.path} is closed`));
    return new Promise<void>((resolve, reject) => {
      this.queue.push(text);
      this.queueDurable ||= durable;
      this.queueWaiters.push({ resolve, reject });
      // A microtask, not now: appends made in the same tick join the first write.
      if (!this.flushing) this.flushing = Promise.resolve().then(() => this.flushLoop());
    });
  }

  private async flushLoop(): Promise<void> {
    while (this.queue.length > 0) {
      const text = this.queue.join("");
      const durable = this.queueDurable;
      const waiters = this.queueWaiters;
      this.queue = [];
      this.queueDurable = false;
      this.queueWaiters = [];
      try {
        if (this.failure) throw this.failure;
        await this.writeAll(Buffer.from(text));
        if (durable) await this.handle.datasync();
        for (const waiter of waiters) waiter.resolve();
      } catch (error) {
        this.failure ??= new Error(`could not append to ${this.path}: ${(error as Error).message}`, { cause: error });
        for (const waiter of waiters) waiter.reject(this.failure);
      }
    }
    this.flushing = null;
  }

  private async writeAll(buffer: Buffer): Promise<void> {
    let offset = 0;
    while (offset < buffer.length) {
      const { bytesWritten } = await this.handle.write(buffer, offset, buffer.length - offset);
      offset += bytesWritten;
    }
  }

  /** Waits for queued appends, then closes the file. Idempotent. */
  close(): Promise<void> {
    this.closed = true;
    this.closing ??= (async () => {
      while (this.flushing) await this.flushing;
      await this.handle.close();
    })();
    return this.closing;
  }
}
