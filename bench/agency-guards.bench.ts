/**
 * The agency's guards (issue 22): what a circuit-breaker decision and a
 * token-bucket decision cost, and what an agency with every guard on costs
 * against the same agency with none. Goals (the issue): each decision
 * < 50 µs (median); every guard on adds < 5 % wall time.
 *
 *   npx tsx bench/agency-guards.bench.ts [--rounds=3] [--events=200] [--samples=200] [--only=decisions,agency]
 *
 * decisions: `--samples` batches of 1 000 calls each, per call in µs —
 * CircuitBreaker.observe (fold one `agency.invocation.finished`),
 * CircuitBreaker.decide, BreakerRouter.route of a closed breaker (what the
 * orchestrator awaits per event), token-bucket `take`, and an invocation's
 * gate `beforeToolCall` on a bucket with room (what the agent loop awaits per
 * tool call, state-file write scheduled included). Baseline: an empty async
 * call, the floor of any awaited decision.
 *
 * agency: `--events` start events, each an invocation of one agent
 * (max_concurrency 4: a read_file call, then a final answer) on the
 * Docker-free tier (HostDirectorySandboxProvider, real git, an in-process
 * model that answers at once), run `--rounds` times each way, interleaved:
 * `none` (no guard field) against `all guards` (rate_limit with limits it
 * never reaches, circuit_breaker with a fallback, and the agency-wide
 * max_hops / budget / mode fields and output_schema the other guards read).
 * No limit is reached, so the difference is the guards' bookkeeping.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { createRunner } from "../src/agency/agency.js";
import { BreakerRouter } from "../src/agency/guards/breaker-router.js";
import { CircuitBreaker } from "../src/agency/guards/circuit-breaker.js";
import { systemClock } from "../src/agency/guards/clock.js";
import { RateLimits } from "../src/agency/guards/rate-limits.js";
import { take, type BucketState } from "../src/agency/guards/token-bucket.js";
import type { AgentDefinition } from "../src/agency/load-agency.js";
import { createAgencyEvent } from "../src/bus/agency-event.js";
import type { ModelClient, ModelRequest, ModelResponse } from "../src/model/model-client.js";
import { HostDirectorySandboxProvider } from "../src/sandbox/fake/host-directory-sandbox.js";
import { option, positiveOption } from "./lib/options.js";
import { fmt, interleave, median, printTable, type Row } from "./lib/stats.js";

const rounds = positiveOption("rounds", 3);
const eventCount = positiveOption("events", 200);
const samples = positiveOption("samples", 200);
const parts = new Set((option("only") ?? "decisions,agency").split(","));
const BATCH = 1000;

/** `samples` batches of BATCH calls of `call`, each batch's time per call in µs. */
async function perCall(call: (index: number) => unknown): Promise<number[]> {
  const perCallMicroseconds: number[] = [];
  let index = 0;
  for (let sample = 0; sample < samples; sample += 1) {
    const started = performance.now();
    for (let k = 0; k < BATCH; k += 1) await call((index += 1));
    perCallMicroseconds.push(((performance.now() - started) * 1000) / BATCH);
  }
  return perCallMicroseconds;
}

async function benchDecisions(): Promise<void> {
  const policy = { window_seconds: 300, min_invocations: 4, failure_rate: 0.5, cooldown_seconds: 120 };
  const agent = {
    name: "coder",
    triggers: ["task.ready"],
    policies: { max_concurrency: 1, timeout_seconds: 600, circuit_breaker: policy, rate_limit: { tool_calls_per_minute: 1e12 } },
  } as AgentDefinition;
  const start = Date.now();
  // Three successes to a failure: the window fills but never opens, as in a healthy agency.
  const finished = Array.from({ length: samples * BATCH + 1 }, (_, index) =>
    createAgencyEvent({
      type: "agency.invocation.finished",
      source: "agent-runner://agencies/bench/orchestrator",
      correlationid: "bench",
      id: `finished-${index}`,
      time: new Date(start + index),
      data: { agent: "coder", invocation_id: `coder-${index}`, status: index % 4 === 3 ? "failed" : "succeeded" },
    }),
  );
  const task = createAgencyEvent({ type: "task.ready", source: "agent-runner://agencies/bench/outside", correlationid: "bench" });
  const breaker = new CircuitBreaker("coder", policy);
  const router = new BreakerRouter([agent], systemClock, async () => task);
  const signal = new AbortController().signal;
  let bucket: BucketState | undefined;
  const directory = mkdtempSync(join(tmpdir(), "agency-guards-bench-"));
  const limits = new RateLimits(join(directory, "rate-limits.json"), systemClock, async () => undefined);
  const gate = limits.gateFor(agent, "coder-0")!;
  const call = { name: "read_file", toolCallId: "call" };
  try {
    const rows: Row[] = [
      { name: "empty async call", samples: await perCall(async () => undefined) },
      { name: "breaker: fold one finished event", samples: await perCall((index) => breaker.observe(finished[index]!)), baseline: "empty async call" },
      { name: "breaker: decide", samples: await perCall(() => breaker.decide(Date.now())), baseline: "empty async call" },
      { name: "breaker: route (closed)", samples: await perCall(() => router.route(agent, task, () => false, signal)), baseline: "empty async call" },
      {
        name: "bucket: take",
        samples: await perCall(() => {
          bucket = take(bucket, 1e12, 1, Date.now()).state;
        }),
        baseline: "empty async call",
      },
      { name: "bucket: gate beforeToolCall", samples: await perCall(() => gate.beforeToolCall(call, signal)), baseline: "empty async call" },
    ];
    printTable("guard decisions, µs per call (the table's ms columns are µs here)", rows);
    for (const row of rows.slice(1))
      console.log(`  ${row.name}: ${median(row.samples) < 50 ? "MET " : "MISS"} < 50 µs (median ${fmt(median(row.samples))} µs)`);
  } finally {
    limits.flush();
    rmSync(directory, { recursive: true, force: true });
  }
}

const USAGE = { prompt_tokens: 10, completion_tokens: 5, cached_tokens: 0, cache_write_tokens: 0 };

function answer(partial: Partial<ModelResponse>): ModelResponse {
  return { content: null, toolCalls: [], finishReason: partial.toolCalls?.length ? "tool_calls" : "stop", usage: USAGE, ...partial };
}

/** An agency of `eventCount` start events for one worker (and, guarded, its fallback); returns agency.yaml. */
function writeAgency(root: string, guarded: boolean): string {
  const repo = join(root, "repo");
  mkdirSync(repo, { recursive: true });
  writeFileSync(join(repo, "README.md"), "bench\n");
  const git = (...args: string[]) => execFileSync("git", ["-c", "user.name=b", "-c", "user.email=b@localhost", ...args], { cwd: repo });
  git("init", "-q", "-b", "main");
  git("add", "-A");
  git("commit", "-qm", "initial");
  mkdirSync(join(root, "agents"));
  writeFileSync(join(root, "script.yaml"), JSON.stringify({ turns: [] }));
  const agent = (name: string, extra: Record<string, unknown>) =>
    writeFileSync(
      join(root, "agents", `${name}.yaml`),
      JSON.stringify({
        agent: {
          name,
          description: `the ${name}`,
          model: { provider: "scripted", script: "../script.yaml" },
          instructions: "bench",
          triggers: [{ event: "bench.work" }],
          capabilities: [{ tool: "read_file" }],
          ...extra,
        },
      }),
    );
  const guards = {
    policies: {
      max_concurrency: 4,
      rate_limit: { tool_calls_per_minute: 1e9, tokens_per_minute: 1e12, events_per_minute: 1e9 },
      circuit_breaker: { window_seconds: 300, min_invocations: 4, failure_rate: 0.5, cooldown_seconds: 120, fallback: "backup" },
    },
    output_schema: { type: "object", required: ["verdict"], properties: { verdict: { enum: ["approve", "changes_requested"] } } },
  };
  agent("worker", guarded ? guards : { policies: { max_concurrency: 4 } });
  if (guarded) agent("backup", { policies: { max_concurrency: 4 } });
  const file = join(root, "agency.yaml");
  const start = Array.from({ length: eventCount }, (_, index) => ({ type: "bench.work", subject: `w${index}` }));
  const agencyGuards = guarded ? { max_hops: 8, mode: "normal", budget: { max_cost_usd: 1000 } } : {};
  writeFileSync(file, JSON.stringify({ name: "bench", workspace: "./repo", goal: "bench.never", start, ...agencyGuards }));
  return file;
}

async function benchAgency(): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), "agency-guards-bench-"));
  const home = join(root, "home");
  const openModel = async () => ({
    close: async () => undefined,
    client: {
      complete: async (request: ModelRequest): Promise<ModelResponse> =>
        request.callIndex === 0
          ? answer({ toolCalls: [{ id: "read", type: "function", function: { name: "read_file", arguments: JSON.stringify({ path: "README.md" }) } }] })
          : answer({ content: JSON.stringify({ verdict: "approve" }) }),
    } satisfies ModelClient,
  });
  const runner = await createRunner({
    home,
    sandboxProvider: new HostDirectorySandboxProvider({ exec: async () => ({ exitCode: 127, stderr: "" }) }),
    openModel,
    environment: { PATH: process.env.PATH, HOME: home, RUNNER_DISK_ENFORCEMENT: "monitor" },
  });
  const files = { none: writeAgency(join(root, "none"), false), "all guards": writeAgency(join(root, "guarded"), true) };
  try {
    const run = async (file: string) => {
      const report = await (await runner.agency(file)).result;
      const done = report.invocations.filter((invocation) => invocation.status === "succeeded").length;
      if (done !== eventCount)
        throw new Error(`${done} of ${eventCount} invocations succeeded: ${JSON.stringify(report.invocations.find((i) => i.status !== "succeeded"))}`);
    };
    const measured = await interleave({ none: () => run(files.none), "all guards": () => run(files["all guards"]) }, rounds, 1);
    const rows: Row[] = [
      { name: "none", samples: measured.none! },
      { name: "all guards", samples: measured["all guards"]!, baseline: "none" },
    ];
    printTable(`an agency of ${eventCount} events (Docker-free tier), ms wall time`, rows);
    const ratio = median(measured["all guards"]!) / median(measured.none!);
    console.log(`  every guard on: ${ratio < 1.05 ? "MET " : "MISS"} < 1.05× (ratio of medians ${ratio.toFixed(3)})\n`);
  } finally {
    await runner.close();
    rmSync(root, { recursive: true, force: true });
  }
}

if (parts.has("decisions")) await benchDecisions();
if (parts.has("agency")) await benchAgency();
