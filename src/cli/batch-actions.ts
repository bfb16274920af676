import { existsSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { buildBatchReport, mergeBatchReports, type BatchReport } from "../batch/batch-report.js";
import { BatchDirectory, type BatchOptions, type BatchPlan } from "../batch/batch-state.js";
import { discoverTasks, type BatchTask, parseFilter, parseShard, selectTasks } from "../batch/discover-tasks.js";
import { ImageUnavailableError, imageNeed, prepareImages } from "../batch/prepare-images.js";
import { reverifyBatch } from "../batch/reverify-batch.js";
import { runBatch, type BatchRunner } from "../batch/run-batch.js";
import { BatchProgressView, resumeHint } from "./batch-progress.js";
import { writeAtomically } from "../run/run-store.js";
import { DockerSandboxProvider } from "../sandbox/docker/docker-sandbox-provider.js";
import { formatBatchTable } from "../batch/summary.js";
import { writeBatchReports } from "../batch/write-reports.js";
import type { Task } from "../config/load-task.js";
import { ConfigError, errorMessage } from "../errors.js";
import { sweBenchPredictions } from "../importers/export-predictions.js";
import { newRunId } from "../run/run-id.js";
import { runnerHome } from "../runner/runner-home.js";
import { Runner } from "../runner/runner.js";
import { terminalSafe } from "../terminal-text.js";
import { parseDuration } from "./exec-command.js";
import { parseNatsFlags } from "../worker/nats-pool.js";

/** Flags of `runner batch run` as commander parses them. */
export interface RunFlags {
  jobs: string;
  shard?: string;
  filter?: string;
  limit?: string;
  attempts: string;
  retries: string;
  minPassRate: string;
  maxErrors: string;
  junit?: string;
  summary?: string;
  json?: boolean;
  budgetUsd?: string;
  deadline?: string;
  nats?: string;
  pool?: string;
  ackWait?: string;
  maxDeliver?: string;
}

/** Flags of `runner batch prepare`. */
export interface PrepareFlags {
  shard?: string;
  filter?: string;
  limit?: string;
  json?: boolean;
}

/** The tasks of `input` that `--filter`, `--shard` and `--limit` keep; ConfigError for a filter that keeps none. */
async function selectedTasks(input: string, options: { filter: string | null; shard: string | null; limit: number | null }) {
  const selection = {
    ...(options.filter !== null ? { filter: parseFilter(options.filter) } : {}),
    ...(options.shard !== null ? { shard: parseShard(options.shard) } : {}),
    ...(options.limit !== null ? { limit: options.limit } : {}),
  };
  const discovered = await discoverTasks(input);
  const selected = selectTasks(discovered.tasks, selection);
  // An empty shard is a CI matrix wider than the batch; an empty filter is a typo.
  if (selected.length === 0 && options.shard === null)
    throw new ConfigError(`--filter ${options.filter}: matches none of the ${discovered.tasks.length} task ids (e.g. ${discovered.tasks[0]!.id})`);
  return { discovered, selected };
}

export async function batchPrepare(input: string, flags: PrepareFlags): Promise<number> {
  const { selected } = await selectedTasks(input, {
    filter: flags.filter ?? null,
    shard: flags.shard ?? null,
    limit: flags.limit === undefined ? null : integer(flags.limit, "--limit", 1),
  });
  // A task the loader refused needs no image; it is listed, and the batch will report it (task_invalid) without failing this step.
  for (const entry of selected) {
    if (entry.task !== null) continue;
    if (flags.json) process.stdout.write(`${JSON.stringify({ task: entry.id, invalid: entry.invalid })}\n`);
    else process.stdout.write(terminalSafe(`invalid ${entry.id}: ${entry.invalid.split("\n").join(" ")}`) + "\n");
  }
  const provider = new DockerSandboxProvider({ egressNetwork: process.env.RUNNER_EGRESS_NETWORK });
  const images = await prepareImages(provider.docker, validTasks(selected));
  for (const image of images) {
    if (flags.json) {
      const line = { need: image.need, tasks: image.tasks, image: image.ready?.image ?? null, source: image.ready?.source ?? null, error: image.error };
      process.stdout.write(`${JSON.stringify(line)}\n`);
    } else if (image.ready) {
      const made = image.ready.image === image.need ? image.ready.source : `${image.ready.source} ${image.ready.image}`;
      process.stdout.write(terminalSafe(`ready   ${image.need}: ${made} (${image.tasks.length} task(s))`) + "\n");
    } else {
      process.stdout.write(terminalSafe(`missing ${image.need} (${image.tasks.length} task(s): ${image.tasks.join(", ")}): ${image.error}`) + "\n");
    }
  }
  return images.every((image) => image.ready) ? 0 : 3;
}

export async function batchRun(input: string, flags: RunFlags, signal: AbortSignal): Promise<number> {
  const options = parseRunFlags(flags);
  const { discovered, selected } = await selectedTasks(input, options);
  // On NATS every task is submitted at once: the workers' -j bounds what runs.
  if (options.nats) options.jobs = Math.max(1, selected.length * options.attempts);
  const home = runnerHome();
  const plan: BatchPlan = {
    batch_id: newRunId(),
    created_at: new Date().toISOString(),
    input: { path: resolve(input), kind: discovered.kind, root: discovered.root },
    options,
    tasks: selected,
    discovered: discovered.tasks.length,
  };
  const directory = BatchDirectory.of(home, plan.batch_id);
  directory.create(plan);
  return execute(directory, plan.batch_id, home, flags.json ?? false, signal);
}

export async function batchResume(batchId: string, flags: { json?: boolean }, signal: AbortSignal): Promise<number> {
  const home = runnerHome();
  const directory = existingBatch(home, batchId);
  const plan = directory.readPlan();
  const last = directory.readJournal().at(-1);
  if (last?.type === "batch.finished" && last.status !== "interrupted" && last.status !== "error") {
    throw new ConfigError(`batch ${batchId} already ended ${last.status}; nothing to resume (\`runner batch show ${batchId}\`)`);
  }
  return execute(directory, plan.batch_id, home, flags.json ?? false, signal);
}

async function execute(directory: BatchDirectory, batchId: string, home: string, json: boolean, signal: AbortSignal): Promise<number> {
  // With --json every stdout line is a JSON document (`jq` reads the stream): the id comes first, as one.
  process.stdout.write(json ? `${JSON.stringify({ batch_id: batchId, status: "running" })}\n` : `batch ${batchId}\n`);
  const out = json ? process.stderr : process.stdout;
  const nats = directory.readPlan().options.nats;
  if (nats) {
    // The workers have the Docker daemons and the images; this process only submits, waits and writes the reports.
    const { openPool } = await import("../worker/nats-pool.js");
    const { NatsBatchRunner } = await import("../worker/nats-batch-runner.js");
    const log = (line: string) => process.stderr.write(`${terminalSafe(`nats: ${line}`)}\n`);
    const { connection, queue } = await openPool(nats, "submitter", log);
    const remote = await NatsBatchRunner.open(queue, home, log);
    try {
      return await runAndReport(remote, directory, json, signal, out);
    } finally {
      await remote.close();
      await connection.drain().catch(() => connection.close());
    }
  }
  const provider = new DockerSandboxProvider({ egressNetwork: process.env.RUNNER_EGRESS_NETWORK });
  const runner = Runner.create({ home, sandboxProvider: provider, sharedRateLimits: true });
  // Images once, up front: a task whose image cannot be had ends `error` without a model call.
  const unavailable = new Map<string, string>();
  const plan = directory.readPlan();
  for (const image of await prepareImages(provider.docker, validTasks(plan.tasks))) {
    if (image.error === null) continue;
    unavailable.set(image.need, image.error);
    out.write(terminalSafe(`image ${image.need}: cannot be had; its ${image.tasks.length} task(s) end in error: ${image.error.split("\n")[0]}`) + "\n");
  }
  const batchRunner: BatchRunner = {
    home: runner.home,
    resume: (runId, options) => runner.resume(runId, options),
    startTask: async (task, options) => {
      const error = unavailable.get(imageNeed(task));
      if (error !== undefined) throw new ImageUnavailableError(error);
      return runner.startTask(task, options);
    },
  };
  return runAndReport(batchRunner, directory, json, signal, out);
}

/** Runs the batch on `batchRunner` with the progress view, and prints its table (or, with --json, its line); the batch's exit code. */
async function runAndReport(
  batchRunner: BatchRunner,
  directory: BatchDirectory,
  json: boolean,
  signal: AbortSignal,
  out: NodeJS.WritableStream,
): Promise<number> {
  const plan = directory.readPlan();
  const progress = new BatchProgressView((line) => out.write(`${line}\n`));
  progress.start(plan.tasks.length * plan.options.attempts);
  let report: BatchReport;
  try {
    report = await runBatch(batchRunner, directory, signal, progress);
  } finally {
    progress.stop();
  }
  const hint = resumeHint(report);
  if (json) {
    if (hint) out.write(`${terminalSafe(hint)}\n`);
    process.stdout.write(`${JSON.stringify({ batch_id: report.batch_id, status: report.status, report: directory.file("batch-report.json") })}\n`);
  } else {
    process.stdout.write(`${terminalSafe(formatBatchTable(report))}\nreport: ${directory.file("batch-report.json")}\n${hint ? `${terminalSafe(hint)}\n` : ""}`);
  }
  return report.exit_code ?? 3;
}

export async function batchVerify(batchId: string, flags: { jobs: string; json?: boolean }): Promise<number> {
  const jobs = integer(flags.jobs, "-j", 1);
  const home = runnerHome();
  const directory = existingBatch(home, batchId);
  if (!existsSync(directory.file("batch-report.json")))
    throw new ConfigError(`batch ${batchId} has no batch-report.json yet; let it finish (or \`runner batch resume ${batchId}\`) first`);
  const report = batchReportOf(directory, home);
  await using runner = Runner.create({ home });
  const out = flags.json ? process.stderr : process.stdout;
  const regraded = await reverifyBatch(report, (runId) => runner.reverify(runId), {
    jobs,
    onRun: (run) => {
      const verdict =
        run.error !== null
          ? `could not verify: ${run.error.split("\n")[0]}`
          : run.after === null
            ? `nothing to verify (stays ${run.status})`
            : run.after
              ? "passed"
              : "failed";
      const was = run.before === null || run.error !== null ? "" : ` (was ${run.before ? "passed" : "failed"})`;
      out.write(terminalSafe(`${run.task} attempt ${run.attempt} run ${run.run_id}: ${verdict}${was}`) + "\n");
    },
  });
  writeAtomically(directory.file("batch-verify.json"), `${JSON.stringify(regraded, null, 2)}\n`);
  if (flags.json) process.stdout.write(`${JSON.stringify(regraded, null, 2)}\n`);
  else {
    const rate = regraded.totals.pass_rate === null ? "n/a" : `${(regraded.totals.pass_rate * 100).toFixed(1)}%`;
    process.stdout.write(
      `regraded: ${regraded.totals.passed}/${regraded.totals.tasks} tasks pass (${rate}), ${regraded.totals.changed} verdict(s) changed, ${regraded.totals.errors} could not be verified\nreport: ${directory.file("batch-verify.json")}\n`,
    );
  }
  if (regraded.totals.errors > 0) return 3;
  return regraded.gate.passed ? 0 : 1;
}

export function batchShow(batchId: string, flags: { json?: boolean }): number {
  const home = runnerHome();
  const directory = existingBatch(home, batchId);
  const file = directory.file("batch-report.json");
  const report = batchReportOf(directory, home);
  if (flags.json) process.stdout.write(existsSync(file) ? readFileSync(file, "utf8") : `${JSON.stringify(report, null, 2)}\n`);
  else process.stdout.write(`${terminalSafe(formatBatchTable(report))}\n`);
  return 0;
}

export function batchExportPredictions(batchId: string, flags: { modelName: string; attempt: string; out?: string }): number {
  const home = runnerHome();
  const directory = existingBatch(home, batchId);
  const report = batchReportOf(directory, home);
  const text = sweBenchPredictions(report, flags.modelName, integer(flags.attempt, "--attempt", 1))
    .map((prediction) => JSON.stringify(prediction))
    .join("\n");
  if (!flags.out) {
    process.stdout.write(`${text}\n`);
    return 0;
  }
  // A temporary file renamed into place: a reader never sees half a file.
  const target = resolve(flags.out);
  writeFileSync(`${target}.tmp`, `${text}\n`);
  renameSync(`${target}.tmp`, target);
  return 0;
}

export function batchMerge(files: string[], flags: { junit?: string; summary?: string; json?: boolean }): number {
  const reports = files.map((file) => {
    if (!existsSync(file)) throw new ConfigError(`${file}: no such file (give the batch-report.json of each shard)`);
    try {
      return { file, report: JSON.parse(readFileSync(file, "utf8")) as BatchReport };
    } catch (error) {
      throw new ConfigError(`${file}: not a batch-report.json (${errorMessage(error)})`);
    }
  });
  const home = runnerHome();
  const merged = mergeBatchReports(reports, newRunId());
  merged.options = { ...merged.options, junit: flags.junit ? resolve(flags.junit) : null, summary: flags.summary ? resolve(flags.summary) : null };
  const directory = BatchDirectory.of(home, merged.batch_id);
  directory.make();
  writeBatchReports(directory, merged);
  if (!flags.json) process.stdout.write(`batch ${merged.batch_id}\n`);
  if (flags.json)
    process.stdout.write(`${JSON.stringify({ batch_id: merged.batch_id, status: merged.status, report: directory.file("batch-report.json") })}\n`);
  else process.stdout.write(`${terminalSafe(formatBatchTable(merged))}\nreport: ${directory.file("batch-report.json")}\n`);
  return merged.exit_code ?? 3;
}

/** The batch's batch-report.json; for a batch killed before it wrote one, the report its plan and journal make. */
function batchReportOf(directory: BatchDirectory, home: string): BatchReport {
  const file = directory.file("batch-report.json");
  if (existsSync(file)) return JSON.parse(readFileSync(file, "utf8")) as BatchReport;
  return buildBatchReport(directory.readPlan(), directory.readJournal(), home, { ended: false, interrupted: false, skipReason: "not_run" });
}

function validTasks(tasks: BatchTask[]): { id: string; task: Task }[] {
  return tasks.flatMap((entry) => (entry.task === null ? [] : [{ id: entry.id, task: entry.task }]));
}

function existingBatch(home: string, batchId: string): BatchDirectory {
  if (!/^[\w.-]+$/.test(batchId)) throw new ConfigError(`batch id "${batchId}": expected an id as \`runner batch run\` printed it (\`batch <id>\`)`);
  const directory = BatchDirectory.of(home, batchId);
  if (!existsSync(directory.file("batch.json")) && !existsSync(directory.file("batch-report.json")))
    throw new ConfigError(`no batch ${batchId} in ${home}/batches (the id is the first line \`runner batch run\` printed)`);
  return directory;
}

function parseRunFlags(flags: RunFlags): BatchOptions {
  return {
    jobs: integer(flags.jobs, "-j", 1),
    attempts: integer(flags.attempts, "--attempts", 1),
    retries: integer(flags.retries, "--retries", 0),
    min_pass_rate: rate(flags.minPassRate),
    max_errors: integer(flags.maxErrors, "--max-errors", 0),
    filter: flags.filter ?? null,
    shard: flags.shard ?? null,
    limit: flags.limit === undefined ? null : integer(flags.limit, "--limit", 1),
    junit: flags.junit ? resolve(flags.junit) : null,
    summary: flags.summary ? resolve(flags.summary) : null,
    budget_usd: flags.budgetUsd === undefined ? null : usd(flags.budgetUsd),
    deadline_ms: flags.deadline === undefined ? null : parseDuration(flags.deadline, "--deadline"),
    nats: natsOption(flags),
  };
}

/** `--nats` and its companions; ConfigError for a companion without it, or `--retries` with it (the queue redelivers: `--max-deliver`). */
function natsOption(flags: RunFlags): BatchOptions["nats"] {
  if (flags.nats === undefined) {
    const stray = flags.ackWait !== undefined ? "--ack-wait" : flags.maxDeliver !== undefined ? "--max-deliver" : null;
    if (stray) throw new ConfigError(`${stray}: only with --nats`);
    return null;
  }
  if (flags.retries.trim() !== "0") {
    throw new ConfigError("--retries: with --nats the pool redelivers a task after an infrastructure failure (--max-deliver); leave --retries at 0");
  }
  return parseNatsFlags({
    nats: flags.nats,
    ...(flags.pool ? { pool: flags.pool } : {}),
    ...(flags.ackWait ? { ackWait: flags.ackWait } : {}),
    ...(flags.maxDeliver ? { maxDeliver: flags.maxDeliver } : {}),
  });
}

function usd(value: string): number {
  const amount = Number(value);
  if (value.trim() === "" || !Number.isFinite(amount) || amount <= 0)
    throw new ConfigError(`--budget-usd: expected an amount of US dollars above 0 such as 25 or 2.50, got "${value}"`);
  return amount;
}

function integer(value: string, flag: string, least: number): number {
  const number = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(number) || number < least) {
    throw new ConfigError(`${flag}: expected a whole number of at least ${least}, got "${value}"`);
  }
  return number;
}

function rate(value: string): number {
  const number = Number(value);
  if (value.trim() === "" || !Number.isFinite(number) || number < 0 || number > 1)
    throw new ConfigError(`--min-pass-rate: expected a number from 0 to 1 such as 0.8, got "${value}"`);
  return number;
}
