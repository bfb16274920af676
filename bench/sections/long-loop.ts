/**
 * Long-run bench, part 1: a 300-step scripted run through the real loop with
 * a small context window, so that clearing happens often and compaction
 * several times (issue 5 "Measure").
 *
 * `runAgentLoop` + the runner's OpenAIModelClient against ScriptedModelServer
 * on 127.0.0.1 + the workspace tools (and read_tool_result) on a FakeSandbox
 * holding a small Python project. Like a real run (run-task.ts) it writes a
 * SessionJournal (session.jsonl) and a CloudEventLog (events.jsonl), keeps
 * capped results in a ToolResultStore, and redacts everything it records with
 * a Redactor holding one secret, all in a temporary run directory.
 *
 * The script cycles through read_file of a ~6 KB module, grep over src/,
 * run_shell (answered by the FakeSandbox's exec handler with pytest-like
 * output, and every third cycle a 12 KB build log that exceeds the per-result
 * cap), write_file of ~3 KB and a turn with read_file + grep side by side.
 *
 * Each measured run happens in its own child process (this file re-run with
 * `--child=<variant>`), so peak RSS (`process.resourceUsage().maxRSS`) belongs
 * to that run alone; the child makes one untimed 30-step warm-up run first.
 * Variants: `managed` (model.context_window 16 000) and `unmanaged` (10 000 000:
 * nothing is ever cleared or compacted), both with the same per-result cap
 * (`tool_result_max_tokens` 2000), so they see identical tool results.
 */
import { spawn } from "node:child_process";
import { subscribe, unsubscribe } from "node:diagnostics_channel";
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { runAgentLoop, requestLimit } from "../../src/agent/agent-loop.js";
import { contextSettings, messageTokens } from "../../src/agent/context-window.js";
import { restoreSession, SessionJournal } from "../../src/agent/session-journal.js";
import { readToolResultTool, ToolResultStore } from "../../src/agent/tool-result-store.js";
import { contextSchema } from "../../src/config/task-schema.js";
import { CloudEventLog, newTraceId } from "../../src/events/cloud-event-log.js";
import { EventFanout, type EventSink, type RunEvent } from "../../src/events/run-events.js";
import { AnthropicModelClient } from "../../src/model/anthropic-model-client.js";
import { addUsage, emptyUsage, type ChatMessage, type ToolDefinition, type Usage } from "../../src/model/messages.js";
import type { ModelClient, ModelRequest, ModelResponse } from "../../src/model/model-client.js";
import { OpenAIModelClient } from "../../src/model/openai-model-client.js";
import { OpenAIResponsesModelClient } from "../../src/model/openai-responses-model-client.js";
import { PRICE_TABLE_DATE } from "../../src/model/price-table.js";
import { costOf, formatUsd, lookupPrices } from "../../src/model/pricing.js";
import type { WireName } from "../../src/model/scripted-wire.js";
import { ScriptedModelServer, type Script, type ScriptedTurn } from "../../src/model/scripted-model-server.js";
import { Redactor } from "../../src/redaction/redactor.js";
import { FakeSandbox } from "../../src/sandbox/fake/fake-sandbox.js";
import type { ExecRequest, ExecResult } from "../../src/sandbox/sandbox.js";
import { workspaceTools } from "../../src/tools/builtin/index.js";
import { ToolRegistry } from "../../src/tools/tool-registry.js";
import { fmt, median, p90 } from "../lib/stats.js";

export const LONG_STEPS = 300;
export const SMALL_WINDOW = 16_000;
export const HUGE_WINDOW = 10_000_000;
/** Same per-result cap in both variants (the small window's default, 1/8 of 16 000). */
const RESULT_CAP_TOKENS = 2000;
const MODULES = 20;
const WARMUP_STEPS = 30;

export type LoopVariant = "managed" | "unmanaged";

/** The wire formats the loop runs through, each with its provider's real client (`--wire=`). */
export const LOOP_WIRES: readonly WireName[] = ["openai-chat", "anthropic", "openai-responses"];

const VARIANT_WINDOW: Record<LoopVariant, number> = { managed: SMALL_WINDOW, unmanaged: HUGE_WINDOW };

/** What one child reports about its measured run. */
export interface LongLoopResult {
  variant: LoopVariant;
  wire: WireName;
  contextWindow: number;
  requestLimit: number;
  outcome: string;
  steps: number;
  toolCalls: number;
  toolErrors: number;
  wallMs: number;
  /** Time inside model.complete (turn and compaction calls). */
  modelMs: number;
  /** The bench's own sizing of recorded requests, excluded from every other time but the wall. */
  measureMs: number;
  compactionModelMs: number;
  /** Per step: end of turn call k → start of turn call k+1, minus compaction calls in between. */
  overheadMs: number[];
  /** The same, split by what fitContext did before turn call k+1: nothing, clearing only, compaction (model call excluded). */
  overheadPlainMs: number[];
  overheadClearMs: number[];
  overheadCompactMs: number[];
  /** Per step: model_call.started k → model_call.started k+1. */
  stepMs: number[];
  /** Per turn call, time inside complete(). */
  turnCallMs: number[];
  rssStartMb: number;
  rssPeakMb: number;
  heapPeakMb: number;
  maxRssMb: number;
  /** Largest request the server saw, turn calls: heuristic (messageTokens + tool definitions / 4) and JSON length / 4. */
  largestTurn: { estimate: number; json: number; callIndex: number };
  largestCompaction: { estimate: number; json: number; callIndex: number } | null;
  /** Largest `estimated_tokens` of model_call.started (calibrated estimator). */
  largestEventEstimate: number;
  requests: number;
  compactionRequests: number;
  clearedEvents: number;
  clearedResults: number;
  compactions: number;
  compactionFailures: number;
  repairs: number;
  prefixCompared: number;
  prefixStable: number;
  sessionBytes: number;
  /** restoreSession(session.jsonl) after the run: what `runner resume` replays before anything else. */
  restoreMs: number;
  /** Messages in the restored conversation and in the live one at the end; whether they are identical (JSON). */
  restoredMessages: number;
  liveMessages: number;
  restoredEqual: boolean;
  eventsBytes: number;
  fullOutputs: number;
  promptTokens: number;
  /** Usage summed over every call as the client returned it (turn and compaction calls). */
  usage: Usage;
  compactionUsage: Usage;
  /** Per turn call: time inside complete() minus the server's handling of its request ({@link ServerClock}), ms. */
  clientOverheadMs: number[];
  /** Per turn call: the part of clientOverheadMs outside fetch (before undici:request:create, after undici:request:trailers), ms. */
  clientCodeMs: number[];
  /** Per turn call: the server's handling time, ms. */
  serverMs: number[];
  /** Per turn call: the request body's size as the client sent it, bytes. */
  requestBytes: number[];
}

// ---------------------------------------------------------------- workspace and script

const WORDS = ["parse", "render", "token", "buffer", "index", "merge", "score", "route", "cache", "frame", "batch", "query"];

function moduleSource(index: number, bytes: number): string {
  const lines = [`"""Module ${index}: generated for the long-run bench."""`, "import math", ""];
  let function_ = 0;
  while (lines.join("\n").length < bytes) {
    const word = WORDS[(index + function_) % WORDS.length]!;
    lines.push(`def handle_${word}_${index}_${function_}(value, factor=${function_ + 2}):`);
    lines.push(`    """Return the ${word} score of value scaled by factor (module ${index}, function ${function_})."""`);
    lines.push(`    total = sum(math.sqrt(abs(item)) * factor for item in value if item is not None)`);
    lines.push(`    return round(total / max(len(value), 1), ${(function_ % 4) + 2})`);
    lines.push("");
    function_ += 1;
  }
  return `${lines.join("\n").slice(0, bytes)}\n`;
}

function testSource(index: number): string {
  const lines = ["import pytest", `from src import module_${index}`, ""];
  for (let case_ = 0; lines.join("\n").length < 2500; case_ += 1) {
    lines.push(`def test_module_${index}_case_${case_}():`);
    lines.push(`    assert module_${index}.handle_${WORDS[(index + case_) % WORDS.length]}_${index}_${case_}([1, 4, 9]) >= 0`);
    lines.push("");
  }
  return `${lines.join("\n")}\n`;
}

/** The fake project: 20 modules of ~6 KB, 20 test files of ~2.5 KB, a README. */
function longRunFiles(): Record<string, string> {
  const files: Record<string, string> = { "README.md": "# bench project\n\nA generated project for the long-run bench.\n" };
  for (let index = 0; index < MODULES; index += 1) {
    files[`src/module_${String(index).padStart(2, "0")}.py`] = moduleSource(index, 6 * 1024);
    files[`tests/test_module_${String(index).padStart(2, "0")}.py`] = testSource(index);
  }
  return files;
}

const pad = (index: number) => String(index % MODULES).padStart(2, "0");

/** One turn of the 10-turn cycle; `cycle` picks the module. */
function turnFor(step: number): ScriptedTurn {
  const cycle = Math.floor(step / 10);
  const module = `src/module_${pad(cycle)}.py`;
  const text = (what: string) => `Step ${step}: ${what}.`;
  switch (step % 10) {
    case 0:
      return { content: text(`reading ${module}`), tool_calls: [{ name: "read_file", arguments: { path: module } }] };
    case 1:
      return {
        content: text("looking for the handlers"),
        tool_calls: [{ name: "grep", arguments: { pattern: `def handle_\\w+_${cycle % MODULES}_`, path: "src" } }],
      };
    case 2:
      return {
        content: text("running its tests"),
        tool_calls: [{ name: "run_shell", arguments: { command: `python3 -m pytest -q tests/test_module_${pad(cycle)}.py` } }],
      };
    case 3:
      return {
        content: text("writing a helper module"),
        tool_calls: [{ name: "write_file", arguments: { path: `src/gen_${String(cycle).padStart(3, "0")}.py`, content: moduleSource(100 + cycle, 3 * 1024) } }],
      };
    case 4:
      return {
        content: text("comparing with the next module"),
        tool_calls: [
          { name: "read_file", arguments: { path: `src/module_${pad(cycle + 1)}.py` } },
          { name: "grep", arguments: { pattern: "return round", path: "src", glob: `module_${pad(cycle + 1)}.py` } },
        ],
      };
    case 5:
      return { content: text("reading the tests"), tool_calls: [{ name: "read_file", arguments: { path: `tests/test_module_${pad(cycle)}.py` } }] };
    case 6:
      return { content: text("checking the diff"), tool_calls: [{ name: "run_shell", arguments: { command: "git diff --stat" } }] };
    case 7:
      return {
        content: text(`rewriting ${module}`),
        tool_calls: [{ name: "write_file", arguments: { path: module, content: moduleSource(200 + cycle, 3 * 1024) } }],
      };
    case 8:
      return { content: text("reading a module again"), tool_calls: [{ name: "read_file", arguments: { path: `src/module_${pad(cycle + 7)}.py` } }] };
    default:
      return cycle % 3 === 2
        ? { content: text("reading the build log"), tool_calls: [{ name: "run_shell", arguments: { command: "cat build.log" } }] }
        : { content: text("running the whole suite"), tool_calls: [{ name: "run_shell", arguments: { command: "python3 -m pytest -q" } }] };
  }
}

function longRunScript(steps: number): Script {
  return { turns: Array.from({ length: steps }, (_, step) => turnFor(step)) };
}

/** The FakeSandbox's exec: rg for grep (from its environment variables), canned outputs for run_shell. */
function execHandler(sandbox: () => FakeSandbox): (request: ExecRequest) => Partial<ExecResult> {
  return (request) => {
    const pattern = request.env?.RUNNER_GREP_PATTERN;
    if (pattern !== undefined) {
      const regex = new RegExp(pattern);
      const glob = request.env?.RUNNER_GREP_GLOB ? new RegExp(`(^|/)${request.env.RUNNER_GREP_GLOB.replace(/\./g, "\\.").replace(/\*/g, ".*")}$`) : null;
      const base = `/workspace/${request.env?.RUNNER_GREP_PATH ?? "."}`.replace(/\/\.$/, "");
      const rows: string[] = [];
      for (const [path, content] of sandbox().files) {
        if (!path.startsWith(`${base}/`) || (glob && !glob.test(path))) continue;
        content
          .toString("utf8")
          .split("\n")
          .forEach((line, index) => {
            if (rows.length <= 300 && regex.test(line)) rows.push(`${path.slice("/workspace/".length)}:${index + 1}:${line}`);
          });
      }
      return { stdout: rows.length ? `${rows.join("\n")}\n` : "" };
    }
    const command = request.command;
    if (command.startsWith("cat build.log")) {
      const lines = Array.from(
        { length: 160 },
        (_, index) => `[build ${String(index).padStart(4, "0")}] compiling src/module_${pad(index)}.py ... ok (${(index * 7) % 97} ms)`,
      );
      return { stdout: `${lines.join("\n")}\n` };
    }
    if (command.startsWith("git diff")) {
      const changed = [...sandbox().files.keys()].filter((path) => path.includes("/gen_")).slice(-12);
      return { stdout: `${changed.map((path) => ` ${path.slice(11)} | 84 ++++++++`).join("\n")}\n ${changed.length} files changed\n` };
    }
    if (command.startsWith("python3 -m pytest")) {
      const dots = ".".repeat(40);
      const detail = Array.from({ length: 14 }, (_, index) => `tests/test_module_${pad(index)}.py::test_module_${pad(index)}_case_${index} PASSED`);
      return { stdout: `${dots} [100%]\n${detail.join("\n")}\n${"=".repeat(30)} 40 passed in 0.42s ${"=".repeat(30)}\n` };
    }
    return { stdout: "" };
  };
}

// ---------------------------------------------------------------- one run (in a child)

class Collector implements EventSink {
  readonly modelStarted: number[] = [];
  toolErrors = 0;
  firstToolError = "";
  clearedEvents = 0;
  clearedResults = 0;
  readonly clearedSteps = new Set<number>();
  readonly compactedSteps = new Set<number>();
  compactions = 0;
  compactionFailures = 0;
  repairs = 0;
  prefixCompared = 0;
  prefixStable = 0;
  largestEstimate = 0;
  emit(event: RunEvent): void {
    switch (event.type) {
      case "model_call.started":
        this.modelStarted.push(performance.now());
        this.largestEstimate = Math.max(this.largestEstimate, event.data.estimated_tokens);
        if (event.data.prefix_stable !== null) {
          this.prefixCompared += 1;
          if (event.data.prefix_stable) this.prefixStable += 1;
        }
        break;
      case "tool_call.finished":
        if (event.data.is_error) {
          this.toolErrors += 1;
          this.firstToolError ||= `${event.data.name}: ${event.data.result_preview.slice(0, 200)}`;
        }
        break;
      case "context.cleared":
        this.clearedEvents += 1;
        this.clearedResults += event.data.cleared;
        this.clearedSteps.add(event.data.step);
        break;
      case "context.compacted":
        this.compactions += 1;
        this.compactedSteps.add(event.data.step);
        break;
      case "context.compaction_failed":
        this.compactionFailures += 1;
        break;
      case "context.repaired":
        this.repairs += 1;
        break;
      default:
        break;
    }
  }
}

interface CallRecord {
  purpose: "turn" | "compaction";
  callIndex: number;
  start: number;
  end: number;
  /** The bench's own work after `end` (sizing the recorded request): subtracted from the loop's time. */
  measureMs: number;
  /** The scripted server's handling of the call's HTTP request(s), ms ({@link ServerClock}). */
  serverMs: number;
  /** Of complete() minus the server: the client's code outside fetch (see {@link ServerClock}). */
  codeMs: number;
  requestBytes: number;
  usage: Usage;
}

interface ServerRequestMessage {
  request: { headers: Record<string, string | string[] | undefined> };
  response: object;
}

/**
 * The scripted server's time per request, from Node's own HTTP
 * instrumentation (`node:diagnostics_channel`: `http.server.request.start`
 * when the request's headers are parsed, `http.server.response.finish` when
 * the last byte of the answer is handed to the socket), so nothing in
 * ScriptedModelServer is changed or reached into. The server runs in the
 * client's process, and the client only waits while the server works (the
 * body is sent as one string, the answer written in one `end()`), so that
 * span is the server's: reading and parsing the body, the wire's reading of
 * it, the prompt cache's hashing, and writing the answer. What
 * complete() takes beyond it is the client's overhead: translating the
 * conversation, the SDK, JSON both ways, the stream parsing, and loopback.
 */
class ServerClock {
  private readonly started = new WeakMap<object, number>();
  private spent = 0;
  private bytes = 0;
  private readonly onStart = (message: unknown) => {
    const { request, response } = message as ServerRequestMessage;
    this.started.set(response, performance.now());
    this.bytes += Number(request.headers["content-length"] ?? 0);
  };
  private readonly onFinish = (message: unknown) => {
    const { response } = message as ServerRequestMessage;
    const started = this.started.get(response);
    if (started !== undefined) this.spent += performance.now() - started;
  };
  private fetchStarted: number | null = null;
  private fetchEnded: number | null = null;
  private readonly onFetchCreate = () => {
    this.fetchStarted ??= performance.now();
  };
  private readonly onFetchEnd = () => {
    this.fetchEnded = performance.now();
  };
  private readonly channels: [string, (message: unknown) => void][] = [
    ["http.server.request.start", this.onStart],
    ["http.server.response.finish", this.onFinish],
    // Node's fetch (undici, which both SDKs use): the request is created, and its answer's body fully received.
    ["undici:request:create", this.onFetchCreate],
    ["undici:request:trailers", this.onFetchEnd],
  ];

  constructor() {
    for (const [name, listener] of this.channels) subscribe(name, listener);
  }

  /** Since the last take: the server's time, the request bytes, and when the first fetch began and the last one ended (performance.now()). */
  take(): { serverMs: number; requestBytes: number; fetchStarted: number | null; fetchEnded: number | null } {
    const taken = { serverMs: this.spent, requestBytes: this.bytes, fetchStarted: this.fetchStarted, fetchEnded: this.fetchEnded };
    this.spent = 0;
    this.bytes = 0;
    this.fetchStarted = null;
    this.fetchEnded = null;
    return taken;
  }

  close(): void {
    for (const [name, listener] of this.channels) unsubscribe(name, listener);
  }
}

/** Wraps the model client: times every complete() and measures the request the server recorded for it, then drops it. */
class MeasuringClient implements ModelClient {
  readonly calls: CallRecord[] = [];
  largestTurn = { estimate: 0, json: 0, callIndex: -1 };
  largestCompaction: { estimate: number; json: number; callIndex: number } | null = null;
  requests = 0;
  compactionRequests = 0;
  private readonly toolsJson: string;
  private readonly toolsTokens: number;

  constructor(
    private readonly inner: ModelClient,
    private readonly server: ScriptedModelServer,
    private readonly clock: ServerClock,
    definitions: ToolDefinition[],
    private readonly measure: boolean,
  ) {
    this.toolsJson = JSON.stringify(definitions);
    this.toolsTokens = Math.ceil(this.toolsJson.length / 4);
  }

  async complete(request: ModelRequest): Promise<ModelResponse> {
    this.clock.take();
    const start = performance.now();
    const response = await this.inner.complete(request);
    const end = performance.now();
    const { serverMs, requestBytes, fetchStarted, fetchEnded } = this.clock.take();
    // The client's own code: before it hands the request to fetch (translation, JSON) and after the answer is in (stream parsing, mapping back).
    const codeMs = fetchStarted === null || fetchEnded === null ? Number.NaN : fetchStarted - start + (end - fetchEnded);
    const purpose = request.purpose ?? "turn";
    // Sizing happens after `end` and is timed, so it can be taken out of the loop's time; the server's record is dropped so memory stays flat.
    if (this.measure) {
      for (const seen of this.server.requests) {
        const withTools = seen.purpose === "turn";
        const messages: ChatMessage[] = seen.messages;
        const estimate = messages.reduce((sum, message) => sum + messageTokens(message), withTools ? this.toolsTokens : 0);
        const json = Math.ceil((JSON.stringify(messages).length + (withTools ? this.toolsJson.length : 0)) / 4);
        if (seen.purpose === "turn") {
          this.requests += 1;
          if (estimate > this.largestTurn.estimate || json > this.largestTurn.json) {
            this.largestTurn = {
              estimate: Math.max(estimate, this.largestTurn.estimate),
              json: Math.max(json, this.largestTurn.json),
              callIndex: seen.callIndex,
            };
          }
        } else {
          this.compactionRequests += 1;
          const previous = this.largestCompaction ?? { estimate: 0, json: 0, callIndex: -1 };
          if (estimate > previous.estimate || json > previous.json) {
            this.largestCompaction = { estimate: Math.max(estimate, previous.estimate), json: Math.max(json, previous.json), callIndex: seen.callIndex };
          }
        }
      }
    }
    this.server.requests.length = 0;
    this.calls.push({
      purpose,
      callIndex: request.callIndex,
      start,
      end,
      measureMs: performance.now() - end,
      serverMs,
      codeMs,
      requestBytes,
      usage: response.usage,
    });
    return response;
  }
}

/** The provider's real client for `wire`, pointed at the scripted server (as open-model.ts does for `provider: scripted`). */
function clientFor(wire: WireName, baseURL: string): ModelClient {
  const common = { apiKey: "bench-no-key", model: "scripted", maxRetries: 0, timeoutMs: 60_000 };
  switch (wire) {
    case "openai-chat":
      return new OpenAIModelClient({ ...common, baseURL });
    case "anthropic":
      // Anthropic's SDK adds `/v1/messages` to the origin.
      return new AnthropicModelClient({ ...common, baseURL: baseURL.replace(/\/v1$/, "") });
    case "openai-responses":
      return new OpenAIResponsesModelClient({ ...common, baseURL });
  }
}

async function runOnce(variant: LoopVariant, wire: WireName, steps: number, measure: boolean, window?: number): Promise<LongLoopResult> {
  const contextWindow = variant === "managed" && window !== undefined ? window : VARIANT_WINDOW[variant];
  const context = contextSettings(contextWindow, contextSchema.parse({ tool_result_max_tokens: RESULT_CAP_TOKENS }));
  const server = new ScriptedModelServer(longRunScript(steps));
  const baseURL = await server.start();
  const runDirectory = mkdtempSync(join(tmpdir(), "agent-runner-bench-longrun-"));
  const clock = new ServerClock();
  try {
    const redactor = new Redactor([{ name: "OPENAI_API_KEY", value: "sk-bench-not-a-real-key-0123456789" }]);
    const runId = `bench-longrun-${process.pid}`;
    const log = new CloudEventLog(join(runDirectory, "events.jsonl"), runId, newTraceId(), { redactor });
    const journal = new SessionJournal(join(runDirectory, "session.jsonl"), (value) => redactor.redactDeep(value));
    const store = new ToolResultStore(runDirectory, "main");
    const tools = new ToolRegistry([...workspaceTools(), readToolResultTool(store, context.toolResultMaxTokens * 4)]);
    let sandbox: FakeSandbox | null = null;
    sandbox = new FakeSandbox(
      longRunFiles(),
      execHandler(() => sandbox!),
    );
    const collector = new Collector();
    const events = new EventFanout().add(log).add(collector);
    const client = new MeasuringClient(clientFor(wire, baseURL), server, clock, tools.definitions(), measure);

    let rssPeak = 0;
    let heapPeak = 0;
    const sample = () => {
      const usage = process.memoryUsage();
      rssPeak = Math.max(rssPeak, usage.rss);
      heapPeak = Math.max(heapPeak, usage.heapUsed);
    };
    sample();
    const rssStart = process.memoryUsage().rss;
    const sampler = setInterval(sample, 10);
    const started = performance.now();
    let outcome: Awaited<ReturnType<typeof runAgentLoop>>;
    try {
      outcome = await runAgentLoop({
        agentId: "main",
        model: client,
        tools,
        sandbox,
        systemPrompt: "You are a benchmark agent working on a Python project.",
        instruction: `Work through the project for ${steps} steps.`,
        maxSteps: steps + 5,
        toolTimeoutMs: 60_000,
        events,
        signal: new AbortController().signal,
        context,
        journal,
        results: store,
        onTurnEnd: () => log.sync(), // as run-task does: the event log is fsynced at every turn boundary
      });
    } finally {
      clearInterval(sampler);
      journal.close();
      log.close();
    }
    const measureMs = client.calls.reduce((sum, call) => sum + call.measureMs, 0);
    // Wall time without the bench's own sizing work.
    const wallMs = performance.now() - started - measureMs;
    sample();

    const turns = client.calls.filter((call) => call.purpose === "turn");
    const compactionCalls = client.calls.filter((call) => call.purpose === "compaction");
    const overheadMs: number[] = [];
    const overheadPlainMs: number[] = [];
    const overheadClearMs: number[] = [];
    const overheadCompactMs: number[] = [];
    for (let index = 0; index + 1 < turns.length; index += 1) {
      const from = turns[index]!.end;
      const to = turns[index + 1]!.start;
      const inside = client.calls
        .filter((call) => call.start >= from && call.end <= to)
        .reduce((sum, call) => sum + (call.end - call.start) + call.measureMs, 0);
      const overhead = to - from - inside - turns[index]!.measureMs;
      overheadMs.push(overhead);
      const next = turns[index + 1]!.callIndex;
      if (collector.compactedSteps.has(next)) overheadCompactMs.push(overhead);
      else if (collector.clearedSteps.has(next)) overheadClearMs.push(overhead);
      else overheadPlainMs.push(overhead);
    }
    const stepMs: number[] = [];
    for (let index = 0; index + 1 < collector.modelStarted.length; index += 1) {
      const from = collector.modelStarted[index]!;
      const to = collector.modelStarted[index + 1]!;
      const measuring = client.calls.filter((call) => call.end >= from && call.end <= to).reduce((sum, call) => sum + call.measureMs, 0);
      stepMs.push(to - from - measuring);
    }
    const modelMs = client.calls.reduce((sum, call) => sum + (call.end - call.start), 0);
    const restoreStarted = performance.now();
    const restored = restoreSession(join(runDirectory, "session.jsonl")).get("main");
    const restoreMs = performance.now() - restoreStarted;
    const toolResultsDirectory = join(runDirectory, "tool-results", "main");
    let fullOutputs = 0;
    try {
      fullOutputs = readdirSync(toolResultsDirectory).length;
    } catch {
      // none were capped
    }
    const sum = (calls: CallRecord[]) => calls.reduce((total, call) => addUsage(total, call.usage), emptyUsage());
    return {
      variant,
      wire,
      contextWindow,
      requestLimit: requestLimit(context),
      outcome: outcome.reason,
      steps: outcome.steps,
      toolCalls: outcome.toolCalls,
      toolErrors: collector.toolErrors,
      wallMs,
      modelMs,
      measureMs,
      compactionModelMs: compactionCalls.reduce((sum, call) => sum + (call.end - call.start), 0),
      overheadMs,
      overheadPlainMs,
      overheadClearMs,
      overheadCompactMs,
      stepMs,
      turnCallMs: turns.map((call) => call.end - call.start),
      rssStartMb: rssStart / 2 ** 20,
      rssPeakMb: rssPeak / 2 ** 20,
      heapPeakMb: heapPeak / 2 ** 20,
      maxRssMb: process.resourceUsage().maxRSS / 1024,
      largestTurn: client.largestTurn,
      largestCompaction: client.largestCompaction,
      largestEventEstimate: collector.largestEstimate,
      requests: client.requests,
      compactionRequests: client.compactionRequests,
      clearedEvents: collector.clearedEvents,
      clearedResults: collector.clearedResults,
      compactions: collector.compactions,
      compactionFailures: collector.compactionFailures,
      repairs: collector.repairs,
      prefixCompared: collector.prefixCompared,
      prefixStable: collector.prefixStable,
      sessionBytes: statSync(join(runDirectory, "session.jsonl")).size,
      restoreMs,
      restoredMessages: restored?.messages.length ?? 0,
      liveMessages: outcome.messages.length,
      restoredEqual: JSON.stringify(restored?.messages) === JSON.stringify(outcome.messages),
      eventsBytes: statSync(join(runDirectory, "events.jsonl")).size,
      fullOutputs,
      promptTokens: outcome.usage.prompt_tokens,
      usage: sum(client.calls),
      compactionUsage: sum(compactionCalls),
      clientOverheadMs: turns.map((call) => call.end - call.start - call.serverMs),
      serverMs: turns.map((call) => call.serverMs),
      clientCodeMs: turns.map((call) => call.codeMs),
      requestBytes: turns.map((call) => call.requestBytes),
      ...(collector.toolErrors ? { firstToolError: collector.firstToolError } : {}),
    };
  } finally {
    clock.close();
    await server.close();
    rmSync(runDirectory, { recursive: true, force: true });
  }
}

/** Child entry point: a warm-up run, then the measured run; prints one `RESULT <json>` line. */
export async function longLoopChild(variant: LoopVariant, wire: WireName, steps: number, window?: number): Promise<void> {
  await runOnce(variant, wire, Math.min(WARMUP_STEPS, steps), false, window);
  const result = await runOnce(variant, wire, steps, true, window);
  process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
}

/** Runs one measured run in a fresh child process (this bench script with `--child=`). */
export function runLongLoopChild(script: string, variant: LoopVariant, wire: WireName, steps: number, window: number): Promise<LongLoopResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...process.execArgv, script, `--child=${variant}`, `--wire=${wire}`, `--steps=${steps}`, `--window=${window}`], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.on("error", reject);
    child.on("close", (code) => {
      const line = stdout.split("\n").find((candidate) => candidate.startsWith("RESULT "));
      if (code !== 0 || !line) {
        reject(new Error(`long-run child ${variant} ${wire} exited ${code}:\n${stderr.slice(-3000)}${stdout.slice(-1000)}`));
        return;
      }
      resolve(JSON.parse(line.slice("RESULT ".length)) as LongLoopResult);
    });
  });
}

// ---------------------------------------------------------------- report

const mb = (value: number) => `${value.toFixed(1)} MB`;

/** Checks every run did what the script says; returns problems (empty = fine). */
export function checkLongLoop(results: LongLoopResult[], steps: number): string[] {
  const problems: string[] = [];
  for (const result of results) {
    const where = `${result.wire} ${result.variant} run`;
    if (result.outcome !== "final_answer" || result.steps !== steps + 1)
      problems.push(`${where}: outcome ${result.outcome} after ${result.steps} model calls (expected final_answer after ${steps + 1})`);
    if (!result.restoredEqual)
      problems.push(`${where}: session.jsonl restores ${result.restoredMessages} messages that differ from the live conversation's ${result.liveMessages}`);
    if (result.toolErrors) problems.push(`${where}: ${result.toolErrors} tool call(s) failed: ${(result as { firstToolError?: string }).firstToolError ?? ""}`);
    if (result.variant === "managed") {
      if (result.largestTurn.estimate >= result.contextWindow || result.largestTurn.json >= result.contextWindow) {
        problems.push(
          `${where}: a request reached ${result.largestTurn.estimate} (heuristic) / ${result.largestTurn.json} (JSON/4) tokens, window ${result.contextWindow}`,
        );
      }
      if (result.largestCompaction && (result.largestCompaction.estimate >= result.contextWindow || result.largestCompaction.json >= result.contextWindow)) {
        problems.push(
          `${where}: a compaction request reached ${result.largestCompaction.estimate} / ${result.largestCompaction.json} tokens, window ${result.contextWindow}`,
        );
      }
      if (result.contextWindow === SMALL_WINDOW && (result.clearedEvents === 0 || result.compactions < 2)) {
        problems.push(`${where}: only ${result.clearedEvents} clearings and ${result.compactions} compactions; the script no longer crosses both thresholds`);
      }
    } else if (result.clearedEvents || result.compactions) {
      problems.push(`${where}: the huge window still cleared ${result.clearedEvents} / compacted ${result.compactions} times`);
    }
  }
  return problems;
}

export function printLongLoopFacts(results: LongLoopResult[], title = "1b."): void {
  const of = (variant: LoopVariant) => results.filter((result) => result.variant === variant);
  const med = (values: number[]) => median(values);
  const line = (label: string, value: (result: LongLoopResult) => number, format: (value: number) => string = (value) => fmt(value)) => {
    const cells = (["managed", "unmanaged"] as const).map((variant) => {
      const values = of(variant).map(value);
      if (!values.length) return "-";
      const low = Math.min(...values);
      const high = Math.max(...values);
      return low === high ? format(low) : `${format(med(values))} (${format(low)}–${format(high)})`;
    });
    console.log(`${label.padEnd(52)}${cells[0]!.padStart(26)}${cells[1]!.padStart(28)}`);
  };
  console.log(`\n== ${title} what the runs did (median over runs; range when runs differ)`);
  const window = of("managed")[0]?.contextWindow ?? SMALL_WINDOW;
  console.log(`${"".padEnd(52)}${`managed (${window})`.padStart(26)}${`unmanaged (${HUGE_WINDOW})`.padStart(28)}`);
  const integer = (value: number) => String(Math.round(value));
  line("turn requests", (result) => result.requests, integer);
  line("compaction requests", (result) => result.compactionRequests, integer);
  line("largest turn request, heuristic tokens", (result) => result.largestTurn.estimate, integer);
  line("largest turn request, JSON length / 4", (result) => result.largestTurn.json, integer);
  line("largest compaction request, heuristic tokens", (result) => result.largestCompaction?.estimate ?? 0, integer);
  line("largest compaction request, JSON length / 4", (result) => result.largestCompaction?.json ?? 0, integer);
  line("largest estimated_tokens in model_call.started", (result) => result.largestEventEstimate, integer);
  line("usable request limit (window - answer reserve)", (result) => result.requestLimit, integer);
  line("context.cleared events", (result) => result.clearedEvents, integer);
  line("  tool results cleared", (result) => result.clearedResults, integer);
  line("context.compacted events", (result) => result.compactions, integer);
  line("  compaction failures / repairs", (result) => result.compactionFailures + result.repairs, integer);
  line(
    "prefix_stable_ratio (stable / compared)",
    (result) => (result.prefixCompared ? result.prefixStable / result.prefixCompared : Number.NaN),
    (value) => value.toFixed(3),
  );
  line("prompt tokens reported (sum over calls)", (result) => result.promptTokens, integer);
  line("session.jsonl size", (result) => result.sessionBytes / 2 ** 20, mb);
  line(
    "restoreSession(session.jsonl) after the run, ms",
    (result) => result.restoreMs,
    (value) => fmt(value),
  );
  line(
    "  restored conversation = live one (JSON)",
    (result) => (result.restoredEqual ? 1 : 0),
    (value) => (value === 1 ? "identical" : "DIFFERENT"),
  );
  line("events.jsonl size", (result) => result.eventsBytes / 2 ** 20, mb);
  line("results kept whole in tool-results/", (result) => result.fullOutputs, integer);
  line("RSS at the start of the measured run", (result) => result.rssStartMb, mb);
  line("RSS peak during the run (10 ms samples)", (result) => result.rssPeakMb, mb);
  line("  peak - start", (result) => result.rssPeakMb - result.rssStartMb, mb);
  line("heapUsed peak (10 ms samples)", (result) => result.heapPeakMb, mb);
  line("maxRSS of the child process", (result) => result.maxRssMb, mb);
  const managed = of("managed");
  if (managed.length) {
    const worst = Math.max(
      ...managed.map((result) =>
        Math.max(result.largestTurn.estimate, result.largestTurn.json, result.largestCompaction?.json ?? 0, result.largestCompaction?.estimate ?? 0),
      ),
    );
    console.log(
      `   largest request of any managed run: ${worst} tokens = ${((worst / window) * 100).toFixed(1)} % of the ${window}-token window: ${worst < window ? "UNDER" : "OVER"}`,
    );
  }
}

/** The model each wire's usage is priced as: Sonnet 4.5 for Anthropic, GPT-4.1 for both OpenAI APIs (price table, src/model/price-table.ts). */
const PRICED_AS: Record<WireName, string> = { "openai-chat": "gpt-4.1", anthropic: "claude-sonnet-4-5", "openai-responses": "gpt-4.1" };

/**
 * Table 1c, one row per wire and variant (median over runs): prompt, cached
 * and cache-write tokens summed over every call (turn and compaction), their
 * ratio, prefix_stable_ratio, cost at {@link PRICED_AS} with the cache and
 * without it (the same usage with cached and cache-write tokens priced as
 * plain input: the scripted conversation is deterministic, so a run without
 * caching sends the same prompt tokens), and the client's overhead per turn
 * call (complete() minus the server's handling, {@link ServerClock}).
 */
export function printProviderCaching(results: LongLoopResult[]): void {
  console.log(`\n== 1c. providers and caching (median over runs; tokens summed over every call; overhead per turn call pooled over runs)`);
  const header = [
    "wire / variant (window)".padEnd(40),
    "prompt".padStart(11),
    "cached".padStart(11),
    "write".padStart(10),
    "ratio".padStart(7),
    "stable".padStart(7),
    "USD cached".padStart(11),
    "USD off".padStart(10),
    "saved".padStart(6),
    "client ms p50 (p90)".padStart(21),
    "code ms p50".padStart(12),
    "KB p50".padStart(8),
    "server ms p50".padStart(14),
  ];
  console.log(header.join(""));
  for (const wire of LOOP_WIRES) {
    const entry = lookupPrices(PRICED_AS[wire]);
    if (!entry) throw new Error(`the price table has no ${PRICED_AS[wire]}`);
    for (const variant of ["managed", "unmanaged"] as const) {
      const runs = results.filter((result) => result.wire === wire && result.variant === variant);
      if (!runs.length) continue;
      const med = (value: (result: LongLoopResult) => number) => median(runs.map(value));
      const prompt = med((result) => result.usage.prompt_tokens);
      const cached = med((result) => result.usage.cached_tokens);
      const write = med((result) => result.usage.cache_write_tokens);
      const stable = med((result) => (result.prefixCompared ? result.prefixStable / result.prefixCompared : Number.NaN));
      const withCache = med((result) => costOf(result.usage, entry.prices));
      const without = med((result) => costOf({ ...result.usage, cached_tokens: 0, cache_write_tokens: 0 }, entry.prices));
      const overhead = runs.flatMap((result) => result.clientOverheadMs);
      const server = runs.flatMap((result) => result.serverMs);
      const ratio = prompt ? cached / prompt : Number.NaN;
      const goal = wire === "anthropic" ? 0.9 : stable;
      const tokens = (value: number) => `${(value / 1e6).toFixed(2)} M`;
      console.log(
        [
          `${wire} / ${variant} (${runs[0]!.contextWindow})`.padEnd(40),
          tokens(prompt).padStart(11),
          tokens(cached).padStart(11),
          tokens(write).padStart(10),
          `${ratio.toFixed(3)}${ratio >= goal - 1e-9 ? " " : "!"}`.padStart(7),
          stable.toFixed(3).padStart(7),
          formatUsd(withCache).padStart(11),
          formatUsd(without).padStart(10),
          `${Math.round((1 - withCache / without) * 100)}%`.padStart(6),
          `${fmt(median(overhead))} (${fmt(p90(overhead))})`.padStart(21),
          fmt(median(runs.flatMap((result) => result.clientCodeMs))).padStart(12),
          (median(runs.flatMap((result) => result.requestBytes)) / 1024).toFixed(0).padStart(8),
          fmt(median(server)).padStart(14),
        ].join(""),
      );
    }
  }
  console.log(
    `   priced as ${LOOP_WIRES.map((wire) => `${wire} = ${PRICED_AS[wire]}`).join(", ")} (price table of ${PRICE_TABLE_DATE}); "USD off" = the same usage with cached and cache-write tokens at the input price.\n` +
      `   ratio = cached / prompt, marked ! when under its goal (anthropic 0.90, the others the run's prefix_stable_ratio); stable = prefix_stable_ratio.\n` +
      `   client ms = complete() minus the scripted server's handling of the request (node:diagnostics_channel http.server.request.start -> response.finish);\n` +
      `   code ms = the part of it outside Node's fetch (complete() start -> undici:request:create, undici:request:trailers -> complete() end); the rest is fetch and loopback; KB = request body.`,
  );
}
