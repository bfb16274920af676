import { formatRate, runCount, type BatchReport } from "./batch-report.js";
import { formatUsd } from "../model/pricing.js";
import { oneLine } from "../terminal-text.js";

/** The batch as a plain-text table (`runner batch show`, the end of `batch run`): one row per task, then the totals and the gate. */
export function formatBatchTable(report: BatchReport): string {
  const rows = report.tasks.map((task) => [
    task.name,
    task.status,
    reasonText(task, 80),
    String(runCount(task)),
    task.attempts.filter((attempt) => attempt.run_id).at(-1)?.run_id ?? "-",
  ]);
  const header = ["task", "status", "reason", "runs", "last run"];
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((cell, column) => cell.padEnd(widths[column]!))
      .join("  ")
      .trimEnd();
  return [
    line(header),
    ...rows.map(line),
    "",
    totalsLine(report),
    `gate: ${report.gate.passed ? "passed" : "not passed"}: ${report.gate.detail}`,
    `status: ${report.status}`,
  ].join("\n");
}

/** One line of counts, pass rates, tokens and cost, and the flaky tasks (at most `flakyShown` of their ids, then how many more). */
function totalsLine(report: BatchReport, flakyShown = Number.POSITIVE_INFINITY): string {
  const { totals } = report;
  const flaky = report.flaky.slice(0, flakyShown).join(", ") + (report.flaky.length > flakyShown ? ` and ${report.flaky.length - flakyShown} more` : "");
  return (
    `${counted(totals.tasks, "task")}: ${totals.succeeded} succeeded, ${totals.failed} failed, ${totals.error} error, ${totals.skipped} skipped; ` +
    `pass rate ${formatRate(totals.pass_rate)} (${formatRate(totals.pass_rate_without_errors)} of the tasks without errors); ` +
    `${counted(totals.runs, "run")}, ${totals.tokens.total} tokens (${totals.tokens.cached} cached), cost ${totals.cost_usd === null ? "unknown (a run was not priced)" : formatUsd(totals.cost_usd)}` +
    (report.flaky.length ? `; flaky: ${flaky}` : "")
  );
}

/** `1 task`, `2 tasks`. */
function counted(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}

/** A task's reason, and for an error its message on one line cut to `max` characters (the JSON and JUnit reports keep it whole). */
function reasonText(task: { status: string; reason: string; error: string | null }, max: number): string {
  const reason = task.reason.replace(/\s+/g, " ");
  if (task.status !== "error" || !task.error) return reason;
  return `${reason}: ${oneLine(task.error, max)}`;
}

/** `$GITHUB_STEP_SUMMARY` takes at most 1 MiB per step (GitHub Actions docs, "Adding a job summary"). */
const SUMMARY_MAX_BYTES = 1024 * 1024;

/** Flaky task ids the summary's totals line names (the rest are counted): the line stays short however many there are. */
const SUMMARY_FLAKY_SHOWN = 20;

/** Rows the summary lists first: what needs a look (errors, failures, skips), then the successes. */
const ROW_ORDER: Record<string, number> = { error: 0, failed: 1, skipped: 2, succeeded: 3 };

/**
 * The batch as markdown for a CI job summary: the status, the totals and
 * the gate, then one table row per task (errors, failures and skips first).
 * At most `maxBytes` of UTF-8: rows that do not fit are left out and a
 * last line says how many and where the whole report is.
 */
export function markdownSummary(report: BatchReport, reportPath: string, maxBytes = SUMMARY_MAX_BYTES): string {
  const head = [
    `## Batch ${cell(report.batch_id)}: ${report.status}`,
    "",
    cell(totalsLine(report, SUMMARY_FLAKY_SHOWN)),
    "",
    `Gate: ${report.gate.passed ? "passed" : "not passed"} (${cell(report.gate.detail)})`,
    "",
    "| task | status | reason | runs | run directory |",
    "|---|---|---|---|---|",
  ].join("\n");
  const rows = [...report.tasks]
    .sort((a, b) => (ROW_ORDER[a.status] ?? 9) - (ROW_ORDER[b.status] ?? 9))
    .map(
      (task) =>
        `| ${cell(task.name)} | ${task.status} | ${cell(reasonText(task, 300))} | ${runCount(task)} | ${cell(task.attempts.filter((attempt) => attempt.run_dir).at(-1)?.run_dir ?? "-")} |`,
    );
  const truncation = (left: number) =>
    `\n\n_Truncated: ${left} more task${left === 1 ? "" : "s"} not shown (this summary is kept under ${maxBytes} bytes); every task is in ${cell(reportPath)}._\n`;
  const reserve = Buffer.byteLength(truncation(rows.length));
  let text = head;
  let bytes = Buffer.byteLength(text);
  for (const [index, row] of rows.entries()) {
    const size = Buffer.byteLength(row) + 1;
    if (bytes + size + reserve > maxBytes) return `${text}${truncation(rows.length - index)}`;
    text += `\n${row}`;
    bytes += size;
  }
  return `${text}\n`;
}

/** A markdown table cell: one line, pipes escaped. */
function cell(text: string): string {
  return text.replace(/\s+/g, " ").replace(/\|/g, "\\|");
}
