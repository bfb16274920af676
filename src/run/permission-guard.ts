import { Mutex } from "async-mutex";
import { CancelledError, errorMessage } from "../errors.js";
import type { EventSink } from "../events/run-events.js";
import type { ToolHooks } from "../hooks/tool-hooks.js";
import { decideApproval, resolveApprovalAnswer, type ApprovalAnswer } from "../policy/approval.js";
import type { PermissionChecker } from "../policy/permission-checker.js";
import type { GuardedCall, ToolGuard, ToolResult } from "../tools/define-tool.js";
import { MinuteWindow } from "../process/minute-window.js";

/** One approval question: the call (agent, tool call id, tool, the subject the rule matched) and the policy's rule and reason. */
export interface ApprovalQuestion {
  agentId: string;
  toolCallId: string;
  toolName: string;
  /** The command or path the rule matched, when the rule is about one. */
  subject: string | null;
  /** The policy rule that asks (e.g. `commands.confirm[0]`). */
  rule: string;
  reason: string;
  /** The question in words, as the terminal prompt shows it. */
  question: string;
  /** True when an "always" answer is allowed (the policy's `remember` list). */
  canRemember: boolean;
}

/** Asks someone to approve a call (the terminal, the library's ApprovalBroker); absent when nobody can be asked (CI, no TTY). */
export type AskApproval = (question: ApprovalQuestion, signal: AbortSignal) => Promise<ApprovalAnswer>;

/** Rule id under which calls blocked by a pre-tool hook are counted. */
const HOOK_RULE = "hooks.pre_tool_use";

export interface PermissionGuardOptions {
  checker: PermissionChecker;
  hooks: ToolHooks | null;
  events: EventSink;
  signal: AbortSignal;
  ask: AskApproval | null;
  /** "Always" answers of this run, shared by every agent using this policy. */
  remembered: Set<string>;
  /** Denials per rule id (report.json `denials`), shared by the run. */
  denials: Record<string, number>;
  /** The run's redactor: whoever is asked (a terminal, a broker forwarding to a web page) never sees a secret in clear. */
  redact?: (text: string) => string;
}

/**
 * The checks a validated call passes before it runs, in order: the policy
 * (hard rules, tool allow-list, path and command rules), approval of what
 * needs confirmation (the terminal, one question at a time; without one the
 * policy's `confirmations` decides), `limits.tool_calls_per_minute` (the call
 * waits), then the pre-tool hooks. A refusal is counted per rule, emitted as
 * `tool_call.denied`, and reaches the model as `[denied] <reason>`.
 */
export class PermissionGuard implements ToolGuard {
  private readonly questions = new Mutex();
  private readonly recentCalls = new MinuteWindow();

  constructor(private readonly options: PermissionGuardOptions) {}

  /** The policy checker (for filtering the tool list the model sees). */
  get checker(): PermissionChecker {
    return this.options.checker;
  }

  async check(call: GuardedCall): Promise<{ allowed: true } | { allowed: false; reason: string }> {
    const { checker } = this.options;
    const policy = checker.policy;
    const decision = checker.check(call.name, call.arguments, { readOnly: call.readOnly });
    let step = decideApproval({ toolName: call.name, decision, interactive: this.options.ask !== null, policy, remembered: this.options.remembered });
    if (step.kind === "ask") {
      const ask = this.options.ask!;
      const question = step.question + writePreview(call.name, call.arguments);
      const canRemember = step.canRemember;
      const answer = await this.questions.runExclusive(async () => {
        this.options.events.emit({
          type: "approval.requested",
          data: { agent_id: call.agentId, tool_call_id: call.toolCallId, name: call.name, question, can_remember: canRemember },
        });
        const redact = this.options.redact ?? ((text: string) => text);
        const subject = decision.subject === undefined ? null : redact(decision.subject);
        const given = await this.askSafely(ask, {
          agentId: call.agentId,
          toolCallId: call.toolCallId,
          toolName: call.name,
          subject,
          rule: decision.rule,
          reason: redact(decision.reason),
          question: redact(question),
          canRemember,
        });
        this.options.events.emit({
          type: "approval.resolved",
          data: {
            agent_id: call.agentId,
            tool_call_id: call.toolCallId,
            answer: given.answer,
            reason: given.answer === "no" ? (given.reason ?? null) : null,
            timed_out: given.answer === "no" && Boolean(given.timedOut),
          },
        });
        return given;
      });
      if (this.options.signal.aborted) throw new CancelledError();
      const resolution = resolveApprovalAnswer({ toolName: call.name, decision, interactive: true, policy, remembered: this.options.remembered }, answer);
      for (const key of resolution.remember) this.options.remembered.add(key);
      step = resolution;
    }
    if (step.kind === "deny") return this.deny(call, step.rule, step.reason);
    await this.throttle(policy.limits.tool_calls_per_minute);
    const hooked = (await this.options.hooks?.before(call)) ?? { allowed: true as const };
    if (!hooked.allowed) return this.deny(call, HOOK_RULE, hooked.reason);
    return { allowed: true };
  }

  async after(call: GuardedCall, result: ToolResult): Promise<string | null> {
    return this.options.hooks ? this.options.hooks.after(call, result) : null;
  }

  /**
   * Asks, and never lets the answerer break the run: an answer that is not
   * one of the three is a "no" naming it; a throw is a "no" with its message;
   * a cancelled run stops waiting at once (a later answer is ignored).
   */
  private async askSafely(ask: AskApproval, question: ApprovalQuestion): Promise<ApprovalAnswer> {
    const { signal } = this.options;
    if (signal.aborted) throw new CancelledError();
    let stopWaiting!: () => void;
    const cancelled = new Promise<null>((resolve) => {
      stopWaiting = () => resolve(null);
      signal.addEventListener("abort", stopWaiting, { once: true });
    });
    try {
      const given: unknown = await Promise.race([Promise.resolve().then(() => ask(question, signal)), cancelled]);
      if (given === null && signal.aborted) throw new CancelledError();
      return validAnswer(given);
    } catch (error) {
      if (error instanceof CancelledError || signal.aborted) throw new CancelledError();
      return { answer: "no", reason: `the approval broker failed: ${errorMessage(error)}` };
    } finally {
      signal.removeEventListener("abort", stopWaiting);
    }
  }

  private deny(call: GuardedCall, rule: string, reason: string): { allowed: false; reason: string } {
    this.options.denials[rule] = (this.options.denials[rule] ?? 0) + 1;
    this.options.events.emit({ type: "tool_call.denied", data: { agent_id: call.agentId, tool_call_id: call.toolCallId, name: call.name, rule, reason } });
    return { allowed: false, reason };
  }

  /** Waits until fewer than `perMinute` calls started in the last minute, then counts this one. */
  private async throttle(perMinute: number | undefined): Promise<void> {
    if (!perMinute) return;
    await this.recentCalls.waitBelow(perMinute, this.options.signal);
    this.recentCalls.add(1);
  }
}

/** An answer as the broker gave it, checked: `yes`, `always`, or `no` (with a string reason); anything else is a "no" saying what came. */
function validAnswer(given: unknown): ApprovalAnswer {
  const answer = typeof given === "object" && given !== null ? (given as Record<string, unknown>).answer : undefined;
  if (answer === "yes" || answer === "always") return { answer };
  if (answer === "no") {
    const { reason, timedOut } = given as Record<string, unknown>;
    return { answer: "no", ...(typeof reason === "string" ? { reason } : {}), ...(timedOut === true ? { timedOut: true } : {}) };
  }
  return {
    answer: "no",
    reason: `the approval broker gave no valid answer (expected { answer: "yes" | "always" | "no" }, got ${given === null ? "null" : Array.isArray(given) ? "an array" : typeof given === "object" ? `an object with answer ${JSON.stringify(typeof answer === "string" ? answer : typeof answer)}` : `a ${typeof given}`})`,
  };
}

/** Lines of a file write the approval question shows (the rest is counted): enough to judge, short enough to read. */
const PREVIEW_LINES = 12;
/** Characters of each previewed line (the rest cut, with an ellipsis): a minified line must not fill the question (security review, 9c). */
const PREVIEW_LINE_CHARS = 200;

/**
 * What a `write_file` or `edit_file` call would write, for its approval
 * question: the size and first lines of the content, or the text replaced
 * and its replacement, at most 12 lines of at most 200 characters each
 * (longer ones cut with "…"). The path alone (the rule's subject) is not
 * enough to decide on (issue 26, a new user's trial). Empty for other tools.
 */
export function writePreview(toolName: string, args: unknown): string {
  const fields = (args ?? {}) as Record<string, unknown>;
  const excerpt = (text: string, label: string) => {
    const lines = text.split("\n");
    if (lines.at(-1) === "") lines.pop();
    const shown = lines.slice(0, PREVIEW_LINES).map((line) => `  | ${cutLine(line)}`);
    const more = lines.length > PREVIEW_LINES ? [`  | … ${lines.length - PREVIEW_LINES} more line${lines.length - PREVIEW_LINES === 1 ? "" : "s"}`] : [];
    return [`${label}:`, ...shown, ...more].join("\n");
  };
  if (toolName === "write_file" && typeof fields.content === "string") {
    const bytes = Buffer.byteLength(fields.content);
    return `\n${excerpt(fields.content, `content (${bytes} bytes, ${fields.content.split("\n").length - (fields.content.endsWith("\n") ? 1 : 0)} lines)`)}`;
  }
  if (toolName === "edit_file" && typeof fields.old_string === "string" && typeof fields.new_string === "string") {
    return `\n${excerpt(fields.old_string, `replace${fields.replace_all === true ? " (every occurrence)" : ""}`)}\n${excerpt(fields.new_string, "with")}`;
  }
  return "";
}

/** `line` cut at {@link PREVIEW_LINE_CHARS} characters (whole code points), with "…" when cut. */
function cutLine(line: string): string {
  const characters = Array.from(line);
  return characters.length > PREVIEW_LINE_CHARS ? `${characters.slice(0, PREVIEW_LINE_CHARS).join("")}…` : line;
}
