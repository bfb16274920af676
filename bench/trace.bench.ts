/**
 * What issue 22's one trace (item 8) costs, no Docker:
 *
 * - `spans`: the span id of 100 000 run events, derived from the call it
 *   belongs to (sha256 of names, src/events/trace-context.ts) against the
 *   random span id every event had before (8 random bytes as hex);
 * - `emit`: 10 000 run events written to events.jsonl by CloudEventLog (the
 *   whole write path, with its derived span ids), to put the span id's
 *   share in proportion;
 * - `tree`: `runner agency show`'s tree of an agency of `--invocations`
 *   invocations of 10 model calls and 10 tool calls each (80 run events an
 *   invocation) built from the records in memory, and drawn as text;
 *   baseline: only reading the same run events (readEvent of every envelope).
 *
 *   npx tsx bench/trace.bench.ts [--rounds=20] [--invocations=200]
 */
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AgencyRecord, InvocationRecord } from "../src/agency/agency-directory.js";
import { invocationSpanId, workflowSpanId } from "../src/agency/agency-event.js";
import { buildAgencyTrace } from "../src/agency/trace/agency-trace.js";
import { traceText } from "../src/agency/trace/trace-text.js";
import type { StoredEvent } from "../src/bus/event-bus.js";
import { CloudEventLog } from "../src/events/cloud-event-log.js";
import { readEvent, type RunEnvelope } from "../src/events/event-catalogue.js";
import type { RunEvent } from "../src/events/run-events.js";
import { spanIdOfRunEvent, traceparentOf } from "../src/events/trace-context.js";
import { positiveOption } from "./lib/options.js";
import { interleave, printTable } from "./lib/stats.js";

const rounds = positiveOption("rounds", 20);
const invocationCount = positiveOption("invocations", 200);
const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
const usage = { prompt_tokens: 1200, completion_tokens: 80, cached_tokens: 0 };

/** The 80 run events of one invocation: 10 model calls, each followed by one tool call. */
function invocationEvents(): RunEvent[] {
  const events: RunEvent[] = [];
  for (let step = 0; step < 10; step += 1) {
    const id = `call_${step}_0`;
    events.push(
      { type: "model_call.started", data: { agent_id: "main", step, messages: 2 * step + 1, estimated_tokens: 1200, prefix_stable: true } },
      { type: "model_call.finished", data: { agent_id: "main", step, duration_ms: 900, usage, cost_usd: 0.001, tool_calls: 1, content: null } },
      { type: "tool_call.started", data: { agent_id: "main", step, tool_call_id: id, name: "read_file", arguments: '{"path":"src/a.ts"}' } },
      {
        type: "tool_call.finished",
        data: { agent_id: "main", step, tool_call_id: id, name: "read_file", is_error: false, duration_ms: 3, result_preview: "export const a = 1;" },
      },
      { type: "context.cleared", data: { agent_id: "main", step, cleared: 0, kept: 2, tokens_before: 1200, tokens_after: 1200 } },
      { type: "context.repaired", data: { agent_id: "main", step, repairs: [] } },
      { type: "context.compaction_failed", data: { agent_id: "main", step, error: "none" } },
      { type: "skills.loaded", data: { skills: [], shadowed: [], problems: [] } },
    );
  }
  return events as RunEvent[];
}

const one = invocationEvents();
const runSpan = "00f067aa0ba902b7";
const spanRows = await interleave(
  {
    "random (before)": async () => {
      for (let index = 0; index < 100_000; index += 1) randomBytes(8).toString("hex");
    },
    "derived (now)": async () => {
      for (let index = 0; index < 100_000; index += 1) spanIdOfRunEvent(runSpan, one[index % one.length]!);
    },
  },
  rounds,
);
printTable("span id of 100 000 run events", [
  { name: "random (before)", samples: spanRows["random (before)"]! },
  { name: "derived (now)", samples: spanRows["derived (now)"]!, baseline: "random (before)" },
]);

const directory = mkdtempSync(join(tmpdir(), "trace-bench-"));
let file = 0;
const emitRows = await interleave(
  {
    "CloudEventLog.emit x10 000": async () => {
      const log = new CloudEventLog(join(directory, `events-${file++}.jsonl`), "r1", traceId, { parentSpanId: runSpan });
      for (let index = 0; index < 10_000; index += 1) log.emit(one[index % one.length]!);
      log.close();
    },
  },
  rounds,
);
rmSync(directory, { recursive: true, force: true });
printTable("write 10 000 run events (events.jsonl)", [{ name: "CloudEventLog.emit x10 000", samples: emitRows["CloudEventLog.emit x10 000"]! }]);

// An agency of `invocationCount` invocations in a chain: each triggered by the event the one before emitted.
const started = Date.UTC(2026, 0, 1);
const record = {
  agency_id: "a1",
  trace_id: traceId,
  branch: "agency/a1",
  created_at: new Date(started).toISOString(),
  definition: { name: "bench", goal: "done", agents: [{ name: "coder", model: { provider: "scripted" } }] },
} as unknown as AgencyRecord;
const events: StoredEvent[] = [];
const invocations: InvocationRecord[] = [];
const runs = new Map<string, RunEnvelope[]>();
for (let index = 0; index < invocationCount; index += 1) {
  const invocationId = `coder-${index}`;
  const span = invocationSpanId(invocationId);
  const time = (offset: number) => new Date(started + index * 100_000 + offset).toISOString();
  events.push({
    sequence: index,
    event: {
      specversion: "1.0",
      id: `e${index}`,
      source: "agent-runner://agencies/a1/agents/coder",
      type: "task.ready",
      time: time(0),
      datacontenttype: "application/json",
      traceparent: traceparentOf(traceId, index === 0 ? workflowSpanId("a1") : invocationSpanId(`coder-${index - 1}`)),
      correlationid: "a1",
      hops: index,
      ...(index === 0 ? {} : { causationid: `e${index - 1}` }),
    },
  });
  invocations.push({
    invocation_id: invocationId,
    agent: "coder",
    event_id: `e${index}`,
    event_type: "task.ready",
    sequence: index,
    run_id: `r${index}`,
    worker: null,
    status: "succeeded",
    reason: "verified",
    cost_usd: 0.01,
    duration_ms: 90_000,
    commit: null,
    merged: true,
    output: null,
  });
  runs.set(
    `r${index}`,
    one.map((event, position) => ({
      specversion: "1.0",
      id: `r${index}-${position}`,
      source: `agent-runner://runs/r${index}`,
      type: `dev.agent-runner.${event.type}.v1`,
      time: time(100 + position * 1000),
      traceparent: traceparentOf(traceId, spanIdOfRunEvent(span, event)),
      data: event.data,
    })),
  );
}
const runEvents = [...runs.values()].reduce((sum, lines) => sum + lines.length, 0);
const input = { record, events, invocations, runEnvelopes: (runId: string) => runs.get(runId) ?? [] };
const treeRows = await interleave(
  {
    "read run events only": async () => {
      for (const lines of runs.values()) for (const envelope of lines) readEvent(envelope);
    },
    "build the tree": async () => buildAgencyTrace(input),
    "build and draw as text": async () => traceText(buildAgencyTrace(input)),
  },
  rounds,
);
printTable(`agency show's tree: ${invocationCount} invocations, ${runEvents} run events`, [
  { name: "read run events only", samples: treeRows["read run events only"]! },
  { name: "build the tree", samples: treeRows["build the tree"]!, baseline: "read run events only" },
  { name: "build and draw as text", samples: treeRows["build and draw as text"]!, baseline: "read run events only" },
]);
