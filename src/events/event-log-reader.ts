import { existsSync, readFileSync } from "node:fs";
import { parseEnvelopeLine, readEvent, type RunEnvelope, type RunEvent } from "./event-catalogue.js";

/**
 * The envelopes of an events.jsonl file, in order (index = sequence number);
 * a line that is not an envelope (one a crash cut short: the next attempt
 * starts a new line) is skipped. Envelopes of types this runner does not know
 * are kept: a replay hands on every line.
 */
export function readEnvelopes(path: string): RunEnvelope[] {
  if (!existsSync(path)) return [];
  const envelopes: RunEnvelope[] = [];
  for (const line of readFileSync(path, "utf8").split("\n")) {
    const envelope = line ? parseEnvelopeLine(line) : null;
    if (envelope) envelopes.push(envelope);
  }
  return envelopes;
}

/**
 * The catalogue events of an events.jsonl file, in order: what the report's
 * counters re-count when a run resumes. Envelopes this runner cannot read
 * (unknown types or versions, data off its schema) are left out: there is
 * nothing in them a counter could add.
 */
export function readRunEvents(path: string): RunEvent[] {
  return readEnvelopes(path).flatMap((envelope) => {
    const read = readEvent(envelope);
    return read.kind === "event" ? [read.event] : [];
  });
}
