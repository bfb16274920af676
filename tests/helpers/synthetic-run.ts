/**
 * A run directory written by hand, for the page's scale tests, its
 * screenshots and bench/serve.bench.ts: events.jsonl lines in the runner's
 * envelope, run.json owned by this process (so the run reads as `running`
 * until report.json exists), and the envelopes of a long, real-looking
 * transcript (model text, tool calls with results, a subagent).
 */
import { appendFileSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { cloudEventType, type RunEventName } from "../../src/events/event-catalogue.js";
import { currentOwner } from "../../src/process/process-owner.js";

export interface SyntheticRun {
  id: string;
  directory: string;
  /** Appends envelopes to events.jsonl (one write). */
  append(lines: string[]): void;
  /** Writes report.json: the run ends. */
  finish(report: Record<string, unknown>): void;
}

export function syntheticRun(home: string, id: string, task: string, workspacePath: string): SyntheticRun {
  const directory = join(home, "runs", id);
  mkdirSync(directory, { recursive: true });
  // The servers serve a run only when its recorded workspace lies inside their roots.
  writeFileSync(join(directory, "task.json"), JSON.stringify({ name: task, workspacePath, policy: "worker" }));
  writeFileSync(
    join(directory, "run.json"),
    JSON.stringify({ run_id: id, owner: currentOwner(), branch: `runner/${id}`, repository: "/nonexistent", worktree: "/nonexistent" }),
  );
  writeFileSync(join(directory, "events.jsonl"), "");
  return {
    id,
    directory,
    append: (lines) => appendFileSync(join(directory, "events.jsonl"), lines.map((line) => `${line}\n`).join("")),
    finish: (report) => writeFileSync(join(directory, "report.json"), JSON.stringify({ run_id: id, task, ...report })),
  };
}

/** One events.jsonl line: a CloudEvents envelope of the catalogue event `name`. */
export function envelopeLine(runId: string, sequence: number, name: RunEventName, data: Record<string, unknown>): string {
  return JSON.stringify({
    specversion: "1.0",
    id: `${runId}-${sequence}`,
    type: cloudEventType(name),
    source: "agent-runner",
    time: new Date(Date.UTC(2026, 11, 1, 12, 0, 0) + sequence * 400).toISOString(),
    runid: runId,
    data,
  });
}

/** The lines of step `step` of a transcript: the model's text and a tool call with its result (four events). */
export function stepLines(runId: string, first: number, step: number): string[] {
  const commands = ["python3 -m pytest -q tests/test_median.py", "grep -n 'def median' stats/median.py", "sed -n 1,40p stats/median.py", "git diff --stat"];
  const command = commands[step % commands.length]!;
  const output =
    step % 7 === 3
      ? "F.....\n=================================== FAILURES ===================================\n____ test_even_length ____\n    assert median([1, 2, 3, 4]) == 2.5\nE   assert 2 == 2.5\n1 failed, 5 passed in 0.12s"
      : `stats/median.py:${10 + (step % 30)}: def median(values):\n(${step} lines of output)`;
  return [
    envelopeLine(runId, first, "model_call.started", {
      agent_id: "main",
      step,
      messages: 2 + step * 2,
      estimated_tokens: 1200 + step * 40,
      prefix_stable: true,
    }),
    envelopeLine(runId, first + 1, "model_call.finished", {
      agent_id: "main",
      step,
      duration_ms: 900,
      usage: { prompt_tokens: 1200 + step * 40, completion_tokens: 60, cache_read_tokens: 0, cache_write_tokens: 0 },
      cost_usd: 0.0021,
      tool_calls: 1,
      content: step % 5 === 0 ? `Step ${step}: the even-length case averages the two middle values; checking with the tests next.` : null,
    }),
    envelopeLine(runId, first + 2, "tool_call.started", {
      agent_id: "main",
      step,
      tool_call_id: `call_${step}`,
      name: "run_shell",
      arguments: JSON.stringify({ command }),
    }),
    envelopeLine(runId, first + 3, "tool_call.finished", {
      agent_id: "main",
      step,
      tool_call_id: `call_${step}`,
      name: "run_shell",
      is_error: step % 7 === 3,
      duration_ms: 140,
      result_preview: `exit ${step % 7 === 3 ? 1 : 0}\n${output}`,
    }),
  ];
}
