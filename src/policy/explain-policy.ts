import { commandRuleId, commandRulePatterns, type Policy } from "./policy-schema.js";

const CONFIRMATIONS: Record<Policy["confirmations"], string> = {
  prompt: "prompt: asked on a terminal (y / n [reason] / a); refused when there is no terminal",
  deny: "deny: refused, with the reason in the tool result (no one is asked)",
  allow: "allow: run without asking",
};

/** A readable account of what a policy allows, for `runner policy check`. */
export function explainPolicy(policy: Policy, source: string): string {
  const lines: string[] = [];
  lines.push(`policy ${policy.name} (${source})`, `  ${policy.description}`, "");

  lines.push("tools (default deny: a tool runs only if allowed and not denied)");
  lines.push(`  allowed: ${policy.tools.allow.join(", ") || "none"}`);
  if (policy.tools.deny.length) lines.push(`  denied:  ${policy.tools.deny.join(", ")}`);
  if (policy.tools.confirm.length) lines.push(`  confirm: ${policy.tools.confirm.join(", ")} (every call they would run needs confirmation)`);
  lines.push("");

  lines.push("paths (globs relative to /workspace; deny beats allow)");
  lines.push("  always: paths stay inside /workspace; nothing is written under .git (hard rules, no policy changes them)");
  for (const access of ["read", "write"] as const) {
    const rules = policy.paths[access];
    const tools = access === "read" ? "read_file, list_dir, glob, grep" : "write_file, edit_file, shell redirections";
    lines.push(`  ${access} (${tools}): allow ${rules.allow.join(", ") || "nothing"}`);
    for (const entry of rules.deny) lines.push(`    deny ${entry.glob}${entry.reason ? ` — ${entry.reason}` : ""}`);
  }
  lines.push("");

  lines.push("commands (run_shell: every simple command is judged; the first matching rule decides; the most severe part decides the line)");
  if (policy.commands.length === 0) lines.push("  (no rules)");
  policy.commands.forEach((rule, index) => {
    const patterns = commandRulePatterns(rule);
    lines.push(`  ${rule.risk.padEnd(7)} ${patterns[0]}   [${commandRuleId(rule, index)}]`);
    for (const pattern of patterns.slice(1)) lines.push(`          ${pattern}`);
    lines.push(`          ${rule.reason}`);
  });
  lines.push(`  otherwise: ${policy.default_command_risk} (default_command_risk)`);
  lines.push("  always at least confirm: a command name or code known only at run time, a script piped into a shell, a line that does not parse");
  lines.push("");

  lines.push(`confirmations: ${CONFIRMATIONS[policy.confirmations]}`);
  lines.push(`remember ("a" answers cover): ${policy.remember.join(", ") || "nothing (every confirmation is asked each time)"}`);
  lines.push(`network allow-list defaults: ${policy.network.allow.join(", ") || "none (no network)"}`);
  const limits = [
    policy.limits.max_steps !== undefined ? `max_steps ${policy.limits.max_steps}` : null,
    policy.limits.tool_calls_per_minute !== undefined ? `${policy.limits.tool_calls_per_minute} tool calls/min` : null,
    policy.limits.tokens_per_minute !== undefined ? `${policy.limits.tokens_per_minute} tokens/min` : null,
  ].filter((limit) => limit !== null);
  lines.push(`limits: ${limits.join(", ") || "none beyond the task's"}`);
  return `${lines.join("\n")}\n`;
}
