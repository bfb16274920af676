import { join } from "node:path";
import { cloudEventType, parseEnvelopeLine } from "../events/event-catalogue.js";
import { ConfigError } from "../errors.js";
import { LineReader } from "../events/line-reader.js";
import { exitCodeOfReport, type RunReport, type RunStatus } from "../run/run-report.js";
import { RunStore } from "../run/run-store.js";
import { findRunId, isRunAlive, listRuns } from "../runner/run-records.js";
import { terminalSafe, terminalSafeJson } from "../terminal-text.js";
import { ProgressView } from "./progress-view.js";

/**
 * How often `runner logs -f` looks for new lines. Polling rather than
 * fs.watch: inotify misses writes on some filesystems (network mounts,
 * Docker Desktop's shares), and a tenth of a second is well under what a
 * person notices for one stat and one read of a local file.
 */
const FOLLOW_INTERVAL_MS = 100;

const RUN_FINISHED = cloudEventType("run.finished");

/**
 * `runner logs [-f] <run-id>`: a run's events as `runner exec` shows them
 * (the progress view, on stdout here) or with `json` the events.jsonl lines
 * as they are. Without `follow` it prints what the file holds and returns 0.
 * With `follow` it goes on printing lines as the run writes them and returns
 * once the run has ended (report.json written and `run.finished` read), with
 * the run's exit code (as `runner exec` would: 0, 1, 3, 130); when the run's
 * runner is gone without a report it says so on stderr and returns 3; when
 * `signal` aborts (Ctrl-C), 130. A run not in `$RUNNER_HOME/runs` is looked
 * for on NATS (src/cli/remote-logs.ts: a run of a batch submitted from here,
 * or `nats`/`pool`). Throws ConfigError for an unknown or ambiguous id.
 */
export async function logsCommand(
  home: string,
  idOrPrefix: string,
  options: { follow?: boolean; json?: boolean; nats?: string; pool?: string },
  signal: AbortSignal,
): Promise<number> {
  if (options.pool !== undefined && options.nats === undefined) throw new ConfigError("--pool: only with --nats (the cluster the pool is on)");
  if (!listRuns(home).some((run) => run.id.startsWith(idOrPrefix))) {
    // Loaded only here: the NATS client is not needed to read a local run.
    const { remoteLogs } = await import("./remote-logs.js");
    return remoteLogs(home, idOrPrefix, options, signal);
  }
  const id = findRunId(home, idOrPrefix);
  const store = new RunStore(join(home, "runs", id));
  const view = options.json ? null : new ProgressView(process.stdout, "event");
  const reader = new LineReader(store.path("events"));
  let lastType: unknown = null;
  const printNew = () => {
    for (const line of reader.next()) {
      const envelope = parseEnvelopeLine(line);
      if (!envelope) continue;
      lastType = envelope.type;
      if (options.json) process.stdout.write(terminalSafeJson(`${line}\n`));
      else view!.show(envelope);
    }
  };
  try {
    printNew();
    if (!options.follow) return 0;
    for (;;) {
      const report = store.readJson("report") as { status?: RunStatus; reason?: string; merge?: RunReport["merge"] } | null;
      printNew();
      // A report without run.finished after it: written by the sweep of a dead run, or by a runner that died right after it.
      if (report?.status && (lastType === RUN_FINISHED || !isRunAlive(store.directory))) {
        if (view) process.stdout.write(`${terminalSafe(`status: ${report.status} (${report.reason ?? "?"}); runner show ${id}`)}\n`);
        // The code `runner exec` ended (or would have ended) with, 4 for a merge that did not happen included.
        return exitCodeOfReport({ status: report.status, merge: report.merge ?? null });
      }
      if (!report && !isRunAlive(store.directory)) {
        process.stderr.write(`runner: run ${id} has no runner any more and no report (it died); \`runner resume ${id}\` continues it\n`);
        return 3;
      }
      if (signal.aborted) return 130;
      await new Promise((resolve) => setTimeout(resolve, FOLLOW_INTERVAL_MS));
      if (signal.aborted) return 130;
    }
  } finally {
    reader.close();
    view?.close();
  }
}
