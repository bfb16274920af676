import type { Context } from "hono";
import { streamSSE, type SSEStreamingApi } from "hono/streaming";
import { HttpProblem } from "./problem.js";
import type { SharedFrames } from "./shared-frames.js";

/** Seconds between SSE comments that keep an idle connection open through proxies (and let a client see the server is alive). */
const KEEPALIVE_MS = 15_000;

/** How long a client waits before reconnecting after the stream drops (the SSE `retry:` field), ms; the page adds its own jittered backoff. */
const RETRY_MS = 2_000;

/** Bytes of SSE text sent in one chunk at most (events queued together go out together, up to this). */
const CHUNK_BYTES = 64 * 1024;

/** A CloudEvent of a run's log or an agency's bus: what the SSE streams carry. */
type StreamedEvent = { readonly type: string };

/**
 * Each event's SSE message, made once for every client of the run: the
 * subscribers of a RunHandle get the same envelope objects, at the same
 * sequence numbers, so 50 clients cost one JSON.stringify, not 50.
 */
const messages = new WeakMap<StreamedEvent, Buffer>();

function messageOf(envelope: StreamedEvent, sequence: number): Buffer {
  // An envelope has one place in its run's log: its message is the same for every client.
  let message = messages.get(envelope);
  if (!message) {
    message = Buffer.from(`id: ${sequence}\nevent: ${envelope.type}\ndata: ${JSON.stringify(envelope)}\n\n`);
    messages.set(envelope, message);
  }
  return message;
}

/**
 * A run's events as Server-Sent Events (issue 23): `id:` is the event's
 * sequence number (its line in events.jsonl, from 0), `event:` its
 * CloudEvents type, `data:` the CloudEvents line. `events` starts at
 * `from`: the caller computes it from `Last-Event-ID` (the next one after
 * it) or `?from=`, so a reconnecting client gets no gap and no duplicate.
 * When the run ends the stream sends `event: end` (no id) and closes, so a
 * client knows not to reconnect. A client that goes away stops the
 * iteration.
 *
 * A pull stream of its own rather than Hono's `streamSSE`: the events that
 * are ready together (a replay, a burst) go out as one chunk, and nothing is
 * read from the run before the client takes what was sent (backpressure), so
 * a slow client costs the server at most one chunk. With one write per event
 * `streamSSE` measured p50 22 ms for 50 clients (bench/serve.bench.ts).
 */
export function runEventStream(context: Context, events: AsyncIterable<StreamedEvent>, from: number): Response {
  const iterator = events[Symbol.asyncIterator]();
  let sequence = from;
  let pending: Promise<IteratorResult<StreamedEvent>> | null = null;
  let keepalive: ReturnType<typeof setInterval> | undefined;
  const next = () => (pending ??= iterator.next());
  const idle = Symbol("idle");
  const stop = () => {
    clearInterval(keepalive);
    void iterator.return?.(undefined);
  };
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      keepalive = openSseStream(controller);
    },
    async pull(controller) {
      let result = await next();
      pending = null;
      const parts: Buffer[] = [];
      let bytes = 0;
      let deadline: Promise<typeof idle> | null = null;
      for (;;) {
        if (result.done) {
          parts.push(Buffer.from(`event: end\ndata: ${JSON.stringify({ next: sequence })}\n\n`));
          controller.enqueue(Buffer.concat(parts));
          controller.close();
          stop();
          return;
        }
        const message = messageOf(result.value, sequence++);
        parts.push(message);
        bytes += message.length;
        if (bytes >= CHUNK_BYTES) break;
        // What is ready before the event loop turns joins this chunk; the rest waits for the next pull.
        deadline ??= new Promise<typeof idle>((resolve) => setImmediate(() => resolve(idle)));
        const ready = await Promise.race([next(), deadline]);
        if (ready === idle) break;
        pending = null;
        result = ready;
      }
      controller.enqueue(parts.length === 1 ? parts[0]! : Buffer.concat(parts, bytes));
    },
    cancel: stop,
  });
  return context.body(body, 200, { "content-type": "text/event-stream", "cache-control": "no-cache", "x-accel-buffering": "no" });
}

/**
 * Opens an SSE body: the client's reconnect delay (`retry`, {@link RETRY_MS})
 * and a comment every {@link KEEPALIVE_MS} so proxies keep the connection;
 * returns the keepalive timer, which stops itself once the stream is closed.
 */
function openSseStream(controller: ReadableStreamDefaultController<Uint8Array>): ReturnType<typeof setInterval> {
  const encoder = new TextEncoder();
  controller.enqueue(encoder.encode(`retry: ${RETRY_MS}\n\n`));
  const keepalive = setInterval(() => {
    try {
      controller.enqueue(encoder.encode(": keepalive\n\n"));
    } catch {
      clearInterval(keepalive);
    }
  }, KEEPALIVE_MS);
  return keepalive;
}

/**
 * A run's events as Server-Sent Events from its {@link SharedFrames} (a run
 * this server runs): the same messages as {@link runEventStream}, read from
 * the one frame log every client of the run shares. A pull takes what is
 * there from the client's position (a page slice when it is behind, the
 * newest frames when it is live), so a slow client holds nothing but its
 * position and the chunk the socket has not taken yet.
 */
export function sharedFrameStream(context: Context, frames: SharedFrames, from: number): Response {
  const encoder = new TextEncoder();
  let next = from;
  let keepalive: ReturnType<typeof setInterval> | undefined;
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      keepalive = openSseStream(controller);
    },
    async pull(controller) {
      for (;;) {
        const chunk = frames.read(next);
        if (chunk === "end") {
          controller.enqueue(encoder.encode(`event: end\ndata: ${JSON.stringify({ next: Math.max(next, frames.length) })}\n\n`));
          controller.close();
          clearInterval(keepalive);
          return;
        }
        if (chunk) {
          next += chunk.count;
          controller.enqueue(chunk.bytes);
          return;
        }
        await frames.wait();
      }
    },
    cancel() {
      clearInterval(keepalive);
    },
  });
  return context.body(body, 200, { "content-type": "text/event-stream", "cache-control": "no-cache", "x-accel-buffering": "no" });
}

/** The first sequence number to send: after `Last-Event-ID` when given, else `?from=`, else 0. */
export function startSequence(lastEventId: string | undefined, from: number | undefined): number {
  if (lastEventId === undefined) return from ?? 0;
  if (!/^\d+$/.test(lastEventId.trim())) {
    throw new HttpProblem(400, "Invalid request", `header.last-event-id: expected a sequence number (the id: of an event), got "${lastEventId}"`, {
      errors: [{ field: "header.last-event-id", message: "expected a sequence number" }],
    });
  }
  return Number(lastEventId.trim()) + 1;
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
 * nothing but its listeners and the messages of this turn of the event loop
 * not sent yet ({@link publishLater}).
 */
export class BoardStream {
  private readonly listeners = new Set<(message: SerialisedMessage) => void>();
  private readonly later = new Map<string, () => BoardMessage | null>();

  /** Sends `message` to every client now, its data serialised once for all of them. */
  publish(message: BoardMessage): void {
    if (this.listeners.size === 0) return;
    const serialised = { event: message.event, data: JSON.stringify(message.data) };
    for (const listener of this.listeners) listener(serialised);
  }

  /**
   * Sends `make()`'s message (null: nothing) once this turn of the event loop
   * is over; a second call with the same `key` before then replaces the
   * first. A run's record is read from its files at each step: a burst of
   * steps costs one read and one message, and with no client connected none
   * (a client that connects gets a fresh snapshot).
   */
  publishLater(key: string, make: () => BoardMessage | null): void {
    if (this.listeners.size === 0) return;
    if (this.later.size === 0) setImmediate(() => this.flush());
    this.later.set(key, make);
  }

  private flush(): void {
    const made = [...this.later.values()];
    this.later.clear();
    for (const make of made) {
      const message = make();
      if (message) this.publish(message);
    }
  }

  /** The SSE response for one client: `snapshot()` first, then every message published while it is connected. */
  respond(context: Context, snapshot: () => unknown): Response {
    return streamSSE(context, async (stream) => {
      const closed = closedSignal(stream);
      const queue: SerialisedMessage[] = [];
      let wake: (() => void) | null = null;
      const listener = (message: SerialisedMessage) => {
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
            await stream.writeSSE(message);
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

/** A board message with its data as JSON text. */
interface SerialisedMessage {
  event: string;
  data: string;
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
