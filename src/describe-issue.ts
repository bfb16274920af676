import type { z } from "zod";

/** One problem of a YAML file, by field path, in words a user can act on. */
export interface FieldProblem {
  /** Dotted field path, e.g. `sandbox.limits.memory`; empty for the file itself. */
  path: string;
  message: string;
}

/**
 * Turns a zod issue into a {@link FieldProblem}: unknown fields name the
 * README section to check (`readmeSection`), type and enum errors say what
 * was expected and what was found, unions say which shapes would do.
 */
export function describeIssue(issue: z.core.$ZodIssue, readmeSection: string): FieldProblem {
  const path = issue.path.map(String).join(".");
  if (issue.code === "unrecognized_keys") {
    return { path, message: `unknown field${issue.keys.length > 1 ? "s" : ""} ${issue.keys.join(", ")} (check the spelling; see README "${readmeSection}")` };
  }
  if (issue.code === "invalid_type") {
    if (issue.input === undefined) return { path, message: `required: expected ${issue.expected}` };
    return { path, message: `expected ${issue.expected}, got ${describeValue(issue.input)}` };
  }
  if (issue.code === "invalid_value") {
    return { path, message: `expected one of ${issue.values.map((value) => JSON.stringify(value)).join(", ")}, got ${describeValue(issue.input)}` };
  }
  if (issue.code === "invalid_key") {
    return { path, message: `invalid key ${JSON.stringify(String(issue.input))}: ${issue.issues.map((inner) => inner.message).join("; ")}` };
  }
  if (issue.code === "invalid_union") {
    // e.g. `match: string | list`: a value of neither type.
    const expected = issue.errors.flat().flatMap((nested) => (nested.code === "invalid_type" && nested.path.length === 0 ? [nested.expected] : []));
    if (expected.length === issue.errors.length) {
      const names = expected.map((type) => (type === "object" ? "a mapping" : type === "array" ? "a list" : `a ${type}`));
      return { path, message: `expected ${names.join(" or ")}, got ${describeValue(issue.input)}` };
    }
    return { path, message: [...new Set(issue.errors.flat().map((nested) => nested.message))].join("; or ") };
  }
  return { path, message: issue.message };
}

/** A short description of a YAML value: `a list`, `a mapping`, `number 3`, `string "x"`. */
function describeValue(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "a list";
  if (typeof value === "object") return "a mapping";
  return `${typeof value} ${JSON.stringify(value)}`;
}
