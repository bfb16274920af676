/**
 * A quick CLI (issue 13 "A quick CLI"): wall-clock time of the built CLI's
 * commands that touch no sandbox and no model, each as a fresh process, beside
 * `node -e 0` (the floor: node's own start), in the same run of this script.
 *
 *   npx tsx bench/cli.bench.ts [--rounds=20]
 *
 * Goal: each command <= 150 ms p50. Needs `npm run build` first (it times
 * dist/cli/main.js, as a user's `runner` runs it). `runs` and `show` read a
 * RUNNER_HOME of this script's own holding one recorded run (a report.json and
 * an events.jsonl, no container); nothing touches Docker or the network.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { positiveOption } from "./lib/options.js";
import { goal, interleave, printTable, type Row } from "./lib/stats.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const CLI = join(ROOT, "dist/cli/main.js");
const rounds = positiveOption("rounds", 20);
const home = mkdtempSync(join(tmpdir(), "agent-runner-bench-cli-"));

/** One finished run's records, as `runner runs` and `runner show` read them. */
function recordRun(): string {
  const id = "20260101-000000-bench0";
  const directory = join(home, "runs", id);
  mkdirSync(directory, { recursive: true });
  writeFileSync(
    join(directory, "report.json"),
    JSON.stringify({ run_id: id, task: "bench", status: "succeeded", reason: "finished_unverified", steps: 1, tool_calls: 0, branch: `runner/${id}`, duration_ms: 1000, usage: { prompt_tokens: 1, completion_tokens: 1 }, agents: [], denials: {} }),
  );
  writeFileSync(join(directory, "events.jsonl"), "");
  return id;
}

/** Runs `command` to its end; a failing command stops the bench (a number for a failure would mean nothing). */
function run(command: string[]): () => Promise<void> {
  return async () => {
    const result = spawnSync(command[0]!, command.slice(1), { env: { ...process.env, RUNNER_HOME: home }, stdio: ["ignore", "pipe", "pipe"] });
    if (result.status !== 0) throw new Error(`${command.join(" ")} exited ${result.status}: ${result.stderr.toString().slice(0, 500)}`);
  };
}

try {
  const id = recordRun();
  const node = process.execPath;
  const commands: Record<string, string[]> = {
    "node -e 0": [node, "-e", "0"],
    "runner --version": [node, CLI, "--version"],
    "runner --help": [node, CLI, "--help"],
    "runner runs": [node, CLI, "runs"],
    [`runner show <id>`]: [node, CLI, "show", id],
    "runner policy check worker": [node, CLI, "policy", "check", "worker"],
    ...(process.argv.includes("--no-completion") ? {} : { "runner completion bash": [node, CLI, "completion", "bash"] }),
  };
  console.log(`cli bench: ${rounds} rounds, node ${process.version}, load ${loadavg().map((value) => value.toFixed(2)).join(" ")}`);
  const samples = await interleave(Object.fromEntries(Object.entries(commands).map(([name, command]) => [name, run(command)])), rounds, 3);
  const rows: Row[] = Object.keys(commands).map((name) => ({ name, samples: samples[name]!, ...(name === "node -e 0" ? {} : { baseline: "node -e 0" }) }));
  printTable("fresh process, wall clock (spawnSync)", rows);
  console.log("\nGoals:");
  for (const name of Object.keys(commands).filter((name) => name !== "node -e 0")) console.log(goal(name, samples[name], 150));
  console.log(`load after: ${loadavg().map((value) => value.toFixed(2)).join(" ")}`);
} finally {
  rmSync(home, { recursive: true, force: true });
}
