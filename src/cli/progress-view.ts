import pc from "picocolors";
import { readEvent, type RunEnvelope } from "../events/event-catalogue.js";
import type { EventSink, RunEvent } from "../events/run-events.js";
import { oneLine, terminalSafe } from "../terminal-text.js";

/**
 * The human view of a run on stderr: one line per model call, tool call and
 * phase, with step numbers and elapsed time. Colours only on a TTY.
 *
 * Every string of an event is made {@link terminalSafe} before the line is
 * put together (the agent, the repository and tools choose most of them:
 * file names, commands, branch and task names, reasons), and a newline left
 * in a field shown whole is made visible, so an event prints as one line of
 * text and nothing else: the only escape sequences written are the view's
 * own colours.
 */
export class ProgressView implements EventSink {
  private started = Date.now();
  /** With `clock: "event"`, the time of the envelope being shown (ms since the epoch). */
  private shownAt: number | null = null;
  private readonly colours: ReturnType<typeof pc.createColors>;

  /**
   * `clock`: what the elapsed time of each line counts: `now` (default) from
   * the view's creation to the moment it shows a line (a run followed live);
   * `event` from the first envelope's `time` to the shown envelope's (a
   * recorded run read back: `runner logs`).
   */
  constructor(
    private readonly stream: NodeJS.WriteStream = process.stderr,
    private readonly clock: "now" | "event" = "now",
  ) {
    this.colours = pc.createColors(Boolean(stream.isTTY));
  }

  emit(event: RunEvent): void {
    this.writeLine(this.describe(safeStrings(event)));
  }

  /**
   * Shows one envelope of the run's stream, read through the event catalogue;
   * one the catalogue cannot read (an unknown type or version, data off its
   * schema) is shown as such instead of being guessed at.
   */
  show(envelope: RunEnvelope): void {
    if (this.clock === "event") {
      const time = Date.parse(String(envelope.time));
      if (Number.isFinite(time)) {
        if (this.shownAt === null) this.started = time;
        this.shownAt = time;
      }
    }
    const read = readEvent(envelope);
    if (read.kind === "event") this.emit(read.event);
    else this.writeLine(this.colours.dim(`event ${terminalSafe(read.type ?? "?")} not shown (${read.kind}): ${oneLine(terminalSafe(read.reason), 160)}`));
  }

  private writeLine(line: string | null): void {
    if (line) this.stream.write(`${this.colours.dim(this.elapsed())} ${line.replace(/\n/g, "\\n")}\n`);
  }

  private elapsed(): string {
    return `[${(((this.shownAt ?? Date.now()) - this.started) / 1000).toFixed(1).padStart(6)}s]`;
  }

  private describe(event: RunEvent): string | null {
    const c = this.colours;
    switch (event.type) {
      case "run.started":
        return `${c.bold("run")} ${event.data.run_id}  task ${event.data.task}  branch ${event.data.branch}`;
      case "sandbox.created":
        return `sandbox ${event.data.sandbox_id} ready in ${event.data.ready_ms} ms (uid ${event.data.uid})`;
      case "disk.prepared":
        return event.data.enforcement === "monitor"
          ? c.yellow(`disk limit ${mebibytes(event.data.limit_bytes)} is only measured, every few seconds: ${event.data.detail} (README "Security model")`)
          : null;
      case "disk.limit_reached":
        return event.data.action === "stopped"
          ? c.red(
              `${event.data.agent_id}'s sandbox holds more than the disk limit (${mebibytes(event.data.used_bytes)} of ${mebibytes(event.data.limit_bytes)}): its processes were stopped and the run ends`,
            )
          : c.yellow(`the run's disk (${mebibytes(event.data.limit_bytes)}) is full: writes past it fail with "No space left on device"`);
      case "sandbox.restarted":
        return c.yellow(`sandbox restarted as ${event.data.sandbox_id} (its control process was killed)`);
      case "model_call.finished":
        return event.data.content ? `${c.cyan(stepLabel(event.data.agent_id, event.data.step))} model: ${oneLine(event.data.content, 160)}` : null;
      case "tool_call.started":
        return `${c.cyan(stepLabel(event.data.agent_id, event.data.step))} ${c.bold(event.data.name)} ${oneLine(event.data.arguments, 140)}`;
      case "tool_call.finished":
        return event.data.is_error ? `  ${c.yellow("↳")} ${oneLine(event.data.result_preview, 160)}` : null;
      case "workspace.committed": {
        if (event.data.timed_out)
          return c.red(`commit ran past its time limit: nothing of it was committed${leftOutSuffix(event.data.left_out, event.data.left_out_count)}`);
        const committed = event.data.changed ? `committed ${event.data.commit.slice(0, 10)} on ${event.data.branch}` : "no changes to commit";
        return event.data.left_out_count ? c.yellow(`${committed}${leftOutSuffix(event.data.left_out, event.data.left_out_count)}`) : committed;
      }
      case "workspace.uncommitted": {
        const { changed_count: changed, ignored_count: ignored } = event.data;
        const parts = [
          changed ? `${changed} uncommitted or untracked (${event.data.changed.join(", ")}${changed > event.data.changed.length ? ", ..." : ""})` : "",
          ignored ? `${ignored} git-ignored (${event.data.ignored.join(", ")}${ignored > event.data.ignored.length ? ", ..." : ""})` : "",
        ];
        return c.yellow(`note: the agent works on HEAD; not in its worktree: ${parts.filter(Boolean).join("; ")} — commit what it should see`);
      }
      case "verify.protected":
        return `${whose(event.data.agent_id)}verify: protected paths from ${event.data.from_commit.slice(0, 10)}: ${event.data.restored.length} restored, ${event.data.deleted.length} deleted${event.data.omitted ? ` (+${event.data.omitted})` : ""}`;
      case "verify.started":
        return `${whose(event.data.agent_id)}${c.bold("verify")} ${event.data.command}`;
      case "verify.finished": {
        const agent = whose(event.data.agent_id);
        if (event.data.sandbox_lost)
          return c.red(`${agent}verify failed: the sandbox was lost while the command ran (${oneLine(event.data.sandbox_lost, 120)})`);
        return event.data.passed
          ? c.green(`${agent}verify passed (${event.data.duration_ms} ms)`)
          : c.red(`${agent}verify failed: ${event.data.timed_out ? "timed out" : `exit ${event.data.exit_code}`}`);
      }
      case "network.denied":
        return c.yellow(`  network: refused ${oneLine(event.data.host, 80)}:${event.data.port} (${event.data.reason})`);
      case "network.proxy_exited":
        return c.red(`egress proxy exited: ${oneLine(event.data.detail, 160)}`);
      case "run.resumed":
        return `${c.bold("resumed")} ${event.data.run_id} at model call ${event.data.next_step + 1} (resume ${event.data.resumes}, worktree ${event.data.worktree})`;
      case "model_call.retrying":
        return c.yellow(
          `  model ${event.data.purpose === "compaction" ? "summary " : ""}request failed (${event.data.reason}${event.data.status ? ` ${event.data.status}` : ""}); retry ${event.data.attempt} in ${(event.data.delay_ms / 1000).toFixed(1)} s`,
        );
      case "tool_call.replayed":
        return `  ${event.data.name} ${event.data.tool_call_id}: finished before the resume, recorded result reused`;
      case "tool_call.interrupted":
        return c.yellow(`  ${event.data.name} ${event.data.tool_call_id}: was in flight when the run stopped; the model is told it was interrupted`);
      case "context.cleared":
        return c.dim(`context: cleared ${event.data.cleared} older tool results (${event.data.tokens_before} → ${event.data.tokens_after} tokens)`);
      case "context.compacted":
        return c.dim(
          `context: compacted ${event.data.summarised_messages} messages into a summary (${event.data.tokens_before} → ${event.data.tokens_after} tokens)`,
        );
      case "context.compaction_failed":
        return c.yellow(`context: compaction failed, conversation kept: ${oneLine(event.data.error, 160)}`);
      case "context.repaired":
        return c.yellow(`context: repaired ${event.data.repairs.length} broken tool call/result pairs`);
      case "subagent.started":
        return `${c.bold(`${event.data.mode} ${event.data.agent_id}`)} started: ${oneLine(event.data.description, 100)}${event.data.branch ? ` on ${event.data.branch}` : ""}${event.data.background ? " (background)" : ""}`;
      case "subagent.finished":
        return `${c.bold(event.data.agent_id)} ${event.data.status === "merged" ? c.green("merged") : event.data.status}${event.data.files.length ? ` (${event.data.files.slice(0, 6).join(", ")})` : ""} after ${event.data.steps} steps`;
      case "task.finished":
        return event.data.kind === "shell" ? `background task ${event.data.task_id} ${event.data.status}` : null;
      case "workspace.merged":
        return event.data.merged ? c.green(event.data.detail) : c.yellow(`not merged: ${event.data.detail}`);
      case "tool_call.denied":
        return c.yellow(`  ${c.bold("denied")} ${event.data.name} (${event.data.rule}): ${oneLine(event.data.reason, 160)}`);
      case "hook.failed":
        return c.yellow(`  hook \`${oneLine(event.data.command, 60)}\` failed: ${oneLine(event.data.error ?? "", 120)}`);
      case "cleanup.failed":
        return c.yellow(`cleanup of ${event.data.what} failed: ${event.data.error}`);
      default:
        return null;
    }
  }
}

/** `".GIT" (dotgit_name), "big.bin" (file_too_large) and 3 more`: paths quoted, so trailing spaces and control characters show. */
export function describeLeftOut(leftOut: readonly { path: string; reason: string }[], count: number): string {
  const shown = leftOut.slice(0, 5).map((entry) => `${terminalSafe(JSON.stringify(entry.path))} (${entry.reason})`);
  return `${shown.join(", ")}${count > shown.length ? ` and ${count - shown.length} more` : ""}`;
}

function leftOutSuffix(leftOut: readonly { path: string; reason: string }[], count: number): string {
  return count ? `; left out: ${describeLeftOut(leftOut, count)}` : "";
}

function mebibytes(bytes: number): string {
  return `${Math.round(bytes / 1024 ** 2)} MiB`;
}

/** `step 3`, or `w2 step 3` for a subagent, so parallel agents' lines can be told apart. */
function stepLabel(agentId: string, step: number): string {
  return agentId === "main" ? `step ${step + 1}` : `${agentId} step ${step + 1}`;
}

/** A copy of `value` with every string (at any depth) made {@link terminalSafe}. */
function safeStrings<T>(value: T): T {
  if (typeof value === "string") return terminalSafe(value) as T;
  if (Array.isArray(value)) return value.map(safeStrings) as T;
  if (typeof value === "object" && value !== null) return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, safeStrings(item)])) as T;
  return value;
}

/** A worker's verify lines name it (`[w1] `); the main agent's need no name. */
function whose(agentId: string | undefined): string {
  return agentId && agentId !== "main" ? `[${agentId}] ` : "";
}
