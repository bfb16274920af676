import picomatch from "picomatch";
import { CommandJudge, type CommandFinding } from "./command-judge.js";
import { checkHardPathRules, PathRuleSet, WORKSPACE_ROOT, workspaceRelativePath, type PathAccess } from "./path-rules.js";
import { RISK_SEVERITY, type Policy, type Risk } from "./policy-schema.js";
import { ShellParser } from "./shell-syntax.js";

/** The verdict on one tool call. */
export interface PermissionDecision {
  /** `allow`: run it; `confirm`: only with an approval (see `decideApproval`); `deny`: refuse. */
  decision: Risk;
  /** Why, in words for the model and the person asked (a denial reaches the model as `[denied] <reason>`). */
  reason: string;
  /**
   * Which rule decided, for per-rule counts: `hard.workspace-confinement`,
   * `hard.protected-path`, `tools.allow`, `tools.deny[0]`,
   * `paths.write.deny[1]`, `commands.git-push`, `commands[3]`,
   * `default_command_risk`, `command.unparsable`, ...
   */
  rule: string;
  /** What the call is about, for a prompt: the command line or the path. */
  subject?: string;
  /** For run_shell: the verdict on every part of the command line. */
  findings?: CommandFinding[];
}

/** File tools and the argument naming their path; a missing path means the workspace root. */
const PATH_TOOLS: Readonly<Record<string, { argument: string; access: PathAccess }>> = {
  read_file: { argument: "path", access: "read" },
  list_dir: { argument: "path", access: "read" },
  glob: { argument: "path", access: "read" },
  grep: { argument: "path", access: "read" },
  write_file: { argument: "path", access: "write" },
  edit_file: { argument: "path", access: "write" },
};

/** The tool whose `command` argument the command rules judge. */
const SHELL_TOOL = "run_shell";

/** MCP tools (`mcp__<server>__<tool>`), and the argument names under which they commonly take workspace paths. */
const MCP_TOOL_PREFIX = "mcp__";
const MCP_PATH_ARGUMENTS = ["path", "paths", "source", "destination"];

/**
 * Checks tool calls against a policy, in this order: hard rules (paths stay
 * in the workspace root, `sandbox.workdir`; nothing is written under `.git`), which no policy can
 * change → the policy's tool allow-list (default deny) → its path rules
 * (file tools) or command rules (`run_shell`). Approval of `confirm`
 * verdicts is a separate step (`decideApproval`).
 */
export class PermissionChecker {
  private readonly allowTools: ((name: string) => boolean)[];
  private readonly denyTools: ((name: string) => boolean)[];
  private readonly confirmTools: ((name: string) => boolean)[];
  private readonly paths: PathRuleSet;
  private readonly commands: CommandJudge;

  private constructor(
    readonly policy: Policy,
    parser: ShellParser,
    /** The workspace root in the sandbox (`sandbox.workdir`): absolute tool paths must lie inside it. */
    private readonly workdir: string,
  ) {
    this.allowTools = policy.tools.allow.map((glob) => picomatch(glob));
    this.denyTools = policy.tools.deny.map((glob) => picomatch(glob));
    this.confirmTools = policy.tools.confirm.map((glob) => picomatch(glob));
    this.paths = new PathRuleSet(policy, workdir);
    this.commands = new CommandJudge(policy, parser, (path) => (workspaceRelativePath(path, workdir) === null ? null : this.paths.check(path, "write")));
  }

  /** Loads the shell parser (once per process) and compiles the policy; `workdir` default /workspace. */
  static async create(policy: Policy, options: { workdir?: string } = {}): Promise<PermissionChecker> {
    return new PermissionChecker(policy, await ShellParser.load(), options.workdir ?? WORKSPACE_ROOT);
  }

  /** Whether the policy's tool lists let `toolName` run at all (for filtering the tool list the model sees). */
  toolAllowed(toolName: string): boolean {
    return this.checkTool(toolName).decision === "allow";
  }

  /**
   * Judges one call. `args` are the call's validated arguments (an object);
   * a path argument that is not a string is left to argument validation.
   */
  check(toolName: string, args: unknown, options: { readOnly?: boolean } = {}): PermissionDecision {
    return this.confirmed(toolName, this.judge(toolName, args, options));
  }

  /** `tools.confirm`: a call the other rules allow needs confirmation when a glob of it matches the tool (a deny stands). */
  private confirmed(toolName: string, verdict: PermissionDecision): PermissionDecision {
    if (verdict.decision !== "allow") return verdict;
    const index = this.confirmTools.findIndex((matches) => matches(toolName));
    if (index === -1) return verdict;
    return {
      ...verdict,
      decision: "confirm",
      reason: `every ${toolName} call needs a person's approval (policy ${this.policy.name}, tools.confirm: ${this.policy.tools.confirm[index]})`,
      rule: `tools.confirm[${index}]`,
    };
  }

  private judge(toolName: string, args: unknown, options: { readOnly?: boolean }): PermissionDecision {
    const argumentsObject = typeof args === "object" && args !== null ? (args as Record<string, unknown>) : {};
    if (toolName.startsWith(MCP_TOOL_PREFIX)) return this.checkMcp(toolName, argumentsObject, options.readOnly ?? false);
    const pathTool = Object.hasOwn(PATH_TOOLS, toolName) ? PATH_TOOLS[toolName] : undefined;
    const rawPath = pathTool ? argumentsObject[pathTool.argument] : undefined;
    const path = pathTool ? (typeof rawPath === "string" ? rawPath : rawPath === undefined ? "." : null) : null;

    if (pathTool && path !== null) {
      const hard = checkHardPathRules(path, pathTool.access, this.workdir);
      if (hard) return { decision: hard.risk, reason: hard.reason, rule: hard.rule, subject: path };
    }
    const tool = this.checkTool(toolName);
    if (tool.decision !== "allow") return tool;
    if (pathTool && path !== null) {
      const verdict = this.paths.check(path, pathTool.access);
      return { decision: verdict.risk, reason: verdict.reason, rule: verdict.rule, subject: path };
    }
    if (toolName === SHELL_TOOL) {
      const command = typeof argumentsObject.command === "string" ? argumentsObject.command : "";
      const judgement = this.commands.judge(command);
      return { decision: judgement.risk, reason: judgement.reason, rule: judgement.rule, subject: command, findings: judgement.findings };
    }
    return tool;
  }

  /**
   * An MCP tool: its tool rule, then each path it takes (`path`, `paths`,
   * `source`, `destination`) against the hard rules and the read (for a
   * `readOnlyHint` tool) or write path rules, like the built-in file tools.
   * The most severe verdict wins.
   */
  private checkMcp(toolName: string, args: Record<string, unknown>, readOnly: boolean): PermissionDecision {
    let verdict = this.checkTool(toolName);
    const access = readOnly ? "read" : "write";
    const paths = MCP_PATH_ARGUMENTS.flatMap((name) => {
      const value = args[name];
      return typeof value === "string" ? [value] : Array.isArray(value) ? value.filter((item): item is string => typeof item === "string") : [];
    });
    for (const path of paths) {
      const hard = checkHardPathRules(path, access, this.workdir);
      const byPath = hard ?? this.paths.check(path, access);
      if (RISK_SEVERITY[byPath.risk] > RISK_SEVERITY[verdict.decision]) {
        verdict = { decision: byPath.risk, reason: `${toolName} on ${path}: ${byPath.reason}`, rule: byPath.rule, subject: path };
      }
    }
    return verdict;
  }

  private checkTool(toolName: string): PermissionDecision {
    const denied = this.denyTools.findIndex((matches) => matches(toolName));
    if (denied !== -1) {
      return {
        decision: "deny",
        reason: `tool ${toolName} is denied by policy ${this.policy.name} (tools.deny: ${this.policy.tools.deny[denied]})`,
        rule: `tools.deny[${denied}]`,
      };
    }
    if (!this.allowTools.some((matches) => matches(toolName))) {
      return {
        decision: "deny",
        reason: `tool ${toolName} is not allowed by policy ${this.policy.name} (tools.allow: ${this.policy.tools.allow.join(", ") || "nothing"})`,
        rule: "tools.allow",
      };
    }
    return { decision: "allow", reason: `tool ${toolName} is allowed by policy ${this.policy.name}`, rule: "tools.allow" };
  }
}
