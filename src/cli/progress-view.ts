import pc from "picocolors";
import { readEvent, type RunEnvelope } from "../events/event-catalogue.js";
import type { EventSink, RunEvent } from "../events/run-events.js";
import type { ModelText } from "../runner/runner.js";
import { oneLine, terminalSafe } from "../terminal-text.js";
import { formatUsd } from "../model/pricing.js";
import { describeArguments, describeOutcome } from "./tool-call-text.js";
import { describeLeftOut } from "./run-summary.js";

/** Back to the start of the line and erase it (CR, then `CSI 2 K`: ECMA-48 §8.3.41). */
const ERASE_LINE = "\r\x1b[2K";
/** How often the status line's timer is redrawn while something runs, ms (it shows whole seconds). */
const TICK_MS = 1000;

/** Something under way that the status line shows with its time so far: a tool call, a model request, a setup or verify command. */
interface Activity {
  label: string;
  /** When it started, ms since the epoch (the view's clock). */
  since: number;
}

/**
 * The human view of a run on stderr: one line per model call, tool call and
 * phase, with step numbers and elapsed time. Colours only on a TTY.
 *
 * A tool call gets one line when it ends, with its outcome
 * ({@link describeOutcome}: the exit code and first line of output of
 * `run_shell`, lines and bytes of file tools, the error of a failed call);
 * the lines of a multi-line command follow it, indented. Setup commands get
 * a line each the same way. On a terminal, while a call, a model request, a
 * setup or verify command runs, a status line shows it with a timer redrawn
 * every second (a followed live run only: no timer without a terminal or
 * for a recorded run).
 *
 * Approval questions: with {@link ProgressView.expectApprovalPrompts} the
 * view stops printing at an `approval.requested` (its status line erased),
 * so the prompt stands alone under everything before it; lines that arrive
 * while the question waits are kept and printed at
 * {@link ProgressView.releaseAfterPrompt}.
 *
 * Every string of an event is made {@link terminalSafe} before the line is
 * put together (the agent, the repository and tools choose most of them:
 * file names, commands, branch and task names, reasons), and a newline left
 * in a field shown whole is made visible, so an event prints as one line of
 * text and nothing else: the only escape sequences written are the view's
 * own colours and, on a TTY, the erasing of the status line that shows the
 * main agent's reply as it streams ({@link ProgressView.showModelText}).
 */
export class ProgressView implements EventSink {
  private started = Date.now();
  /** With `clock: "event"`, the time of the envelope being shown (ms since the epoch). */
  private shownAt: number | null = null;
  private readonly colours: ReturnType<typeof pc.createColors>;
  /** The main agent's reply as it streams: shown dim on a status line of its own until `model_call.finished` prints it whole. */
  private streaming: { step: number; attempt: number; text: string } | null = null;
  /** Whether the status line is on the screen (the cursor is at its end). */
  private statusShown = false;
  /** What runs now, by key (`tool <agent> <id>`, `model <agent>`, `setup <phase> <index>`, `verify <agent>`), in start order. */
  private readonly running = new Map<string, Activity>();
  /** The arguments of calls started and not finished, by `<agent> <id>`, for their line at the end. */
  private readonly startedCalls = new Map<string, { step: number; name: string; arguments: string }>();
  /** Calls refused by `tool_call.denied` (already shown): their `tool_call.finished` adds nothing. */
  private readonly deniedCalls = new Set<string>();
  private ticker: NodeJS.Timeout | null = null;
  /** Whether an approval prompt may be on the screen: lines wait in {@link held} until it is answered. */
  private promptExpected = false;
  private held: string[] | null = null;
  /** Approval questions shown and not yet waited for, and who waits for one (by `<agent id> <tool call id>`). */
  private readonly questionsShown = new Set<string>();
  private readonly questionWaiters = new Map<string, () => void>();

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

  /** Whether {@link showModelText} can draw: a status line is redrawn in place, which needs a terminal. */
  get showsStreamedText(): boolean {
    return Boolean(this.stream.isTTY);
  }

  /** Whether the status line shows what runs with a timer: a live run on a terminal. */
  private get showsTimer(): boolean {
    return this.showsStreamedText && this.clock === "now";
  }

  /**
   * Say that approval questions will be asked on this terminal (`runner
   * exec`'s prompt): from now on an `approval.requested` holds the view's
   * output until {@link releaseAfterPrompt}.
   */
  expectApprovalPrompts(): void {
    this.promptExpected = true;
  }

  /**
   * Resolves once the view has shown the `approval.requested` of
   * `toolCallId` (everything before it is on the screen and the view holds
   * its output): the moment to write the prompt.
   */
  questionShown(agentId: string, toolCallId: string): Promise<void> {
    const key = `${agentId} ${toolCallId}`;
    // Each question is waited for once: a later call with the same id waits for its own event.
    if (this.questionsShown.delete(key)) return Promise.resolve();
    return new Promise((resolve) => this.questionWaiters.set(key, resolve));
  }

  /** The prompt was answered (its own lines end with a newline): print the lines kept meanwhile and go on. */
  releaseAfterPrompt(): void {
    const held = this.held ?? [];
    this.held = null;
    for (const line of held) this.put(line);
    this.drawStatus();
  }

  emit(event: RunEvent): void {
    if (event.type === "model_call.finished" && event.data.agent_id === "main") this.streaming = null;
    const safe = safeStrings(event);
    this.track(safe);
    const line = this.describe(safe);
    const lines = Array.isArray(line) ? line : [line];
    for (const [index, text] of lines.entries()) this.writeLine(text, index > 0);
    if (event.type === "approval.requested") this.holdForPrompt(`${event.data.agent_id} ${event.data.tool_call_id}`);
    else this.drawStatus();
  }

  /** Erases the status line and stops the timer; calls started without a result yet are shown `→ no result` (the run ended first, or the record stops there). */
  close(): void {
    // A prompt cut short (the run ended while it waited): what it held is still to be shown.
    if (this.held) this.releaseAfterPrompt();
    this.streaming = null;
    if (this.statusShown) this.put(ERASE_LINE);
    this.statusShown = false;
    this.running.clear();
    this.stopTicker();
    for (const [key, call] of this.startedCalls) {
      const agent = key.slice(0, key.indexOf(" "));
      this.writeLine(
        `${this.colours.cyan(stepLabel(agent, call.step))} ${this.colours.bold(call.name)} ${describeArguments(call.name, call.arguments).head} ${this.colours.yellow("→ no result")}`,
      );
    }
    this.startedCalls.clear();
  }

  /** `key`: the question's agent and tool call id, as the event gives them (not made terminal-safe: it is matched, never shown). */
  private holdForPrompt(key: string): void {
    if (!this.promptExpected) return;
    if (this.statusShown) this.put(ERASE_LINE);
    this.statusShown = false;
    this.held ??= [];
    const waiter = this.questionWaiters.get(key);
    this.questionWaiters.delete(key);
    if (waiter) waiter();
    else this.questionsShown.add(key);
  }

  /** Keeps {@link running} and the calls' arguments up to date with `event`. */
  private track(event: RunEvent): void {
    const now = this.now();
    switch (event.type) {
      case "model_call.started":
        this.running.set(`model ${event.data.agent_id}`, { label: `${stepLabel(event.data.agent_id, event.data.step)} model`, since: now });
        break;
      case "model_call.finished":
        this.running.delete(`model ${event.data.agent_id}`);
        break;
      case "tool_call.started": {
        const { head } = describeArguments(event.data.name, event.data.arguments);
        this.startedCalls.set(`${event.data.agent_id} ${event.data.tool_call_id}`, event.data);
        this.running.set(`tool ${event.data.agent_id} ${event.data.tool_call_id}`, {
          label: `${stepLabel(event.data.agent_id, event.data.step)} ${event.data.name} ${head}`,
          since: now,
        });
        break;
      }
      case "tool_call.finished":
        this.running.delete(`tool ${event.data.agent_id} ${event.data.tool_call_id}`);
        break;
      case "tool_call.denied":
        this.deniedCalls.add(`${event.data.agent_id} ${event.data.tool_call_id}`);
        break;
      case "setup.started":
        this.running.set(`setup ${event.data.phase} ${event.data.index}`, {
          label: `${setupLabel(event.data)} ${oneLine(event.data.command, 100)}`,
          since: now,
        });
        break;
      case "setup.finished":
        this.running.delete(`setup ${event.data.phase} ${event.data.index}`);
        break;
      case "verify.started":
        this.running.set(`verify ${event.data.agent_id ?? "main"}`, {
          label: `${whose(event.data.agent_id)}verify ${oneLine(event.data.command, 100)}`,
          since: now,
        });
        break;
      case "verify.finished":
        this.running.delete(`verify ${event.data.agent_id ?? "main"}`);
        break;
      case "run.finished":
        this.running.clear();
        break;
      default:
        break;
    }
    if (this.running.size && this.showsTimer) this.startTicker();
    else this.stopTicker();
  }

  private startTicker(): void {
    if (this.ticker) return;
    this.ticker = setInterval(() => this.drawStatus(), TICK_MS);
    // The timer never keeps the process alive on its own.
    this.ticker.unref();
  }

  private stopTicker(): void {
    if (this.ticker) clearInterval(this.ticker);
    this.ticker = null;
  }

  /**
   * Shows a piece of the main agent's streamed reply (subagents' and
   * summaries' text is not shown): the end of the reply so far, flattened to
   * one dim line that is redrawn in place ({@link ERASE_LINE}), made
   * {@link terminalSafe}, and erased when the next line is printed. A piece of a
   * later attempt starts the text over.
   */
  showModelText(text: ModelText): void {
    if (!this.showsStreamedText || text.agentId !== "main" || text.purpose !== "turn") return;
    if (!this.streaming || this.streaming.step !== text.step || this.streaming.attempt !== text.attempt) {
      this.streaming = { step: text.step, attempt: text.attempt, text: "" };
    }
    this.streaming.text += text.delta;
    this.drawStatus();
  }

  /** Redraws the status line: the streamed reply, else what runs longest with its time so far (live, on a terminal); nothing while a prompt waits. */
  private drawStatus(): void {
    if (this.held) return;
    // Room on one terminal row, so the status line never wraps (a wrapped line cannot be erased with one CR).
    const columns = (this.stream.columns || 80) - 1;
    if (this.streaming) {
      const label = `${this.elapsed()} ${stepLabel("main", this.streaming.step)} model: `;
      const room = Math.max(10, columns - label.length);
      const flat = terminalSafe(this.streaming.text.replace(/\s+/g, " ").trimStart());
      const tail = flat.length > room ? `…${flat.slice(flat.length - room + 1)}` : flat;
      this.put(`${ERASE_LINE}${this.colours.dim(`${label}${tail}`)}`);
      this.statusShown = true;
      return;
    }
    const [oldest, ...others] = this.showsTimer ? this.running.values() : [];
    if (!oldest) {
      if (this.statusShown) this.put(ERASE_LINE);
      this.statusShown = false;
      return;
    }
    const timer = ` … ${Math.floor((this.now() - oldest.since) / 1000)}s${others.length ? ` (+${others.length} more)` : ""}`;
    const label = `${this.elapsed()} ${oldest.label}`;
    const shown = label.length + timer.length > columns ? `${label.slice(0, Math.max(10, columns - timer.length - 1))}…` : label;
    this.put(`${ERASE_LINE}${this.colours.dim(`${shown}${timer}`)}`);
    this.statusShown = true;
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
    else {
      this.writeLine(this.colours.dim(`event ${terminalSafe(read.type ?? "?")} not shown (${read.kind}): ${oneLine(terminalSafe(read.reason), 160)}`));
      this.drawStatus();
    }
  }

  /** Prints one line (a newline in it made visible; `continued`: no time, it belongs to the line before), after erasing the status line; kept for later while a prompt waits. The caller redraws the status. */
  private writeLine(line: string | null, continued = false): void {
    if (!line) return;
    const elapsed = this.elapsed();
    // A continuation (a multi-line command's next lines) leaves the time column blank, so the call's line leads.
    const text = `${continued ? " ".repeat(elapsed.length) : this.colours.dim(elapsed)} ${line.replace(/\n/g, "\\n")}\n`;
    if (this.held) {
      this.held.push(text);
      return;
    }
    const erase = this.statusShown ? ERASE_LINE : "";
    this.statusShown = false;
    this.put(`${erase}${text}`);
  }

  /** The one way to the terminal: text made of the view's own escapes and terminal-safe strings. */
  private put(text: string): void {
    this.stream.write(text);
  }

  private now(): number {
    return this.shownAt ?? Date.now();
  }

  private elapsed(): string {
    return `[${((this.now() - this.started) / 1000).toFixed(1).padStart(6)}s]`;
  }

  /** The finished call's line: step, tool, readable arguments, outcome and duration; then a multi-line command's further lines. */
  private finishedCall(event: Extract<RunEvent, { type: "tool_call.finished" }>): string[] | null {
    const c = this.colours;
    const key = `${event.data.agent_id} ${event.data.tool_call_id}`;
    const started = this.startedCalls.get(key);
    this.startedCalls.delete(key);
    if (this.deniedCalls.delete(key)) return null;
    const { head, rest } = started ? describeArguments(event.data.name, started.arguments) : { head: "", rest: [] };
    const outcome = describeOutcome(event.data);
    const arrow = outcome.failed ? c.yellow(`→ ${outcome.text}`) : `→ ${outcome.text}`;
    return [
      `${c.cyan(stepLabel(event.data.agent_id, event.data.step))} ${c.bold(event.data.name)}${head ? ` ${head}` : ""} ${arrow} ${c.dim(`(${seconds(event.data.duration_ms)})`)}`,
      ...rest.map((line) => c.dim(`    │ ${line}`)),
      ...(typeof event.data.details?.network_hint === "string" ? [c.yellow(`    note: ${event.data.details.network_hint}`)] : []),
    ];
  }

  private describe(event: RunEvent): string | string[] | null {
    const c = this.colours;
    switch (event.type) {
      case "run.started":
        return `${c.bold("run")} ${event.data.run_id}  task ${event.data.task}  branch ${event.data.branch}`;
      case "sandbox.created":
        return `sandbox ${event.data.sandbox_id} ready in ${event.data.ready_ms} ms (uid ${event.data.uid})`;
      case "disk.prepared":
        return event.data.enforcement === "monitor"
          ? c.yellow(
              `disk limit ${mebibytes(event.data.limit_bytes)} is only measured, every few seconds: ${event.data.detail} (docs/security.md "Security model")`,
            )
          : null;
      case "disk.limit_reached": {
        const { used_inodes: files, limit_inodes: allowed } = event.data;
        const held =
          files !== undefined && allowed !== undefined && files > allowed
            ? `more files than the disk limit allows (${files} of ${allowed}, one per 8 KiB of ${mebibytes(event.data.limit_bytes)})`
            : `more than the disk limit (${mebibytes(event.data.used_bytes)} of ${mebibytes(event.data.limit_bytes)})`;
        return event.data.action === "stopped"
          ? c.red(`${event.data.agent_id}'s sandbox holds ${held}: its processes were stopped and the run ends`)
          : c.yellow(`the run's disk (${mebibytes(event.data.limit_bytes)}) is full: writes past it fail with "No space left on device"`);
      }
      case "sandbox.restarted":
        return c.yellow(`sandbox restarted as ${event.data.sandbox_id} (its control process was killed)`);
      case "model_call.finished":
        return event.data.content ? `${c.cyan(stepLabel(event.data.agent_id, event.data.step))} model: ${oneLine(event.data.content, 160)}` : null;
      case "tool_call.started":
        // Its line comes when it ends, with the outcome; meanwhile the status line shows it with a timer.
        return null;
      case "tool_call.finished":
        return this.finishedCall(event);
      case "approval.requested":
        // The prompt shows the question itself; a recorded run says it was asked.
        return this.promptExpected ? null : `  ${c.yellow("approval asked")}: ${oneLine(event.data.question, 200)}`;
      case "approval.resolved":
        return `  approval: ${event.data.answer === "no" ? c.yellow(`no${event.data.timed_out ? " (no answer in time)" : event.data.reason ? ` (${oneLine(event.data.reason, 120)})` : ""}`) : event.data.answer}`;
      case "setup.started":
        return null;
      case "setup.finished": {
        const failed = event.data.timed_out || event.data.exit_code !== 0;
        const ending = event.data.timed_out ? "timed out" : event.data.exit_code === null ? "killed" : `exit ${event.data.exit_code}`;
        const last = failed ? event.data.output_tail.trimEnd().split("\n").at(-1) : undefined;
        const text = `${setupLabel(event.data)} ${oneLine(event.data.command, 100)} → ${ending}${last ? ` · ${oneLine(last, 120)}` : ""} (${seconds(event.data.duration_ms)})`;
        return failed ? c.red(text) : text;
      }
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
      case "run.limit_reached":
        return event.data.limit === "max_cost_usd"
          ? c.yellow(
              `budget reached: the model calls cost ${formatUsd(event.data.cost_usd ?? 0)} of model.max_cost_usd ${formatUsd(event.data.value)}; no model call starts now`,
            )
          : c.yellow(`time limit reached: timeout_sec ${event.data.value} passed; the run stops, its work committed`);
      case "model.unpriced":
        // The summary's cost line says it (`cost: unknown (...)`): once is enough.
        return null;
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
        return `${c.bold(event.data.agent_id)} ${event.data.status === "merged" ? c.green("merged") : event.data.status}${event.data.files.length ? ` (${event.data.files.slice(0, 6).join(", ")})` : ""} after ${event.data.steps} steps${event.data.not_merged_reason ? c.yellow(`: ${event.data.not_merged_reason}`) : ""}`;
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

/** `setup[0]`, or `verify setup[0]` for the verification's sandbox, or `[w1] setup[0]` for a worker's. */
function setupLabel(data: { agent_id: string; phase: "agent" | "verify"; index: number }): string {
  return `${whose(data.agent_id)}${data.phase === "verify" ? "verify " : ""}setup[${data.index}]`;
}

/** `0.4 s`, `12.3 s`. */
function seconds(milliseconds: number): string {
  return `${(milliseconds / 1000).toFixed(1)} s`;
}

/** A worker's verify lines name it (`[w1] `); the main agent's need no name. */
function whose(agentId: string | undefined): string {
  return agentId && agentId !== "main" ? `[${agentId}] ` : "";
}
