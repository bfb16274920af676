import type { AgencyEvent } from "./event-bus.js";

/**
 * The line format of bus.jsonl (docs/agency.md "Records"): one CloudEvents
 * JSON object a line, `specversion` and `id` first, so the id of a line can
 * be read from its first bytes.
 */

export const isStoredEvent = (value: unknown): value is AgencyEvent =>
  typeof value === "object" && value !== null && (value as AgencyEvent).specversion === "1.0" && typeof (value as AgencyEvent).id === "string";

/** How every log line starts: `publish` writes these two attributes first, so an open reads ids without parsing whole events. */
const LINE_START = '{"specversion":"1.0","id":';

/** An event as its log line (one JSON object, specversion and id first, and a newline), or null for what JSON cannot hold. */
export function logLine(event: AgencyEvent): string | null {
  try {
    const json = JSON.stringify(event);
    if (json.startsWith(LINE_START)) return `${json}\n`;
    const { specversion, id, ...rest } = event;
    return `${JSON.stringify({ specversion, id, ...rest })}\n`;
  } catch {
    return null;
  }
}

const LINE_START_BYTES = Buffer.from(LINE_START);
const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const CLOSING_BRACE = 0x7d;

/**
 * The event id of a log line (a LineReader): read from the line's start
 * alone, except for the last line — the only one a crash can tear — and
 * lines some other writer shaped differently, which are parsed whole. A line
 * damaged after its id is found by the reader that parses it.
 */
export function readLogLineId(line: Buffer, last: boolean): string | null {
  const idStart = LINE_START_BYTES.length;
  if (!last && line[idStart] === QUOTE && line[line.length - 1] === CLOSING_BRACE && LINE_START_BYTES.compare(line, 0, idStart) === 0) {
    let quote = line.indexOf(QUOTE, idStart + 1);
    while (quote !== -1 && isEscaped(line, quote)) quote = line.indexOf(QUOTE, quote + 1);
    if (quote !== -1) return JSON.parse(line.toString("utf8", idStart, quote + 1)) as string;
  }
  const value: unknown = JSON.parse(line.toString("utf8"));
  return isStoredEvent(value) ? value.id : null;
}

/** Whether the byte at `index` follows an odd number of backslashes. */
function isEscaped(line: Buffer, index: number): boolean {
  let backslashes = 0;
  while (line[index - 1 - backslashes] === BACKSLASH) backslashes += 1;
  return backslashes % 2 === 1;
}
