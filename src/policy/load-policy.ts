import { describeIssue, describeYamlError, yamlDocumentValue } from "../describe-issue.js";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseDocument } from "yaml";
import { ConfigError } from "../errors.js";
import { policySchema, type Policy } from "./policy-schema.js";

/** The policies shipped with the runner (`policies/<name>.yaml` of this package). */
const SHIPPED_POLICY_DIRECTORY = fileURLToPath(new URL("../../policies/", import.meta.url));

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
    super(
      `${file}: ${problems.length} problem${problems.length === 1 ? "" : "s"}:\n${problems.map((problem) => `  - ${problem.path || "(file)"}: ${problem.message}`).join("\n")}`,
    );
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
  const source = readFileSync(absolute, "utf8");
  const document = parseDocument(source, { prettyErrors: true });
  if (document.errors.length) {
    throw new PolicyValidationError(
      absolute,
      document.errors.map((error) => ({ path: "", message: describeYamlError(error, source) })),
    );
  }
  const built = yamlDocumentValue(document);
  if ("problem" in built) throw new PolicyValidationError(absolute, [{ path: "", message: built.problem }]);
  return validatePolicy(built.value, absolute);
}

/** Validates an already-parsed policy object; `label` names it in the error. */
export function validatePolicy(raw: unknown, label: string): Policy {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw new PolicyValidationError(label, [{ path: "", message: "expected a mapping of policy fields (name, description, tools, ...)" }]);
  }
  const parsed = policySchema.safeParse(raw, { reportInput: true });
  if (!parsed.success)
    throw new PolicyValidationError(
      label,
      parsed.error.issues.map((issue) => describeIssue(issue, "docs/policies.md", policySchema)),
    );
  return parsed.data;
}
