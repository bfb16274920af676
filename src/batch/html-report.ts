import { relative } from "node:path";
import { formatRate, type BatchReport } from "./batch-report.js";
import { totalsLine } from "./summary.js";

const STATUS_COLOURS: Record<string, string> = { succeeded: "#1a7f37", failed: "#cf222e", error: "#9a6700", skipped: "#57606a" };

/**
 * report.html: a static page a person can open from the batch directory:
 * the totals and the gate, then one table row per task (status, reason,
 * runs), with a link per run to its run directory and its patch.diff
 * (relative to `batchDirectory`, so the page works wherever RUNNER_HOME is
 * opened from). No script, no external resource.
 */
export function htmlReport(report: BatchReport, batchDirectory: string): string {
  const link = (path: string, text: string) => `<a href="${escapeHtml(encodeURI(relative(batchDirectory, path)))}">${escapeHtml(text)}</a>`;
  const rows = report.tasks.map((task) => {
    const runs = task.attempts
      .map((attempt) => {
        const label = task.attempts.length > 1 ? `#${attempt.attempt}.${attempt.try} ` : "";
        const run = attempt.run_dir ? link(attempt.run_dir, attempt.run_id ?? "run") : "no run";
        const patch = attempt.patch ? ` (${link(attempt.patch, "patch.diff")})` : "";
        return `<li><span class="${escapeHtml(attempt.status)}">${escapeHtml(label)}${escapeHtml(attempt.status)}</span> ${escapeHtml(attempt.reason)}: ${run}${patch}</li>`;
      })
      .join("");
    return `<tr><td>${escapeHtml(task.name)}${task.flaky ? " <em>flaky</em>" : ""}</td><td class="${escapeHtml(task.status)}">${escapeHtml(task.status)}</td><td>${escapeHtml(task.reason)}</td><td><ul>${runs}</ul></td></tr>`;
  });
  const styles = Object.entries(STATUS_COLOURS)
    .map(([status, colour]) => `.${status}{color:${colour};font-weight:600}`)
    .join("");
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8" />
<title>${escapeHtml(`batch ${report.batch_id}: ${report.status}`)}</title>
<style>body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #d0d7de;padding:4px 8px;vertical-align:top;text-align:left}ul{margin:0;padding-left:1em}${styles}</style>
</head>
<body>
<h1>${escapeHtml(`Batch ${report.batch_id}: ${report.status}`)}</h1>
<p>${escapeHtml(totalsLine(report))}</p>
<p>${escapeHtml(`Gate: ${report.gate.passed ? "passed" : "not passed"} (${report.gate.detail}); pass rate ${formatRate(report.totals.pass_rate)}`)}</p>
<table>
<thead><tr><th>task</th><th>status</th><th>reason</th><th>runs</th></tr></thead>
<tbody>
${rows.join("\n")}
</tbody>
</table>
</body>
</html>
`;
}

/**
 * Text for HTML element content and quoted attribute values: the five
 * characters with a meaning there (`& < > " '`, HTML Living Standard
 * "Serializing HTML fragments" escapes the same set) become character
 * references. Five replacements do not need a dependency.
 */
function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (character) => `&#${character.charCodeAt(0)};`);
}
