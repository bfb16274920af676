import picomatch from "picomatch";
import type { PermissionDecision } from "./permission-checker.js";
import type { Policy } from "./policy-schema.js";

/** Everything the approval step looks at; nothing here is read from the world (no TTY probing, no clock). */
export interface ApprovalContext {
  toolName: string;
  decision: PermissionDecision;
  /** Whether a person can be asked (a terminal on both ends). */
  interactive: boolean;
  policy: Pick<Policy, "name" | "confirmations" | "remember">;
  /** Keys recorded by earlier "always" answers of this run (from `resolveApprovalAnswer`). */
  remembered: ReadonlySet<string>;
}

/** The approval step's verdict: final, or ask the person. */
export type ApprovalStep =
  { kind: "allow"; reason: string; rule: string } | { kind: "deny"; reason: string; rule: string } | { kind: "ask"; question: string; canRemember: boolean };

/** The person's answer: `y`, `n [reason]`, `a` (always, this run), or no answer in time. */
export type ApprovalAnswer = { answer: "yes" } | { answer: "always" } | { answer: "no"; reason?: string; timedOut?: boolean };

/** The final verdict after an answer, and the keys to add to the run's remembered answers. */
export interface ApprovalResolution {
  kind: "allow" | "deny";
  reason: string;
  rule: string;
  remember: string[];
}

/**
 * Turns a checker verdict into allow, deny or "ask": `allow`/`deny` stand;
 * `confirm` is allowed when an earlier "always" answer of this run covers
 * it (only for tools the policy's `remember` lists), else by
 * `confirmations`: `deny` refuses, `allow` runs it unasked, `prompt` asks
 * when there is a terminal and refuses when there is none.
 */
export function decideApproval(context: ApprovalContext): ApprovalStep {
  const { decision, policy, toolName } = context;
  if (decision.decision === "allow") return { kind: "allow", reason: decision.reason, rule: decision.rule };
  if (decision.decision === "deny") return { kind: "deny", reason: decision.reason, rule: decision.rule };
  const canRemember = rememberable(policy, toolName);
  const keys = rememberKeys(toolName, decision);
  if (canRemember && keys.every((key) => context.remembered.has(key))) {
    return {
      kind: "allow",
      reason: `approved earlier in this run with "always" (${confirmRules(decision).join(", ")}): ${decision.reason}`,
      rule: decision.rule,
    };
  }
  switch (policy.confirmations) {
    case "deny":
      return {
        kind: "deny",
        reason: `${decision.reason} — this needs confirmation, and policy ${policy.name} refuses everything that does (confirmations: deny)`,
        rule: decision.rule,
      };
    case "allow":
      return { kind: "allow", reason: `${decision.reason} — allowed without asking (policy ${policy.name}: confirmations: allow)`, rule: decision.rule };
    case "prompt":
      if (!context.interactive) {
        return {
          kind: "deny",
          reason: `${decision.reason} — this needs confirmation and there is no terminal to ask (policy ${policy.name}: confirmations: prompt)`,
          rule: decision.rule,
        };
      }
      return {
        kind: "ask",
        question: `policy ${policy.name}: ${toolName}${decision.subject !== undefined ? ` ${JSON.stringify(decision.subject)}` : ""} needs confirmation.\n${decision.reason}`,
        canRemember,
      };
  }
}

/** The final verdict after the person answered an "ask". */
export function resolveApprovalAnswer(context: ApprovalContext, answer: ApprovalAnswer): ApprovalResolution {
  const { decision } = context;
  switch (answer.answer) {
    case "yes":
      return { kind: "allow", reason: `approved by the user: ${decision.reason}`, rule: decision.rule, remember: [] };
    case "always":
      if (!rememberable(context.policy, context.toolName)) {
        return {
          kind: "allow",
          reason: `approved by the user (this once: policy ${context.policy.name} does not let answers for ${context.toolName} be remembered): ${decision.reason}`,
          rule: decision.rule,
          remember: [],
        };
      }
      return {
        kind: "allow",
        reason: `approved by the user for the rest of this run: ${decision.reason}`,
        rule: decision.rule,
        remember: rememberKeys(context.toolName, decision),
      };
    case "no": {
      const why = answer.timedOut ? "no answer came in time" : answer.reason ? `the user refused: ${answer.reason}` : "the user refused";
      return { kind: "deny", reason: `${why} (${decision.reason})`, rule: decision.rule, remember: [] };
    }
  }
}

/** Whether an "always" answer may be remembered for this tool (the policy's `remember` globs). */
function rememberable(policy: Pick<Policy, "remember">, toolName: string): boolean {
  return policy.remember.some((glob) => picomatch(glob)(toolName));
}

/**
 * What an "always" answer covers: the tool together with each rule that
 * asked for confirmation, so approving `git push` once does not approve
 * `rm -rf /` later.
 */
function rememberKeys(toolName: string, decision: PermissionDecision): string[] {
  return confirmRules(decision).map((rule) => `${toolName} ${rule}`);
}

function confirmRules(decision: PermissionDecision): string[] {
  const rules = decision.findings?.filter((finding) => finding.risk === "confirm").map((finding) => finding.rule) ?? [];
  return rules.length > 0 ? [...new Set(rules)] : [decision.rule];
}
