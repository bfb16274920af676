import { mkdirSync } from "node:fs";
import { dirname } from "node:path";
import { writeAtomically } from "../run/run-store.js";
import type { BatchReport } from "./batch-report.js";
import type { BatchDirectory } from "./batch-state.js";
import { htmlReport } from "./html-report.js";
import { junitXml } from "./junit.js";
import { markdownSummary } from "./summary.js";

/**
 * Writes the batch's reports, each through a temporary file and a rename:
 * batch-report.json, junit.xml, summary.md and report.html in the batch directory, and
 * the `--junit` / `--summary` copies (their directories made if missing).
 */
export function writeBatchReports(directory: BatchDirectory, report: BatchReport): void {
  directory.writeReport(report);
  const junit = junitXml(report);
  const summary = markdownSummary(report, directory.file("batch-report.json"));
  writeAtomically(directory.file("junit.xml"), junit);
  writeAtomically(directory.file("summary.md"), summary);
  writeAtomically(directory.file("report.html"), htmlReport(report, directory.path));
  for (const [path, content] of [
    [report.options.junit, junit],
    [report.options.summary, summary],
  ] as const) {
    if (!path) continue;
    mkdirSync(dirname(path), { recursive: true });
    writeAtomically(path, content);
  }
}
