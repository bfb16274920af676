import { closeSync, openSync, readSync } from "node:fs";

/** The complete lines appended to a file since the last call (a line still being written waits for its newline); a missing file has none yet. */
export class LineReader {
  private descriptor: number | null = null;
  private position = 0;
  private pending = Buffer.alloc(0);

  constructor(private readonly path: string) {}

  next(): string[] {
    if (this.descriptor === null) {
      try {
        this.descriptor = openSync(this.path, "r");
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
        throw error;
      }
    }
    const chunks: Buffer[] = [this.pending];
    const buffer = Buffer.alloc(64 * 1024);
    for (;;) {
      const read = readSync(this.descriptor, buffer, 0, buffer.length, this.position);
      if (read === 0) break;
      this.position += read;
      chunks.push(Buffer.from(buffer.subarray(0, read)));
    }
    const text = Buffer.concat(chunks);
    const end = text.lastIndexOf(0x0a);
    this.pending = end < 0 ? text : text.subarray(end + 1);
    return end < 0 ? [] : text.subarray(0, end).toString("utf8").split("\n").filter(Boolean);
  }

  close(): void {
    if (this.descriptor !== null) closeSync(this.descriptor);
    this.descriptor = null;
  }
}
