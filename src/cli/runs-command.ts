import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { ConfigError } from "../errors.js";
import { restoreSession } from "../agent/session-journal.js";
import type { ChatMessage } from "../model/messages.js";
import { isOwnerAlive } from "../process/process-owner.js";
import { oneLine, terminalSafe, terminalSafeJson } from "../terminal-text.js";

interface RunSummary {
  id: string;
  task: string;
  status: string;
  branch: string;
  started: Date;
}

/** Runs under `<home>/runs`, newest first. A run without report.json is `running` while its runner lives, else `unfinished`. */
function listRuns(home: string): RunSummary[] {
  const runs = join(home, "runs");
  if (!existsSync(runs)) return [];
  return readdirSync(runs)
    .map((id) => {
      const directory = join(runs, id);
      const report = readJson(join(directory, "report.json")) as { task?: string; status?: string; branch?: string } | null;
      const lock = readJson(join(directory, "run.json")) as { owner?: string; branch?: string } | null;
      const recordedTask = readJson(join(directory, "task.json")) as { name?: string } | null;
      const status = report?.status ?? (lock && isOwnerAlive(lock.owner) ? "running" : "unfinished");
      return {
        id,
        task: report?.task ?? recordedTask?.name ?? "?",
        status,
        branch: report?.branch ?? lock?.branch ?? "-",
        started: statSync(directory).birthtime,
      };
    })
    .sort((a, b) => (a.id < b.id ? 1 : -1));
}

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
  for (const row of rows) process.stdout.write(`${terminalSafe(row.map((cell, column) => cell.padEnd(widths[column]!)).join("  ").trimEnd())}\n`);
  return 0;
}

/** `runner show <run-id>`: the report and a readable transcript. Accepts a unique prefix of the id. */
export function showCommand(home: string, idOrPrefix: string): number {
  const matches = listRuns(home).filter((run) => run.id.startsWith(idOrPrefix));
  if (matches.length !== 1) {
    throw new ConfigError(
      matches.length === 0 ? `no run ${idOrPrefix} in ${join(home, "runs")} (see \`runner runs\`)` : `${idOrPrefix} matches ${matches.length} runs (${matches.slice(0, 5).map((match) => match.id).join(", ")}${matches.length > 5 ? ", ..." : ""}); give more of the id`,
    );
  }
  const directory = join(home, "runs", matches[0]!.id);
  const report = readJson(join(directory, "report.json"));
  const out: string[] = [`run ${matches[0]!.id}  (${directory})`, ""];
  out.push(report ? JSON.stringify(report, null, 2) : "(no report.json: the run has not finished)", "");
  // session.json is written when a run ends; a run that is going on or died has only its journal.
  const session = readJson(join(directory, "session.json")) as { agents?: Record<string, { messages: ChatMessage[] }> } | null;
  const agents = session?.agents ?? Object.fromEntries([...restoreSession(join(directory, "session.jsonl"))].map(([id, agent]) => [id, { messages: agent.messages }]));
  for (const [agent, { messages }] of Object.entries(agents)) {
    out.push(`== transcript (${agent})`);
    for (const message of messages) out.push(...describeMessage(message));
  }
  process.stdout.write(`${out.map(terminalSafe).join("\n")}\n`);
  return 0;
}

const RESULT_PREVIEW_LINES = 12;

function describeMessage(message: ChatMessage): string[] {
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
      const shown = lines.slice(0, RESULT_PREVIEW_LINES).map((line) => `    ${line}`);
      if (lines.length > RESULT_PREVIEW_LINES) shown.push(`    [... ${lines.length - RESULT_PREVIEW_LINES} more lines]`);
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

function readJson(path: string): unknown {
  try {
    return JSON.parse(readFileSync(path, "utf8"));
  } catch {
    return null;
  }
}
