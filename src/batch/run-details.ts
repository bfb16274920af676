import { closeSync, existsSync, fstatSync, openSync, readSync } from "node:fs";
import { join } from "node:path";
import { cloudEventType, readEvent, type RunEvent, type RunEventName } from "../events/event-catalogue.js";
import { joinExcerpt } from "../events/output-excerpt.js";
import { RUN_FILES } from "../run/run-store.js";

/** What one entry of a run's timeline is about (the CSS class and the badge of report.html). */
export type TimelineKind = "run" | "agent" | "tool" | "denied" | "verify" | "merge" | "model" | "problem";

/** One line of a run's timeline: a moment of the run, said in a title and an optional longer detail. */
export interface TimelineEntry {
  /** Milliseconds since the run's first event; null when the events carry no time. */
  offset_ms: number | null;
  kind: TimelineKind;
  /** The agent the entry belongs to (`main`, a subagent's id), when the event names one. */
  agent: string | null;
  title: string;
  /** Tool arguments, results, verify output: at most {@link MAX_DETAIL_CHARACTERS}, with a note when cut. */
  detail: string;
  /** How it went: colours the entry (a failed tool call, a failed verify, a denial are `bad`). */
  outcome: "ok" | "bad" | "neutral";
}

/** The part of a run that report.html and junit.xml show, each bounded (see the limits below). */
export interface RunDetails {
  /** In event order; at most {@link MAX_TIMELINE_ENTRIES}. */
  timeline: TimelineEntry[];
  /** Entries left out of the middle of `timeline` (0 when none). */
  timelineOmitted: number;
  /** events.jsonl was larger than {@link MAX_EVENTS_BYTES}: only its head and its tail were read. */
  eventsCut: boolean;
  /** The start of patch.diff, cut at a line end; null when the run has none. */
  diff: { text: string; shownBytes: number; totalBytes: number } | null;
  /** The verify command's output (its head and tail) of the last verify.finished (what a CI reader wants first). */
  verifyOutput: string | null;
  /** The main agent's last verification (its last verify.finished of the main agent): command, exit code (null when it had none), timed out. */
  verify: { command: string; exitCode: number | null; timedOut: boolean; passed: boolean; outputTail: string } | null;
  /** The main agent's final message. */
  finalMessage: string | null;
}

/** Bytes of events.jsonl read per run: head and tail halves when larger (a long run's events can run to hundreds of MB; the start and the end are where verify and merge are). */
const MAX_EVENTS_BYTES = 4 * 1024 * 1024;
/** Timeline entries kept per run: the first 3/4 and the last 1/4 of them, with a note of how many were left out. */
export const MAX_TIMELINE_ENTRIES = 400;
/** Characters of one entry's detail (a write_file's content, a command's output). */
const MAX_DETAIL_CHARACTERS = 1500;
/** Bytes of patch.diff shown per run. */
export const MAX_DIFF_BYTES = 64 * 1024;

/**
 * Reads one run's events.jsonl (through the event catalogue: lines this
 * runner cannot read are left out) and patch.diff from its run directory,
 * with the bounds above, so a batch of 1 000 long runs still makes a report
 * of bounded size in bounded time. Never throws: a missing or unreadable
 * file gives an empty timeline or no diff. The files are the runner's own,
 * written by the host (not the agent's worktree), but their text is the
 * agent's: callers escape it.
 */
export function readRunDetails(runDirectory: string, patchPath: string | null): RunDetails {
  const { text: events, cut: eventsCut } = readBounded(join(runDirectory, RUN_FILES.events), MAX_EVENTS_BYTES, "head-and-tail");
  const timeline = timelineOf(events);
  const diffRead = patchPath ? readBounded(patchPath, MAX_DIFF_BYTES, "head") : null;
  const verify = timeline.entries.findLast((entry) => entry.kind === "verify");
  return {
    timeline: timeline.entries.length > MAX_TIMELINE_ENTRIES ? keepEnds(timeline.entries) : timeline.entries,
    timelineOmitted: Math.max(0, timeline.entries.length - MAX_TIMELINE_ENTRIES),
    eventsCut,
    diff: diffRead && diffRead.totalBytes > 0 ? { text: diffRead.text, shownBytes: Buffer.byteLength(diffRead.text), totalBytes: diffRead.totalBytes } : null,
    verifyOutput: verify ? timeline.verifyOutput : null,
    verify: timeline.verify,
    finalMessage: timeline.finalMessage,
  };
}

function keepEnds(entries: TimelineEntry[]): TimelineEntry[] {
  const head = Math.floor((MAX_TIMELINE_ENTRIES * 3) / 4);
  return [...entries.slice(0, head), ...entries.slice(entries.length - (MAX_TIMELINE_ENTRIES - head))];
}

/** A file's text, at most `limit` bytes of it: its head, or its head and tail halves; cut at line ends (a UTF-8 character is never split). */
function readBounded(path: string, limit: number, mode: "head" | "head-and-tail"): { text: string; cut: boolean; totalBytes: number } {
  if (!existsSync(path)) return { text: "", cut: false, totalBytes: 0 };
  let descriptor: number | null = null;
  try {
    descriptor = openSync(path, "r");
    const size = fstatSync(descriptor).size;
    const read = (position: number, length: number) => {
      const buffer = Buffer.alloc(length);
      const bytes = readSync(descriptor!, buffer, 0, length, position);
      return buffer.subarray(0, bytes);
    };
    if (size <= limit) return { text: read(0, size).toString("utf8"), cut: false, totalBytes: size };
    if (mode === "head") {
      const head = read(0, limit);
      const end = head.lastIndexOf(0x0a);
      return { text: head.subarray(0, end > 0 ? end + 1 : head.length).toString("utf8"), cut: true, totalBytes: size };
    }
    const half = Math.floor(limit / 2);
    const head = read(0, half);
    const tail = read(size - half, half);
    const headEnd = head.lastIndexOf(0x0a);
    const tailStart = tail.indexOf(0x0a);
    return {
      text: `${head.subarray(0, headEnd + 1).toString("utf8")}${tail.subarray(tailStart + 1).toString("utf8")}`,
      cut: true,
      totalBytes: size,
    };
  } catch {
    return { text: "", cut: false, totalBytes: 0 };
  } finally {
    if (descriptor !== null) closeSync(descriptor);
  }
}

function clip(text: string, limit = MAX_DETAIL_CHARACTERS): string {
  return text.length <= limit ? text : `${text.slice(0, limit)}\n[... ${text.length - limit} more characters]`;
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

/** The CloudEvents types {@link timelineOf} turns into entries. */
const TIMELINE_TYPES = new Set(
  (
    [
      "run.started",
      "run.resumed",
      "run.finished",
      "sandbox.created",
      "subagent.started",
      "subagent.finished",
      "agent.finished",
      "tool_call.started",
      "tool_call.finished",
      "tool_call.replayed",
      "tool_call.interrupted",
      "tool_call.denied",
      "network.denied",
      "hook.finished",
      "hook.failed",
      "approval.resolved",
      "model_call.retrying",
      "verify.started",
      "verify.finished",
      "workspace.committed",
      "workspace.merged",
      "disk.limit_reached",
      "mcp_server.failed",
      "cleanup.failed",
    ] satisfies RunEventName[]
  ).map(cloudEventType),
);

/**
 * The timeline of events.jsonl's text: agents starting and finishing, each
 * tool call (its start and end as one entry), denials (policy, network,
 * hooks, approvals refused), model retries, verify, the commit and the merge,
 * and faults; model calls and context bookkeeping are left out (a step is
 * seen in its tool calls).
 */
function timelineOf(text: string): { entries: TimelineEntry[]; verifyOutput: string | null; verify: RunDetails["verify"]; finalMessage: string | null } {
  const entries: TimelineEntry[] = [];
  const openTools = new Map<string, TimelineEntry>();
  let verifyEntry: TimelineEntry | null = null;
  let verifyOutput: string | null = null;
  let verify: RunDetails["verify"] = null;
  let finalMessage: string | null = null;
  let start: number | null = null;
  for (const line of text.split("\n")) {
    let envelope: { type?: unknown; time?: unknown } | null = null;
    try {
      envelope = line ? (JSON.parse(line) as { type?: unknown; time?: unknown }) : null;
    } catch {
      // A line a crash cut short.
    }
    // Only the events the timeline shows are checked against the catalogue (readEvent checks the envelope too): most of a long run's lines are model calls.
    if (!envelope || typeof envelope !== "object" || !TIMELINE_TYPES.has(envelope.type as string)) continue;
    const read = readEvent(envelope);
    if (read.kind !== "event") continue;
    const time = typeof envelope.time === "string" ? Date.parse(envelope.time) : Number.NaN;
    if (start === null && !Number.isNaN(time)) start = time;
    const offset = start === null || Number.isNaN(time) ? null : time - start;
    const add = (entry: Omit<TimelineEntry, "offset_ms">) => {
      const full = { offset_ms: offset, ...entry, detail: clip(entry.detail) };
      entries.push(full);
      return full;
    };
    const event: RunEvent = read.event;
    switch (event.type) {
      case "run.started":
        add({ kind: "run", agent: null, title: `run started on ${event.data.branch}`, detail: `base ${event.data.base_commit}`, outcome: "neutral" });
        break;
      case "run.resumed":
        add({ kind: "run", agent: null, title: `run resumed (${event.data.resumes}) at step ${event.data.next_step}`, detail: "", outcome: "neutral" });
        break;
      case "run.finished":
        add({
          kind: "run",
          agent: null,
          title: `run finished: ${event.data.status} in ${seconds(event.data.duration_ms)}`,
          detail: event.data.error ?? "",
          outcome: event.data.status === "succeeded" ? "ok" : "bad",
        });
        break;
      case "sandbox.created":
        add({ kind: "run", agent: null, title: `sandbox ready in ${event.data.ready_ms} ms`, detail: event.data.image, outcome: "neutral" });
        break;
      case "subagent.started":
        add({
          kind: "agent",
          agent: event.data.agent_id,
          title: `${event.data.mode} agent ${event.data.agent_id} started by ${event.data.parent_id}`,
          detail: event.data.description,
          outcome: "neutral",
        });
        break;
      case "subagent.finished":
        add({
          kind: "agent",
          agent: event.data.agent_id,
          title: `agent ${event.data.agent_id} finished: ${event.data.status} after ${event.data.steps} steps${event.data.merge ? `, merge ${event.data.merge}` : ""}`,
          detail: event.data.files.join("\n"),
          outcome: event.data.status === "failed" ? "bad" : event.data.status === "cancelled" ? "neutral" : "ok",
        });
        break;
      case "agent.finished":
        if (event.data.agent_id === "main") finalMessage = event.data.final_message;
        add({
          kind: "agent",
          agent: event.data.agent_id,
          title: `agent ${event.data.agent_id} finished: ${event.data.reason} after ${event.data.steps} steps`,
          detail: event.data.final_message ?? "",
          outcome: event.data.reason === "final_answer" ? "ok" : "bad",
        });
        break;
      case "tool_call.started":
        openTools.set(
          event.data.tool_call_id,
          add({ kind: "tool", agent: event.data.agent_id, title: event.data.name, detail: event.data.arguments, outcome: "neutral" }),
        );
        break;
      case "tool_call.finished": {
        const entry =
          openTools.get(event.data.tool_call_id) ?? add({ kind: "tool", agent: event.data.agent_id, title: event.data.name, detail: "", outcome: "neutral" });
        openTools.delete(event.data.tool_call_id);
        entry.title = `${event.data.name} (${event.data.duration_ms} ms)${event.data.is_error ? ": error" : ""}`;
        entry.detail = clip(`${entry.detail}${entry.detail ? "\n→ " : ""}${event.data.result_preview}`);
        entry.outcome = event.data.is_error ? "bad" : "ok";
        break;
      }
      case "tool_call.replayed":
      case "tool_call.interrupted": {
        const entry = openTools.get(event.data.tool_call_id);
        if (entry) entry.title = `${event.data.name}: ${event.type === "tool_call.replayed" ? "replayed on resume" : "interrupted"}`;
        break;
      }
      case "tool_call.denied":
        add({
          kind: "denied",
          agent: event.data.agent_id,
          title: `${event.data.name} denied (${event.data.rule})`,
          detail: event.data.reason,
          outcome: "bad",
        });
        break;
      case "network.denied":
        add({
          kind: "denied",
          agent: null,
          title: `network denied: ${event.data.method} ${event.data.host}:${event.data.port}`,
          detail: event.data.reason,
          outcome: "bad",
        });
        break;
      case "hook.finished":
      case "hook.failed":
        if (event.data.outcome === "blocked")
          add({
            kind: "denied",
            agent: null,
            title: `${event.data.tool_name} blocked by a ${event.data.phase} hook`,
            detail: event.data.command,
            outcome: "bad",
          });
        break;
      case "approval.resolved":
        if (event.data.answer === "no")
          add({
            kind: "denied",
            agent: event.data.agent_id,
            title: `approval refused${event.data.timed_out ? " (timed out)" : ""}`,
            detail: event.data.reason ?? "",
            outcome: "bad",
          });
        break;
      case "model_call.retrying":
        add({
          kind: "model",
          agent: event.data.agent_id,
          title: `model call retried (${event.data.reason}${event.data.status ? ` ${event.data.status}` : ""}) after ${event.data.delay_ms} ms`,
          detail: "",
          outcome: "neutral",
        });
        break;
      case "verify.started":
        verifyEntry = add({ kind: "verify", agent: event.data.agent_id ?? null, title: "verify", detail: event.data.command, outcome: "neutral" });
        break;
      case "verify.finished": {
        const verdict = event.data.timed_out ? "timed out" : event.data.passed ? "passed" : `failed (exit ${event.data.exit_code ?? "none"})`;
        const entry =
          verifyEntry ?? add({ kind: "verify", agent: event.data.agent_id ?? null, title: "verify", detail: event.data.command, outcome: "neutral" });
        entry.title = `verify ${verdict} in ${seconds(event.data.duration_ms)}${event.data.sandbox_lost ? `: sandbox lost (${event.data.sandbox_lost})` : ""}`;
        const output = joinExcerpt(event.data);
        entry.detail = clip(`$ ${event.data.command}\n${output}`);
        entry.outcome = event.data.passed ? "ok" : "bad";
        verifyOutput = output;
        // A worker's verify (agent_id other than main) is not the run's verification.
        if ((event.data.agent_id ?? "main") === "main") {
          const { command, exit_code: exitCode, timed_out: timedOut, passed, output_tail: outputTail } = event.data;
          verify = { command, exitCode, timedOut, passed, outputTail };
        }
        verifyEntry = null;
        break;
      }
      case "workspace.committed":
        add({
          kind: "merge",
          agent: null,
          title: event.data.changed ? `committed ${event.data.commit.slice(0, 12)} on ${event.data.branch}` : `nothing to commit on ${event.data.branch}`,
          detail: event.data.left_out_count ? `${event.data.left_out_count} paths left out: ${event.data.left_out.map((path) => path.path).join(", ")}` : "",
          outcome: event.data.timed_out ? "bad" : "neutral",
        });
        break;
      case "workspace.merged":
        add({
          kind: "merge",
          agent: null,
          title: event.data.merged ? `merged ${event.data.branch ?? ""}`.trimEnd() : "not merged",
          detail: event.data.detail,
          outcome: event.data.merged ? "ok" : "neutral",
        });
        break;
      case "disk.limit_reached":
        add({
          kind: "problem",
          agent: event.data.agent_id,
          title: `disk limit reached (${event.data.used_bytes} of ${event.data.limit_bytes} bytes): ${event.data.action}`,
          detail: "",
          outcome: "bad",
        });
        break;
      case "mcp_server.failed":
      case "cleanup.failed":
        add({
          kind: "problem",
          agent: null,
          title: event.type === "mcp_server.failed" ? `MCP server ${event.data.server} failed` : `clean-up failed: ${event.data.what}`,
          detail: event.data.error,
          outcome: "bad",
        });
        break;
      default:
        break;
    }
  }
  return { entries, verifyOutput, verify, finalMessage };
}
