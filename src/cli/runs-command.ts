import { readFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import type { Task } from "../config/load-task.js";
import type { ChatMessage } from "../model/messages.js";
import type { RunReport } from "../run/run-report.js";
import { RUN_FILES } from "../run/run-store.js";
import { redactorFor } from "../redaction/redactor.js";
import { listRuns, readRunRecord, runSummary, wholeToolResults } from "../runner/run-records.js";
import { oneLine, terminalSafe, terminalSafeJson } from "../terminal-text.js";
import { outcomeText } from "./run-summary.js";

/** `runner runs`: a table (or JSON lines) of the runs in RUNNER_HOME. */
export function runsCommand(home: string, options: { json?: boolean }): number {
  const runs = listRuns(home);
  if (options.json) {
    for (const run of runs) process.stdout.write(`${terminalSafeJson(JSON.stringify({ ...run, started: run.started.toISOString() }))}\n`);
    return 0;
  }
  if (runs.length === 0) {
    process.stdout.write(`no runs in ${join(home, "runs")}\n`);
    return 0;
  }
  const rows = [["RUN", "TASK", "STATUS", "AGE", "BRANCH"], ...runs.map((run) => [run.id, run.task, run.status, age(run.started), run.branch])];
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  // Task and branch names come from task files and run records: escaped like everything else shown.
  for (const row of rows)
    process.stdout.write(
      `${terminalSafe(
        row
          .map((cell, column) => cell.padEnd(widths[column]!))
          .join("  ")
          .trimEnd(),
      )}\n`,
    );
  return 0;
}

/**
 * `runner show <run-id>`: the summary `runner exec` printed when the run
 * ended ({@link outcomeText}), then a readable transcript, tool results cut
 * to their first {@link RESULT_PREVIEW_LINES} lines (with `full`, whole: see
 * {@link wholeToolResults}), then the run's diff (patch.diff). With `json`, one JSON object:
 * `{run_id, directory, report, agents: {<agent id>: {messages}}}`, the
 * messages as the model got them (with `full`, tool messages' content whole).
 * Accepts a unique prefix of the id; throws ConfigError when none or several match.
 */
export function showCommand(home: string, idOrPrefix: string, options: { full?: boolean; json?: boolean } = {}): number {
  const run = readRunRecord(home, idOrPrefix);
  const whole = options.full ? wholeToolResults(run.directory) : null;
  const agents = Object.fromEntries(
    Object.entries(run.agents).map(([agent, { messages }]) => [
      agent,
      {
        messages: messages.map((message) =>
          message.role === "tool" && whole ? { ...message, content: whole.get(agent)?.get(message.tool_call_id) ?? message.content } : message,
        ),
      },
    ]),
  );
  if (options.json) {
    process.stdout.write(`${terminalSafeJson(JSON.stringify({ run_id: run.id, directory: run.directory, report: run.report, agents }))}\n`);
    return 0;
  }
  const out: string[] = [`run ${run.id}  (${run.directory})`, summaryOf(run.directory, run.report)];
  for (const [agent, { messages }] of Object.entries(agents)) {
    out.push(`== transcript (${agent})`);
    for (const message of messages) out.push(...describeMessage(message, options.full ? Infinity : RESULT_PREVIEW_LINES));
  }
  const patch = readText(join(run.directory, RUN_FILES.patch));
  out.push("", `== diff (${join(run.directory, RUN_FILES.patch)})`);
  // The agent's work keeps what it wrote (patch.diff, the branch); on the terminal it is redacted like the records:
  // credential shapes, and the values of the run's secret_env variables that this environment holds.
  const redactor = redactorFor({ sandbox: { secret_env: recordedSecretEnv(run.directory) } }, process.env);
  out.push(patch === null ? "(no patch.diff: the run has not finished)" : patch.trim() ? redactor.redact(patch.trimEnd()) : "(no changes)");
  process.stdout.write(`${out.map(terminalSafe).join("\n")}\n`);
  return 0;
}

/** The run's `sandbox.secret_env` names from its task.json; none when it is missing or damaged. */
function recordedSecretEnv(directory: string): string[] {
  try {
    const names = (JSON.parse(readText(join(directory, RUN_FILES.task)) ?? "{}") as { sandbox?: { secret_env?: unknown } }).sandbox?.secret_env;
    return Array.isArray(names) ? names.filter((name): name is string => typeof name === "string") : [];
  } catch {
    return [];
  }
}

/**
 * The summary `runner exec` printed for the run (the run's task.json says
 * what its verify was), without its leading blank line; a note for a run
 * still going; report.json as JSON when it is not one this runner can
 * summarise (a record of another version, or damaged).
 */
function summaryOf(directory: string, report: unknown): string {
  if (!report) {
    const id = basename(directory);
    return runSummary(dirname(dirname(directory)), id)?.status === "running"
      ? `(no report.json: the run is still running; \`runner logs -f ${id}\` follows it)\n`
      : `(no report.json: the run stopped before it finished; \`runner resume ${id}\` continues it)\n`;
  }
  const taskText = readText(join(directory, RUN_FILES.task));
  let task: Pick<Task, "verify"> = {};
  try {
    if (taskText) task = JSON.parse(taskText) as Task;
  } catch {
    // A damaged task.json only loses the verify time limit in the summary.
  }
  try {
    return outcomeText(task, { report: report as RunReport, runDirectory: directory }).replace(/^\n/, "");
  } catch {
    return `${JSON.stringify(report, null, 2)}\n`;
  }
}

function readText(path: string): string | null {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return null;
  }
}

/** Lines of a tool result `runner show` prints without `--full`. */
const RESULT_PREVIEW_LINES = 12;

function describeMessage(message: ChatMessage, resultLines: number): string[] {
  switch (message.role) {
    case "system":
      return [`[system] ${oneLine(message.content, 120)}`];
    case "user":
      return [`[user] ${message.content.trim()}`];
    case "assistant":
      return [
        ...(message.content ? [`[assistant] ${message.content.trim()}`] : []),
        ...(message.tool_calls ?? []).map((call) => `  → ${call.function.name} ${oneLine(call.function.arguments, 200)}`),
      ];
    case "tool": {
      const lines = message.content.split("\n");
      const shown = lines.slice(0, resultLines).map((line) => `    ${line}`);
      if (lines.length > resultLines) shown.push(`    [... ${lines.length - resultLines} more lines: runner show --full]`);
      return shown;
    }
  }
}

function age(started: Date): string {
  const seconds = Math.max(0, Math.round((Date.now() - started.getTime()) / 1000));
  if (seconds < 120) return `${seconds}s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)}m`;
  if (seconds < 172800) return `${Math.round(seconds / 3600)}h`;
  return `${Math.round(seconds / 86400)}d`;
}
