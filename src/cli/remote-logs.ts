import { existsSync, readdirSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import type { NatsConnection } from "@nats-io/transport-node";
import { BatchDirectory } from "../batch/batch-state.js";
import { ConfigError, errorMessage, SandboxError } from "../errors.js";
import { cloudEventType, parseEnvelopeLine } from "../events/event-catalogue.js";
import { exitCodeOfReport, type RunStatus } from "../run/run-report.js";
import { terminalSafe, terminalSafeJson } from "../terminal-text.js";
import { connectNats } from "../bus/nats-connection.js";
import { parseNatsFlags } from "../worker/nats-pool.js";
import { MAX_STORED_EVENTS_BYTES, PoolRunEvents, type StoredRunEvents } from "../worker/pool-run-events.js";
import { ProgressView } from "./progress-view.js";

/** Where a remote run's events are: the pool and its servers, and what told us. */
interface RemoteRun {
  runId: string;
  servers: string[];
  pool: string;
  /** `batch <id>` (its records named the run) or `--nats` (the flags). */
  foundIn: string;
}

/**
 * How long `runner logs -f` waits, after `run.finished`, for the worker to
 * store the run's report.json (it does so right after the run ends, before
 * its result), ms; without it the summary comes from `run.finished` alone.
 */
const REPORT_WAIT_MS = 10_000;
const REPORT_POLL_MS = 200;
const RUN_FINISHED = cloudEventType("run.finished");

/**
 * `runner logs [-f] <run-id>` of a run that is not in `$RUNNER_HOME/runs`
 * (docs/scale-out.md "Following a run on a worker"): a run of a NATS batch
 * submitted from this machine (its batch's batch.json names the cluster and
 * pool, batch.jsonl the run ids), or, with `--nats URL [--pool NAME]`, any run
 * whose events are on that pool's stream. Credentials from RUNNER_NATS_* as
 * for workers. Prints what `logsCommand` prints for a local run, read from
 * `RUNNER_EVENTS_<pool>`: without `follow` the events so far (0); with it,
 * live until `run.finished`, then the status line, with the run's exit code.
 * An event over 16 KiB (sent by reference) is fetched from the run's stored
 * events.jsonl when the worker has stored it, else left out with one line
 * saying so. A run whose worker died (no `run.finished` will come) ends once
 * the pool's lease says the task went on without it: a line on stderr with
 * the reason and the task's next run, exit 3. Throws ConfigError for an id
 * nobody knows (naming what was looked at) or an ambiguous prefix;
 * SandboxError (3) when NATS does not answer.
 */
export async function remoteLogs(
  home: string,
  idOrPrefix: string,
  options: { follow?: boolean; json?: boolean; nats?: string; pool?: string },
  signal: AbortSignal,
): Promise<number> {
  const fromRecords = runsInBatches(home, idOrPrefix);
  if (new Set(fromRecords.runs.map((run) => run.runId)).size > 1) throw ambiguous(idOrPrefix, [...new Set(fromRecords.runs.map((run) => run.runId))]);
  let remote: RemoteRun | null = fromRecords.runs[0] ?? null;
  const flags = options.nats === undefined ? null : parseNatsFlags({ nats: options.nats, ...(options.pool ? { pool: options.pool } : {}) });
  if (!remote && !flags) {
    throw new ConfigError(
      `no run ${idOrPrefix}: not in ${join(home, "runs")} and not in the records of the ${fromRecords.batches} NATS batch(es) in ${join(home, "batches")}; ` +
        "for a run on a worker that another machine submitted give --nats URL --pool NAME (see `runner runs`)",
    );
  }
  const servers = remote?.servers ?? flags!.servers;
  const pool = remote?.pool ?? flags!.pool;
  const connection = await connect(servers);
  try {
    const events = await PoolRunEvents.open(connection, pool, servers);
    if (!remote) {
      const runIds = await events.runIds(idOrPrefix);
      if (runIds.length > 1) throw ambiguous(idOrPrefix, runIds);
      if (runIds.length === 0)
        throw new ConfigError(
          `no run ${idOrPrefix}: not in ${join(home, "runs")}, not in the records of the ${fromRecords.batches} NATS batch(es) in ${join(home, "batches")}, ` +
            `and no events of it on ${events.stream} at ${servers.join(",")} (the stream keeps a run's events 24 h)`,
        );
      remote = { runId: runIds[0]!, servers, pool, foundIn: "--nats" };
    }
    process.stderr.write(`${terminalSafe(`runner: run ${remote.runId} ran on a worker of pool ${pool} (${servers.join(",")}; from ${remote.foundIn})`)}\n`);
    return await printEvents(events, remote.runId, options, signal);
  } finally {
    await connection.close().catch(() => undefined);
  }
}

async function printEvents(events: PoolRunEvents, runId: string, options: { follow?: boolean; json?: boolean }, signal: AbortSignal): Promise<number> {
  const view = options.json ? null : new ProgressView(process.stdout, "event");
  // Without -f: what the stream holds now; none yet (the worker has just taken the task) is nothing to print.
  const last = options.follow ? null : await events.lastStreamSequence(runId);
  if (!options.follow && last === null) return 0;
  const stop = new AbortController();
  const abort = () => stop.abort();
  signal.addEventListener("abort", abort, { once: true });
  let stored: StoredRunEvents = { lines: null, bytes: null };
  let finished: { status: RunStatus; exit_code: number } | null = null;
  // A run whose worker died never sends run.finished: the lease says when the task went on without it.
  const abandonment: { found: Awaited<ReturnType<PoolRunEvents["whenAbandoned"]>> } = { found: null };
  const watching = options.follow
    ? events.whenAbandoned(runId, stop.signal).then(
        async (found) => {
          if (!found || (await events.lastEventType(runId)) === RUN_FINISHED) return;
          abandonment.found = found;
          stop.abort();
        },
        () => undefined,
      )
    : Promise.resolve();
  try {
    for await (const message of await events.follow(runId, stop.signal)) {
      const note = (text: string) => (view ? process.stdout : process.stderr).write(`${terminalSafe(text)}\n`);
      let line = message.kind === "event" ? message.line : null;
      if (message.kind === "malformed") note(message.note);
      if (message.kind === "reference") {
        if (stored.lines === null && stored.bytes === null) stored = await events.storedEvents(message.reference);
        line = stored.lines?.[message.sequence] ?? null;
        if (line === null) {
          const where =
            stored.lines === null && stored.bytes !== null
              ? `the run's events.jsonl, ${stored.bytes} bytes, is over the ${MAX_STORED_EVENTS_BYTES} read from NATS`
              : "the run's events.jsonl has it";
          note(
            `event ${message.type ?? "?"} (#${message.sequence}) is over 16 KiB and left out here; ${where} (runner logs ${runId} once the batch has copied the run's records)`,
          );
        }
      }
      const envelope = line === null ? null : parseEnvelopeLine(line);
      if (envelope) {
        if (view) view.show(envelope);
        // Re-serialised: the message's own text may span lines; --json prints one envelope per line.
        else process.stdout.write(terminalSafeJson(`${JSON.stringify(envelope)}\n`));
        if (envelope.type === RUN_FINISHED) finished = envelope.data as { status: RunStatus; exit_code: number };
      }
      if (last !== null && message.streamSequence >= last) break;
    }
    if (signal.aborted) return 130;
    if (!options.follow) return 0;
    if (abandonment.found) {
      const { worker, reason, next } = abandonment.found;
      const after = next ? `; the task went on as run ${next.run_id} on ${next.worker}: runner logs -f ${next.run_id}` : "";
      process.stderr.write(`${terminalSafe(`runner: run ${runId} on ${worker} will not finish: ${reason}${after}`)}\n`);
      return 3;
    }
    const report = await storedReport(events, runId, signal);
    if (signal.aborted) return 130;
    const status = report?.status ?? finished?.status ?? "error";
    if (view) {
      const reason = report?.reason ?? "?";
      process.stdout.write(`${terminalSafe(`status: ${status} (${reason}); runner show ${runId} (once the batch has copied the run's records)`)}\n`);
    }
    if (report) return exitCodeOfReport({ status: report.status, reason: report.reason, merge: null });
    return finished?.exit_code ?? 3;
  } finally {
    signal.removeEventListener("abort", abort);
    stop.abort();
    await watching;
    view?.close();
  }
}

/** The worker's report.json, waited for up to {@link REPORT_WAIT_MS}: it is stored just after `run.finished`. */
async function storedReport(events: PoolRunEvents, runId: string, signal: AbortSignal) {
  const deadline = Date.now() + REPORT_WAIT_MS;
  for (;;) {
    const report = await events.report(runId).catch(() => null);
    if (report || Date.now() >= deadline || signal.aborted) return report;
    await new Promise((resolve) => setTimeout(resolve, REPORT_POLL_MS));
  }
}

/**
 * The runs of this home's NATS batches (batch.json `options.nats`) whose id
 * is `idOrPrefix` or starts with it, from their batch.jsonl start lines; and
 * how many NATS batches were looked at.
 */
function runsInBatches(home: string, idOrPrefix: string): { runs: RemoteRun[]; batches: number } {
  const root = join(home, "batches");
  const runs: RemoteRun[] = [];
  let batches = 0;
  for (const batchId of existsSync(root) ? readdirSync(root) : []) {
    const directory = BatchDirectory.of(home, batchId);
    let nats;
    try {
      nats = directory.readPlan().options.nats;
    } catch {
      continue;
    }
    if (!nats) continue;
    batches += 1;
    for (const line of directory.readJournal()) {
      if ((line.type === "attempt.started" || line.type === "attempt.resumed") && line.run_id.startsWith(idOrPrefix))
        runs.push({ runId: line.run_id, servers: nats.servers, pool: nats.pool, foundIn: `batch ${batchId}` });
    }
  }
  return { runs, batches };
}

function ambiguous(idOrPrefix: string, runIds: string[]): ConfigError {
  return new ConfigError(
    `${idOrPrefix} matches ${runIds.length} runs (${runIds.slice(0, 5).join(", ")}${runIds.length > 5 ? ", ..." : ""}); give more of the id`,
  );
}

/** Connects with the RUNNER_NATS_* credentials; a cluster that does not answer is SandboxError `nats_unreachable` (exit 3). */
async function connect(servers: string[]): Promise<NatsConnection> {
  try {
    return await connectNats({ servers, name: `agent-runner logs ${hostname()}:${process.pid}`, environment: process.env });
  } catch (error) {
    if (error instanceof ConfigError) throw error;
    throw new SandboxError(`${errorMessage(error)}; check --nats and that the servers run (docs/scale-out.md)`, { reason: "nats_unreachable", cause: error });
  }
}
