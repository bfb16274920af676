import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseDocument } from "yaml";
import type { z } from "zod";
import { ConfigError } from "../errors.js";
import { policySchema, type Policy } from "./policy-schema.js";

/** The policies shipped with the runner (`policies/<name>.yaml` of this package). */
export const SHIPPED_POLICY_DIRECTORY = fileURLToPath(new URL("../../policies/", import.meta.url));

/** One problem in a policy file: where, and what is expected. */
export interface PolicyProblem {
  /** Dotted field path, e.g. `commands.2.risk`; empty for the file itself. */
  path: string;
  message: string;
}

/** Thrown with *all* problems of a policy file. Exit 2. */
export class PolicyValidationError extends ConfigError {
  constructor(
    readonly file: string,
    readonly problems: PolicyProblem[],
  ) {
    super(`${file}: ${problems.length} problem${problems.length === 1 ? "" : "s"}:\n${problems.map((problem) => `  - ${problem.path || "(file)"}: ${problem.message}`).join("\n")}`);
  }
}

/** A validated policy and the file it came from. */
export interface LoadedPolicy {
  policy: Policy;
  /** Absolute path of the policy file. */
  file: string;
  /** True for a policy shipped with the runner. */
  shipped: boolean;
}

/** Names of the shipped policies, sorted. */
export function shippedPolicyNames(): string[] {
  if (!existsSync(SHIPPED_POLICY_DIRECTORY)) return [];
  return readdirSync(SHIPPED_POLICY_DIRECTORY)
    .filter((entry) => entry.endsWith(".yaml"))
    .map((entry) => entry.slice(0, -".yaml".length))
    .sort();
}

/**
 * Loads a policy by shipped name (`worker`) or by file path. A bare name
 * (lowercase letters, digits, dashes) is a shipped policy; anything else is a
 * path. Throws {@link PolicyValidationError} listing every problem.
 *
 * Which files may be loaded is the caller's business: a policy must never be
 * read from the agent's workspace during a run (issue 6, "Trust").
 */
export function loadPolicy(nameOrPath: string): LoadedPolicy {
  if (/^[a-z0-9][a-z0-9-]*$/.test(nameOrPath)) {
    const file = resolve(SHIPPED_POLICY_DIRECTORY, `${nameOrPath}.yaml`);
    if (!existsSync(file)) {
      throw new PolicyValidationError(nameOrPath, [
        { path: "", message: `no shipped policy named "${nameOrPath}" (shipped: ${shippedPolicyNames().join(", ") || "none"}); give a file path for your own` },
      ]);
    }
    return { policy: loadPolicyFile(file), file, shipped: true };
  }
  const file = resolve(nameOrPath);
  return { policy: loadPolicyFile(file), file, shipped: false };
}

/** Reads, parses and validates one policy file. */
export function loadPolicyFile(file: string): Policy {
  const absolute = resolve(file);
  if (!existsSync(absolute)) throw new PolicyValidationError(absolute, [{ path: "", message: "file not found" }]);
  if (!statSync(absolute).isFile()) throw new PolicyValidationError(absolute, [{ path: "", message: "not a file; give the path of a policy .yaml" }]);
  const document = parseDocument(readFileSync(absolute, "utf8"), { prettyErrors: true });
  if (document.errors.length) {
    throw new PolicyValidationError(
      absolute,
      document.errors.map((error) => ({ path: "", message: `YAML syntax: ${error.message.split("\n")[0]}` })),
    );
  }
  return validatePolicy(document.toJS() ?? {}, absolute);
}

/** Validates an already-parsed policy object; `label` names it in the error. */
export function validatePolicy(raw: unknown, label: string): Policy {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw new PolicyValidationError(label, [{ path: "", message: "expected a mapping of policy fields (name, description, tools, ...)" }]);
  }
  const parsed = policySchema.safeParse(raw, { reportInput: true });
  if (!parsed.success) throw new PolicyValidationError(label, parsed.error.issues.map(describeIssue));
  return parsed.data;
}

function describeIssue(issue: z.core.$ZodIssue): PolicyProblem {
  const path = issue.path.map(String).join(".");
  if (issue.code === "unrecognized_keys") {
    return { path, message: `unknown field${issue.keys.length > 1 ? "s" : ""} ${issue.keys.join(", ")} (check the spelling; see README "Policies")` };
  }
  if (issue.code === "invalid_type") {
    if (issue.input === undefined) return { path, message: `required: expected ${issue.expected}` };
    return { path, message: `expected ${issue.expected}, got ${describeValue(issue.input)}` };
  }
  if (issue.code === "invalid_value") {
    return { path, message: `expected one of ${issue.values.map((value) => JSON.stringify(value)).join(", ")}, got ${describeValue(issue.input)}` };
  }
  if (issue.code === "invalid_union") {
    // `match: string | list`, path deny entries `glob | { glob, reason }`: a value of neither type.
    const expected = issue.errors.flat().flatMap((nested) => (nested.code === "invalid_type" && nested.path.length === 0 ? [nested.expected] : []));
    if (expected.length === issue.errors.length) {
      const names = expected.map((type) => (type === "object" ? "a mapping" : type === "array" ? "a list" : `a ${type}`));
      return { path, message: `expected ${names.join(" or ")}, got ${describeValue(issue.input)}` };
    }
    return { path, message: [...new Set(issue.errors.flat().map((nested) => nested.message))].join("; or ") };
  }
  return { path, message: issue.message };
}

function describeValue(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "a list";
  if (typeof value === "object") return "a mapping";
  return `${typeof value} ${JSON.stringify(value)}`;
}
