import { randomBytes, randomUUID } from "node:crypto";
import { CloudEvent } from "cloudevents";
import type { Redactor } from "../redaction/redactor.js";
import { AppendOnlyFile } from "./append-only-file.js";
import { cloudEventType } from "./event-catalogue.js";
import type { EventSink, RunEvent } from "./run-events.js";
import { runSpanId, spanIdOfRunEvent, traceparentOf } from "./trace-context.js";

export interface CloudEventLogOptions {
  /** Redacts secrets in every event's data before it is written or handed to {@link CloudEventLog.onEnvelope}. */
  redactor?: Redactor | null;
  /** The span the run's events hang under (`RunEmbedding.trace.parentSpanId`); default a span of the run's own. */
  parentSpanId?: string | null;
}

/** A new W3C trace id for a run: 32 lower-case hex digits. */
export function newTraceId(): string {
  return randomBytes(16).toString("hex");
}

/**
 * Wraps run events in CloudEvents 1.0 envelopes (type `dev.agent-runner.<event>.v<N>`
 * with N from the event catalogue, `traceparent` from the W3C Trace Context /
 * CloudEvents distributed-tracing extension: the span of the model or tool
 * call the event belongs to, else the run's, see trace-context.ts;
 * docs/events.md) and appends
 * them, one JSON object per line, to events.jsonl.
 * Each line is written with a single write() so a crash never leaves half a line.
 * With a redactor, event data is redacted (every string, at any depth) before
 * the envelope is built, so neither the file nor `onEnvelope` sees a secret.
 */
export class CloudEventLog implements EventSink {
  private readonly file: AppendOnlyFile;
  /** Optional extra consumer of the envelopes (e.g. `--json` on stdout). */
  onEnvelope: ((line: string) => void) | null = null;

  private readonly redactor: Redactor | null;
  private readonly runSpan: string;

  constructor(
    path: string,
    private readonly runId: string,
    private readonly traceId: string,
    options: CloudEventLogOptions = {},
  ) {
    this.redactor = options.redactor ?? null;
    this.runSpan = runSpanId(runId, options.parentSpanId ?? null);
    this.file = new AppendOnlyFile(path);
  }

  emit(event: RunEvent): void {
    const envelope = new CloudEvent({
      id: randomUUID(),
      source: `agent-runner://runs/${this.runId}`,
      type: cloudEventType(event.type),
      datacontenttype: "application/json",
      time: new Date().toISOString(),
      traceparent: traceparentOf(this.traceId, spanIdOfRunEvent(this.runSpan, event)),
      runid: this.runId,
      data: this.redactor ? this.redactor.redactDeep(event.data) : event.data,
    });
    const line = JSON.stringify(envelope.toJSON());
    this.file.appendLine(line);
    this.onEnvelope?.(`${line}\n`);
  }

  /** Flushes to disk (turn boundaries, the end of the run). */
  sync(): void {
    this.file.sync();
  }

  close(): void {
    this.file.close();
  }
}
