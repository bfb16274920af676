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
 * Reads one line (its bytes without the newline; a view valid during the
 * call) into a record, or returns null when the line is not one. `last` is true for the file's last whole line: the
 * only one a crash can have torn, so the only one a reader must check in
 * full (others may be read cheaply, e.g. just their id).
 */
export type LineReader<T> = (line: Buffer, last: boolean) => T | null;

/**
 * Reads the JSON Lines file at `path` (absent = empty), calling `onRecord`
 * with each line's record (see {@link LineReader}) and byte offset, in order;
 * then cuts off a torn last line and makes the cut durable. A last line is
 * torn when it has no newline or the reader refuses it: what a process
 * killed in the middle of a write (or a power loss before the flush) leaves.
 * Such a line's append never resolved, so nothing acknowledged is dropped.
 *
 * Throws when a line *before* the last is refused: that is damage, not a
 * torn append, and dropping it would renumber every later line. The message
 * names the file and the line.
 */
export async function recoverJsonLines<T>(path: string, readLine: LineReader<T>, onRecord: (record: T, offset: number) => void): Promise<JsonLinesRecovery> {
  let handle;
  try {
    handle = await open(path, "r+");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return { bytes: 0, droppedBytes: 0 };
    throw error;
  }
  try {
    const { size } = await handle.stat();
    let lineNumber = 0;
    // Each whole line waits here until the next one shows it was not the last.
    let held: { line: Buffer; offset: number } | null = null;
    const release = (last: boolean): boolean => {
      if (!held) return true;
      lineNumber += 1;
      let record: T | null = null;
      try {
        record = readLine(held.line, last);
      } catch {
        record = null;
      }
      if (record === null) {
        if (!last) throw damaged(path, lineNumber);
        return false;
      }
      onRecord(record, held.offset);
      return true;
    };
    let carry = Buffer.alloc(0);
    let carryOffset = 0;
    let position = 0;
    while (position < size) {
      const chunk = Buffer.allocUnsafe(Math.min(CHUNK_BYTES, size - position));
      const { bytesRead } = await handle.read(chunk, 0, chunk.length, position);
      if (bytesRead === 0) break;
      position += bytesRead;
      const buffer = carry.length > 0 ? Buffer.concat([carry, chunk.subarray(0, bytesRead)]) : chunk.subarray(0, bytesRead);
      let start = 0;
      for (let newline = buffer.indexOf(10, start); newline !== -1; newline = buffer.indexOf(10, start)) {
        release(false);
        held = { line: buffer.subarray(start, newline), offset: carryOffset + start };
        start = newline + 1;
      }
      carry = buffer.subarray(start);
      carryOffset += start;
    }
    const heldOffset = held?.offset ?? 0;
    const bytes = release(true) ? carryOffset : heldOffset;
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
