import { create } from "xmlbuilder2";
import type { BatchAttempt, BatchReport, BatchTaskReport } from "./batch-report.js";
import type { RunDetailsOf } from "./html-report.js";
import type { RunDetails } from "./run-details.js";

/** Longest text kept per failure or error element, characters. */
const MAX_DETAIL_CHARACTERS = 16 * 1024;

/** Longest `<system-out>` per testcase at first, characters (the verify output tail and the agent's last message are in it). */
const MAX_SYSTEM_OUT_CHARACTERS = 64 * 1024;

/**
 * Largest junit.xml, bytes (30 MB, decimal): issue 15's limit, so CI tools'
 * report parsers (GitLab's among them, which refuses larger test reports)
 * take the file whole.
 */
export const JUNIT_MAX_BYTES = 30 * 1000 * 1000;

/** How much of each testcase's text a rendering keeps, from everything down to names and messages alone. */
interface Detail {
  /** Characters of each `<system-out>`; 0: none. */
  systemOut: number;
  /** Characters of each failure's or error's text; 0: none. */
  failureText: number;
}

/**
 * The batch as JUnit XML (the de-facto schema Jenkins, GitLab and GitHub
 * test reporters read): one `<testsuite>`, one `<testcase>` per run of a
 * task (every try of every attempt; a task that never ran gets one), named
 * by the task id (its directory), with `[attempt a, try t]` when the task
 * had more than one run, so names are unique; its `classname` is the task
 * id too, so viewers that group by class show one group per task directory.
 * `<failure>` is the agent's failure, `<error>` an error (infrastructure,
 * or a task that could not be run), `<skipped>` a task or try that did not
 * finish; `message` is the reason. The failure's or error's text, which CI
 * viewers show first, holds the error, the verify command with its exit
 * code and its output's tail (from `detailsOf`), and the run directory.
 * `<system-out>` (which viewers collapse) has the run's paths, the verify
 * output of a run that did not fail it, and the agent's last message.
 * Escaping is xmlbuilder2's; characters XML 1.0 cannot hold (control
 * characters other than tab and newlines, lone surrogates, U+FFFE/U+FFFF)
 * are removed first, which xmlbuilder2 does not do.
 *
 * At most `maxBytes` (default {@link JUNIT_MAX_BYTES}): when the whole text
 * is larger, each `<system-out>` (and failure text) is cut to a quarter of
 * the share of the limit one testcase has, each with a line saying so, and
 * the suite's `<system-out>` says why; when that is still too large,
 * the testcases' texts are dropped (names, statuses and messages stay: every
 * testcase is always there) and the suite's `<system-out>` says so. That
 * last form is some 170 bytes a testcase: past ~170 000 runs it is the one
 * case where the file can still exceed the limit.
 */
export function junitXml(report: BatchReport, detailsOf: RunDetailsOf = () => null, maxBytes = JUNIT_MAX_BYTES): string {
  const cases = report.tasks.flatMap((task): Case[] =>
    (task.attempts.length ? task.attempts : [null]).map((attempt) => ({ task, attempt, details: attempt?.run_dir ? detailsOf(attempt) : null })),
  );
  const outputs = cases.map(systemOut);
  const full = render(report, cases, outputs, { systemOut: MAX_SYSTEM_OUT_CHARACTERS, failureText: MAX_DETAIL_CHARACTERS }, null);
  if (Buffer.byteLength(full) <= maxBytes) return full;
  const share = Math.floor(maxBytes / Math.max(1, cases.length) / 4);
  if (share >= 256) {
    const cut = render(
      report,
      cases,
      outputs,
      { systemOut: share, failureText: Math.min(share, MAX_DETAIL_CHARACTERS) },
      `junit.xml is kept under ${maxBytes} bytes: each testcase's system-out and failure text are cut to ${share} characters; batch-report.json and the run directories have all of it.`,
    );
    if (Buffer.byteLength(cut) <= maxBytes) return cut;
  }
  return render(
    report,
    cases,
    outputs,
    { systemOut: 0, failureText: 0 },
    `junit.xml is kept under ${maxBytes} bytes: the testcases' failure texts and system-out are left out (names, statuses and messages are all here); batch-report.json and the run directories have all of it.`,
  );
}

/** One testcase: a run of a task (null: the task never ran) and what its run directory holds. */
interface Case {
  task: BatchTaskReport;
  attempt: BatchAttempt | null;
  details: RunDetails | null;
}

function render(report: BatchReport, cases: Case[], outputs: string[], detail: Detail, note: string | null): string {
  const count = (status: string) => cases.filter(({ task, attempt }) => (attempt?.status ?? task.status) === status).length;
  const seconds = (ms: number | null | undefined) => ((ms ?? 0) / 1000).toFixed(3);
  const totalMs = cases.reduce((sum, { attempt }) => sum + (attempt?.duration_ms ?? 0), 0);
  const counts = { tests: cases.length, failures: count("failed"), errors: count("error"), skipped: count("skipped"), time: seconds(totalMs) };
  const root = create({ version: "1.0", encoding: "UTF-8" }).ele("testsuites", { name: xmlText(`runner batch ${report.batch_id}`), ...stringify(counts) });
  const suite = root.ele("testsuite", { name: xmlText(`batch ${report.batch_id}`), timestamp: report.created_at.replace(/\.\d+Z$/, ""), ...stringify(counts) });
  for (const [index, entry] of cases.entries()) {
    const { task, attempt } = entry;
    const testcase = suite.ele("testcase", { classname: xmlText(task.name), name: xmlText(caseName(task, attempt)), time: seconds(attempt?.duration_ms) });
    const status = attempt?.status ?? task.status;
    const reason = xmlText(attempt?.reason ?? task.reason);
    const text = detail.failureText ? xmlText(failureText(entry, detail.failureText)) : "";
    if (status === "failed") testcase.ele("failure", { message: reason, type: reason }).txt(text);
    else if (status === "error") testcase.ele("error", { message: reason, type: reason }).txt(text);
    else if (status === "skipped") testcase.ele("skipped", { message: reason });
    if (detail.systemOut > 0) testcase.ele("system-out").txt(xmlText(truncate(outputs[index]!, detail.systemOut)));
  }
  if (note) suite.ele("system-out").txt(xmlText(note));
  return `${root.end({ prettyPrint: true })}\n`;
}

/**
 * A failure's or error's text, at most `limit` characters: the error, the
 * verify command that did not pass with its exit and its output's tail (its
 * end kept when cut: that is where a test runner says what failed), the run
 * directory.
 */
function failureText({ task, attempt, details }: Case, limit: number): string {
  const error = attempt?.error ?? task.error;
  const verify = details?.verify && !details.verify.passed ? details.verify : null;
  const head = [error, verify ? `$ ${verify.command}\n${verify.timedOut ? "timed out" : `exit ${verify.exitCode ?? "none (no exit code)"}`}` : null].filter(
    Boolean,
  );
  const foot = attempt?.run_dir ? `run: ${attempt.run_dir}` : null;
  const fixed = [...head, foot].filter(Boolean).join("\n");
  if (!verify?.outputTail) return truncate(fixed, limit);
  const tail = verify.outputTail.trimEnd();
  const label = "\noutput (tail):\n";
  const marker = (cut: number) => `[... ${cut} characters cut ...]`;
  const room = limit - fixed.length - label.length - marker(tail.length).length;
  if (room <= 0) return truncate(fixed, limit);
  const output = tail.length <= room ? tail : `${marker(tail.length - room)}${tail.slice(-room)}`;
  return [...head, `output (tail):\n${output}`, foot].filter(Boolean).join("\n");
}

function systemOut({ task, attempt, details }: Case): string {
  const failedVerify = details?.verify && !details.verify.passed;
  return [
    attempt?.run_dir ? `run directory: ${attempt.run_dir}` : null,
    attempt?.patch ? `patch: ${attempt.patch}` : null,
    `task file: ${task.task_file}`,
    details?.verifyOutput && !failedVerify ? `\nverify output (tail):\n${details.verifyOutput}` : null,
    details?.finalMessage ? `\nthe agent's last message:\n${details.finalMessage}` : null,
  ]
    .filter(Boolean)
    .join("\n");
}

function caseName(task: BatchTaskReport, attempt: BatchAttempt | null): string {
  if (!attempt || task.attempts.length === 1) return task.name;
  return `${task.name} [attempt ${attempt.attempt}, try ${attempt.try}]`;
}

function stringify(values: Record<string, number | string>): Record<string, string> {
  return Object.fromEntries(Object.entries(values).map(([key, value]) => [key, String(value)]));
}

function truncate(text: string, limit: number): string {
  return text.length <= limit ? text : `${text.slice(0, limit)}\n[... cut: ${text.length - limit} more characters in the run directory]`;
}

/** `text` without the code points XML 1.0 does not allow (its "Char" production, section 2.2). */
function xmlText(text: string): string {
  return text.replace(/[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu, "");
}
