/**
 * One durable consumer's position (JetStream's consumer state): the ack
 * floor (the lowest sequence not acked), the sequences acked above it (acks
 * come out of order), and how often each unacked sequence has been
 * delivered. In memory; the bus records every change in consumers.jsonl.
 */
export class ConsumerCursor {
  private floor = 0;
  private readonly ackedAboveFloor = new Set<number>();
  private readonly deliveries = new Map<number, number>();

  get ackFloor(): number {
    return this.floor;
  }

  isAcked(sequence: number): boolean {
    return sequence < this.floor || this.ackedAboveFloor.has(sequence);
  }

  /** Marks `sequence` acked and moves the floor over every acked sequence it now reaches. */
  ack(sequence: number): void {
    if (this.isAcked(sequence)) return;
    this.ackedAboveFloor.add(sequence);
    this.deliveries.delete(sequence);
    while (this.ackedAboveFloor.delete(this.floor)) this.floor += 1;
  }

  /** Counts one more delivery of `sequence` and returns the count (1 for the first). */
  deliver(sequence: number): number {
    const count = (this.deliveries.get(sequence) ?? 0) + 1;
    this.deliveries.set(sequence, count);
    return count;
  }

  /** The state as one consumers.jsonl snapshot record (see {@link applyCursorRecord}). */
  snapshot(consumer: string): CursorRecord {
    return {
      consumer,
      ack_floor: this.floor,
      acked: [...this.ackedAboveFloor].sort((a, b) => a - b),
      delivered: [...this.deliveries].sort(([a], [b]) => a - b),
    };
  }

  /** Restores a snapshot record's state. */
  restore(record: { ack_floor: number; acked: number[]; delivered: [number, number][] }): void {
    this.floor = record.ack_floor;
    this.ackedAboveFloor.clear();
    this.deliveries.clear();
    for (const sequence of record.acked) this.ack(sequence);
    for (const [sequence, count] of record.delivered) if (!this.isAcked(sequence)) this.deliveries.set(sequence, count);
  }
}

/**
 * A line of consumers.jsonl: an ack (flushed before `ack` resolves), a
 * delivery (written before the delivery is handed out, not flushed: it
 * survives a killed process, and a power loss at worst under-counts), or a
 * snapshot of a whole cursor (written when the file is compacted on open).
 */
export type CursorRecord =
  | { consumer: string; ack: number }
  | { consumer: string; delivered: number }
  | { consumer: string; ack_floor: number; acked: number[]; delivered: [number, number][] };

const isSequence = (value: unknown): value is number => Number.isSafeInteger(value) && (value as number) >= 0;

/** Whether `value` is a consumers.jsonl record this version can read. */
export function isCursorRecord(value: unknown): value is CursorRecord {
  if (typeof value !== "object" || value === null) return false;
  const record = value as Record<string, unknown>;
  if (typeof record.consumer !== "string") return false;
  if ("ack" in record) return isSequence(record.ack);
  if ("delivered" in record && !("ack_floor" in record)) return isSequence(record.delivered);
  return (
    isSequence(record.ack_floor) &&
    Array.isArray(record.acked) &&
    record.acked.every(isSequence) &&
    Array.isArray(record.delivered) &&
    record.delivered.every((pair) => Array.isArray(pair) && pair.length === 2 && isSequence(pair[0]) && isSequence(pair[1]))
  );
}

/** Folds one record into the cursors by consumer name. */
export function applyCursorRecord(cursors: Map<string, ConsumerCursor>, record: CursorRecord): void {
  let cursor = cursors.get(record.consumer);
  if (!cursor) {
    cursor = new ConsumerCursor();
    cursors.set(record.consumer, cursor);
  }
  if ("ack" in record) cursor.ack(record.ack);
  else if ("ack_floor" in record) cursor.restore(record);
  else cursor.deliver(record.delivered);
}
