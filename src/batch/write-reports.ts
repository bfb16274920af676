import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { writeAtomically } from "../run/run-store.js";
import type { BatchAttempt, BatchReport } from "./batch-report.js";
import type { BatchDirectory } from "./batch-state.js";
import { htmlReport } from "./html-report.js";
import { junitXml } from "./junit.js";
import { readRunDetails, type RunDetails } from "./run-details.js";
import { markdownSummary } from "./summary.js";

/**
 * Writes the batch's reports, each through a temporary file and a rename:
 * batch-report.json, junit.xml, summary.md and report.html in the batch directory, and
 * the `--junit` / `--summary` copies (their directories made if missing).
 * Each run's events.jsonl and patch.diff are read once (bounded:
 * src/batch/run-details.ts) for report.html's timelines and diffs and
 * junit.xml's system-out.
 */
export function writeBatchReports(directory: BatchDirectory, report: BatchReport): void {
  directory.writeReport(report);
  const read = new Map<BatchAttempt, RunDetails>();
  const detailsOf = (attempt: BatchAttempt): RunDetails | null => {
    if (!attempt.run_dir) return null;
    const known = read.get(attempt);
    if (known) return known;
    const details = readRunDetails(attempt.run_dir, attempt.patch);
    read.set(attempt, details);
    return details;
  };
  const junit = junitXml(report, detailsOf);
  const summary = markdownSummary(report, directory.file("batch-report.json"));
  writeAtomically(directory.file("junit.xml"), junit);
  writeAtomically(directory.file("summary.md"), summary);
  writeAtomically(directory.file("report.html"), htmlReport(report, directory.path, detailsOf));
  for (const [path, content] of [
    [report.options.junit, junit],
    [report.options.summary, summary],
  ] as const) {
    if (!path) continue;
    mkdirSync(dirname(path), { recursive: true });
    writeAtomically(path, content);
  }
}
