/**
 * Long-run benchmarks (issue 5 "Measure"): `npx tsx bench/long-run.bench.ts`
 * (see bench/README.md, "Long runs").
 *
 * 1. loop: a 300-step scripted run through runAgentLoop (FakeSandbox, each
 *    wire's real provider client (OpenAIModelClient, AnthropicModelClient,
 *    OpenAIResponsesModelClient) against ScriptedModelServer on 127.0.0.1
 *    speaking that wire, with its prompt-cache simulator; session
 *    journal, event log and tool-result store in a temp run directory) with a
 *    16 000-token window, so clearing happens often and compaction several
 *    times; baseline in the same run: the same script with a 10 000 000-token
 *    window (no clearing, no compaction). Each run in its own child process.
 *    Per wire: prompt / cached / cache-write tokens, cost at the price table
 *    with and without caching, and the client's overhead per call.
 * 2. resume: the real CLI (dist/cli/main.js; `npm run build` first) on a copy
 *    of examples/fix-median with a scripted model that reaches `run_shell
 *    sleep 600`; the runner is SIGKILLed when events.jsonl shows that call
 *    started, then `runner resume <id>` is timed until it exits 0. Baseline in
 *    the same run: `runner exec` of the same task without the sleep step.
 *
 * Network: only 127.0.0.1 (scripted model servers) and the Docker socket; the
 * sandboxes run with network none. Cleanup: temp directories are removed;
 * containers of the bench's runs are removed at the end and on Ctrl-C.
 *
 * Options: --only=loop,resume   parts to run (default both)
 *          --rounds=N           loop runs per variant (default 5)
 *          --resume-rounds=N    kill/resume rounds and exec rounds (default 5)
 *          --steps=N            scripted steps of the loop part (default 300)
 *          --window=N           the managed run's model.context_window (default 16000)
 *          --wire=LIST          loop wires: openai-chat,anthropic,openai-responses (default all three)
 */
import { cpus, loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { median, printTable, type Row } from "./lib/stats.js";
import {
  checkLongLoop,
  HUGE_WINDOW,
  LONG_STEPS,
  longLoopChild,
  LOOP_WIRES,
  printLongLoopFacts,
  printProviderCaching,
  runLongLoopChild,
  SMALL_WINDOW,
  type LongLoopResult,
  type LoopVariant,
} from "./sections/long-loop.js";
import { benchResume, RESUME_CLI } from "./sections/resume-kill.js";
import { option, positiveOption } from "./lib/options.js";
import type { WireName } from "../src/model/scripted-wire.js";

const steps = positiveOption("steps", LONG_STEPS);
const window = positiveOption("window", SMALL_WINDOW);
const wires = (option("wire") ?? LOOP_WIRES.join(",")).split(",").map((wire) => wire.trim()) as WireName[];
for (const wire of wires) if (!LOOP_WIRES.includes(wire)) throw new Error(`--wire: unknown wire ${wire}; use ${LOOP_WIRES.join(", ")}`);
const child = option("child");
if (child !== undefined) {
  if (child !== "managed" && child !== "unmanaged") throw new Error(`--child=${child}: managed or unmanaged`);
  if (wires.length !== 1) throw new Error("--child runs one --wire");
  await longLoopChild(child, wires[0]!, steps, window);
  process.exit(0);
}

const parts = new Set((option("only") ?? "loop,resume").split(",").map((part) => part.trim()));
for (const part of parts) if (!["loop", "resume"].includes(part)) throw new Error(`unknown part ${part}; use loop, resume`);
const loopRounds = positiveOption("rounds", 5);
const resumeRounds = positiveOption("resume-rounds", 5);
const script = fileURLToPath(import.meta.url);

/** Part 1 on one wire: every round's managed and unmanaged runs, tables 1a and 1b; returns the runs. */
async function benchLoopWire(wire: WireName, number: string): Promise<LongLoopResult[]> {
  console.log(
    `\n${number}. ${wire}: ${steps}-step scripted run, window ${window} (managed) vs ${HUGE_WINDOW} (unmanaged), ${loopRounds} runs each, one child process per run`,
  );
  const results: LongLoopResult[] = [];
  for (let round = 0; round < loopRounds; round += 1) {
    const order: LoopVariant[] = round % 2 === 0 ? ["managed", "unmanaged"] : ["unmanaged", "managed"];
    for (const variant of order) {
      const result = await runLongLoopChild(script, variant, wire, steps, window);
      results.push(result);
      console.log(
        `   run ${round + 1} ${variant.padEnd(9)} wall ${result.wallMs.toFixed(0).padStart(6)} ms, model ${result.modelMs.toFixed(0).padStart(6)} ms, ` +
          `loop ${(result.wallMs - result.modelMs).toFixed(0).padStart(5)} ms, cleared ${result.clearedEvents}, compacted ${result.compactions}, maxRSS ${result.maxRssMb.toFixed(0)} MB`,
      );
    }
  }
  const of = (variant: LoopVariant) => results.filter((result) => result.variant === variant);
  const managed = of("managed");
  const unmanaged = of("unmanaged");
  const rows: Row[] = [
    {
      name: "wall, unmanaged (baseline)",
      samples: unmanaged.map((result) => result.wallMs),
      note: `whole runAgentLoop, ${steps} steps + the final answer, closing the journal and event log`,
    },
    { name: "wall, managed", samples: managed.map((result) => result.wallMs), baseline: "wall, unmanaged (baseline)" },
    { name: "in model.complete, unmanaged", samples: unmanaged.map((result) => result.modelMs) },
    {
      name: "in model.complete, managed",
      samples: managed.map((result) => result.modelMs),
      baseline: "in model.complete, unmanaged",
      note: "turn + compaction calls (HTTP, JSON both ways, the in-process server)",
    },
    { name: "  of which compaction calls, managed", samples: managed.map((result) => result.compactionModelMs), baseline: "in model.complete, managed" },
    { name: "loop excl. model, unmanaged", samples: unmanaged.map((result) => result.wallMs - result.modelMs) },
    {
      name: "loop excl. model, managed",
      samples: managed.map((result) => result.wallMs - result.modelMs),
      baseline: "loop excl. model, unmanaged",
      note: "wall - model: tools, journal, event log, redaction, estimates, clearing, compaction bookkeeping",
    },
    {
      name: "per-step overhead, unmanaged",
      samples: unmanaged.flatMap((result) => result.overheadMs),
      note: "end of turn call k -> start of turn call k+1, minus compaction calls; all steps of all runs",
    },
    { name: "per-step overhead, managed", samples: managed.flatMap((result) => result.overheadMs), baseline: "per-step overhead, unmanaged" },
    {
      name: "  managed, steps with no clearing",
      samples: managed.flatMap((result) => result.overheadPlainMs),
      note: "split by what fitContext did before the next call (same runs)",
    },
    { name: "  managed, steps that cleared", samples: managed.flatMap((result) => result.overheadClearMs), baseline: "  managed, steps with no clearing" },
    {
      name: "  managed, steps that compacted",
      samples: managed.flatMap((result) => result.overheadCompactMs),
      baseline: "  managed, steps with no clearing",
      note: "the summary call itself excluded",
    },
    { name: "step, unmanaged", samples: unmanaged.flatMap((result) => result.stepMs), note: "model_call.started -> next model_call.started" },
    { name: "step, managed", samples: managed.flatMap((result) => result.stepMs), baseline: "step, unmanaged" },
    { name: "turn call, unmanaged", samples: unmanaged.flatMap((result) => result.turnCallMs) },
    { name: "turn call, managed", samples: managed.flatMap((result) => result.turnCallMs), baseline: "turn call, unmanaged" },
  ];
  printTable(
    `${number}a. ${wire}, ${steps}-step run: time (per run, or per step pooled over runs)`,
    rows.filter((row) => row.samples.length > 0),
  );
  console.log(
    `   the bench's own sizing of each recorded request (JSON.stringify after the call) is taken out of every time above: ` +
      `median ${median(managed.map((result) => result.measureMs)).toFixed(0)} ms per managed run, ${median(unmanaged.map((result) => result.measureMs)).toFixed(0)} ms per unmanaged run`,
  );
  printLongLoopFacts(results, `${number}b. ${wire}`);
  return results;
}

const load = () =>
  loadavg()
    .map((value) => value.toFixed(2))
    .join(" ");
console.log(`agent-runner long-run bench: node ${process.version}, ${cpus().length} CPUs, load ${load()}`);
const benchStarted = performance.now();
let failed = false;

try {
  if (parts.has("loop")) {
    const started = performance.now();
    const all: LongLoopResult[] = [];
    for (const [wireIndex, wire] of wires.entries()) {
      const results = await benchLoopWire(wire, `1.${wireIndex + 1}`);
      all.push(...results);
      const problems = checkLongLoop(results, steps);
      if (problems.length) {
        failed = true;
        console.log(`   PROBLEMS:\n${problems.map((problem) => `   - ${problem}`).join("\n")}`);
      }
    }
    printProviderCaching(all);
    console.log(`   (part 1: ${((performance.now() - started) / 1000).toFixed(1)} s)`);
  }
  if (parts.has("resume")) {
    const started = performance.now();
    console.log(`\n2. runner resume after kill -9 vs a fresh runner exec (real CLI ${RESUME_CLI}, real Docker), ${resumeRounds} rounds`);
    const ok = await benchResume(resumeRounds);
    if (!ok) failed = true;
    console.log(`   (part 2: ${((performance.now() - started) / 1000).toFixed(1)} s)`);
  }
} catch (error) {
  failed = true;
  console.error(`\nbench failed: ${(error as Error).stack ?? error}`);
}
console.log(`\ntotal ${((performance.now() - benchStarted) / 1000).toFixed(1)} s; load now ${load()}`);
process.exit(failed ? 1 : 0);
