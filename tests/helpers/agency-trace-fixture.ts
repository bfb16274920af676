/** The two-agent pipeline and the readers the trace tests share (tests/unit/agency-trace.test.ts, agency-otlp.test.ts). */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { TraceNode } from "../../src/agency/trace/agency-trace.js";
import type { StoredEvent } from "../../src/bus/event-bus.js";
import { readBusLog } from "../../src/bus/read-bus-log.js";
import type { RunEnvelope } from "../../src/events/event-catalogue.js";
import type { AgentSpec } from "./agency-fixture.js";
import { toolCall } from "./runner-cli.js";

/** The coder fixes calc.txt and emits code.ready; the reviewer reads it and approves (the goal). */
export function pipelineAgents(): Record<string, AgentSpec> {
  return {
    coder: {
      triggers: ["task.ready"],
      capabilities: ["read_file", "write_file"],
      emits: ["code.ready"],
      turns: [
        { tool_calls: [toolCall("write_file", { path: "calc.txt", content: "right\n" })] },
        { tool_calls: [toolCall("emit_event", { type: "code.ready", subject: "t1", data: { files: ["calc.txt"] } })] },
        { content: "fixed" },
      ],
    },
    reviewer: {
      triggers: ["code.*"],
      capabilities: ["read_file"],
      emits: ["review.approved"],
      turns: [
        { tool_calls: [toolCall("read_file", { path: "calc.txt" })] },
        { tool_calls: [toolCall("emit_event", { type: "review.approved", data: {} })] },
        { content: "approved" },
      ],
    },
  };
}

export function envelopes(home: string, runId: string): RunEnvelope[] {
  return readFileSync(join(home, "runs", runId, "events.jsonl"), "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as RunEnvelope);
}

export async function busLog(directory: string): Promise<StoredEvent[]> {
  const log: StoredEvent[] = [];
  for await (const stored of readBusLog(directory, { follow: false })) log.push(stored);
  return log;
}

/** The tree as `kind name` lines, indented two spaces a level: its shape without times. */
export function shapeOf(node: TraceNode, depth = 0): string[] {
  return [`${"  ".repeat(depth)}${node.kind} ${node.name}`, ...node.children.flatMap((child) => shapeOf(child, depth + 1))];
}
