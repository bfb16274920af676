import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { policyCheckCommand } from "../../src/cli/policy-command.js";
import { ConfigError } from "../../src/errors.js";
import { loadPolicy, loadPolicyFile, PolicyValidationError, shippedPolicyNames, validatePolicy } from "../../src/policy/load-policy.js";
import { PermissionChecker } from "../../src/policy/permission-checker.js";
import { temporaryDirectory } from "../helpers/git-repository.js";

function problemsOf(raw: unknown): { path: string; message: string }[] {
  try {
    validatePolicy(raw, "policy.yaml");
  } catch (error) {
    expect(error).toBeInstanceOf(PolicyValidationError);
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as PolicyValidationError).exitCode).toBe(2);
    return (error as PolicyValidationError).problems;
  }
  throw new Error("expected the policy to be rejected");
}

describe("policy files", () => {
  it("lists every problem with its field path", () => {
    const problems = problemsOf({
      name: "Bad_Name",
      tools: { allow: ["read file"], denny: [] },
      paths: { write: { allow: ["/etc/**"], deny: ["../x", { glob: ".env", reason: "" }, 42] } },
      commands: [
        { match: "rm -rf '/", risk: "maybe", reason: "" },
        { match: ["git push", "| sh"], risk: "deny", reason: "ok" },
        { match: "--force", risk: "allow", reason: "x", extra: 1 },
      ],
      default_command_risk: "sometimes",
      network: { allow: ["1.2.3.4"] },
      limits: { max_steps: 0 },
      confirmations: "ask",
    });
    const byPath = Object.fromEntries(problems.map((problem) => [problem.path, problem.message]));
    expect(Object.keys(byPath)).toEqual(
      expect.arrayContaining([
        "name",
        "description",
        "tools.allow.0",
        "tools",
        "paths.write.allow.0",
        "paths.write.deny.0",
        "paths.write.deny.1.reason",
        "paths.write.deny.2",
        "commands.0.match",
        "commands.0.risk",
        "commands.0.reason",
        "commands.1.match.1",
        "commands.2.match",
        "commands.2",
        "default_command_risk",
        "network.allow.0",
        "limits.max_steps",
        "confirmations",
      ]),
    );
    expect(byPath["description"]).toMatch(/required/);
    expect(byPath["tools"]).toMatch(/unknown field denny/);
    expect(byPath["paths.write.allow.0"]).toMatch(/relative to \/workspace/);
    expect(byPath["paths.write.deny.2"]).toBe("expected a string or a mapping, got number 42");
    expect(byPath["commands.0.match"]).toMatch(/unterminated ' quote/);
    expect(byPath["commands.0.risk"]).toBe('expected one of "allow", "confirm", "deny", got string "maybe"');
    expect(byPath["commands.1.match.1"]).toMatch(/stage 1 is empty/);
    expect(byPath["commands.2.match"]).toMatch(/first word is the command name/);
    expect(byPath["network.allow.0"]).toMatch(/IP addresses are not allowed/);
  });

  it("checks that need valid fields (duplicate rule ids) follow once those pass", () => {
    const problems = problemsOf({
      name: "dup",
      description: "two rules with one id",
      tools: { allow: ["run_shell"] },
      commands: [
        { id: "same", match: "ls", risk: "allow", reason: "x" },
        { id: "same", match: "cat", risk: "allow", reason: "x" },
      ],
    });
    expect(problems).toEqual([{ path: "commands.1.id", message: 'duplicate id "same" (also commands.0.id)' }]);
  });

  it("fills defaults: default-deny tools, everything readable and writable, confirm unknown commands, prompt", () => {
    const policy = validatePolicy({ name: "minimal", description: "only tools", tools: { allow: ["read_file"] } }, "minimal");
    expect(policy).toMatchObject({
      tools: { allow: ["read_file"], deny: [] },
      paths: { read: { allow: ["**"], deny: [] }, write: { allow: ["**"], deny: [] } },
      commands: [],
      default_command_risk: "confirm",
      network: { allow: [] },
      limits: {},
      remember: [],
      confirmations: "prompt",
    });
  });

  it("reports YAML syntax errors and missing files", async () => {
    await using directory = temporaryDirectory();
    const file = join(directory.path, "broken.yaml");
    writeFileSync(file, "name: [x\n");
    expect(() => loadPolicyFile(file)).toThrow(/YAML syntax/);
    expect(() => loadPolicyFile(join(directory.path, "missing.yaml"))).toThrow(/file not found/);
    expect(() => loadPolicy("no-such-policy")).toThrow(/no shipped policy named "no-such-policy" \(shipped: ci, explore, reviewer, worker\)/);
  });
});

describe("shipped policies", () => {
  it("ships explore, worker, reviewer and ci", () => {
    expect(shippedPolicyNames()).toEqual(["ci", "explore", "reviewer", "worker"]);
  });

  it.each(["explore", "worker", "reviewer", "ci"])("%s loads and compiles", async (name) => {
    const loaded = loadPolicy(name);
    expect(loaded).toMatchObject({ shipped: true, policy: { name } });
    const checker = await PermissionChecker.create(loaded.policy);
    expect(checker.check("read_file", { path: "README.md" }).decision).toBe("allow");
    expect(checker.check("write_file", { path: ".git/config" }).rule).toBe("hard.protected-path");
  });

  it("ci has worker's rules, but refuses what needs confirmation", () => {
    const worker = loadPolicy("worker").policy;
    const ci = loadPolicy("ci").policy;
    expect({ tools: ci.tools, paths: ci.paths, commands: ci.commands, default: ci.default_command_risk, network: ci.network }).toEqual({
      tools: worker.tools,
      paths: worker.paths,
      commands: worker.commands,
      default: worker.default_command_risk,
      network: worker.network,
    });
    expect(worker.confirmations).toBe("prompt");
    expect(ci.confirmations).toBe("deny");
  });

  it("explore and reviewer write nothing and refuse what they have no rule for, or ask", async () => {
    const explore = await PermissionChecker.create(loadPolicy("explore").policy);
    const reviewer = await PermissionChecker.create(loadPolicy("reviewer").policy);
    for (const checker of [explore, reviewer]) {
      expect(checker.check("write_file", { path: "a.txt", content: "" }).rule).toBe("tools.allow");
      expect(checker.check("run_shell", { command: "git status && git log --oneline -5 | cat" }).decision).toBe("allow");
      expect(checker.check("run_shell", { command: "grep -rn TODO src > todo.txt" })).toMatchObject({ decision: "deny", rule: "paths.write.allow" });
      expect(checker.check("run_shell", { command: "git -c core.pager='sh -c id' log" })).toMatchObject({
        decision: "deny",
        rule: "commands.git-config-override",
      });
      expect(checker.check("run_shell", { command: "git grep -c TODO -- src" })).toMatchObject({ decision: "allow", rule: "commands.git-read" });
    }
    expect(explore.check("run_shell", { command: "python3 -m pytest -q" })).toMatchObject({ decision: "deny", rule: "default_command_risk" });
    expect(explore.check("run_shell", { command: "find . -name '*.tmp' -delete" })).toMatchObject({ decision: "deny", rule: "commands.find-writes" });
    expect(reviewer.check("run_shell", { command: "python3 -m pytest -q" })).toMatchObject({ decision: "allow", rule: "commands.run-tests" });
    expect(reviewer.check("run_shell", { command: "npm test -- --run" })).toMatchObject({ decision: "allow", rule: "commands.run-tests" });
    expect(reviewer.check("run_shell", { command: "git commit -am fix" })).toMatchObject({ decision: "deny", rule: "commands.git-change" });
    expect(reviewer.check("run_shell", { command: "pip install -e ." })).toMatchObject({ decision: "confirm", rule: "default_command_risk" });
  });
});

describe("runner policy check", () => {
  it("explains a shipped policy: tools, paths, command rules with risks and reasons, defaults", () => {
    let output = "";
    expect(policyCheckCommand("worker", (text) => (output += text))).toBe(0);
    expect(output).toMatch(/^policy worker \(shipped, /);
    expect(output).toMatch(/allowed: read_file, list_dir, glob, grep, read_tool_result, load_skill, write_file, edit_file, run_shell/);
    expect(output).toMatch(/deny \*\*\/\.env\* — \.env files hold secrets/);
    expect(output).toMatch(/confirm git push {3}\[commands\.git-push\]\n {10}publishes commits/);
    expect(output).toMatch(/otherwise: allow \(default_command_risk\)/);
    expect(output).toMatch(/confirmations: prompt/);
    expect(output).toMatch(/valid\n$/);
  });

  it("exits 0 for a good file and 2 with every problem for a bad one (the real CLI)", async () => {
    await using directory = temporaryDirectory();
    const good = join(directory.path, "mine.yaml");
    writeFileSync(good, "name: mine\ndescription: reads only\ntools:\n  allow: [read_file]\n");
    const bad = join(directory.path, "bad.yaml");
    writeFileSync(bad, "name: bad\ntools:\n  allow: [read_file]\ncommands:\n  - { match: 'rm \"', risk: deny }\n");
    const cli = (file: string) =>
      spawnSync(process.execPath, ["--import", "tsx", join(process.cwd(), "src/cli/main.ts"), "policy", "check", file], { encoding: "utf8" });
    const ok = cli(good);
    expect(ok.status, ok.stderr).toBe(0);
    expect(ok.stdout).toMatch(/policy mine \(.*mine\.yaml\)[\s\S]*allowed: read_file/);
    const failed = cli(bad);
    expect(failed.status).toBe(2);
    expect(failed.stderr).toMatch(/bad\.yaml: 3 problems:/);
    expect(failed.stderr).toMatch(/- description: required/);
    expect(failed.stderr).toMatch(/- commands\.0\.match: unterminated " quote/);
    expect(failed.stderr).toMatch(/- commands\.0\.reason: required/);
  });
});
