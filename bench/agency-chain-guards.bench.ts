/**
 * The chain guards of an agency (issue 22 items 1, 7, 9): what each decision
 * costs the orchestrator, per decision, against the JSON.parse of one event
 * line that the orchestrator already pays for every event it reads (same run).
 *
 *   npx tsx bench/agency-chain-guards.bench.ts [--rounds=15] [--decisions=20000] [--invocations=200]
 *
 * hops: `withinHops` over an invocation's outbox of 3 events (once per
 * invocation end). budget: `AgencyBudget.exhausted()` with `--invocations`
 * finished invocations (once per invocation start; it sums them, so it grows
 * with the agency). stops: `ChainStops.observe` of an event that is no stop
 * (once per event read). Samples are ms per decision (a round's time / decisions).
 */
import { performance } from "node:perf_hooks";
import { AgencyBudget } from "../src/agency/guards/agency-budget.js";
import { ChainStops } from "../src/agency/guards/chain-stops.js";
import { withinHops } from "../src/agency/guards/hop-limit.js";
import { createAgencyEvent } from "../src/bus/agency-event.js";
import { positiveOption } from "./lib/options.js";
import { fmt, median, printTable, type Row } from "./lib/stats.js";

const rounds = positiveOption("rounds", 15);
const decisions = positiveOption("decisions", 20_000);
const invocations = positiveOption("invocations", 200);

const event = (hops: number) =>
  createAgencyEvent({
    type: "coding.code.ready",
    source: "agent-runner://agencies/bench/agents/coder",
    correlationid: "bench",
    data: { summary: "x".repeat(200) },
    hops,
  });
const outbox = [event(7), event(8), event(9)];
const line = JSON.stringify(outbox[0]);
const costs = Array.from({ length: invocations }, (_, index) => (index % 10 === 0 ? null : 0.0123));
const budget = new AgencyBudget(1_000_000, () => costs);
const stops = new ChainStops();

let sink = 0;
const variants: Record<string, () => void> = {
  "baseline: JSON.parse of one event line": () => {
    sink += (JSON.parse(line) as { hops: number }).hops;
  },
  "hops: withinHops, outbox of 3": () => {
    sink += withinHops(outbox, 8).refused.length;
  },
  [`budget: exhausted(), ${invocations} invocations`]: () => {
    sink += budget.exhausted() ? 1 : 0;
  },
  "stops: observe a non-stop event": () => {
    stops.observe(outbox[0]!);
  },
};

const samples = new Map<string, number[]>(Object.keys(variants).map((name) => [name, []]));
for (let round = 0; round < rounds; round += 1) {
  // Round-robin: background load hits every variant alike.
  for (const [name, decide] of Object.entries(variants)) {
    const started = performance.now();
    for (let index = 0; index < decisions; index += 1) decide();
    samples.get(name)!.push((performance.now() - started) / decisions);
  }
}
const baseline = "baseline: JSON.parse of one event line";
const rows: Row[] = [...samples].map(([name, values]) => ({ name, samples: values, ...(name === baseline ? {} : { baseline }) }));
printTable(`chain guards: ms per decision (${decisions} decisions a round, ${rounds} rounds)`, rows);
for (const [name, values] of samples) if (name !== baseline) console.log(`  ${name}: median ${fmt(median(values) * 1000)} µs per decision`);
if (sink < 0) console.log(sink);
