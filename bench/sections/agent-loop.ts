/**
 * Section 4: the agent loop's own cost per step. A scripted model (the
 * runner's ScriptedModelServer on 127.0.0.1) plays N turns, each one
 * `list_dir .`, then the script ends and the server's final answer stops the
 * loop. The loop runs through the runner's OpenAIModelClient and
 * ToolRegistry against (i) an in-memory FakeSandbox (src/sandbox/fake), (ii) the real DockerSandbox.
 *
 * A step is timed from one `model_call.started` event to the next (model call
 * + tool call + bookkeeping); the loop sends the whole conversation every
 * step, so later steps carry bigger requests. Baselines: a raw fetch POST of
 * a mid-run request body to the same server, and OpenAIModelClient.complete
 * with the same request.
 */
import { performance } from "node:perf_hooks";
import { contextSettings } from "../../src/agent/context-window.js";
import { contextSchema } from "../../src/config/task-schema.js";
import { runAgentLoop } from "../../src/agent/agent-loop.js";
import type { EventSink, RunEvent } from "../../src/events/run-events.js";
import type { ChatMessage } from "../../src/model/messages.js";
import { OpenAIModelClient } from "../../src/model/openai-model-client.js";
import { CALL_INDEX_HEADER } from "../../src/model/request-headers.js";
import { ScriptedModelServer, type Script } from "../../src/model/scripted-model-server.js";
import type { Sandbox } from "../../src/sandbox/sandbox.js";
import { ToolRegistry } from "../../src/tools/tool-registry.js";
import { workspaceTools } from "../../src/tools/builtin/index.js";
import { interleave, type Row } from "../lib/stats.js";

const LOOP_STEPS = 50;

class TimingSink implements EventSink {
  readonly modelStarted: number[] = [];
  readonly modelMs: number[] = [];
  readonly toolMs: number[] = [];
  /** Sinks must not throw: tool failures are collected and checked after the run. */
  readonly toolErrors: string[] = [];
  private modelStart = 0;
  private toolStart = 0;
  emit(event: RunEvent): void {
    const now = performance.now();
    switch (event.type) {
      case "model_call.started":
        this.modelStarted.push(now);
        this.modelStart = now;
        break;
      case "model_call.finished":
        this.modelMs.push(now - this.modelStart);
        break;
      case "tool_call.started":
        this.toolStart = now;
        break;
      case "tool_call.finished":
        if (event.data.is_error) this.toolErrors.push(event.data.result_preview);
        this.toolMs.push(now - this.toolStart);
        break;
      default:
        break;
    }
  }
}

interface LoopSamples {
  /** Per step: model_call.started → next model_call.started. */
  step: number[];
  model: number[];
  tool: number[];
  /** Per run: whole runAgentLoop / LOOP_STEPS (includes the final answer call). */
  perRun: number[];
}

export async function benchAgentLoop(sandboxes: { memory: Sandbox; docker: Sandbox | null }, runs: number, rawRounds: number): Promise<Row[]> {
  const script: Script = {
    turns: Array.from({ length: LOOP_STEPS }, (_, index) => ({
      content: `step ${index}`,
      tool_calls: [{ name: "list_dir", arguments: { path: "." } }],
    })),
  };
  const server = new ScriptedModelServer(script);
  const baseURL = await server.start();
  try {
    const client = new OpenAIModelClient({ baseURL, apiKey: "bench-no-key", model: "scripted", maxRetries: 0, timeoutMs: 30_000 });
    const tools = new ToolRegistry(workspaceTools());
    const definitions = tools.definitions();

    const runLoop = async (sandbox: Sandbox, into: LoopSamples | null) => {
      const sink = new TimingSink();
      const started = performance.now();
      const outcome = await runAgentLoop({
        agentId: "main",
        model: client,
        tools,
        sandbox,
        systemPrompt: "You are a benchmark.",
        instruction: "List the workspace fifty times.",
        maxSteps: LOOP_STEPS + 5,
        toolTimeoutMs: 60_000,
        events: sink,
        signal: new AbortController().signal,
        context: contextSettings(128_000, contextSchema.parse({})),
      });
      const elapsed = performance.now() - started;
      if (sink.toolErrors.length) throw new Error(`bench loop: tool failed: ${sink.toolErrors[0]}`);
      if (outcome.reason !== "final_answer" || outcome.toolCalls !== LOOP_STEPS) {
        throw new Error(`bench loop: unexpected outcome ${outcome.reason}, ${outcome.toolCalls} tool calls`);
      }
      if (!into) return;
      for (let step = 0; step < LOOP_STEPS; step += 1) into.step.push(sink.modelStarted[step + 1]! - sink.modelStarted[step]!);
      into.model.push(...sink.modelMs.slice(0, LOOP_STEPS));
      into.tool.push(...sink.toolMs);
      into.perRun.push(elapsed / LOOP_STEPS);
    };

    const memory: LoopSamples = { step: [], model: [], tool: [], perRun: [] };
    const docker: LoopSamples = { step: [], model: [], tool: [], perRun: [] };
    await runLoop(sandboxes.memory, null); // warm-up: JIT, keep-alive connection
    if (sandboxes.docker) await runLoop(sandboxes.docker, null);
    for (let run = 0; run < runs; run += 1) {
      await runLoop(sandboxes.memory, memory);
      if (sandboxes.docker) await runLoop(sandboxes.docker, docker);
    }

    // Baselines on a mid-run request (the conversation after LOOP_STEPS / 2 steps).
    const midIndex = Math.floor(LOOP_STEPS / 2);
    const mid = server.requests.find((request) => request.callIndex === midIndex)!;
    const messages: ChatMessage[] = mid.messages;
    const body = JSON.stringify({ model: "scripted", messages, tools: definitions, tool_choice: "auto" });
    server.requests.length = 0;
    const raw = await interleave(
      {
        fetch: async () => {
          const response = await fetch(`${baseURL}/chat/completions`, {
            method: "POST",
            headers: { "content-type": "application/json", authorization: "Bearer bench-no-key", [CALL_INDEX_HEADER]: String(midIndex) },
            body,
          });
          if (!response.ok) throw new Error(`raw fetch: HTTP ${response.status}`);
          await response.json();
        },
        client: async () => {
          await client.complete({ messages, tools: definitions, agentId: "main", callIndex: midIndex });
        },
      },
      rawRounds,
      5,
    );
    server.requests.length = 0;

    const bodyKb = (Buffer.byteLength(body) / 1024).toFixed(0);
    const rows: Row[] = [
      { name: `raw fetch POST (mid-run body, ${bodyKb} KB)`, samples: raw.fetch! },
      { name: "OpenAIModelClient.complete (same request)", samples: raw.client!, baseline: `raw fetch POST (mid-run body, ${bodyKb} KB)` },
      {
        name: "loop step, in-memory sandbox",
        samples: memory.step,
        baseline: `raw fetch POST (mid-run body, ${bodyKb} KB)`,
        note: `${runs} runs x ${LOOP_STEPS} steps; model call + list_dir + loop bookkeeping`,
      },
      { name: "  of which model call (in-memory)", samples: memory.model, baseline: "loop step, in-memory sandbox" },
      { name: "  of which list_dir tool (in-memory)", samples: memory.tool, baseline: "loop step, in-memory sandbox" },
      {
        name: "loop run / 50, in-memory sandbox",
        samples: memory.perRun,
        baseline: `raw fetch POST (mid-run body, ${bodyKb} KB)`,
        note: "whole runAgentLoop / 50 (includes the final-answer call)",
      },
    ];
    if (sandboxes.docker) {
      rows.push(
        { name: "loop step, DockerSandbox", samples: docker.step, baseline: "loop step, in-memory sandbox" },
        { name: "  of which model call (Docker)", samples: docker.model, baseline: "loop step, DockerSandbox" },
        { name: "  of which list_dir tool (Docker)", samples: docker.tool, baseline: "loop step, DockerSandbox" },
        { name: "loop run / 50, DockerSandbox", samples: docker.perRun, baseline: "loop run / 50, in-memory sandbox" },
      );
    }
    return rows;
  } finally {
    await server.close();
  }
}
