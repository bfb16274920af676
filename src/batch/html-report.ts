import { createHash } from "node:crypto";
import { relative } from "node:path";
import { formatRate, runCount, type BatchAttempt, type BatchReport, type BatchTaskReport } from "./batch-report.js";
import type { RunDetails, TimelineEntry } from "./run-details.js";

/** The status colours (GitHub Primer's success, danger, attention and muted foregrounds): badges, the table, the tests' pixel checks. */
export const STATUS_COLOURS = { succeeded: "#1a7f37", failed: "#cf222e", error: "#9a6700", skipped: "#57606a" } as const;

/**
 * Bytes of per-run sections (timelines and diffs) one report.html inlines in
 * all; the runs after that get a note and their links. Each run is bounded
 * on its own (src/batch/run-details.ts); this bounds a batch of thousands,
 * so the page stays one a browser opens (tens of MB, not GB).
 */
export const INLINE_BUDGET_BYTES = 24 * 1024 * 1024;

/** A run's timeline and diff, or null when there is nothing to show (no run directory). */
export type RunDetailsOf = (attempt: BatchAttempt) => RunDetails | null;

/**
 * The status filter: shows the filter bar (hidden for readers without
 * script: the page needs none) and hides table rows and task sections whose
 * status is unticked or whose name lacks the typed text. Written without `<`
 * and `&` so the page stays well-formed XML, which the unit tests parse.
 */
const FILTER_SCRIPT = `(function () {
  var bar = document.getElementById("filters");
  bar.hidden = false;
  var boxes = bar.querySelectorAll("input[type=checkbox]");
  var text = document.getElementById("filter-text");
  function apply() {
    var shown = {};
    boxes.forEach(function (box) { shown[box.value] = box.checked; });
    var needle = text.value.toLowerCase();
    document.querySelectorAll("[data-status]").forEach(function (element) {
      var named = needle ? element.getAttribute("data-name").toLowerCase().indexOf(needle) !== -1 : true;
      element.hidden = !(shown[element.getAttribute("data-status")] ? named : false);
    });
  }
  boxes.forEach(function (box) { box.addEventListener("change", apply); });
  text.addEventListener("input", apply);
})();`;

/**
 * The page's Content-Security-Policy: nothing loads from anywhere, styles
 * are the inline ones, and the only script that runs is FILTER_SCRIPT (by
 * its SHA-256, CSP Level 2 "hash-source"). Task names, tool arguments and
 * diffs are escaped; this is the second wall should escaping ever miss.
 */
const CONTENT_SECURITY_POLICY = `default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'sha256-${createHash("sha256").update(FILTER_SCRIPT).digest("base64")}'; base-uri 'none'; form-action 'none'`;

const STYLE = `
:root{--ok:${STATUS_COLOURS.succeeded};--bad:${STATUS_COLOURS.failed};--warn:${STATUS_COLOURS.error};--muted:${STATUS_COLOURS.skipped};--line:#d0d7de}
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;padding:1.5em 2em;color:#1f2328;background:#fff;line-height:1.4}
h1{font-size:1.5em;margin:0 0 .5em}h2{font-size:1.2em;margin:1.5em 0 .5em}h3{font-size:1em;margin:.8em 0 .4em}h4{font-size:.9em;margin:.8em 0 .3em;color:#59636e}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;color:#fff;font-weight:600;font-size:.85em;white-space:nowrap}
.badge.succeeded,.badge.passed{background:var(--ok)}.badge.failed{background:var(--bad)}.badge.error{background:var(--warn)}.badge.skipped,.badge.interrupted,.badge.running{background:var(--muted)}
.cards{display:flex;flex-wrap:wrap;gap:.6em;margin:.8em 0}.card{border:1px solid var(--line);border-radius:6px;padding:.4em .8em;min-width:6em}
.card b{display:block;font-size:1.4em}.card.succeeded b{color:var(--ok)}.card.failed b{color:var(--bad)}.card.error b{color:var(--warn)}.card.skipped b{color:var(--muted)}
.gate{padding:.5em .8em;border-left:6px solid var(--muted);background:#f6f8fa}.gate.passed{border-color:var(--ok)}.gate.failed{border-color:var(--bad)}
#filters{margin:1em 0}#filters label{margin-right:1em}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid var(--line);padding:4px 8px;vertical-align:top;text-align:left}th{background:#f6f8fa}
td.status{border-left:6px solid var(--muted)}td.status.succeeded{border-left-color:var(--ok)}td.status.failed{border-left-color:var(--bad)}td.status.error{border-left-color:var(--warn)}
td.num{text-align:right;font-variant-numeric:tabular-nums}ul{margin:0;padding-left:1em}
details.task{border:1px solid var(--line);border-radius:6px;margin:.5em 0;padding:.3em .8em}details.task>summary{cursor:pointer;padding:.2em 0}
details.task>summary .name{font-weight:600;margin:0 .5em}.reason{color:#59636e}
.attempt{border-top:1px solid var(--line);margin-top:.5em}
.error-text,pre{white-space:pre-wrap;word-break:break-word;font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.85em}
ol.timeline{list-style:none;margin:0;padding:0}ol.timeline li{border-left:4px solid var(--line);padding:2px 8px;margin:2px 0}
ol.timeline li.ok{border-left-color:var(--ok)}ol.timeline li.bad{border-left-color:var(--bad)}ol.timeline li.denied{background:#ffebe9}
.t{color:#59636e;font-variant-numeric:tabular-nums;display:inline-block;min-width:5em}.k{display:inline-block;min-width:4.5em;font-size:.8em;text-transform:uppercase;color:#59636e}.who{color:#8250df;margin-right:.5em}
ol.timeline pre{margin:2px 0 2px 10em;color:#424a53}
pre.diff{border:1px solid var(--line);border-radius:6px;padding:0;overflow-x:auto;white-space:pre}pre.diff span{display:block;padding:0 8px}
.d-add{background:#dafbe1;color:#116329}.d-del{background:#ffebe9;color:#82071e}.d-hunk{background:#ddf4ff;color:#0550ae}.d-meta{font-weight:600;background:#f6f8fa}
.note{color:#9a6700;font-style:italic}
`;

/**
 * report.html: one self-contained page (no external resource; readable with
 * script off) for a person: the status, totals and gate; a filter bar (a
 * few lines of inline script); the table of tasks; and per task an
 * expandable section (`<details>`) with, per run, its error, a timeline of
 * agents, tool calls, denials, verify and merge (from events.jsonl through
 * the event catalogue), and its patch.diff coloured by line (`+` added, `-`
 * removed, `@@` hunks). Every text is escaped; a Content-Security-Policy
 * lets only the filter script run. Links to run directories and patches
 * are relative to `batchDirectory`. Bounded in size: per run
 * (run-details.ts) and {@link INLINE_BUDGET_BYTES} over all runs.
 */
export function htmlReport(report: BatchReport, batchDirectory: string, detailsOf: RunDetailsOf = () => null): string {
  const link = (path: string, text: string) => `<a href="${escapeHtml(encodeURI(relative(batchDirectory, path)))}">${escapeHtml(text)}</a>`;
  const { totals } = report;
  const rows = report.tasks.map((task, index) => {
    const runs = task.attempts
      .map((attempt) => {
        const label = task.attempts.length > 1 ? `#${attempt.attempt}.${attempt.try} ` : "";
        const run = attempt.run_dir ? link(attempt.run_dir, attempt.run_id ?? "run") : "no run";
        const patch = attempt.patch ? ` (${link(attempt.patch, "patch.diff")})` : "";
        return `<li>${escapeHtml(label)}${escapeHtml(attempt.status)} ${run}${patch}</li>`;
      })
      .join("");
    const finished = task.attempts.filter((attempt) => attempt.status !== "skipped");
    const tokens = finished.reduce((sum, attempt) => sum + (attempt.tokens ? attempt.tokens.prompt + attempt.tokens.completion : 0), 0);
    const duration = finished.reduce((sum, attempt) => sum + (attempt.duration_ms ?? 0), 0);
    return (
      `<tr ${filterAttributes(task)}><td><a href="#task-${index}">${escapeHtml(task.name)}</a>${task.flaky ? " <em>flaky</em>" : ""}</td>` +
      `<td class="status ${escapeHtml(task.status)}"><span class="badge ${escapeHtml(task.status)}">${escapeHtml(task.status)}</span></td>` +
      `<td>${escapeHtml(task.reason)}</td><td class="num">${runCount(task)}</td><td class="num">${tokens}</td>` +
      `<td class="num">${finished.length ? escapeHtml(formatSeconds(duration)) : "-"}</td><td><ul>${runs}</ul></td></tr>`
    );
  });
  let budget = INLINE_BUDGET_BYTES;
  const sections = report.tasks.map((task, index) => {
    const attempts = task.attempts.map((attempt) => {
      const header =
        `<h3>${task.attempts.length > 1 ? escapeHtml(`attempt ${attempt.attempt}, try ${attempt.try}: `) : ""}` +
        `<span class="badge ${escapeHtml(attempt.status)}">${escapeHtml(attempt.status)}</span> <span class="reason">${escapeHtml(attempt.reason)}</span>` +
        `${attempt.run_dir ? ` · run ${link(attempt.run_dir, attempt.run_id ?? "run")}` : ""}${attempt.patch ? ` · ${link(attempt.patch, "patch.diff")}` : ""}` +
        `${attempt.steps !== null ? escapeHtml(` · ${attempt.steps} steps`) : ""}` +
        `${attempt.tokens ? escapeHtml(` · ${attempt.tokens.prompt + attempt.tokens.completion} tokens (${attempt.tokens.cached} cached)`) : ""}` +
        `${attempt.duration_ms !== null ? escapeHtml(` · ${formatSeconds(attempt.duration_ms)}`) : ""}</h3>`;
      const error = attempt.error ? `<pre class="error-text">${escapeHtml(attempt.error)}</pre>` : "";
      let body: string;
      if (budget <= 0) {
        body = `<p class="note">Timeline and diff not shown: this page already holds ${INLINE_BUDGET_BYTES} bytes of them; open the run directory.</p>`;
      } else {
        const details = attempt.run_dir ? detailsOf(attempt) : null;
        body = details ? runSection(details) : `<p class="note">No run directory: nothing ran.</p>`;
        budget -= body.length;
      }
      return `<section class="attempt">${header}${error}${body}</section>`;
    });
    return (
      `<details class="task" id="task-${index}" ${filterAttributes(task)}><summary><span class="badge ${escapeHtml(task.status)}">${escapeHtml(task.status)}</span>` +
      `<span class="name">${escapeHtml(task.name)}</span><span class="reason">${escapeHtml(task.reason)}</span>${task.flaky ? " <em>flaky</em>" : ""}</summary>` +
      `<p>task file: <code>${escapeHtml(task.task_file)}</code></p>${attempts.join("\n") || `<p class="note">No run.</p>`}</details>`
    );
  });
  const card = (label: string, value: string, status = "") => `<div class="card ${status}"><b>${escapeHtml(value)}</b>${escapeHtml(label)}</div>`;
  const durations = totals.duration_ms;
  const statuses = Object.keys(STATUS_COLOURS)
    .map((status) => `<label><input type="checkbox" value="${status}" checked="checked" /> ${status}</label>`)
    .join("");
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8" />
<meta http-equiv="Content-Security-Policy" content="${CONTENT_SECURITY_POLICY}" />
<meta name="viewport" content="width=device-width, initial-scale=1" />
<title>${escapeHtml(`batch ${report.batch_id}: ${report.status}`)}</title>
<style>${STYLE}</style>
</head>
<body>
<h1>Batch ${escapeHtml(report.batch_id)} <span class="badge ${escapeHtml(report.status)}" id="batch-status">${escapeHtml(report.status)}</span></h1>
<div class="cards">${card("tasks", String(totals.tasks))}${card("succeeded", String(totals.succeeded), "succeeded")}${card("failed", String(totals.failed), "failed")}${card("error", String(totals.error), "error")}${card("skipped", String(totals.skipped), "skipped")}${card("pass rate", formatRate(totals.pass_rate))}${card("without infrastructure errors", formatRate(totals.pass_rate_without_errors))}${card(`tokens (${totals.tokens.cached} cached)`, String(totals.tokens.total))}${card("runs", String(totals.runs))}${durations ? card("run p50 / p90", `${formatSeconds(durations.p50)} / ${formatSeconds(durations.p90)}`) : ""}${card("wall", formatSeconds(totals.wall_ms))}</div>
<p class="gate ${report.gate.passed ? "passed" : "failed"}" id="gate">${escapeHtml(`Gate ${report.gate.passed ? "passed" : "not passed"}: ${report.gate.detail}`)}</p>${report.merged_from ? `\n<p>${escapeHtml(`Merged from ${report.merged_from.join(", ")}`)}</p>` : ""}${report.flaky.length ? `\n<p>${escapeHtml(`Flaky: ${report.flaky.join(", ")}`)}</p>` : ""}
<div id="filters" hidden="hidden">Show: ${statuses}<label>name contains <input type="search" id="filter-text" /></label></div>
<h2>Tasks</h2>
<table id="tasks">
<thead><tr><th>task</th><th>status</th><th>reason</th><th>runs</th><th>tokens</th><th>time</th><th>run directories</th></tr></thead>
<tbody>
${rows.join("\n")}
</tbody>
</table>
<h2>Runs: timelines and diffs</h2>
${sections.join("\n")}
<script>${FILTER_SCRIPT}</script>
</body>
</html>
`;
}

function filterAttributes(task: BatchTaskReport): string {
  return `data-status="${escapeHtml(task.status)}" data-name="${escapeHtml(task.name)}"`;
}

function runSection(details: RunDetails): string {
  const parts: string[] = [];
  if (details.timeline.length) {
    const head = details.timelineOmitted ? Math.floor(details.timeline.length * 0.75) : details.timeline.length;
    const items = details.timeline.map(timelineItem);
    if (details.timelineOmitted)
      items.splice(
        head,
        0,
        `<li class="note">${details.timelineOmitted} entries left out here (this page keeps ${details.timeline.length} per run; events.jsonl has all).</li>`,
      );
    parts.push(`<h4>Timeline</h4>`);
    if (details.eventsCut) parts.push(`<p class="note">events.jsonl is large: only its start and its end were read.</p>`);
    parts.push(`<ol class="timeline">${items.join("")}</ol>`);
  } else {
    parts.push(`<p class="note">No events.</p>`);
  }
  if (details.diff) {
    parts.push(`<h4>Diff</h4><pre class="diff">${diffLines(details.diff.text)}</pre>`);
    if (details.diff.shownBytes < details.diff.totalBytes)
      parts.push(`<p class="note">Diff cut: ${details.diff.shownBytes} of ${details.diff.totalBytes} bytes shown; patch.diff has all of it.</p>`);
  } else {
    parts.push(`<p class="note">No diff.</p>`);
  }
  return parts.join("");
}

function timelineItem(entry: TimelineEntry): string {
  const time = entry.offset_ms === null ? "" : `+${formatSeconds(entry.offset_ms)}`;
  return (
    `<li class="${entry.kind} ${entry.outcome}"><span class="t">${time}</span><span class="k">${entry.kind}</span>` +
    `${entry.agent ? `<span class="who">${escapeHtml(entry.agent)}</span>` : ""}${escapeHtml(entry.title)}` +
    `${entry.detail ? `<pre>${escapeHtml(entry.detail)}</pre>` : ""}</li>`
  );
}

/**
 * A unified diff, one `<span>` per line classed by its first characters, as
 * `git diff --color` colours it (meta, hunk header, added, removed, context).
 * Colouring by line prefix is all a patch view needs here; diff2html would
 * parse the patch into files and hunks and bring a stylesheet of its own.
 */
function diffLines(text: string): string {
  const lines = text.endsWith("\n") ? text.slice(0, -1).split("\n") : text.split("\n");
  return lines
    .map((line) => {
      const kind = /^(diff --git |index |--- |\+\+\+ |new file mode|deleted file mode|similarity index|rename (from|to) |Binary files )/.test(line)
        ? "d-meta"
        : line.startsWith("@@")
          ? "d-hunk"
          : line.startsWith("+")
            ? "d-add"
            : line.startsWith("-")
              ? "d-del"
              : "d-ctx";
      return `<span class="${kind}">${escapeHtml(line) || " "}</span>`;
    })
    .join("");
}

function formatSeconds(ms: number): string {
  return ms < 60_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/**
 * Text for HTML element content and quoted attribute values: the five
 * characters with a meaning there (`& < > " '`, HTML Living Standard
 * "Serializing HTML fragments" escapes the same set) become character
 * references, and control characters other than tab and line ends (a
 * terminal's colour codes in tool output; HTML calls them parse errors) are
 * removed. Five replacements do not need a dependency.
 */
function escapeHtml(text: string): string {
  return text.replace(SPECIAL, (character) => (character in REFERENCES ? REFERENCES[character]! : ""));
}

const SPECIAL = /[&<>"'\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g;
const REFERENCES: Record<string, string> = { "&": "&#38;", "<": "&#60;", ">": "&#62;", '"': "&#34;", "'": "&#39;" };
