import { statSync } from "node:fs";
import { join } from "node:path";
import type { Task } from "../config/load-task.js";
import { verifyEnding } from "../delivery/verify-ending.js";
import { formatUsd } from "../model/pricing.js";
import type { RunReport } from "../run/run-report.js";
import { terminalSafe } from "../terminal-text.js";

// The summary of a finished run, as `runner exec` prints it and `runner show` leads with: this module
// loads nothing of the run machinery (bench/cli.bench.ts times `runner show`).

/** `".GIT" (dotgit_name), "big.bin" (file_too_large) and 3 more`: paths quoted, so trailing spaces and control characters show. */
export function describeLeftOut(leftOut: readonly { path: string; reason: string }[], count: number): string {
  const shown = leftOut.slice(0, 5).map((entry) => `${terminalSafe(JSON.stringify(entry.path))} (${entry.reason})`);
  return `${shown.join(", ")}${count > shown.length ? ` and ${count - shown.length} more` : ""}`;
}

/** Lines of the verify output tail and of the final answer the summary shows (the whole texts are in report.json). */
const SUMMARY_LINES = 15;

function lastLines(text: string, count: number): string {
  const lines = text.trimEnd().split("\n");
  return `${lines.length > count ? `  [${lines.length - count} lines before]\n` : ""}${lines
    .slice(-count)
    .map((line) => `  ${line}`)
    .join("\n")}`;
}

function firstLines(text: string, count: number): string {
  const lines = text.trim().split("\n");
  return `${lines
    .slice(0, count)
    .map((line) => `  ${line}`)
    .join("\n")}${lines.length > count ? `\n  [${lines.length - count} more lines: report.json final_message]` : ""}`;
}

/** The summary `runner exec` prints after a run (terminal-safe): status, verify, answer, branch, counts and cost, the run's files, what needs a look. */
export function outcomeText(task: Pick<Task, "verify">, { report, runDirectory }: { report: RunReport; runDirectory: string }): string {
  const lines = [
    "",
    `status: ${report.status} (${report.reason})${report.error ? `\nerror: ${report.error}` : ""}`,
    report.verify
      ? `verify: ${report.verify.command} → ${verifyEnding(report.verify, task.verify?.timeout_sec ?? 0)}${
          report.verify.protected ? ` (protected: ${report.verify.protected.restored.length} restored, ${report.verify.protected.deleted.length} deleted)` : ""
        }`
      : task.verify
        ? "verify: not run"
        : "verify: (no verify.command in the task)",
    report.verify && !report.verify.passed && report.verify.output_tail.trim()
      ? `verify output (last lines):\n${lastLines(report.verify.output_tail, SUMMARY_LINES)}`
      : "",
    report.final_message?.trim() ? `answer:\n${firstLines(report.final_message, SUMMARY_LINES)}` : "",
    `branch: ${report.branch ?? "-"}`,
    report.commit?.left_out_count
      ? `left out of the commit: ${describeLeftOut(report.commit.left_out, report.commit.left_out_count)} (see report.json commit.left_out)`
      : "",
    `steps: ${report.steps}, tool calls: ${report.tool_calls}, tokens: ${report.usage.prompt_tokens} in (${report.usage.cached_tokens} cached${report.usage.cache_write_tokens ? `, ${report.usage.cache_write_tokens} written to the cache` : ""}) / ${report.usage.completion_tokens} out, cost: ${costText(report)}, ${(report.duration_ms / 1000).toFixed(1)} s`,
    `run directory: ${runDirectory}`,
    // A run that changed nothing has an empty patch.diff: no line to open it.
    report.patch && !isEmptyFile(join(runDirectory, report.patch)) ? `patch: ${join(runDirectory, report.patch)}` : "",
    Object.keys(report.denials).length
      ? `denied: ${Object.entries(report.denials)
          .map(([rule, count]) => `${rule} ×${count}`)
          .join(", ")} (rules of the agents' policies; see events.jsonl tool_call.denied)`
      : "",
    report.merge ? `merge: ${report.merge.merged ? "" : "not merged: "}${terminalSafe(report.merge.detail)}` : "",
    report.disk?.limit_reached
      ? `disk: the limit (${Math.round(report.disk.limit_bytes / 1024 ** 2)} MiB) was reached; ${report.disk.enforcement === "filesystem" ? "writes past it were refused" : "the sandbox's processes were stopped"}`
      : "",
    report.agents.length ? `subagents: ${report.agents.map((agent) => `${agent.id} ${agent.status}`).join(", ")}` : "",
    ...report.agents.filter((agent) => agent.not_merged_reason).map((agent) => `  ${agent.id} not merged: ${agent.not_merged_reason}`),
    continueHint(report),
  ];
  // The verify command, branch, error and merge detail come from the task file, the repository and the agent's work.
  return `${terminalSafe(lines.filter(Boolean).join("\n"))}\n`;
}

function isEmptyFile(path: string): boolean {
  try {
    return statSync(path).size === 0;
  } catch {
    return false;
  }
}

/** The summary's cost: `$0.0123` (with the budget when there is one), or why it is unknown. */
function costText(report: RunReport): string {
  if (report.cost_usd === null) return `unknown (${report.pricing?.unpriced ?? "not priced"})`;
  const budget = report.reason === "budget_exceeded" ? " (the budget, model.max_cost_usd, was reached)" : "";
  return `${formatUsd(report.cost_usd)}${report.pricing?.model ? ` as ${report.pricing.model}` : ""}${budget}`;
}

/** How to continue a run that can be: after an interruption or error, or past a limit `runner resume` raises. */
function continueHint(report: RunReport): string {
  if (report.steps === 0) return "";
  // Resuming replays the recorded task with the same verify command: the task file needs the fix, then a new run.
  if (report.reason === "verify_unrunnable")
    return "next: fix verify.command in the task file (its program could not run in the sandbox), then start a new run";
  if (report.status === "cancelled" || report.status === "error") return `continue it: runner resume ${report.run_id}`;
  if (report.status !== "failed") return "";
  const flag = { max_steps: " --max-steps N", budget_exceeded: " --max-cost USD", timed_out: " (--timeout D for a new time limit)" }[report.reason];
  return flag === undefined ? "" : `continue it: runner resume ${report.run_id}${flag}`;
}
