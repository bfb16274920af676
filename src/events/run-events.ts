import type { RunEvent } from "./event-catalogue.js";

/** Everything a run reports: the event catalogue's events (src/events/event-catalogue.ts, docs/events.md). */
export type { RunEvent };

/** Receives events as they happen. Implementations must not throw. */
export interface EventSink {
  emit(event: RunEvent): void;
}

/** Fans one event out to several sinks. */
export class EventFanout implements EventSink {
  private readonly sinks: EventSink[] = [];
  add(sink: EventSink): this {
    this.sinks.push(sink);
    return this;
  }
  emit(event: RunEvent): void {
    for (const sink of this.sinks) sink.emit(event);
  }
}
