/**
 * The Runner library against the CLI (issue "The run core as a library",
 * Measure): time from `runner.start()` to the run's first event, and the
 * memory of 4 concurrent runs in one process against 4 `runner exec`
 * processes, in the same run of this script.
 *
 *   npx tsx bench/library.bench.ts [--rounds=5]
 *
 * Each run is a scripted task of 3 shell steps on a small repository (real
 * Docker, the scripted model on 127.0.0.1). Memory: the library side is the
 * peak RSS of a child process that runs the 4 runs through `createRunner`
 * (the same built package `runner exec` uses), the CLI side the sum of the 4
 * processes' peak RSS (`/usr/bin/time -f %M`). Needs `make build` first.
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { createRunner } from "../src/runner/runner.js";
import { positiveOption } from "./lib/options.js";
import { fmt, median, printTable } from "./lib/stats.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const CLI = join(ROOT, "dist/cli/main.js");
const rounds = positiveOption("rounds", 5);
const scratch = mkdtempSync(join(tmpdir(), "agent-runner-bench-library-"));

/** A repository, a script and a task.yaml of `name` under the scratch directory; returns the task file. */
function makeTask(name: string): string {
  const directory = join(scratch, name);
  const repo = join(directory, "repo");
  execFileSync("mkdir", ["-p", repo]);
  writeFileSync(join(repo, "a.txt"), "a\n");
  const git = (...args: string[]) => execFileSync("git", ["-c", "user.name=bench", "-c", "user.email=bench@localhost", ...args], { cwd: repo });
  git("init", "-q");
  git("add", "-A");
  git("commit", "-qm", "initial");
  const turns = [1, 2, 3].map((step) => ({ tool_calls: [{ name: "run_shell", arguments: { command: `echo step-${step}` } }] }));
  writeFileSync(join(directory, "script.yaml"), JSON.stringify({ turns: [...turns, { content: "Done." }] }));
  const task = join(directory, "task.yaml");
  writeFileSync(task, JSON.stringify({ name, instruction: "x", workspace: "./repo", model: { provider: "scripted", script: "./script.yaml" } }));
  return task;
}

/** Peak RSS (KiB) of a command, from GNU time. */
function peakRss(command: string[], environment: NodeJS.ProcessEnv): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = spawn("/usr/bin/time", ["-f", "RSS %M", ...command], { cwd: ROOT, env: environment, stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.on("error", reject);
    child.on("close", () => {
      const match = /RSS (\d+)\s*$/.exec(stderr.trim());
      if (match) resolve(Number(match[1]));
      else reject(new Error(`no RSS from ${command.join(" ")}: ${stderr.slice(-500)}`));
    });
  });
}

const LIBRARY_CHILD = `
import { createRunner } from "agent-runner";
const runner = await createRunner();
const runs = await Promise.all(process.argv.slice(1).map((task) => runner.start(task)));
for (const run of runs) {
  const report = await run.result;
  if (report.status !== "succeeded") { console.error(report.status, report.reason, report.error); process.exitCode = 1; }
}
await runner.close();
`;

async function main(): Promise<void> {
  console.log(
    `agent-runner bench (library): node ${process.version}, load ${loadavg()
      .map((value) => value.toFixed(2))
      .join(" ")}, ${rounds} rounds`,
  );
  const home = join(scratch, "home");
  const environment = { ...process.env, RUNNER_HOME: home };
  const tasks = [0, 1, 2, 3].map((index) => makeTask(`bench-${index}`));
  const firstEvent: number[] = [];
  const libraryRss: number[] = [];
  const cliRss: number[] = [];
  const runner = await createRunner({ home });
  try {
    for (let round = 0; round < rounds; round += 1) {
      // start() → the first event of the run, in this process.
      const started = performance.now();
      const run = await runner.start(tasks[0]!);
      for await (const envelope of run.events()) {
        void envelope;
        firstEvent.push(performance.now() - started);
        break;
      }
      await run.result;
      // Memory, alternating which side goes first.
      const library = () => peakRss([process.execPath, "--input-type=module", "-e", LIBRARY_CHILD, ...tasks], environment);
      const cli = async () =>
        (await Promise.all(tasks.map((task) => peakRss([process.execPath, CLI, "exec", task], environment)))).reduce((sum, value) => sum + value, 0);
      if (round % 2 === 0) {
        libraryRss.push(await library());
        cliRss.push(await cli());
      } else {
        cliRss.push(await cli());
        libraryRss.push(await library());
      }
    }
  } finally {
    await runner.close();
  }
  printTable("runner.start() to the first event (one run, in process)", [{ name: "start() → first event", samples: firstEvent }]);
  const mib = (kib: number[]) => kib.map((value) => value / 1024);
  console.log("\n== memory of 4 concurrent runs (MiB, peak RSS)");
  console.log(`4 runs in one process (createRunner)     median ${fmt(median(mib(libraryRss)))} MiB`);
  console.log(`4 runner exec processes (sum of peaks)   median ${fmt(median(mib(cliRss)))} MiB`);
  console.log(`ratio library / CLI                      ${(median(libraryRss) / median(cliRss)).toFixed(2)}x`);
}

try {
  await main();
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
