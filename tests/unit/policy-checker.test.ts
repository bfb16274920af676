import { beforeAll, describe, expect, it } from "vitest";
import { validatePolicy } from "../../src/policy/load-policy.js";
import { workspaceRelativePath } from "../../src/policy/path-rules.js";
import { PermissionChecker } from "../../src/policy/permission-checker.js";

/** Allows every tool, every path and every command: only the hard rules are left. */
let permissive: PermissionChecker;
/** A narrow policy: reads anywhere but secrets/, writes only under src/ and never *.lock, no run_shell, no mcp tools. */
let narrow: PermissionChecker;

beforeAll(async () => {
  permissive = await PermissionChecker.create(
    validatePolicy(
      { name: "anything", description: "allows everything", tools: { allow: ["*"] }, paths: { write: { allow: ["**"] } }, default_command_risk: "allow" },
      "anything",
    ),
  );
  narrow = await PermissionChecker.create(
    validatePolicy(
      {
        name: "narrow",
        description: "a narrow policy",
        tools: { allow: ["read_*", "list_dir", "glob", "grep", "write_file", "edit_file", "mcp__*"], deny: ["mcp__*"] },
        paths: {
          read: { allow: ["**"], deny: ["secrets/**"] },
          write: { allow: ["src/**"], deny: [{ glob: "**/*.lock", reason: "lock files are generated" }] },
        },
      },
      "narrow",
    ),
  );
});

describe("order of checks", () => {
  it("a hard rule beats a policy that allows everything", () => {
    expect(permissive.check("write_file", { path: ".git/config", content: "" })).toMatchObject({ decision: "deny", rule: "hard.protected-path" });
    expect(permissive.check("edit_file", { path: "vendor/lib/.git/HEAD" })).toMatchObject({ decision: "deny", rule: "hard.protected-path" });
    expect(permissive.check("write_file", { path: "src/../.git/hooks/post-commit" })).toMatchObject({ decision: "deny", rule: "hard.protected-path" });
    expect(permissive.check("read_file", { path: "../../etc/passwd" })).toMatchObject({ decision: "deny", rule: "hard.workspace-confinement" });
    expect(permissive.check("read_file", { path: "/etc/passwd" })).toMatchObject({ decision: "deny", rule: "hard.workspace-confinement" });
    expect(permissive.check("list_dir", { path: "/workspace/../root" })).toMatchObject({ decision: "deny", rule: "hard.workspace-confinement" });
    expect(permissive.check("grep", { pattern: "x", path: "src/../../home" })).toMatchObject({ decision: "deny", rule: "hard.workspace-confinement" });
  });

  it("hard rules come before the tool allow-list", async () => {
    const readOnly = await PermissionChecker.create(validatePolicy({ name: "read-only", description: "reads", tools: { allow: ["read_file"] } }, "read-only"));
    expect(readOnly.check("write_file", { path: ".git/config" }).rule).toBe("hard.protected-path");
    expect(readOnly.check("list_dir", { path: "/etc" }).rule).toBe("hard.workspace-confinement");
    expect(readOnly.check("write_file", { path: "src/a.ts" }).rule).toBe("tools.allow");
  });

  it("the tool allow-list comes before path and command rules", () => {
    expect(narrow.check("run_shell", { command: "ls" })).toMatchObject({ decision: "deny", rule: "tools.allow" });
    expect(narrow.check("run_shell", { command: "ls" }).reason).toMatch(/not allowed by policy narrow/);
    expect(narrow.check("agent", { prompt: "x" })).toMatchObject({ decision: "deny", rule: "tools.allow" });
    expect(narrow.check("mcp__github__create_issue", {})).toMatchObject({ decision: "deny", rule: "tools.deny[0]" });
    expect(narrow.check("read_file", { path: "src/a.ts" })).toMatchObject({ decision: "allow", rule: "paths.read.allow" });
  });

  it("tools.confirm: a call the rules allow needs confirmation, one they deny stays denied, other tools are untouched", async () => {
    const gated = await PermissionChecker.create(
      validatePolicy(
        {
          name: "gated",
          description: "asks before writes and shell commands",
          tools: { allow: ["read_file", "write_file", "run_shell"], confirm: ["write_file", "run_*"] },
          paths: { write: { allow: ["src/**"] } },
          commands: [{ match: "rm", risk: "deny", reason: "no deleting" }],
          default_command_risk: "allow",
        },
        "gated",
      ),
    );
    expect(gated.check("write_file", { path: "src/a.ts", content: "" })).toMatchObject({ decision: "confirm", rule: "tools.confirm[0]", subject: "src/a.ts" });
    expect(gated.check("write_file", { path: "src/a.ts", content: "" }).reason).toMatch(
      /every write_file call needs a person's approval \(policy gated, tools.confirm: write_file\)/,
    );
    expect(gated.check("run_shell", { command: "ls" })).toMatchObject({ decision: "confirm", rule: "tools.confirm[1]", subject: "ls" });
    expect(gated.check("write_file", { path: "docs/a.md", content: "" })).toMatchObject({ decision: "deny", rule: "paths.write.allow" });
    expect(gated.check("run_shell", { command: "rm x" })).toMatchObject({ decision: "deny" });
    expect(gated.check("read_file", { path: "src/a.ts" })).toMatchObject({ decision: "allow" });
  });

  it("path rules: deny beats allow, and a path outside every allow glob is denied", () => {
    expect(narrow.check("write_file", { path: "src/index.ts" })).toMatchObject({ decision: "allow" });
    expect(narrow.check("write_file", { path: "/workspace/src/index.ts" })).toMatchObject({ decision: "allow" });
    expect(narrow.check("edit_file", { path: "src/pkg/yarn.lock" })).toMatchObject({ decision: "deny", rule: "paths.write.deny[0]" });
    expect(narrow.check("edit_file", { path: "src/pkg/yarn.lock" }).reason).toMatch(/lock files are generated/);
    expect(narrow.check("write_file", { path: "README.md" })).toMatchObject({ decision: "deny", rule: "paths.write.allow" });
    expect(narrow.check("read_file", { path: "secrets/key.pem" })).toMatchObject({ decision: "deny", rule: "paths.read.deny[0]" });
    expect(narrow.check("read_file", { path: "README.md" })).toMatchObject({ decision: "allow" });
  });

  it("only writes under .git are protected; reading it, and names like .gitignore, are fine", () => {
    expect(permissive.check("read_file", { path: ".git/config" }).decision).toBe("allow");
    expect(permissive.check("write_file", { path: ".gitignore" }).decision).toBe("allow");
    expect(permissive.check("write_file", { path: "docs/.github/workflows/ci.yml" }).decision).toBe("allow");
  });

  it("a file tool without a path argument means the workspace root", () => {
    expect(narrow.check("glob", { pattern: "**/*.ts" })).toMatchObject({ decision: "allow", subject: "." });
    expect(narrow.check("grep", { pattern: "TODO" }).decision).toBe("allow");
  });

  it("tools the policy allows and that have no path or command are allowed by the tool list", () => {
    expect(permissive.check("read_tool_result", { tool_call_id: "x" })).toMatchObject({ decision: "allow", rule: "tools.allow" });
    expect(permissive.toolAllowed("mcp__anything__goes")).toBe(true);
    expect(narrow.toolAllowed("run_shell")).toBe(false);
  });
});

describe("workspaceRelativePath", () => {
  it.each([
    ["src/a.ts", "src/a.ts"],
    ["./src/../src/a.ts", "src/a.ts"],
    ["/workspace", "."],
    ["/workspace/", "."],
    ["/workspace/src/", "src"],
    ["", "."],
    [".", "."],
    ["..", null],
    ["a/../../b", null],
    ["/workspacex/a", null],
    ["/etc", null],
    ["a\0b", null],
  ])("%j → %j", (input, expected) => {
    expect(workspaceRelativePath(input)).toBe(expected);
  });
});

describe("MCP tools that take paths", () => {
  it("are held to the hard rules and to the read or write path rules, by their readOnlyHint", async () => {
    const policy = await PermissionChecker.create(
      validatePolicy(
        {
          name: "mcp-paths",
          description: "mcp allowed, paths ruled",
          tools: { allow: ["mcp__*"] },
          paths: { read: { allow: ["**"], deny: ["secrets/**"] }, write: { allow: ["src/**"] } },
        },
        "mcp-paths",
      ),
    );
    expect(policy.check("mcp__files__write_file", { path: "/workspace/src/a.ts" })).toMatchObject({ decision: "allow" });
    expect(policy.check("mcp__files__write_file", { path: "/workspace/docs/a.md" })).toMatchObject({ decision: "deny", rule: "paths.write.allow" });
    expect(policy.check("mcp__files__move_file", { source: "/workspace/src/a.ts", destination: "/workspace/.git/hooks/x" })).toMatchObject({
      decision: "deny",
      rule: "hard.protected-path",
      subject: "/workspace/.git/hooks/x",
    });
    expect(policy.check("mcp__files__read_text_file", { path: "/workspace/secrets/k" }, { readOnly: true })).toMatchObject({
      decision: "deny",
      rule: "paths.read.deny[0]",
    });
    expect(policy.check("mcp__files__read_multiple_files", { paths: ["/workspace/src/a.ts", "/etc/passwd"] }, { readOnly: true })).toMatchObject({
      decision: "deny",
      rule: "hard.workspace-confinement",
    });
    // A tool with no path argument is decided by the tool rules alone.
    expect(policy.check("mcp__everything__echo", { message: "hi" })).toMatchObject({ decision: "allow", rule: "tools.allow" });
  });
});
