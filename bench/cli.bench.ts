/**
 * A quick CLI (issue 13 "A quick CLI"): wall-clock time of the built CLI's
 * commands that touch no sandbox and no model, each as a fresh process, beside
 * `node -e 0` (the floor: node's own start), in the same run of this script.
 *
 *   npx tsx bench/cli.bench.ts [--rounds=20] [--before=DIR]
 *
 * `--before=DIR` also times DIR/cli/main.js (a build of an older commit put
 * inside this checkout, e.g. `dist-before/`, so it finds node_modules) in the
 * same rounds, as rows "before: ...". Wall time moves with the machine's
 * load; so the table also gives each process's CPU time (user + sys, from
 * GNU time), which load moves much less.
 *
 * Goal: each command <= 150 ms p50. Needs `npm run build` first (it times
 * dist/cli/main.js, as a user's `runner` runs it). `runs`, `show` and `logs` read a
 * RUNNER_HOME of this script's own holding one recorded run (a report.json and
 * an events.jsonl, no container); nothing touches Docker or the network.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { option, positiveOption } from "./lib/options.js";
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
    JSON.stringify({
      run_id: id,
      task: "bench",
      status: "succeeded",
      reason: "finished_unverified",
      steps: 1,
      tool_calls: 0,
      branch: `runner/${id}`,
      duration_ms: 1000,
      usage: { prompt_tokens: 1, completion_tokens: 1 },
      agents: [],
      denials: {},
    }),
  );
  writeFileSync(join(directory, "events.jsonl"), "");
  return id;
}

/** CPU time (user + sys, ms) of each timed process, by variant name. */
const cpu: Record<string, number[]> = {};

/** Runs `command` to its end under GNU time; a failing command stops the bench (a number for a failure would mean nothing). */
function run(name: string, command: string[]): () => Promise<void> {
  return async () => {
    const result = spawnSync("/usr/bin/time", ["-f", "CPU %U %S", ...command], {
      env: { ...process.env, RUNNER_HOME: home },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const stderr = result.stderr.toString();
    if (result.status !== 0) throw new Error(`${command.join(" ")} exited ${result.status}: ${stderr.slice(0, 500)}`);
    const match = /CPU ([\d.]+) ([\d.]+)\s*$/.exec(stderr);
    if (!match) throw new Error(`no CPU time from GNU time: ${stderr.slice(-300)}`);
    (cpu[name] ??= []).push((Number(match[1]) + Number(match[2])) * 1000);
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
    [`runner logs <id>`]: [node, CLI, "logs", id],
    "runner policy check worker": [node, CLI, "policy", "check", "worker"],
    ...(process.argv.includes("--no-completion") ? {} : { "runner completion bash": [node, CLI, "completion", "bash"] }),
  };
  const before = option("before");
  if (before) {
    const old = join(resolve(before), "cli/main.js");
    for (const [name, command] of Object.entries(commands)) {
      if (name.startsWith("runner") && !name.includes("completion")) commands[`before: ${name}`] = command.map((part) => (part === CLI ? old : part));
    }
  }
  console.log(
    `cli bench: ${rounds} rounds, node ${process.version}, load ${loadavg()
      .map((value) => value.toFixed(2))
      .join(" ")}`,
  );
  const samples = await interleave(Object.fromEntries(Object.entries(commands).map(([name, command]) => [name, run(name, command)])), rounds, 3);
  const rows: Row[] = Object.keys(commands).map((name) => ({ name, samples: samples[name]!, ...(name === "node -e 0" ? {} : { baseline: "node -e 0" }) }));
  printTable("fresh process, wall clock (spawnSync)", rows);
  // Warm-up rounds ran too: only the timed rounds' CPU samples count.
  printTable(
    "the same processes, CPU time (user + sys, GNU time, 10 ms resolution)",
    rows.map((row) => ({ ...row, samples: cpu[row.name]!.slice(-row.samples.length) })),
  );
  console.log("\nGoals:");
  for (const name of Object.keys(commands).filter((name) => name.startsWith("runner"))) console.log(goal(name, samples[name], 150));
  console.log(
    `load after: ${loadavg()
      .map((value) => value.toFixed(2))
      .join(" ")}`,
  );
} finally {
  rmSync(home, { recursive: true, force: true });
}
