import { z } from "zod";
import { parseAllowEntry } from "../sandbox/network-allow-list.js";
import { parseCommandPattern } from "./command-pattern.js";

/** How risky an action is, and so what happens to it: run, ask first, or refuse. */
export const riskSchema = z.enum(["allow", "confirm", "deny"]);
export type Risk = z.infer<typeof riskSchema>;

/** Orders risks: `deny` is the most severe. */
export const RISK_SEVERITY: Record<Risk, number> = { allow: 0, confirm: 1, deny: 2 };

const toolGlob = z
  .string()
  .min(1, "expected a tool name or glob like read_file, read_* or mcp__*")
  .regex(/^[A-Za-z0-9_*?[\]{},!.-]+$/, "expected a tool name or glob like read_file, read_* or mcp__* (letters, digits, _ - . and glob characters)");

const pathGlob = z
  .string()
  .min(1, "expected a glob relative to /workspace, like src/** or .env*")
  .refine((glob) => !glob.startsWith("/"), { message: "path globs are relative to /workspace: drop the leading / (e.g. src/**)" })
  .refine((glob) => !glob.split("/").includes(".."), { message: "path globs cannot contain .. (nothing outside /workspace is reachable)" });

/** A deny entry: a glob, or a glob with the reason the model is told. */
const pathDenyEntry = z
  .union([pathGlob, z.strictObject({ glob: pathGlob, reason: z.string().trim().min(1, "expected a reason the model can read") })])
  .transform((entry): { glob: string; reason?: string } => (typeof entry === "string" ? { glob: entry } : entry));

const pathRulesSchema = z.strictObject({
  /** Paths the tools may touch; a path must match one (default: everything in /workspace). */
  allow: z.array(pathGlob).default(["**"]),
  /** Paths refused even when allowed; deny beats allow. */
  deny: z.array(pathDenyEntry).default([]),
});
export type PathRules = z.infer<typeof pathRulesSchema>;

const commandPattern = z.string().superRefine((pattern, context) => {
  const parsed = parseCommandPattern(pattern);
  if (typeof parsed === "string") context.addIssue({ code: "custom", message: parsed });
});

const commandRuleSchema = z.strictObject({
  /** Names the rule in denial counts and messages (default: its position, commands[3]). */
  id: z
    .string()
    .regex(/^[a-z0-9][a-z0-9-]*$/, "expected lowercase letters, digits and dashes, like git-push")
    .optional(),
  /** One command pattern or several (see docs/policies.md "Policies": command patterns). */
  match: z.union([commandPattern, z.array(commandPattern).min(1, "expected at least one pattern")]),
  risk: riskSchema,
  /** Told to the model (and the person asked) when the rule decides. */
  reason: z.string().trim().min(1, "expected a reason the model and the user can read"),
});
export type CommandRule = z.infer<typeof commandRuleSchema>;

const positiveCount = (max: number) => z.number().int("expected a whole number").positive("expected a whole number above 0").max(max, `at most ${max}`);

const limitsSchema = z.strictObject({
  /** Model calls of a run. */
  max_steps: positiveCount(10_000).optional(),
  tool_calls_per_minute: positiveCount(100_000).optional(),
  tokens_per_minute: positiveCount(100_000_000).optional(),
});

export const policySchema = z
  .strictObject({
    name: z.string().regex(/^[a-z0-9][a-z0-9-]*$/, "expected lowercase letters, digits and dashes, like worker"),
    description: z.string().trim().min(1, "expected a sentence saying what the policy is for"),
    /** Default-deny: a tool runs only when a glob of `allow` matches its name and none of `deny` does. */
    tools: z.strictObject({
      allow: z.array(toolGlob),
      deny: z.array(toolGlob).default([]),
      /**
       * Tools every call of which needs confirmation once the other rules allow it (a `deny` still wins): a
       * person approves each (the agency's `confirm`, docs/agency.md "Human gates: confirm").
       */
      confirm: z.array(toolGlob).default([]),
    }),
    /** Path rules for the file tools, globs relative to /workspace. */
    paths: z
      .strictObject({
        read: pathRulesSchema.default({ allow: ["**"], deny: [] }),
        write: pathRulesSchema.default({ allow: ["**"], deny: [] }),
      })
      .default({ read: { allow: ["**"], deny: [] }, write: { allow: ["**"], deny: [] } }),
    /** run_shell rules: for each simple command the first matching rule decides. */
    commands: z.array(commandRuleSchema).default([]),
    /** What a simple command no rule matches gets. */
    default_command_risk: riskSchema.default("confirm"),
    network: z
      .strictObject({
        /** Hosts a task under this policy may reach by default (task.yaml's `sandbox.network.allow` syntax). */
        allow: z.array(
          z.string().superRefine((entry, context) => {
            const parsed = parseAllowEntry(entry);
            if (typeof parsed === "string") context.addIssue({ code: "custom", message: parsed });
          }),
        ),
      })
      .default({ allow: [] }),
    limits: limitsSchema.default({}),
    /** Tools whose confirmations an "a" (always, this run) answer may cover. */
    remember: z.array(toolGlob).default([]),
    /**
     * What happens to an action that needs confirmation: `prompt` asks on a
     * terminal (and refuses without one); `deny` refuses it (CI); `allow` runs
     * it without asking (unattended runs that accept the risks).
     */
    confirmations: z.enum(["prompt", "deny", "allow"]).default("prompt"),
  })
  .superRefine((policy, context) => {
    const seen = new Map<string, number>();
    policy.commands.forEach((rule, index) => {
      if (rule.id === undefined) return;
      const first = seen.get(rule.id);
      if (first !== undefined) {
        context.addIssue({ code: "custom", path: ["commands", index, "id"], message: `duplicate id "${rule.id}" (also commands.${first}.id)` });
      } else seen.set(rule.id, index);
    });
  });

/** A validated policy, defaults filled in. */
export type Policy = z.infer<typeof policySchema>;

/** The id a command rule is counted and named by: its `id`, else `commands[<index>]`. */
export function commandRuleId(rule: CommandRule, index: number): string {
  return rule.id !== undefined ? `commands.${rule.id}` : `commands[${index}]`;
}

/** The patterns of a rule, as a list. */
export function commandRulePatterns(rule: CommandRule): string[] {
  return typeof rule.match === "string" ? [rule.match] : rule.match;
}
