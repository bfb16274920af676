import { open } from "node:fs/promises";

/** Bytes read at a time while scanning; a line longer than this is carried over, never split. */
const CHUNK_BYTES = 4 * 1024 * 1024;

/** What {@link recoverJsonLines} found. */
export interface JsonLinesRecovery {
  /** Byte length of the whole lines kept: the file's length after recovery. */
  bytes: number;
  /** Bytes of a torn last line cut off (0 when the file ended cleanly). */
  droppedBytes: number;
}

/**
 * Reads the JSON Lines file at `path` (absent = empty), calling `onLine` with
 * each line's value and its byte offset, in order; then cuts off a torn last
 * line and makes the cut durable. A last line is torn when it has no newline
 * or `accept` refuses it: what a process killed in the middle of a write (or
 * a power loss before the flush) leaves. Such a line's append never resolved,
 * so nothing acknowledged is dropped.
 *
 * Throws when a line *before* the last is unreadable: that is damage, not a
 * torn append, and dropping it would renumber every later line. The message
 * names the file and the line.
 */
export async function recoverJsonLines(
  path: string,
  accept: (value: unknown) => boolean,
  onLine: (value: unknown, offset: number) => void,
): Promise<JsonLinesRecovery> {
  let handle;
  try {
    handle = await open(path, "r+");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { bytes: 0, droppedBytes: 0 };
    throw error;
  }
  try {
    const { size } = await handle.stat();
    let carry = Buffer.alloc(0);
    let carryOffset = 0;
    let lineNumber = 0;
    /** The first unreadable whole line, if any: fatal unless nothing but it follows. */
    let bad: { offset: number; lineNumber: number } | null = null;
    let position = 0;
    while (position < size) {
      const chunk = Buffer.allocUnsafe(Math.min(CHUNK_BYTES, size - position));
      const { bytesRead } = await handle.read(chunk, 0, chunk.length, position);
      if (bytesRead === 0) break;
      position += bytesRead;
      const buffer = carry.length > 0 ? Buffer.concat([carry, chunk.subarray(0, bytesRead)]) : chunk.subarray(0, bytesRead);
      let start = 0;
      for (let newline = buffer.indexOf(10, start); newline !== -1; newline = buffer.indexOf(10, start)) {
        const offset = carryOffset + start;
        lineNumber += 1;
        if (bad) throw damaged(path, bad.lineNumber);
        let value: unknown;
        let readable = true;
        try {
          value = JSON.parse(buffer.toString("utf8", start, newline));
          readable = accept(value);
        } catch {
          readable = false;
        }
        if (readable) onLine(value, offset);
        else bad = { offset, lineNumber };
        start = newline + 1;
      }
      carry = buffer.subarray(start);
      carryOffset += start;
    }
    const bytes = bad ? bad.offset : carryOffset;
    if (bytes < size) {
      await handle.truncate(bytes);
      await handle.sync();
    }
    return { bytes, droppedBytes: size - bytes };
  } finally {
    await handle.close();
  }
}

function damaged(path: string, lineNumber: number): Error {
  return new Error(
    `${path}: line ${lineNumber} is not a readable record but later lines are, so it is damage rather than a torn last write; ` +
      "move the file aside (or repair that line) and open again",
  );
}
