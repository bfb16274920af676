import { cloudEventType, parseEnvelopeLine, type RunEnvelope } from "../events/event-catalogue.js";
import { LineReader } from "../events/line-reader.js";

const MODEL_CALL_STARTED = cloudEventType("model_call.started");
const MODEL_CALL_FINISHED = cloudEventType("model_call.finished");
const SUMMARY_USAGE = cloudEventType("context.summary_usage");
const RUN_FINISHED = cloudEventType("run.finished");

/** A page of a run's events: the envelopes from a cursor and the cursor after them. */
export interface EventPage {
  events: RunEnvelope[];
  /** The sequence number of the next event to ask for (the cursor after the last one returned). */
  nextCursor: number;
  /** Events after `nextCursor` already in the log (more to page through without waiting). */
  remaining: number;
}

/**
 * One run's events.jsonl as the MCP server reads it: the envelopes read so
 * far (sequence number = index, as `RunHandle.events({ from })` and
 * `readEnvelopes` count: lines that are not envelopes are skipped), each
 * with its size, and a running fold of what `run_status` shows. Reading is
 * incremental ({@link refresh} reads only what was appended), so a status or
 * a page costs no more on a 10 000-event run than on a short one
 * (bench/mcp-server.bench.ts). Works the same for runs of this process and
 * of any other (the file is the one record both write).
 */
export class RunEventLog {
  private readonly reader: LineReader;
  private readonly envelopes: RunEnvelope[] = [];
  /** UTF-8 bytes of each envelope's line. */
  private readonly sizes: number[] = [];
  private mainStep = 0;
  private cost = 0;
  private unpriced = false;

  constructor(path: string) {
    this.reader = new LineReader(path);
  }

  /** Reads what was appended since the last call. */
  refresh(): void {
    for (const line of this.reader.next()) {
      const envelope = parseEnvelopeLine(line);
      if (!envelope) continue;
      this.envelopes.push(envelope);
      this.sizes.push(Buffer.byteLength(line));
      this.fold(envelope);
    }
  }

  /** Envelopes read so far. */
  get length(): number {
    return this.envelopes.length;
  }

  /** The main agent's latest model call, 1-based as the terminal's `step N` (events count from 0); 0 before the first. */
  get step(): number {
    return this.mainStep;
  }

  /** USD of the model calls so far (subagents' and compactions' included); null once a call had no price. */
  get costUsd(): number | null {
    return this.unpriced ? null : Math.round(this.cost * 1e6) / 1e6;
  }

  /** Whether the last envelope read is `run.finished` (an attempt ended; a resume may append more). */
  get endsWithRunFinished(): boolean {
    return this.envelopes.at(-1)?.type === RUN_FINISHED;
  }

  /** The last `count` envelopes, oldest first, with their sequence numbers. */
  last(count: number): { sequence: number; envelope: RunEnvelope }[] {
    const start = Math.max(0, this.envelopes.length - count);
    return this.envelopes.slice(start).map((envelope, index) => ({ sequence: start + index, envelope }));
  }

  /**
   * Envelopes from sequence number `cursor`: at most `maxEvents`, and no more
   * than `maxBytes` of JSON in all, except that the first is always returned
   * whole (so the cursor always moves on; an event's own fields are bounded,
   * docs/events.md).
   */
  page(cursor: number, maxEvents: number, maxBytes: number): EventPage {
    const events: RunEnvelope[] = [];
    let bytes = 0;
    let next = Math.min(cursor, this.envelopes.length);
    while (next < this.envelopes.length && events.length < maxEvents) {
      const size = this.sizes[next]!;
      if (events.length > 0 && bytes + size > maxBytes) break;
      events.push(this.envelopes[next]!);
      bytes += size;
      next += 1;
    }
    return { events, nextCursor: Math.max(next, cursor), remaining: this.envelopes.length - next };
  }

  close(): void {
    this.reader.close();
  }

  private fold(envelope: RunEnvelope): void {
    const data = envelope.data as { agent_id?: unknown; step?: unknown; cost_usd?: unknown } | undefined;
    if (envelope.type === MODEL_CALL_STARTED && data?.agent_id === "main" && typeof data.step === "number")
      this.mainStep = Math.max(this.mainStep, data.step + 1);
    if (envelope.type === MODEL_CALL_FINISHED || envelope.type === SUMMARY_USAGE) {
      if (typeof data?.cost_usd === "number") this.cost += data.cost_usd;
      else if (data?.cost_usd === null) this.unpriced = true;
    }
  }
}
