import type { RunEnvelope } from "../events/event-catalogue.js";

/**
 * The events of one run with replay: every envelope is kept in order (its
 * index is its sequence number, the line number in events.jsonl counting from
 * 0), and any number of subscribers may start at any sequence number at any
 * time, before, during or after the run: they get what happened from there,
 * then follow live, and their iteration ends when the run ends.
 *
 * Kept in memory for the run's lifetime (a 300-step run writes ~1 MB of
 * events); a run the process did not start is replayed from its file.
 */
export class EventReplay {
  private readonly envelopes: RunEnvelope[] = [];
  private ended = false;
  private waiting: (() => void)[] = [];

  /** Appends the next envelope (the next line of events.jsonl). */
  push(envelope: RunEnvelope): void {
    this.envelopes.push(envelope);
    this.wake();
  }

  /** The run ended: subscribers finish once they have read everything. */
  end(): void {
    this.ended = true;
    this.wake();
  }

  /** Envelopes from sequence number `from` (default 0), then live ones, until the run ends. */
  async *subscribe(from = 0): AsyncGenerator<RunEnvelope, void, undefined> {
    if (!Number.isInteger(from) || from < 0) throw new RangeError(`events({ from }): expected a sequence number (an integer >= 0), got ${from}`);
    let next = from;
    for (;;) {
      while (next < this.envelopes.length) yield this.envelopes[next++]!;
      if (this.ended) return;
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    }
  }

  private wake(): void {
    const waiting = this.waiting;
    this.waiting = [];
    for (const resolve of waiting) resolve();
  }
}
