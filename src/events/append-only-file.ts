import { closeSync, fsyncSync, openSync, writeSync } from "node:fs";

/**
 * A file opened for appending (mode 0600), written one whole line per
 * write(2) so a crash never leaves half a line in the middle; `sync()` makes
 * what was written durable. The base of events.jsonl and session.jsonl.
 */
export class AppendOnlyFile {
  private readonly fd: number;

  constructor(readonly path: string) {
    this.fd = openSync(path, "a", 0o600);
  }

  /** Appends `line` and a newline in one write. */
  appendLine(line: string): void {
    writeSync(this.fd, `${line}\n`);
  }

  /** Flushes to disk (turn boundaries, the end of the run). */
  sync(): void {
    try {
      fsyncSync(this.fd);
    } catch {
      // not every file system supports fsync; the data is written regardless
    }
  }

  close(): void {
    this.sync();
    closeSync(this.fd);
  }
}
