import { Mutex } from "async-mutex";
import { CancelledError } from "../errors.js";
import type { EventSink } from "../events/run-events.js";
import type { ToolHooks } from "../hooks/tool-hooks.js";
import { decideApproval, resolveApprovalAnswer, type ApprovalAnswer } from "../policy/approval.js";
import type { PermissionChecker, PermissionDecision } from "../policy/permission-checker.js";
import { RISK_SEVERITY } from "../policy/policy-schema.js";
import type { GuardedCall, ToolGuard, ToolResult } from "../tools/define-tool.js";
import { abortableSleep } from "../model/openai-model-client.js";

/** Asks the person at the terminal; absent when nobody can be asked (CI, no TTY). */
export type AskApproval = (question: string, canRemember: boolean, signal: AbortSignal) => Promise<ApprovalAnswer>;

/** Rule id under which calls blocked by a pre-tool hook are counted. */
export const HOOK_RULE = "hooks.pre_tool_use";

/** One minute, the window of `limits.tool_calls_per_minute`. */
const MINUTE_MS = 60_000;

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
  private readonly recentCalls: number[] = [];

  constructor(private readonly options: PermissionGuardOptions) {}

  /** The policy checker (for filtering the tool list the model sees). */
  get checker(): PermissionChecker {
    return this.options.checker;
  }

  async check(call: GuardedCall): Promise<{ allowed: true } | { allowed: false; reason: string }> {
    const { checker } = this.options;
    const policy = checker.policy;
    const decision = mcpPathDecision(checker, call) ?? checker.check(call.name, call.arguments);
    let step = decideApproval({ toolName: call.name, decision, interactive: this.options.ask !== null, policy, remembered: this.options.remembered });
    if (step.kind === "ask") {
      const ask = this.options.ask!;
      const question = step.question;
      const canRemember = step.canRemember;
      const answer = await this.questions.runExclusive(() => ask(question, canRemember, this.options.signal));
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

  private deny(call: GuardedCall, rule: string, reason: string): { allowed: false; reason: string } {
    this.options.denials[rule] = (this.options.denials[rule] ?? 0) + 1;
    this.options.events.emit({ type: "tool_call.denied", data: { agent_id: call.agentId, tool_call_id: call.toolCallId, name: call.name, rule, reason } });
    return { allowed: false, reason };
  }

  /** Waits until fewer than `perMinute` calls started in the last minute (a sliding window). */
  private async throttle(perMinute: number | undefined): Promise<void> {
    if (!perMinute) return;
    for (;;) {
      const now = Date.now();
      while (this.recentCalls.length && this.recentCalls[0]! <= now - MINUTE_MS) this.recentCalls.shift();
      if (this.recentCalls.length < perMinute) {
        this.recentCalls.push(now);
        return;
      }
      await abortableSleep(this.recentCalls[0]! + MINUTE_MS - now, this.options.signal);
    }
  }
}

/** Argument names under which MCP tools commonly take workspace paths (server-filesystem and the like). */
const MCP_PATH_ARGUMENTS = ["path", "paths", "source", "destination"];

/**
 * An MCP tool that takes paths is held to the same path rules as the
 * built-in file tools (reads for `readOnlyHint` tools, else writes) and to
 * the hard rules (`.git`, confinement): the most severe verdict of its tool
 * rule and each path wins. Null for other tools, or when no path argument is
 * given (then the tool rules alone decide).
 */
function mcpPathDecision(checker: PermissionChecker, call: GuardedCall): PermissionDecision | null {
  if (!call.name.startsWith("mcp__")) return null;
  const paths = MCP_PATH_ARGUMENTS.flatMap((name) => {
    const value = call.arguments[name];
    return typeof value === "string" ? [value] : Array.isArray(value) ? value.filter((item): item is string => typeof item === "string") : [];
  });
  if (paths.length === 0) return null;
  let verdict = checker.check(call.name, call.arguments);
  for (const path of paths) {
    const byPath = checker.check(call.readOnly ? "read_file" : "write_file", { path });
    if (RISK_SEVERITY[byPath.decision] > RISK_SEVERITY[verdict.decision]) verdict = { ...byPath, reason: `${call.name} on ${path}: ${byPath.reason}` };
  }
  return verdict;
}
