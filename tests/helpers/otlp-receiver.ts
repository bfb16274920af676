/**
 * An in-process OTLP/HTTP receiver for tests: the OpenTelemetry exporter's
 * JSON encoding POSTed to /v1/traces on 127.0.0.1 (no collector can run here).
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";

/** One span as OTLP/JSON carries it, attributes flattened to their values. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  events: { name: string; attributes: Record<string, unknown> }[];
  status: { code?: number };
}

type OtlpAttribute = { key: string; value: Record<string, unknown> };

function flatten(attributes: OtlpAttribute[] | undefined): Record<string, unknown> {
  return Object.fromEntries((attributes ?? []).map(({ key, value }) => [key, Object.values(value)[0]]));
}

/** An OTLP/HTTP receiver on 127.0.0.1 that keeps every span POSTed to /v1/traces (JSON bodies), with the headers it came with. */
export async function otlpReceiver(): Promise<{ url: string; spans: ReceivedSpan[]; headers: Record<string, unknown>[]; server: Server }> {
  const spans: ReceivedSpan[] = [];
  const headers: Record<string, unknown>[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      headers.push({ ...request.headers, path: request.url });
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as {
        resourceSpans: {
          scopeSpans: {
            spans: (Omit<ReceivedSpan, "attributes" | "events"> & { attributes: OtlpAttribute[]; events?: { name: string; attributes: OtlpAttribute[] }[] })[];
          }[];
        }[];
      };
      for (const resource of body.resourceSpans) {
        for (const scope of resource.scopeSpans) {
          for (const span of scope.spans) {
            spans.push({
              ...span,
              attributes: flatten(span.attributes),
              events: (span.events ?? []).map((event) => ({ name: event.name, attributes: flatten(event.attributes) })),
            });
          }
        }
      }
      response.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans, headers, server };
}
