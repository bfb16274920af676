import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { CloudEventLog } from "../../src/events/cloud-event-log.js";
import { cloudEventType, EVENT_CATALOGUE, readEvent, type RunEnvelope, type RunEventName } from "../../src/events/event-catalogue.js";
import { readEnvelopes, readRunEvents } from "../../src/events/event-log-reader.js";
import { ProgressView } from "../../src/cli/progress-view.js";
import { reportCounter } from "../../src/run/report-counter.js";
import { emptyUsage } from "../../src/model/messages.js";
import type { RunReport } from "../../src/run/run-report.js";
import { temporaryDirectory } from "../helpers/git-repository.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** docs/events.md's event sections: `### \`name\` vN` (several names for one table: `· \`other\` vN`) and the field column of their table. */
function documentedEvents(): Map<string, { version: number; fields: string[] }> {
  const documented = new Map<string, { version: number; fields: string[] }>();
  const text = readFileSync(join(ROOT, "docs/events.md"), "utf8");
  const section = text.slice(text.indexOf("\n## The events\n"));
  for (const block of section.split("\n### ").slice(1)) {
    const [heading, ...body] = block.split("\n");
    const fields = body.flatMap((line) => /^\| `([a-z_]+)` \|/.exec(line)?.[1] ?? []);
    for (const [, name, version] of heading!.matchAll(/`([a-z_]+\.[a-z_]+)` v(\d+)/g)) {
      expect(documented.has(name!), `docs/events.md documents ${name} twice`).toBe(false);
      documented.set(name!, { version: Number(version), fields });
    }
  }
  return documented;
}

function envelope(type: string, data: unknown, extra: Record<string, unknown> = {}): RunEnvelope {
  return { specversion: "1.0", id: "6f0c2a1e", source: "agent-runner://runs/r1", type, datacontenttype: "application/json", data, ...extra };
}

const TOOL_FINISHED = { agent_id: "main", step: 0, tool_call_id: "c1", name: "read_file", is_error: false, duration_ms: 4, result_preview: "hello" };

function captureStream(): { stream: NodeJS.WriteStream; text(): string } {
  let text = "";
  const stream = { isTTY: false, write: (chunk: string) => ((text += chunk), true) } as unknown as NodeJS.WriteStream;
  return { stream, text: () => text };
}

describe("event catalogue", () => {
  it("docs/events.md lists exactly the catalogue's events, with their versions and data fields", () => {
    const documented = documentedEvents();
    const catalogue = Object.entries(EVENT_CATALOGUE).map(([name, definition]) => [
      name,
      { version: definition.version, fields: Object.keys(definition.data.shape) },
    ]);
    expect(Object.fromEntries([...documented].sort(([a], [b]) => a.localeCompare(b)))).toEqual(
      Object.fromEntries(catalogue.sort(([a], [b]) => String(a).localeCompare(String(b)))),
    );
    expect(documented.size).toBeGreaterThan(40);
  });

  it("CloudEvents types come from the catalogue: dev.agent-runner.<name>.v<version>", () => {
    expect(cloudEventType("tool_call.finished")).toBe("dev.agent-runner.tool_call.finished.v1");
    for (const name of Object.keys(EVENT_CATALOGUE) as RunEventName[])
      expect(cloudEventType(name)).toBe(`dev.agent-runner.${name}.v${EVENT_CATALOGUE[name].version}`);
  });

  it("the log writes the envelope as before (CloudEvents 1.0 attributes, traceparent, runid) and reads back strictly", async () => {
    await using directory = temporaryDirectory();
    const path = join(directory.path, "events.jsonl");
    const log = new CloudEventLog(path, "r1", "4bf92f3577b34da6a3ce929d0e0e4736");
    log.emit({ type: "tool_call.finished", data: { ...TOOL_FINISHED, details: { path: "a.txt", bytes: 5 } } });
    log.emit({ type: "run.finished", data: { status: "succeeded", exit_code: 0, duration_ms: 12 } });
    log.close();
    const lines = readFileSync(path, "utf8")
      .trimEnd()
      .split("\n")
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(Object.keys(lines[0]!).sort()).toEqual(["data", "datacontenttype", "id", "runid", "source", "specversion", "time", "traceparent", "type"]);
    expect(lines[0]).toMatchObject({
      specversion: "1.0",
      source: "agent-runner://runs/r1",
      type: "dev.agent-runner.tool_call.finished.v1",
      datacontenttype: "application/json",
      runid: "r1",
    });
    expect(lines[0]!.traceparent).toMatch(/^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/);
    expect(readEnvelopes(path).map((read) => readEvent(read, { strict: true }))).toEqual([
      { kind: "event", version: 1, event: { type: "tool_call.finished", data: { ...TOOL_FINISHED, details: { path: "a.txt", bytes: 5 } } } },
      { kind: "event", version: 1, event: { type: "run.finished", data: { status: "succeeded", exit_code: 0, duration_ms: 12 } } },
    ]);
  });

  it("reads a field a newer runner added (kept in data), and refuses it when strict", () => {
    const newer = envelope("dev.agent-runner.tool_call.finished.v1", { ...TOOL_FINISHED, cpu_ms: 3 });
    expect(readEvent(newer)).toEqual({ kind: "event", version: 1, event: { type: "tool_call.finished", data: { ...TOOL_FINISHED, cpu_ms: 3 } } });
    expect(readEvent(newer, { strict: true })).toMatchObject({
      kind: "invalid",
      type: newer.type,
      reason: expect.stringMatching(/tool_call\.finished v1.*cpu_ms/s),
    });
  });

  it("keeps types it cannot read as unknown: another producer, an unknown name, another version", () => {
    expect(readEvent(envelope("com.example.build.done", {}))).toMatchObject({ kind: "unknown", type: "com.example.build.done" });
    expect(readEvent(envelope("dev.agent-runner.quota.exceeded.v1", {}))).toMatchObject({
      kind: "unknown",
      reason: expect.stringContaining('no event "quota.exceeded"'),
    });
    expect(readEvent(envelope("dev.agent-runner.tool_call.finished.v2", { anything: true }))).toMatchObject({
      kind: "unknown",
      reason: "this runner reads tool_call.finished v1, not v2",
    });
    // A name that is a property of every object is not an event.
    expect(readEvent(envelope("dev.agent-runner.constructor.v1", {}))).toMatchObject({ kind: "unknown" });
  });

  it("says which field is wrong, and never throws on a line that is not an envelope", () => {
    const bad = readEvent(
      envelope("dev.agent-runner.model_call.finished.v1", { agent_id: "main", step: "3", duration_ms: 1, usage: emptyUsage(), tool_calls: 0, content: null }),
    );
    expect(bad).toMatchObject({ kind: "invalid", type: "dev.agent-runner.model_call.finished.v1" });
    expect(bad.kind === "invalid" && bad.reason).toMatch(/step/);
    expect(readEvent(envelope("dev.agent-runner.model_call.finished.v1", undefined))).toMatchObject({ kind: "invalid" });
    for (const value of [null, "text", 42, [], { type: "dev.agent-runner.run.finished.v1" }, { specversion: "0.3", id: "x", source: "s", type: "t" }]) {
      expect(readEvent(value).kind).toBe("invalid");
    }
  });

  it("a resumed run's counters read the file through the catalogue: cut lines, unknown and invalid events are left out", async () => {
    await using directory = temporaryDirectory();
    const path = join(directory.path, "events.jsonl");
    const started = (step: number, data: Record<string, unknown> = {}) =>
      JSON.stringify(
        envelope("dev.agent-runner.model_call.started.v1", {
          agent_id: "main",
          step,
          messages: 3,
          estimated_tokens: 1000 * (step + 1),
          prefix_stable: step > 0,
          ...data,
        }),
      );
    writeFileSync(
      path,
      [
        started(0),
        JSON.stringify(envelope("dev.agent-runner.model_call.started.v2", { agent_id: "main", step: 1 })),
        started(1, { estimated_tokens: "many" }),
        JSON.stringify(envelope("com.example.other", {})),
        started(2),
        '{"specversion":"1.0","id":"cut',
      ].join("\n"),
    );
    // The replay keeps every envelope (also those this runner cannot read); the counters only what they can count.
    expect(readEnvelopes(path)).toHaveLength(5);
    const events = readRunEvents(path);
    expect(events.map((event) => event.type === "model_call.started" && event.data.step)).toEqual([0, 2]);
    const report = { context: { requests: 0, max_request_tokens: 0 }, prefix_stable_ratio: null, pricing: { prices: null } } as unknown as RunReport;
    const counter = reportCounter(report);
    for (const event of events) counter.emit(event);
    expect(report.context).toMatchObject({ requests: 2, max_request_tokens: 3000 });
  });

  it("the terminal view reads envelopes through the catalogue: one it cannot read is a line saying so, not a crash", () => {
    const { stream, text } = captureStream();
    const view = new ProgressView(stream);
    view.show(envelope("dev.agent-runner.verify.started.v1", { command: "npm test" }));
    // subagent.finished without `files`: the view's description of it would throw on the missing list.
    view.show(
      envelope("dev.agent-runner.subagent.finished.v1", { agent_id: "w1", status: "merged", steps: 2, verify_passed: true, merge: "merged", duration_ms: 5 }),
    );
    view.show(envelope("dev.agent-runner.sandbox.resized.v3", { sandbox_id: "s1" }));
    const lines = text().trimEnd().split("\n");
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/verify npm test$/);
    expect(lines[1]).toMatch(/event dev\.agent-runner\.subagent\.finished\.v1 not shown \(invalid\): data does not match subagent\.finished v1: .*files/);
    expect(lines[2]).toMatch(/event dev\.agent-runner\.sandbox\.resized\.v3 not shown \(unknown\)/);
  });
});
