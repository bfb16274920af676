/**
 * One trace per agency (issue 22 item 8): every event, run and tool call in
 * the agency's trace, span ids that form event → invocation → its run's
 * steps → next event, and the tree `runner agency show` draws from them.
 */
import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { eventsFile, fakeRunner, fakeShell, toolCall, writeScriptedTask } from "../helpers/fake-runner.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { fakeAgencyRunner, writeAgency } from "../helpers/agency-fixture.js";
import { busLog, envelopes, pipelineAgents, shapeOf } from "../helpers/agency-trace-fixture.js";
import { AgencyDirectory } from "../../src/agency/agency-directory.js";
import { invocationSpanId, workflowSpanId } from "../../src/agency/agency-event.js";
import { buildAgencyTrace, readAgencyTrace, type TraceNode } from "../../src/agency/trace/agency-trace.js";
import { traceText } from "../../src/agency/trace/trace-text.js";
import type { AgencyEvent, StoredEvent } from "../../src/bus/event-bus.js";
import { modelCallSpanId, parseTraceparent, runSpanId, spanIdFor, toolCallSpanId, traceparentOf } from "../../src/events/trace-context.js";

const PIPELINE_SHAPE = [
  "workflow test-agency",
  "  event task.ready",
  "    invocation coder",
  "      chat scripted",
  "      tool write_file",
  "      chat scripted",
  "      tool emit_event",
  "        event code.ready",
  "          invocation reviewer",
  "            chat scripted",
  "            tool read_file",
  "            chat scripted",
  "            tool emit_event",
  "              event review.approved",
  "            chat scripted",
  "      chat scripted",
];

describe("an agency's one trace", () => {
  it("puts every event, run and tool call in the agency's trace, with span ids that chain event → invocation → tool call → next event", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeAgencyRunner({ exec: fakeShell() });
    const { agencyFile } = writeAgency(directory.path, { files: { "calc.txt": "wrong\n" }, agents: pipelineAgents() });
    const agency = await fake.runner.agency(agencyFile);
    const report = await agency.result;
    expect(report.status).toBe("succeeded");
    const record = AgencyDirectory.existing(fake.home, agency.id).readRecord();
    const traceId = record.trace_id;

    const log = await busLog(agency.directory);
    for (const { event } of log) expect(parseTraceparent(event.traceparent)?.traceId).toBe(traceId);
    const [coder, reviewer] = report.invocations;
    for (const invocation of [coder!, reviewer!]) {
      const span = invocationSpanId(invocation.invocation_id);
      const runReport = JSON.parse(readFileSync(join(fake.home, "runs", invocation.run_id, "report.json"), "utf8"));
      expect(runReport.trace_id).toBe(traceId);
      // Recorded, so a resume keeps the trace even when the caller gives none.
      expect(JSON.parse(readFileSync(join(fake.home, "runs", invocation.run_id, "run.json"), "utf8"))).toMatchObject({
        trace_id: traceId,
        parent_span_id: span,
      });
      const lines = envelopes(fake.home, invocation.run_id);
      for (const line of lines) expect(parseTraceparent(line.traceparent)?.traceId).toBe(traceId);
      // Run-level events carry the invocation's span; a tool call's events its own span, the same on started and finished.
      expect(parseTraceparent(lines.find((line) => line.type.includes("run.started"))!.traceparent)?.spanId).toBe(span);
      const emit = lines.filter((line) => line.type.includes("tool_call.") && (line.data as { name?: string }).name === "emit_event");
      expect(emit.length).toBe(2);
      const callId = (emit[0]!.data as { tool_call_id: string }).tool_call_id;
      expect(emit.map((line) => parseTraceparent(line.traceparent)?.spanId)).toEqual([toolCallSpanId(span, callId), toolCallSpanId(span, callId)]);
      // The event the call emitted names that call's span as its producer.
      const emitted = log.find((stored) => stored.event.source.endsWith(`/agents/${invocation.agent}`))!.event;
      expect(parseTraceparent(emitted.traceparent)?.spanId).toBe(toolCallSpanId(span, callId));
      // The orchestrator's report of the invocation is in the invocation's span.
      const finished = log.find((stored) => stored.event.type === "agency.invocation.finished" && stored.event.id.startsWith(invocation.invocation_id))!.event;
      expect(parseTraceparent(finished.traceparent)?.spanId).toBe(span);
    }
    // Start events and lifecycle changes are in the agency's own span.
    expect(parseTraceparent(log[0]!.event.traceparent)?.spanId).toBe(workflowSpanId(agency.id));

    const tree = await readAgencyTrace(AgencyDirectory.existing(fake.home, agency.id), fake.home);
    expect(shapeOf(tree)).toEqual(PIPELINE_SHAPE);
    const invocations = tree.children[0]!.children;
    expect(invocations[0]).toMatchObject({ kind: "invocation", status: "succeeded", spanId: invocationSpanId(coder!.invocation_id) });
    expect(invocations[0]!.attributes).toMatchObject({ "run.id": coder!.run_id, "event.type": "task.ready" });
    // Times nest: each step inside its invocation; the workflow spans them all.
    const coderNode = invocations[0]!;
    for (const step of coderNode.children) {
      expect(step.startMs).toBeGreaterThanOrEqual(coderNode.startMs);
      expect(step.endMs).not.toBeNull();
      expect(step.endMs!).toBeLessThanOrEqual(coderNode.endMs!);
    }
    expect(tree.endMs!).toBeGreaterThanOrEqual(coderNode.endMs!);
    // No message content unless asked for.
    const all = (node: TraceNode): TraceNode[] => [node, ...node.children.flatMap(all)];
    expect(all(tree).some((node) => node.content !== undefined)).toBe(false);
    const withContent = await readAgencyTrace(AgencyDirectory.existing(fake.home, agency.id), fake.home, { includeContent: true });
    expect(all(withContent).find((node) => node.name === "write_file")!.content).toMatchObject({ arguments: expect.stringContaining("calc.txt") });

    const text = traceText(tree);
    expect(text.split("\n")[0]).toMatch(/^agency test-agency \d+\.\ds/);
    expect(text).toMatch(/└─ invoke reviewer \+\d+\.\ds \d+\.\ds succeeded run \S+/);
    expect(text).toMatch(/tool emit_event \+\d+\.\ds \d+\.\ds\n/);
    expect(text).not.toContain("agency.agent.state");
  });
});

/** A stored event of a synthetic log. */
function stored(sequence: number, fields: Partial<AgencyEvent> & { type: string; id: string; span: string }): StoredEvent {
  const { span, ...rest } = fields;
  return {
    sequence,
    event: {
      specversion: "1.0",
      source: "agent-runner://agencies/a1/orchestrator",
      time: new Date(Date.UTC(2026, 0, 1, 0, 0, sequence)).toISOString(),
      datacontenttype: "application/json",
      traceparent: `00-${"a".repeat(32)}-${span}-01`,
      correlationid: "a1",
      hops: 0,
      ...rest,
    },
  };
}

describe("the trace tree of records", () => {
  const record = {
    agency_id: "a1",
    trace_id: "a".repeat(32),
    branch: "agency/a1",
    created_at: new Date(Date.UTC(2026, 0, 1)).toISOString(),
    definition: { name: "team", goal: "done", agents: [] },
  } as unknown as Parameters<typeof buildAgencyTrace>[0]["record"];
  const root = workflowSpanId("a1");

  it("draws every agency.* event that is not lifecycle noise as a marker, under its cause or the span that produced it", () => {
    const invocation = {
      invocation_id: "coder-1",
      agent: "coder",
      event_id: "e0",
      event_type: "task.ready",
      sequence: 0,
      run_id: "r1",
      worker: null,
      status: "failed",
      reason: "output_invalid",
      cost_usd: 0.25,
      duration_ms: 1000,
      commit: null,
      merged: null,
      output: null,
    };
    const log = [
      stored(0, { type: "task.ready", id: "e0", span: root, source: "agent-runner://agencies/a1/outside" }),
      stored(1, { type: "agency.agent.state", id: "s1", span: root, data: { agent: "coder", state: "idle" } }),
      stored(2, { type: "agency.rate_limited", id: "g1", span: invocationSpanId("coder-1"), causationid: "e0", data: { bucket: "tool_calls" } }),
      stored(3, { type: "agency.invocation.finished", id: "f1", span: invocationSpanId("coder-1"), causationid: "e0" }),
      stored(4, { type: "agency.chain.stopped", id: "g2", span: root, causationid: "e0", data: { reason: "max_hops", hops: 8 } }),
      stored(5, { type: "agency.breaker.opened", id: "g3", span: root, data: { agent: "coder" } }),
    ];
    const tree = buildAgencyTrace({ record, events: log, invocations: [invocation], runEnvelopes: () => [] });
    expect(shapeOf(tree)).toEqual([
      "workflow team",
      "  event task.ready",
      "    invocation coder",
      "      marker agency.rate_limited",
      "    marker agency.chain.stopped",
      "  marker agency.breaker.opened",
    ]);
    expect(tree.costUsd).toBe(0.25);
    const text = traceText(tree);
    expect(text).toContain('!! agency.chain.stopped #4 +4.0s {"reason":"max_hops","hops":8}');
    expect(text).toMatch(/invoke coder \+0\.0s 0\.0s \$0\.2500 failed run r1 \(output_invalid\)/);
  });

  it("writes what an agent chose (names, subjects) terminal-safe", () => {
    const log = [stored(0, { type: "task.ready", id: "e0", span: root, subject: "\u001b[31mred\u001b[0m" })];
    const text = traceText(buildAgencyTrace({ record, events: log, invocations: [], runEnvelopes: () => [] }));
    expect(text).not.toContain("\u001b");
    expect(text).toContain("event task.ready #0");
  });
});

describe("a run given a trace (RunEmbedding.trace)", () => {
  const trace = { traceId: "4bf92f3577b34da6a3ce929d0e0e4736", parentSpanId: "00f067aa0ba902b7" };

  it("writes every event in that trace under that span, and a resume without the embedding keeps both", async () => {
    await using directory = temporaryDirectory();
    let arrived: () => void = () => undefined;
    const waiting = new Promise<void>((resolve) => (arrived = resolve));
    const shell = fakeShell();
    await using fake = await fakeRunner({
      exec: async (call) => {
        if (call.request.command !== "hold") return shell(call);
        arrived();
        return new Promise((_resolve, reject) => call.signal.addEventListener("abort", () => reject(call.signal.reason), { once: true }));
      },
    });
    const { task } = writeScriptedTask(directory.path, {
      script: { turns: [{ tool_calls: [toolCall("run_shell", { command: "hold" })] }, { content: "done" }] },
      task: { name: "traced" },
    });
    const first = await fake.runner.start(task, { embedding: { trace } });
    await waiting;
    await first.cancel();
    expect((await first.result).status).toBe("cancelled");
    const resumed = await fake.runner.resume(first.id);
    const report = await resumed.result;
    expect(report).toMatchObject({ status: "succeeded", trace_id: trace.traceId, resumes: 1 });
    const lines = eventsFile(first.directory);
    const afterResume = lines.slice(resumed.resumed!.earlierEvents);
    expect(afterResume.length).toBeGreaterThan(0);
    for (const line of lines) expect(parseTraceparent(line.traceparent)?.traceId).toBe(trace.traceId);
    for (const line of lines.filter((envelope) => /\.run\.(started|resumed|finished)\./.test(envelope.type))) {
      expect(parseTraceparent(line.traceparent)?.spanId).toBe(trace.parentSpanId);
    }
    expect(afterResume.some((envelope) => envelope.type.includes("run.resumed"))).toBe(true);
  });

  it("refuses a malformed trace, naming the field", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell() });
    const { task } = writeScriptedTask(directory.path, { script: { turns: [{ content: "done" }] }, task: { name: "traced" } });
    await expect(fake.runner.start(task, { embedding: { trace: { ...trace, traceId: "0".repeat(32) } } })).rejects.toThrow(
      /embedding\.trace\.traceId: expected 32/,
    );
    await expect(fake.runner.start(task, { embedding: { trace: { ...trace, parentSpanId: "XYZ" } } })).rejects.toThrow(
      /embedding\.trace\.parentSpanId: expected 16/,
    );
  });
});

describe("span ids", () => {
  it("are derived: the same names give the same W3C span id, different ones a different id", () => {
    expect(spanIdFor("a", "b")).toMatch(/^[0-9a-f]{16}$/);
    expect(spanIdFor("a", "b")).toBe(spanIdFor("a", "b"));
    // Parts are separated: ("ab", "") is not ("a", "b").
    expect(spanIdFor("ab", "")).not.toBe(spanIdFor("a", "b"));
    expect(runSpanId("r1", null)).toBe(spanIdFor("run", "r1"));
    expect(runSpanId("r1", "00f067aa0ba902b7")).toBe("00f067aa0ba902b7");
    expect(modelCallSpanId("00f067aa0ba902b7", "main", 1)).not.toBe(modelCallSpanId("00f067aa0ba902b7", "main", 2));
    expect(traceparentOf("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7")).toBe("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    expect(parseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")).toEqual({
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
      spanId: "00f067aa0ba902b7",
    });
    expect(parseTraceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")).toBeNull();
  });
});
