import { jetstream, jetstreamManager, type Consumer, type JetStreamClient, type JetStreamManager } from "@nats-io/jetstream";
import { Objm, type ObjectStore } from "@nats-io/obj";
import type { NatsConnection } from "@nats-io/transport-node";
import { isTransient } from "../bus/nats-event-bus.js";
import { ConfigError } from "../errors.js";
import { cloudEventType, type RunEnvelope } from "../events/event-catalogue.js";
import type { RunReport } from "../run/run-report.js";

/**
 * One message of a run's events subject: the envelope with its JSON text as
 * published, or, for an envelope over 16 KiB, the worker's reference to the
 * run's `events.jsonl` object (stored when the run ends) with the envelope's
 * id and type. `sequence`: the envelope's place in the run's events (0-based,
 * as its events.jsonl line); `streamSequence`: the message's in the stream.
 */
export type PoolRunEvent =
  | { kind: "event"; sequence: number; streamSequence: number; envelope: RunEnvelope; line: string }
  | { kind: "reference"; sequence: number; streamSequence: number; reference: string; id: string | null; type: string | null };

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
    return new PoolRunEvents(jetstream(connection), manager, objects, pool);
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

  /** The worker's report.json of the run, once it stored it (null before: the worker stores it right after the run ends). */
  async report(runId: string): Promise<RunReport | null> {
    const bytes = await this.object(`run/${runId}/report.json`);
    return bytes ? (JSON.parse(Buffer.from(bytes).toString("utf8")) as RunReport) : null;
  }

  /**
   * The object a reference names (`run/<run-id>/events.jsonl`), as its
   * lines (one envelope each) in order; null while the worker has not stored it (the run goes
   * on) or after it expired. Only names under `run/` are read.
   */
  async storedEvents(reference: string): Promise<string[] | null> {
    if (!/^run\/[\w.-]+\/events\.jsonl$/.test(reference)) return null;
    const bytes = await this.object(reference);
    if (!bytes) return null;
    return Buffer.from(bytes)
      .toString("utf8")
      .split("\n")
      .filter((line) => line.trim() !== "");
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
      const parsed = JSON.parse(line) as RunEnvelope | { reference: string; id?: string; type?: string };
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
