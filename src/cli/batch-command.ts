import { Command } from "commander";
import type { PrepareFlags, RunFlags } from "./batch-actions.js";

// The definitions only: each action imports ./batch-actions.js (the Runner, dockerode, the batch modules) when it runs,
// so `runner --help` and the other quick commands do not load them (src/cli/main.ts).

/**
 * `runner batch run | prepare | verify | resume | merge | show | export-predictions` (docs/batch.md, docs/importers.md). `signal` is the CLI's
 * interrupt (SIGINT/SIGTERM); `exit` receives the exit code.
 */
export function batchCommand(signal: AbortSignal, exit: (code: number) => void): Command {
  // addCommand does not pass the program's settings on: usage errors must still reach main as CommanderError (exit 2).
  const batch = new Command("batch")
    .description("run many tasks as one batch: shards, retries, resume, JUnit and markdown reports (docs/batch.md)")
    .exitOverride();
  batch
    .command("run")
    .exitOverride()
    .description("run every task of a directory, a quoted glob, a list file (.txt) or a JSONL file of tasks")
    .argument("<input>", "directory of task dirs / task.yaml files, a quoted glob, list.txt, or tasks.jsonl")
    .option("-j, --jobs <n>", "runs at once, in this process", "4")
    .option("--shard <i/n>", "run only shard i of n (stable, by a hash of the task id)")
    .option("--filter <regex>", "run only tasks whose id matches")
    .option("--limit <n>", "run at most n tasks (the first by id, after --filter and --shard)")
    .option("--attempts <k>", "independent attempts per task (pass@k; a flaky list)", "1")
    .option("--retries <n>", "new tries of an attempt that ended in an infrastructure error (never of an agent failure)", "0")
    .option("--min-pass-rate <x>", "gate: least pass rate (0..1) among tasks without errors", "1")
    .option("--max-errors <n>", "gate: attempts that may end in an error; past it (errors of runs) the batch stops (exit 3)", "0")
    .option("--budget-usd <x>", "start no run once the batch's runs cost this much, USD; the rest are skipped")
    .option("--deadline <duration>", "start no run this long after the batch (or its resume) started: 90s, 20m, 2h; the rest are skipped")
    .option("--junit <file>", "also write the JUnit XML there")
    .option("--summary <file>", "also write the markdown summary there (e.g. $GITHUB_STEP_SUMMARY)")
    .option("--json", "print the final report line as JSON: {batch_id, status, report}")
    .option("--nats <urls>", "run the tasks on `runner worker`s of a NATS JetStream cluster: nats://host:port[,host:port…] (docs/scale-out.md)")
    .option("--pool <name>", "with --nats: the workers' pool", "default")
    .option("--ack-wait <seconds>", "with --nats, when this creates the pool: how long a silent worker keeps a task (default 60)")
    .option("--max-deliver <n>", "with --nats, when this creates the pool: deliveries of a task before it is an error (default 3)")
    .addHelpText(
      "after",
      "\nExit codes: 0 the gate passes, 1 it does not, 2 bad input, 3 more errors than --max-errors (a broken task file or a missing image is its task's error and the others still run), 130 interrupted.",
    )
    .action(async (input: string, flags: RunFlags) => {
      exit(await (await import("./batch-actions.js")).batchRun(input, flags, signal));
    });
  batch
    .command("prepare")
    .exitOverride()
    .description("build or pull every image the tasks need, before any model call; names what cannot be had")
    .argument("<input>", "the input `batch run` takes: a directory, a quoted glob, list.txt, or tasks.jsonl")
    .option("--shard <i/n>", "only the tasks of shard i of n")
    .option("--filter <regex>", "only tasks whose id matches")
    .option("--limit <n>", "at most n tasks (the first by id, after --filter and --shard)")
    .option("--json", "print one JSON line per image: {need, tasks, image, source, error}")
    .addHelpText("after", "\nExit codes: 0 every image is ready, 2 bad input, 3 an image cannot be had.")
    .action(async (input: string, flags: PrepareFlags) => {
      exit(await (await import("./batch-actions.js")).batchPrepare(input, flags));
    });
  batch
    .command("verify")
    .exitOverride()
    .description("regrade: verify the commit of every finished attempt again, with no model call (writes batch-verify.json)")
    .argument("<batch-id>", "the batch id")
    .option("-j, --jobs <n>", "verifications at once", "4")
    .option("--json", "print batch-verify.json")
    .addHelpText(
      "after",
      "\nExit codes: 0 the regraded pass rate meets the batch's --min-pass-rate, 1 it does not, 2 bad input, 3 a run could not be verified.",
    )
    .action(async (batchId: string, flags: { jobs: string; json?: boolean }) => {
      exit(await (await import("./batch-actions.js")).batchVerify(batchId, flags));
    });
  batch
    .command("resume")
    .exitOverride()
    .description("continue a batch: finished tasks never run again; runs in flight resume from their journal")
    .argument("<batch-id>", "the batch id (`batch <id>`, the first line `batch run` printed)")
    .option("--json", "print the final report line as JSON: {batch_id, status, report}")
    .action(async (batchId: string, flags: { json?: boolean }) => {
      exit(await (await import("./batch-actions.js")).batchResume(batchId, flags, signal));
    });
  batch
    .command("merge")
    .exitOverride()
    .description("one report from the batch-report.json of each shard (as the unsharded batch would report, timings aside)")
    .argument("<reports...>", "batch-report.json files, one per shard")
    .option("--junit <file>", "also write the merged JUnit XML there")
    .option("--summary <file>", "also write the merged markdown summary there")
    .option("--json", "print the final report line as JSON: {batch_id, status, report}")
    .addHelpText(
      "after",
      "\nExit code: the merged gate's (0 passed, 1 failed, 3 infrastructure stop, 130 a shard was interrupted); 2 for reports that do not belong together.",
    )
    .action(async (files: string[], flags: { junit?: string; summary?: string; json?: boolean }) => {
      exit((await import("./batch-actions.js")).batchMerge(files, flags));
    });
  batch
    .command("show")
    .exitOverride()
    .description("print a batch's table (with --json, its batch-report.json)")
    .argument("<batch-id>", "the batch id")
    .option("--json", "print batch-report.json")
    .action(async (batchId: string, flags: { json?: boolean }) => {
      exit((await import("./batch-actions.js")).batchShow(batchId, flags));
    });
  batch
    .command("export-predictions")
    .exitOverride()
    .description("SWE-bench predictions JSONL (instance_id, model_name_or_path, model_patch) of the tasks `runner import swe-bench` made")
    .argument("<batch-id>", "the batch id")
    .option("--model-name <name>", "model_name_or_path of every line", "agent-runner")
    .option("--attempt <k>", "whose patch, with --attempts K: attempt k's last try (never chosen by its verdict)", "1")
    .option("--out <file>", "write there instead of stdout")
    .action(async (batchId: string, flags: { modelName: string; attempt: string; out?: string }) => {
      exit((await import("./batch-actions.js")).batchExportPredictions(batchId, flags));
    });
  return batch;
}
