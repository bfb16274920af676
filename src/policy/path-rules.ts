import { posix } from "node:path";
import picomatch from "picomatch";
import type { Policy, PathRules, Risk } from "./policy-schema.js";

/** Where the task's files are inside the sandbox; every tool path is relative to it. */
const WORKSPACE_ROOT = "/workspace";

export type PathAccess = "read" | "write";

/** A decision about one path. */
export interface PathDecision {
  risk: Risk;
  /** `hard.workspace-confinement`, `hard.protected-path`, `paths.write.deny[0]`, `paths.read.allow`, ... */
  rule: string;
  reason: string;
}

/**
 * A tool's path made relative to /workspace (`.` for the root), or null when
 * it leaves /workspace: `..` climbing out, an absolute path elsewhere, a NUL
 * byte. Purely lexical: the sandbox resolves symlinks and refuses paths that
 * lead outside, which is the check that holds.
 */
export function workspaceRelativePath(path: string): string | null {
  if (path.includes("\0")) return null;
  let relative: string;
  if (path.startsWith("/")) {
    const normalized = posix.normalize(path);
    if (normalized === WORKSPACE_ROOT || normalized === `${WORKSPACE_ROOT}/`) return ".";
    if (!normalized.startsWith(`${WORKSPACE_ROOT}/`)) return null;
    relative = normalized.slice(WORKSPACE_ROOT.length + 1);
  } else relative = path;
  const normalized = posix.normalize(relative === "" ? "." : relative).replace(/\/+$/, "");
  if (normalized === ".." || normalized.startsWith("../")) return null;
  return normalized === "" ? "." : normalized;
}

/**
 * The rules no policy can change: a path must stay inside /workspace, and
 * nothing is written under a `.git` directory (or over a `.git` file).
 * Returns the denial, or null when the hard rules let the path through.
 */
export function checkHardPathRules(path: string, access: PathAccess): PathDecision | null {
  const relative = workspaceRelativePath(path);
  if (relative === null) {
    return {
      risk: "deny",
      rule: "hard.workspace-confinement",
      reason: `${JSON.stringify(path)} is outside ${WORKSPACE_ROOT}; tools only reach the task's files (paths are relative to ${WORKSPACE_ROOT})`,
    };
  }
  if (access === "write" && relative.split("/").includes(".git")) {
    return {
      risk: "deny",
      rule: "hard.protected-path",
      reason: `writing ${relative} is never allowed: .git holds the repository's metadata, which only the runner changes (no policy can allow it)`,
    };
  }
  return null;
}

/** The policy's own path rules (`paths.read`, `paths.write`), applied after the hard rules. */
export class PathRuleSet {
  private readonly compiled: Record<PathAccess, { allow: ((path: string) => boolean)[]; deny: ((path: string) => boolean)[]; rules: PathRules }>;

  constructor(private readonly policy: Policy) {
    const compile = (rules: PathRules) => ({
      rules,
      allow: rules.allow.map(pathMatcher),
      deny: rules.deny.map((entry) => pathMatcher(entry.glob)),
    });
    this.compiled = { read: compile(policy.paths.read), write: compile(policy.paths.write) };
  }

  /** Hard rules, then the policy's: deny globs beat allow globs; a path no allow glob matches is denied. */
  check(path: string, access: PathAccess): PathDecision {
    const hard = checkHardPathRules(path, access);
    if (hard) return hard;
    const relative = workspaceRelativePath(path)!;
    const { allow, deny, rules } = this.compiled[access];
    const verb = access === "write" ? "writing" : "reading";
    const denied = deny.findIndex((matches) => matches(relative));
    if (denied !== -1) {
      const entry = rules.deny[denied]!;
      return {
        risk: "deny",
        rule: `paths.${access}.deny[${denied}]`,
        reason: `${verb} ${relative} is denied by policy ${this.policy.name}${entry.reason ? `: ${entry.reason}` : ` (paths.${access}.deny: ${entry.glob})`}`,
      };
    }
    if (!allow.some((matches) => matches(relative))) {
      return {
        risk: "deny",
        rule: `paths.${access}.allow`,
        reason:
          rules.allow.length === 0
            ? `${verb} ${relative} is not allowed: policy ${this.policy.name} allows no ${verb} in the workspace (paths.${access}.allow is empty)`
            : `${verb} ${relative} is not allowed by policy ${this.policy.name}: paths.${access}.allow covers only ${rules.allow.join(", ")}`,
      };
    }
    return { risk: "allow", rule: `paths.${access}.allow`, reason: `${verb} ${relative} is allowed by policy ${this.policy.name}` };
  }
}

/** A glob over workspace-relative paths; dot files match like any other, and `**` covers the root `.` itself. */
function pathMatcher(glob: string): (path: string) => boolean {
  const matches = picomatch(glob, { dot: true });
  const coversRoot = glob === "**" || glob === "." || glob === "**/*";
  return (path) => (path === "." ? coversRoot : matches(path));
}
