import { jetstream, jetstreamManager, type Consumer, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import { Kvm, type KV } from "@nats-io/kv";
import { Objm, type ObjectStore } from "@nats-io/obj";
import type { NatsConnection } from "@nats-io/transport-node";
import { isTransient } from "../bus/nats-event-bus.js";
import { ConfigError } from "../errors.js";
import { cloudEventType, type RunEnvelope } from "../events/event-catalogue.js";
import type { RunReport } from "../run/run-report.js";
import type { Lease, LeaseAttempt } from "./work-queue.js";

/**
 * One message of a run's events subject: the envelope with its JSON text as
 * published, or, for an envelope over 16 KiB, the worker's reference to the
 * run's `events.jsonl` object (stored when the run ends) with the envelope's
 * id and type. `sequence`: the envelope's place in the run's events (0-based,
 * as its events.jsonl line); `streamSequence`: the message's in the stream.
 */
export type PoolRunEvent =
  | { kind: "event"; sequence: number; streamSequence: number; envelope: RunEnvelope; line: string }
  | { kind: "reference"; sequence: number; streamSequence: number; reference: string; id: string | null; type: string | null }
  | { kind: "malformed"; sequence: number; streamSequence: number; note: string };

/**
 * Most bytes of a run's stored events.jsonl that `runner logs` reads from the object store (it holds the object in
 * memory): 64 MiB, many times a long run's events (their data is bounded: tool outputs go in as excerpts). A choice
 * of this project; a larger object is left out with a note, and the run's copied records have it.
 */
export const MAX_STORED_EVENTS_BYTES = 64 * 1024 * 1024;

/** A run's stored events.jsonl: its lines; or none, with its size when it is over the cap (null: not stored, or expired). */
export type StoredRunEvents = { lines: string[] } | { lines: null; bytes: number | null };

/**
 * Reads the events stream `RUNNER_EVENTS_<pool>` (subject
 * `runner.<pool>.events.<run-id>`, written by src/worker/task-worker.ts) and
 * the run records of the pool's object store (`run/<run-id>/…`) from a
 * process that neither runs nor submits: `runner logs` on the submitter's
 * machine. Unlike `WorkQueue.open` it creates nothing: a pool name with a typo
 * is an error, not a new pool.
 */
export class PoolRunEvents {
  private constructor(
    private readonly client: JetStreamClient,
    private readonly manager: JetStreamManager,
    private readonly objects: ObjectStore | null,
    private readonly keyValue: KV | null,
    readonly pool: string,
  ) {}

  get stream(): string {
    return `RUNNER_EVENTS_${this.pool}`;
  }

  subject(runId: string): string {
    return `runner.${this.pool}.events.${runId}`;
  }

  /**
   * Opens pool `pool` on `connection`. Throws ConfigError naming the pool and
   * `servers` when the pool has no events stream there (no worker or
   * submitter ever used it, or it was deleted).
   */
  static async open(connection: NatsConnection, pool: string, servers: string[]): Promise<PoolRunEvents> {
    const manager = await jetstreamManager(connection);
    const stream = `RUNNER_EVENTS_${pool}`;
    await manager.streams.info(stream).catch((error: unknown) => {
      if (isTransient(error)) throw error;
      throw new ConfigError(`pool ${pool}: no stream ${stream} at ${servers.join(",")} (check --pool; a worker or submitter of the pool creates it)`);
    });
    // The object store is missing only when the pool was half deleted: events can still be followed.
    const objects = await new Objm(connection).open(`runner_${pool}`).catch(() => null);
    const keyValue = await new Kvm(connection).open(`runner_${pool}`).catch(() => null);
    return new PoolRunEvents(jetstream(connection), manager, objects, keyValue, pool);
  }

  /** The run ids with events in the stream that are `prefix` or start with it (the stream keeps 24 h). */
  async runIds(prefix: string): Promise<string[]> {
    const base = `runner.${this.pool}.events.`;
    const info = await this.manager.streams.info(this.stream, { subjects_filter: `${base}>` });
    return Object.keys(info.state.subjects ?? {})
      .map((subject) => subject.slice(base.length))
      .filter((runId) => runId.startsWith(prefix));
  }

  /** The stream sequence of the run's latest message; null when the stream holds none of it. */
  async lastStreamSequence(runId: string): Promise<number | null> {
    const message = await this.manager.streams.getMessage(this.stream, { last_by_subj: this.subject(runId) }).catch(() => null);
    return message?.seq ?? null;
  }

  /**
   * The run's messages from the first, live, in order; ends after
   * `run.finished`, or when `signal` aborts. One consumer of the stream
   * filtered on the run's subject (one filter subject: nats-server 2.9).
   */
  follow(runId: string, signal?: AbortSignal): Promise<AsyncIterable<PoolRunEvent>> {
    return followRunSubject(this.client, this.stream, this.subject(runId), signal);
  }

  /** The type of the run's latest message on the stream (a reference's too); null when there is none. */
  async lastEventType(runId: string): Promise<string | null> {
    const message = await this.manager.streams.getMessage(this.stream, { last_by_subj: this.subject(runId) }).catch(() => null);
    return message ? ((message.json<{ type?: unknown }>().type as string | undefined) ?? null) : null;
  }

  /**
   * Resolves once the pool's leases say run `runId` will not go on: its
   * delivery got a reason (its worker stopped answering and another took the
   * task, it was handed back, or the worker was stopped), with that reason,
   * the worker, and the task's later run once it has one (or null when every
   * later delivery ended without one); null when `signal`
   * aborts first or the pool has no leases to read. One watch of
   * `lease.>` (the latest value of each key, then changes).
   */
  async whenAbandoned(runId: string, signal: AbortSignal): Promise<{ worker: string; reason: string; next: LeaseAttempt | null } | null> {
    if (!this.keyValue || signal.aborted) return null;
    const watcher = await this.keyValue.watch({ key: "lease.>" });
    const stop = () => watcher.stop();
    signal.addEventListener("abort", stop, { once: true });
    try {
      for await (const entry of watcher) {
        if (entry.operation !== "PUT") continue;
        const attempts = entry.json<Lease>().attempts ?? [];
        const index = attempts.findIndex((attempt) => attempt.run_id === runId);
        const attempt = attempts[index];
        if (!attempt?.reason) continue;
        const later = attempts.slice(index + 1);
        const next = later.findLast((delivery) => delivery.run_id) ?? null;
        // A later delivery still making its run: its run id comes with the next change of the lease.
        if (!next && later.some((delivery) => delivery.reason === null)) continue;
        return { worker: attempt.worker, reason: attempt.reason, next };
      }
      return null;
    } finally {
      signal.removeEventListener("abort", stop);
      stop();
    }
  }

  /** The worker's report.json of the run, once it stored it (null before: the worker stores it right after the run ends). */
  async report(runId: string): Promise<RunReport | null> {
    const bytes = await this.object(`run/${runId}/report.json`);
    return bytes ? (JSON.parse(Buffer.from(bytes).toString("utf8")) as RunReport) : null;
  }

  /**
   * The object a reference names (`run/<run-id>/events.jsonl`), as its
   * lines (one envelope each) in order; none while the worker has not stored it (the run goes
   * on), after it expired, or when it is over `maxBytes` (default {@link MAX_STORED_EVENTS_BYTES}:
   * then its size says so, and it is not read). Only names under `run/` are read.
   */
  async storedEvents(reference: string, maxBytes = MAX_STORED_EVENTS_BYTES): Promise<StoredRunEvents> {
    if (!/^run\/[\w.-]+\/events\.jsonl$/.test(reference) || !this.objects) return { lines: null, bytes: null };
    const info = await this.objects.info(reference);
    if (!info || info.deleted) return { lines: null, bytes: null };
    if (info.size > maxBytes) return { lines: null, bytes: info.size };
    const bytes = await this.objects.getBlob(reference);
    if (!bytes) return { lines: null, bytes: null };
    return {
      lines: Buffer.from(bytes)
        .toString("utf8")
        .split("\n")
        .filter((line) => line.trim() !== ""),
    };
  }

  private async object(name: string): Promise<Uint8Array | null> {
    if (!this.objects) return null;
    const info = await this.objects.info(name);
    if (!info || info.deleted) return null;
    return this.objects.getBlob(name);
  }
}

/**
 * The messages of `subject` in `stream` as {@link PoolRunEvent}s, from the
 * first, live; ends after `run.finished` or when `signal` aborts. What the
 * submitter's `RunHandle.events()` of a remote run and `runner logs` read.
 * Rejects (before any message) when JetStream does not hand out the consumer.
 */
export async function followRunSubject(client: JetStreamClient, stream: string, subject: string, signal?: AbortSignal): Promise<AsyncIterable<PoolRunEvent>> {
  const consumer = await client.consumers.get(stream, { filter_subjects: subject });
  return readRunMessages(consumer, signal);
}

async function* readRunMessages(consumer: Consumer, signal?: AbortSignal): AsyncIterable<PoolRunEvent> {
  const messages = await consumer.consume();
  const stop = () => void messages.close();
  if (signal?.aborted) stop();
  signal?.addEventListener("abort", stop, { once: true });
  try {
    let sequence = 0;
    for await (const message of messages) {
      const line = message.string();
      const parsed = parseObject(line) as RunEnvelope | { reference: string; id?: string; type?: string } | null;
      if (parsed === null) {
        // Whoever holds the pool's credentials can publish here: one bad message is left out, not the end of the reading.
        const note = `message ${message.seq} of ${message.subject} (${Buffer.byteLength(line)} bytes) is not a JSON object: skipped`;
        yield { kind: "malformed", sequence: sequence++, streamSequence: message.seq, note };
        continue;
      }
      if ("reference" in parsed && typeof parsed.reference === "string") {
        yield {
          kind: "reference",
          sequence: sequence++,
          streamSequence: message.seq,
          reference: parsed.reference,
          id: parsed.id ?? null,
          type: parsed.type ?? null,
        };
        if (parsed.type === cloudEventType("run.finished")) break;
        continue;
      }
      const envelope = parsed as RunEnvelope;
      yield { kind: "event", sequence: sequence++, streamSequence: message.seq, envelope, line };
      if (envelope.type === cloudEventType("run.finished")) break;
    }
  } finally {
    signal?.removeEventListener("abort", stop);
    stop();
  }
}

/** `text` parsed when it is a JSON object; null for anything else (not JSON, an array, a number). */
function parseObject(text: string): object | null {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value) ? value : null;
  } catch {
    return null;
  }
}
