/**
 * A run directory as a finished run leaves it, written by hand for report
 * tests: events.jsonl (CloudEvents envelopes of catalogue events, one second
 * apart) and patch.diff. The events' data are checked against the catalogue
 * here, so a test never feeds the reports an event a runner could not write.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { cloudEventType, readEvent, type RunEvent } from "../../src/events/event-catalogue.js";

export function writeRunFiles(runDirectory: string, events: RunEvent[], patch?: string): void {
  mkdirSync(runDirectory, { recursive: true });
  const start = Date.parse("2026-12-01T12:00:00.000Z");
  const lines = events.map((event, index) => {
    const envelope = {
      specversion: "1.0",
      id: `event-${index}`,
      source: "/agent-runner/test",
      type: cloudEventType(event.type),
      time: new Date(start + index * 1000).toISOString(),
      data: event.data,
    };
    const read = readEvent(envelope, { strict: true });
    if (read.kind !== "event") throw new Error(`writeRunFiles: ${event.type} is off the catalogue: ${"reason" in read ? read.reason : ""}`);
    return JSON.stringify(envelope);
  });
  writeFileSync(join(runDirectory, "events.jsonl"), `${lines.join("\n")}\n`);
  if (patch !== undefined) writeFileSync(join(runDirectory, "patch.diff"), patch);
}
