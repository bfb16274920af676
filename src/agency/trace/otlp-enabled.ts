/**
 * Whether the standard variables ask for an OTLP export of traces
 * (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set,
 * https://opentelemetry.io/docs/specs/otel/protocol/exporter/). A module of
 * its own so callers load the OpenTelemetry packages (otlp-export.ts) only
 * when it is true: a CLI start or a library import without them pays nothing.
 */
export function otlpTracesEnabled(environment: NodeJS.ProcessEnv): boolean {
  return Boolean(environment.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() || environment.OTEL_EXPORTER_OTLP_ENDPOINT?.trim());
}
