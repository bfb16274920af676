/**
 * `runner mcp` (issue 24): how fast `run_status` and `run_events` answer on a
 * 10 000-event run, through the MCP SDK's Client and the server's tools over
 * the SDK's in-memory transport (the protocol's JSON-RPC, schema validation
 * and structuredContent included; no stdio pipe). The baseline row is the
 * SDK's `ping` round trip in the same rounds: the floor any tool call pays.
 *
 *   npx tsx bench/mcp-server.bench.ts [--rounds=200] [--events=10000]
 *
 * The run is a recorded one in a RUNNER_HOME of this script's own
 * (events.jsonl of model and tool call events ~450 bytes each, a report.json),
 * read as a run of another process would be: no Docker, no model. The first
 * call of a server reads the whole file once (the "cold" row, one fresh server
 * per sample); after that each call reads only what was appended.
 *
 * Goal: run_status and run_events <= 10 ms p50 on the 10 000-event run.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { cloudEventType, type RunEventName } from "../src/events/event-catalogue.js";
import { createRunnerMcpServer } from "../src/mcp-server/runner-mcp-server.js";
import { Runner } from "../src/runner/runner.js";
import { positiveOption } from "./lib/options.js";
import { goal, interleave, printTable, time } from "./lib/stats.js";

const rounds = positiveOption("rounds", 200);
const eventCount = positiveOption("events", 10_000);
const home = mkdtempSync(join(tmpdir(), "agent-runner-bench-mcp-"));

function envelope(runId: string, sequence: number, name: RunEventName, data: Record<string, unknown>): string {
  return JSON.stringify({
    specversion: "1.0",
    id: `${runId}-${sequence}`,
    source: `agent-runner/${runId}`,
    type: cloudEventType(name),
    time: new Date(Date.UTC(2026, 11, 1, 0, 0, 0, sequence)).toISOString(),
    traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    runid: runId,
    datacontenttype: "application/json",
    data,
  });
}

/** A finished run of `count` events: model calls each followed by a shell call, run.finished last. */
function recordRun(runId: string, count: number): void {
  const directory = join(home, "runs", runId);
  mkdirSync(directory, { recursive: true });
  const lines: string[] = [];
  for (let sequence = 0; lines.length < count - 1; sequence += 1) {
    const step = Math.floor(sequence / 4);
    const call = `call_${step}`;
    const kind = sequence % 4;
    if (kind === 0)
      lines.push(
        envelope(runId, lines.length, "model_call.started", {
          agent_id: "main",
          step,
          messages: step * 2 + 2,
          estimated_tokens: 1200 + step,
          prefix_stable: true,
        }),
      );
    if (kind === 1)
      lines.push(
        envelope(runId, lines.length, "model_call.finished", {
          agent_id: "main",
          step,
          duration_ms: 812,
          usage: { prompt_tokens: 1200 + step, completion_tokens: 40, cached_tokens: 1100 },
          cost_usd: 0.0004,
          tool_calls: 1,
          content: null,
        }),
      );
    if (kind === 2)
      lines.push(
        envelope(runId, lines.length, "tool_call.started", {
          agent_id: "main",
          step,
          tool_call_id: call,
          name: "run_shell",
          arguments: '{"command":"python3 -m pytest -q tests/test_stats.py"}',
        }),
      );
    if (kind === 3)
      lines.push(
        envelope(runId, lines.length, "tool_call.finished", {
          agent_id: "main",
          step,
          tool_call_id: call,
          name: "run_shell",
          is_error: false,
          duration_ms: 1530,
          result_preview: "exit_code: 0\n....................                                  [100%]\n20 passed in 0.41s",
        }),
      );
  }
  lines.push(envelope(runId, lines.length, "run.finished", { status: "succeeded", exit_code: 0, duration_ms: 3_600_000 }));
  writeFileSync(join(directory, "events.jsonl"), `${lines.join("\n")}\n`);
  writeFileSync(
    join(directory, "report.json"),
    JSON.stringify({
      run_id: runId,
      task: "bench",
      status: "succeeded",
      reason: "verified",
      steps: Math.floor(count / 4),
      cost_usd: 1,
      patch: null,
      branch: `runner/${runId}`,
    }),
  );
}

async function connect(runner: Runner) {
  const { server, close } = createRunnerMcpServer({ runner, workspaceRoots: [home], version: "bench" });
  const client = new Client({ name: "bench", version: "1" });
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  await client.connect(clientSide);
  const call = async (name: string, args: Record<string, unknown>) => {
    const result = await client.callTool({ name, arguments: args });
    if (result.isError) throw new Error(`${name}: ${JSON.stringify(result.content)}`);
    return result;
  };
  return {
    client,
    call,
    async close() {
      await client.close();
      await close();
    },
  };
}

try {
  const big = "20261201-000000-big000";
  const small = "20261201-000000-small0";
  recordRun(big, eventCount);
  recordRun(small, 100);
  const runner = Runner.create({ home });
  const mcp = await connect(runner);
  const tail = Math.max(0, eventCount - 100);
  console.log(
    `mcp-server bench: ${rounds} rounds, ${eventCount} events, node ${process.version}, load ${loadavg()
      .map((value) => value.toFixed(2))
      .join(" ")}`,
  );
  const samples = await interleave(
    {
      "ping (MCP round trip)": () => mcp.client.ping(),
      [`run_status (${eventCount} events)`]: () => mcp.call("run_status", { run_id: big }),
      [`run_events cursor 0, 100 events (${eventCount})`]: () => mcp.call("run_events", { run_id: big, cursor: 0, max_events: 100, wait_ms: 0 }),
      [`run_events cursor ${tail}, the last 100 (${eventCount})`]: () => mcp.call("run_events", { run_id: big, cursor: tail, max_events: 100, wait_ms: 0 }),
      "run_status (100 events)": () => mcp.call("run_status", { run_id: small }),
      "run_events cursor 0, 100 events (100)": () => mcp.call("run_events", { run_id: small, cursor: 0, max_events: 100, wait_ms: 0 }),
    },
    rounds,
    5,
  );
  const names = Object.keys(samples);
  printTable(
    "warm server (the run's events read once), wall clock per call",
    names.map((name) => ({ name, samples: samples[name]!, ...(name.startsWith("ping") ? {} : { baseline: "ping (MCP round trip)" }) })),
  );
  // Cold: a fresh server's first run_status reads the whole file.
  const cold: number[] = [];
  for (let index = 0; index < Math.min(rounds, 10); index += 1) {
    const fresh = await connect(runner);
    cold.push(await time(() => fresh.call("run_status", { run_id: big })));
    await fresh.close();
  }
  printTable("cold: a fresh server's first call (reads every event once)", [{ name: `run_status (${eventCount} events), first call`, samples: cold }]);
  console.log("\nGoals:");
  console.log(goal(`run_status (${eventCount} events)`, samples[`run_status (${eventCount} events)`], 10));
  console.log(goal(`run_events cursor 0, 100 events (${eventCount})`, samples[`run_events cursor 0, 100 events (${eventCount})`], 10));
  console.log(goal(`run_events cursor ${tail}, the last 100 (${eventCount})`, samples[`run_events cursor ${tail}, the last 100 (${eventCount})`], 10));
  await mcp.close();
} finally {
  rmSync(home, { recursive: true, force: true });
}
