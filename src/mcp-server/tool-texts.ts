import type { RunEnvelope } from "../events/event-catalogue.js";

/**
 * The text content of the MCP tools' results: what a model reads when its
 * client shows text rather than `structuredContent`. Compact, and in the
 * order an agent acts on (the outcome first).
 */

/** `dev.agent-runner.tool_call.finished.v1` → `tool_call.finished`. */
export function shortType(type: string): string {
  return type.replace(/^dev\.agent-runner\./, "").replace(/\.v\d+$/, "");
}

/** Longest one-line summary of an event's data in status texts. */
const SUMMARY_CHARS = 160;

function summary(envelope: RunEnvelope): string {
  const data = JSON.stringify(envelope.data ?? {});
  return data.length > SUMMARY_CHARS ? `${data.slice(0, SUMMARY_CHARS)}…` : data;
}

export function describeStatus(
  status: {
    run_id: string;
    task: string;
    status: string;
    reason: string | null;
    step: number;
    cost_usd: number | null;
    pending_approvals: { approval_id: string; tool: string; subject: string | null; question: string; can_allow_always: boolean; deadline: string }[];
    owned_here: boolean;
  },
  recent: { sequence: number; envelope: RunEnvelope }[],
): string {
  const lines = [
    `run ${status.run_id} (${status.task}): ${status.status}${status.reason ? ` (${status.reason})` : ""}, step ${status.step}, cost ${status.cost_usd === null ? "unknown" : `$${status.cost_usd.toFixed(4)}`}`,
  ];
  for (const approval of status.pending_approvals) {
    lines.push(
      `WAITING FOR APPROVAL ${approval.approval_id}: ${approval.question} (answer with run_approve: allow${approval.can_allow_always ? ", allow_always" : ""} or deny; denied by itself at ${approval.deadline})`,
    );
  }
  if (!status.owned_here && status.status === "running") lines.push("(run by another process: its approval questions are answered there)");
  if (recent.length) lines.push("last events:", ...recent.map(({ sequence, envelope }) => `  #${sequence} ${shortType(envelope.type)} ${summary(envelope)}`));
  return lines.join("\n");
}

/** The page's events as events.jsonl lines, then where to go on from. */
export function describeEvents(page: { run_id: string; events: unknown[]; next_cursor: number; done: boolean }, remaining: number): string {
  const lines = page.events.map((event) => JSON.stringify(event));
  lines.push(
    page.done
      ? `done: run ${page.run_id} has ended and every event was returned (next_cursor ${page.next_cursor}); read run_result`
      : `next_cursor ${page.next_cursor}${remaining ? ` (${remaining} more events ready)` : ""}; call run_events again with it`,
  );
  return lines.join("\n");
}

/** run_result's text: the verify outcome first, then what changed, how to merge, the answer, and the patch page. */
export function describeResult(
  result: {
    run_id: string;
    status: string;
    reason: string;
    error: string | null;
    verify: { command: string; passed: boolean; ending: string; output_tail: string } | null;
    files: { path: string; from?: string; change: string; added: number; removed: number; binary: boolean }[];
    diffstat: { files: number; added: number; removed: number };
    how_to_merge: string;
    final_message: string | null;
    patch: { offset: number; lines: number; total_lines: number; next_offset: number | null; text: string };
  },
  hadVerify: boolean,
): string {
  const lines = [
    result.verify
      ? `verify: ${result.verify.passed ? "PASSED" : "FAILED"}: ${result.verify.command} → ${result.verify.ending}`
      : hadVerify
        ? "verify: not run"
        : "verify: none (the task has no verify command: nothing checked the work)",
    `status: ${result.status} (${result.reason})${result.error ? `; error: ${result.error}` : ""}`,
  ];
  if (result.verify && !result.verify.passed && result.verify.output_tail.trim()) lines.push(`verify output (end):\n${result.verify.output_tail.trimEnd()}`);
  lines.push(
    `changed: ${result.diffstat.files} file${result.diffstat.files === 1 ? "" : "s"}, +${result.diffstat.added} -${result.diffstat.removed}`,
    ...result.files.map(
      (file) => `  ${file.change.padEnd(8)} ${file.from ? `${file.from} → ` : ""}${file.path}${file.binary ? " (binary)" : ` +${file.added} -${file.removed}`}`,
    ),
    `merge: ${result.how_to_merge}`,
  );
  if (result.final_message?.trim()) lines.push(`agent's answer:\n${result.final_message.trim()}`);
  const { patch } = result;
  if (patch.total_lines === 0) lines.push("patch: empty");
  else {
    lines.push(
      `patch lines ${patch.offset + 1}-${patch.offset + patch.lines} of ${patch.total_lines}${patch.next_offset === null ? "" : ` (next page: run_result with patch_offset ${patch.next_offset})`}:`,
      patch.text,
    );
  }
  return lines.join("\n");
}
