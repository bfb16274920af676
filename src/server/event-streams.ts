import type { Context } from "hono";
import { streamSSE, type SSEStreamingApi } from "hono/streaming";
import type { RunEnvelope } from "../events/event-catalogue.js";

/** Seconds between SSE comments that keep an idle connection open through proxies (and let a client see the server is alive). */
const KEEPALIVE_MS = 15_000;

/** How long a client waits before reconnecting after the stream drops (the SSE `retry:` field), ms; the page adds its own jittered backoff. */
const RETRY_MS = 2_000;

/**
 * A run's events as Server-Sent Events (issue 23): `id:` is the event's
 * sequence number (its line in events.jsonl, from 0), `event:` its
 * CloudEvents type, `data:` the CloudEvents line. `events` starts at
 * `from`: the caller computes it from `Last-Event-ID` (the next one after
 * it) or `?from=`, so a reconnecting client gets no gap and no duplicate.
 * When the run ends the stream sends `event: end` (no id) and closes, so a
 * client knows not to reconnect. A client that goes away stops the
 * iteration.
 */
export function runEventStream(context: Context, events: AsyncIterable<RunEnvelope>, from: number): Response {
  return streamSSE(context, async (stream) => {
    const closed = closedSignal(stream);
    const keepalive = setInterval(() => void stream.write(": keepalive\n\n").catch(() => undefined), KEEPALIVE_MS);
    try {
      await stream.write(`retry: ${RETRY_MS}\n\n`);
      const iterator = events[Symbol.asyncIterator]();
      let sequence = from;
      for (;;) {
        const next = await Promise.race([iterator.next(), closed.promise]);
        if (next === null || next.done) break;
        await stream.writeSSE({ id: String(sequence++), event: next.value.type, data: JSON.stringify(next.value) });
      }
      void iterator.return?.();
      if (!closed.aborted()) await stream.writeSSE({ event: "end", data: JSON.stringify({ next: sequence }) });
    } finally {
      clearInterval(keepalive);
    }
  });
}

/** One message of the board's stream ({@link BoardStream}). */
export interface BoardMessage {
  event: string;
  data: unknown;
}

/**
 * The runs board's one stream (`GET /v1/events`, issue 23 "fed by one SSE
 * stream of run-level events"): a `snapshot` first (what the page shows
 * now: runs and pending approvals), then run-level changes as they happen
 * (`run` with the run's fresh record, `approval.requested`,
 * `approval.resolved`). It has no ids to resume from: a client that
 * reconnects gets a fresh snapshot, so nothing is missed. The board keeps
 * nothing but its listeners.
 */
export class BoardStream {
  private readonly listeners = new Set<(message: BoardMessage) => void>();

  publish(message: BoardMessage): void {
    for (const listener of this.listeners) listener(message);
  }

  /** The SSE response for one client: `snapshot()` first, then every message published while it is connected. */
  respond(context: Context, snapshot: () => unknown): Response {
    return streamSSE(context, async (stream) => {
      const closed = closedSignal(stream);
      const queue: BoardMessage[] = [];
      let wake: (() => void) | null = null;
      const listener = (message: BoardMessage) => {
        queue.push(message);
        wake?.();
      };
      this.listeners.add(listener);
      const keepalive = setInterval(() => void stream.write(": keepalive\n\n").catch(() => undefined), KEEPALIVE_MS);
      try {
        await stream.write(`retry: ${RETRY_MS}\n\n`);
        await stream.writeSSE({ event: "snapshot", data: JSON.stringify(snapshot()) });
        while (!closed.aborted()) {
          while (queue.length) {
            const message = queue.shift()!;
            await stream.writeSSE({ event: message.event, data: JSON.stringify(message.data) });
          }
          await Promise.race([new Promise<void>((resolve) => (wake = resolve)), closed.promise]);
          wake = null;
        }
      } finally {
        this.listeners.delete(listener);
        clearInterval(keepalive);
      }
    });
  }
}

/** Resolves (to null) when the client goes away. */
function closedSignal(stream: SSEStreamingApi): { promise: Promise<null>; aborted: () => boolean } {
  let aborted = false;
  const promise = new Promise<null>((resolve) =>
    stream.onAbort(() => {
      aborted = true;
      resolve(null);
    }),
  );
  return { promise, aborted: () => aborted || stream.aborted || stream.closed };
}
