import { create } from "xmlbuilder2";
import type { BatchAttempt, BatchReport, BatchTaskReport } from "./batch-report.js";

/** Longest text kept per failure or error element, characters: a batch of 1 000 tasks stays far below CI tools' upload limits (GitLab reads up to 30 MB). */
const MAX_DETAIL_CHARACTERS = 16 * 1024;

/**
 * The batch as JUnit XML (the de-facto schema Jenkins, GitLab and GitHub
 * test reporters read): one `<testsuite>`, one `<testcase>` per run of a
 * task (every try of every attempt; a task that never ran gets one), named
 * by the task id, with `[attempt a, try t]` when the task had more than one
 * run, so names are unique. `<failure>` is the agent's failure, `<error>`
 * an infrastructure error, `<skipped>` a task or try that did not finish;
 * `message` is the reason. Escaping is xmlbuilder2's; characters XML 1.0
 * cannot hold (control characters other than tab and newlines, lone
 * surrogates, U+FFFE/U+FFFF) are removed first, which xmlbuilder2 does not do.
 */
export function junitXml(report: BatchReport): string {
  const cases = report.tasks.flatMap((task): { task: BatchTaskReport; attempt: BatchAttempt | null }[] =>
    task.attempts.length ? task.attempts.map((attempt) => ({ task, attempt })) : [{ task, attempt: null }],
  );
  const count = (status: string) => cases.filter(({ task, attempt }) => (attempt?.status ?? task.status) === status).length;
  const seconds = (ms: number | null | undefined) => ((ms ?? 0) / 1000).toFixed(3);
  const totalMs = cases.reduce((sum, { attempt }) => sum + (attempt?.duration_ms ?? 0), 0);
  const counts = { tests: cases.length, failures: count("failed"), errors: count("error"), skipped: count("skipped"), time: seconds(totalMs) };
  const root = create({ version: "1.0", encoding: "UTF-8" }).ele("testsuites", { name: xmlText(`runner batch ${report.batch_id}`), ...stringify(counts) });
  const suite = root.ele("testsuite", { name: xmlText(`batch ${report.batch_id}`), timestamp: report.created_at.replace(/\.\d+Z$/, ""), ...stringify(counts) });
  for (const { task, attempt } of cases) {
    const testcase = suite.ele("testcase", { classname: "runner.batch", name: xmlText(caseName(task, attempt)), time: seconds(attempt?.duration_ms) });
    const status = attempt?.status ?? task.status;
    const reason = xmlText(attempt?.reason ?? task.reason);
    const detail = xmlText(truncate([attempt?.error ?? task.error, attempt?.run_dir ? `run: ${attempt.run_dir}` : null].filter(Boolean).join("\n")));
    if (status === "failed") testcase.ele("failure", { message: reason, type: reason }).txt(detail);
    else if (status === "error") testcase.ele("error", { message: reason, type: reason }).txt(detail);
    else if (status === "skipped") testcase.ele("skipped", { message: reason });
    const out = [
      attempt?.run_dir ? `run directory: ${attempt.run_dir}` : null,
      attempt?.patch ? `patch: ${attempt.patch}` : null,
      `task file: ${task.task_file}`,
    ]
      .filter(Boolean)
      .join("\n");
    testcase.ele("system-out").txt(xmlText(out));
  }
  return `${root.end({ prettyPrint: true })}\n`;
}

function caseName(task: BatchTaskReport, attempt: BatchAttempt | null): string {
  if (!attempt || task.attempts.length === 1) return task.name;
  return `${task.name} [attempt ${attempt.attempt}, try ${attempt.try}]`;
}

function stringify(values: Record<string, number | string>): Record<string, string> {
  return Object.fromEntries(Object.entries(values).map(([key, value]) => [key, String(value)]));
}

function truncate(text: string): string {
  return text.length <= MAX_DETAIL_CHARACTERS
    ? text
    : `${text.slice(0, MAX_DETAIL_CHARACTERS)}\n[... ${text.length - MAX_DETAIL_CHARACTERS} more characters in the run's report.json]`;
}

/** `text` without the code points XML 1.0 does not allow (its "Char" production, section 2.2). */
function xmlText(text: string): string {
  return text.replace(/[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/gu, "");
}
