import { randomBytes, randomUUID } from "node:crypto";
import { CloudEvent } from "cloudevents";
import type { Redactor } from "../redaction/redactor.js";
import { AppendOnlyFile } from "./append-only-file.js";
import { cloudEventType } from "./event-catalogue.js";
import type { EventSink, RunEvent } from "./run-events.js";

export interface CloudEventLogOptions {
  /** Redacts secrets in every event's data before it is written or handed to {@link CloudEventLog.onEnvelope}. */
  redactor?: Redactor | null;
}

/** W3C trace context for a run: one trace id, a span id per event. */
export function newTraceId(): string {
  return randomBytes(16).toString("hex");
}

/**
 * Wraps run events in CloudEvents 1.0 envelopes (type `dev.agent-runner.<event>.v<N>`
 * with N from the event catalogue, `traceparent` from the W3C Trace Context /
 * CloudEvents distributed-tracing extension; docs/events.md) and appends
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

  constructor(
    path: string,
    private readonly runId: string,
    private readonly traceId: string,
    options: CloudEventLogOptions = {},
  ) {
    this.redactor = options.redactor ?? null;
    this.file = new AppendOnlyFile(path);
  }

  emit(event: RunEvent): void {
    const envelope = new CloudEvent({
      id: randomUUID(),
      source: `agent-runner://runs/${this.runId}`,
      type: cloudEventType(event.type),
      datacontenttype: "application/json",
      time: new Date().toISOString(),
      traceparent: `00-${this.traceId}-${randomBytes(8).toString("hex")}-01`,
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
