import { closeSync, openSync, readFileSync, readSync } from "node:fs";
import { join } from "node:path";
import { cloudEventType, parseEnvelopeLine } from "../events/event-catalogue.js";
import { isOwnerAlive } from "../process/process-owner.js";
import { exitCodeOfReport, type RunReport, type RunStatus } from "../run/run-report.js";
import { RunStore } from "../run/run-store.js";
import { findRunId } from "../runner/run-records.js";
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
 * `signal` aborts (Ctrl-C), 130. Throws ConfigError for an unknown or
 * ambiguous id.
 */
export async function logsCommand(home: string, idOrPrefix: string, options: { follow?: boolean; json?: boolean }, signal: AbortSignal): Promise<number> {
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
      if (report?.status && (lastType === RUN_FINISHED || !runnerAlive(store))) {
        if (view) process.stdout.write(`${terminalSafe(`status: ${report.status} (${report.reason ?? "?"}); runner show ${id}`)}\n`);
        // The code `runner exec` ended (or would have ended) with, 4 for a merge that did not happen included.
        return exitCodeOfReport({ status: report.status, merge: report.merge ?? null });
      }
      if (!report && !runnerAlive(store)) {
        process.stderr.write(`runner: run ${id} has no runner any more and no report (it died); \`runner resume ${id}\` continues it\n`);
        return 3;
      }
      if (signal.aborted) return 130;
      await new Promise((resolve) => setTimeout(resolve, FOLLOW_INTERVAL_MS));
      if (signal.aborted) return 130;
    }
  } finally {
    reader.close();
  }
}

/**
 * Whether a runner process still works on the run: the owner in run.json or
 * the holder of resume.lock is alive. A run directory without run.json yet
 * (its runner is opening the workspace) counts as alive.
 */
function runnerAlive(store: RunStore): boolean {
  const lock = store.readJson("lock") as { owner?: string } | null;
  if (!lock) return true;
  if (lock.owner && isOwnerAlive(lock.owner)) return true;
  let resumer = "";
  try {
    resumer = readFileSync(store.path("resumeLock"), "utf8").trim();
  } catch {
    return false;
  }
  return resumer !== "" && isOwnerAlive(resumer);
}

/** The complete lines appended to a file since the last call (a line still being written waits for its newline); a missing file has none yet. */
class LineReader {
  private descriptor: number | null = null;
  private position = 0;
  private pending = Buffer.alloc(0);

  constructor(private readonly path: string) {}

  next(): string[] {
    if (this.descriptor === null) {
      try {
        this.descriptor = openSync(this.path, "r");
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
        throw error;
      }
    }
    const chunks: Buffer[] = [this.pending];
    const buffer = Buffer.alloc(64 * 1024);
    for (;;) {
      const read = readSync(this.descriptor, buffer, 0, buffer.length, this.position);
      if (read === 0) break;
      this.position += read;
      chunks.push(Buffer.from(buffer.subarray(0, read)));
    }
    const text = Buffer.concat(chunks);
    const end = text.lastIndexOf(0x0a);
    this.pending = end < 0 ? text : text.subarray(end + 1);
    return end < 0 ? [] : text.subarray(0, end).toString("utf8").split("\n").filter(Boolean);
  }

  close(): void {
    if (this.descriptor !== null) closeSync(this.descriptor);
    this.descriptor = null;
  }
}
