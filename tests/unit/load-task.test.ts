import { writeFileSync, mkdirSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadTaskFile, TaskValidationError } from "../../src/config/load-task.js";
import { temporaryDirectory } from "../helpers/git-repository.js";

function writeTask(directory: string, yaml: string): string {
  const file = join(directory, "task.yaml");
  writeFileSync(file, yaml);
  return file;
}

function problemsOf(file: string): { path: string; message: string }[] {
  try {
    loadTaskFile(file);
  } catch (error) {
    expect(error).toBeInstanceOf(TaskValidationError);
    expect((error as TaskValidationError).exitCode).toBe(2);
    return (error as TaskValidationError).problems;
  }
  throw new Error("expected the task to be rejected");
}

describe("loadTaskFile", () => {
  it("fills defaults and resolves paths relative to the task file", async () => {
    await using directory = temporaryDirectory();
    mkdirSync(join(directory.path, "repo"));
    writeFileSync(join(directory.path, "script.yaml"), "turns: []\n");
    const task = loadTaskFile(
      writeTask(directory.path, "name: fix-add\ninstruction: do it\nworkspace: ./repo\nmodel: { provider: scripted, script: ./script.yaml }\n"),
    );
    expect(task.workspacePath).toBe(join(directory.path, "repo"));
    expect(task.scriptPath).toBe(join(directory.path, "script.yaml"));
    expect(task.max_steps).toBe(50);
    expect(task.sandbox).toMatchObject({
      image: "agent-runner/sandbox:bookworm",
      network: { allow: [] },
      limits: { cpus: 1, memory: 1024 ** 3, pids: 256, disk: 10 * 1024 ** 3 },
    });
  });

  it("reads sandbox.limits.disk in the size syntax of the other limits and refuses one too small for a checkout", async () => {
    await using directory = temporaryDirectory();
    const task = loadTaskFile(writeTask(directory.path, "name: t\ninstruction: x\nsandbox: { limits: { disk: 1.5g } }\n"));
    expect(task.sandbox.limits.disk).toBe(1.5 * 1024 ** 3);
    const problems = problemsOf(writeTask(directory.path, "name: t\ninstruction: x\nsandbox: { limits: { disk: 10m } }\n"));
    expect(problems).toEqual([{ path: "sandbox.limits.disk", message: 'expected a size of at least 64m such as "512m" or "2g", got "10m"' }]);
  });

  it("lists every problem with its field path, not just the first", async () => {
    await using directory = temporaryDirectory();
    const problems = problemsOf(
      writeTask(
        directory.path,
        [
          "name: Fix_Add",
          "workspace: 42",
          "model: { provider: claude }",
          "sandbox:",
          "  limits: { memory: lots, pids: 2 }",
          "  netwrk: {}",
          "verify: { timeout_sec: 10 }",
          "max_steps: -1",
        ].join("\n"),
      ),
    );
    const paths = problems.map((problem) => problem.path);
    expect(paths).toEqual(
      expect.arrayContaining([
        "name",
        "instruction",
        "workspace",
        "model.provider",
        "sandbox.limits.memory",
        "sandbox.limits.pids",
        "sandbox",
        "verify.command",
        "max_steps",
      ]),
    );
    expect(problems.find((problem) => problem.path === "instruction")?.message).toMatch(/required/);
    expect(problems.find((problem) => problem.path === "sandbox")?.message).toMatch(/unknown field netwrk/);
    expect(problems.find((problem) => problem.path === "sandbox.limits.memory")?.message).toMatch(/512m/);
    expect(problems.find((problem) => problem.path === "name")?.message).toMatch(/lowercase/);
  });

  it("reports cross-field problems together: missing workspace and script, bad allow-list entries", async () => {
    await using directory = temporaryDirectory();
    const problems = problemsOf(
      writeTask(
        directory.path,
        "name: t\ninstruction: x\nworkspace: ./nope\nmodel: { provider: scripted }\nsandbox: { network: { allow: [packages.example.com] } }\n",
      ),
    );
    expect(problems.map((problem) => problem.path).sort()).toEqual(["model.script", "workspace"]);
    const network = problemsOf(
      writeTask(
        directory.path,
        'name: t\ninstruction: x\nsandbox: { network: { allow: [ok.example.com, "10.0.0.1", "*.com.", "bad_name.org", "x.org:99999", "*.example.org:8443"], allow_cidrs: ["10.0.0.0/33"] } }\n',
      ),
    );
    expect(network.map((problem) => `${problem.path}: ${problem.message}`)).toEqual([
      'sandbox.network.allow.1: "10.0.0.1": IP addresses are not allowed; name the host (and use allow_cidrs for private test ranges)',
      'sandbox.network.allow.2: "*.com.": a wildcard needs a domain with a dot, like "*.example.org"',
      'sandbox.network.allow.3: "bad_name.org": expected a host name like "api.example.com", "*.example.org" or "git.example.net:8443"',
      'sandbox.network.allow.4: "x.org:99999": port must be 1-65535',
      'sandbox.network.allow_cidrs.0: expected a CIDR range like "172.28.0.0/16"',
    ]);
  });

  it("refuses hooks and trusted MCP servers whose working directory, program or arguments lie inside the repository, and shell text", async () => {
    await using directory = temporaryDirectory();
    const repository = join(directory.path, "repo");
    mkdirSync(join(repository, "tools"), { recursive: true });
    mkdirSync(join(repository, ".git"));
    writeFileSync(join(repository, "tools", "check.sh"), "#!/bin/sh\n", { mode: 0o755 });
    writeFileSync(join(directory.path, "script.yaml"), "turns: []\n");
    writeFileSync(join(directory.path, "outside.sh"), "#!/bin/sh\n", { mode: 0o755 });
    const base = "name: t\ninstruction: do it\nmodel: { provider: scripted, script: SCRIPT }\n";
    // A task file inside the repository: the hook would run there.
    const inside = writeTask(repository, `${base.replace("SCRIPT", "../script.yaml")}workspace: .\nhooks: { pre_tool_use: [{ command: "true" }] }\n`);
    expect(problemsOf(inside)).toEqual([{ path: "hooks.pre_tool_use.0", message: expect.stringContaining("which the agent's work can change") }]);
    // A task file outside it whose hooks reach a script inside it: shell text, an argument, an absolute path, a symlink;
    // a trusted server by its argument. `./outside.sh` and an in-sandbox server are fine.
    symlinkSync(join(repository, "tools"), join(directory.path, "linked-tools"));
    const named = writeTask(
      directory.path,
      `${base.replace("SCRIPT", "./script.yaml")}workspace: ./repo\nhooks:\n  pre_tool_use: [{ command: "cd repo && ./tools/check.sh" }, { command: sh, args: [./repo/tools/check.sh] }, { command: "./outside.sh" }]\n  post_tool_use: [{ command: "${join(repository, "tools/check.sh")}", args: [--x] }, { command: "linked-tools/check.sh" }]\nmcp_servers:\n  host: { command: node, args: [repo/tools/server.js], trusted: true }\n  boxed: { command: node, args: [repo/tools/server.js] }\n`,
    );
    expect(problemsOf(named).map((problem) => problem.path)).toEqual([
      "hooks.pre_tool_use.0.command",
      "hooks.pre_tool_use.1.args.0",
      "hooks.post_tool_use.0.command",
      "hooks.post_tool_use.1.command",
      "mcp_servers.host.args",
      "mcp_servers.host.args.0",
    ]);
    // The repository is the whole git tree, not only the workspace below it.
    const subdirectory = writeTask(
      directory.path,
      `${base.replace("SCRIPT", "./script.yaml")}workspace: ./repo/tools\nhooks: { pre_tool_use: [{ command: "./repo/tools/check.sh" }] }\n`,
    );
    expect(problemsOf(subdirectory).map((problem) => problem.path)).toEqual(["hooks.pre_tool_use.0.command"]);
    // Outside the repository: accepted.
    const fine = writeTask(
      directory.path,
      `${base.replace("SCRIPT", "./script.yaml")}workspace: ./repo\nhooks: { pre_tool_use: [{ command: "./outside.sh", args: ["two words"] }] }\n`,
    );
    expect(loadTaskFile(fine).hooks.pre_tool_use).toEqual([expect.objectContaining({ command: "./outside.sh", args: ["two words"] })]);
  });

  it("reads verify.protect and the host commit's limits, with defaults, and names a bad entry's field", async () => {
    await using directory = temporaryDirectory();
    mkdirSync(join(directory.path, "repo"));
    const base = "name: fix-add\ninstruction: do it\nworkspace: ./repo\n";
    const task = loadTaskFile(
      writeTask(directory.path, `${base}verify: { command: pytest, protect: ["tests/**", "**/conftest.py"] }\ncommit: { max_file_size: 10m }\n`),
    );
    expect(task.verify).toEqual({ command: "pytest", timeout_sec: 600, protect: ["tests/**", "**/conftest.py"], python_safe_path: true });
    expect(task.commit).toEqual({ max_file_size: 10 * 1024 ** 2, max_total_size: 1024 ** 3, timeout_sec: 300 });
    expect(loadTaskFile(writeTask(directory.path, `${base}verify: { command: pytest }\n`)).verify?.protect).toEqual([]);
    const problems = problemsOf(
      writeTask(
        directory.path,
        `${base}verify: { command: pytest, protect: ["/etc/**", "../up", ":(top)x"] }\ncommit: { max_total_size: "0", timeout_sec: 0 }\n`,
      ),
    );
    expect(problems.map((problem) => problem.path).sort()).toEqual([
      "commit.max_total_size",
      "commit.timeout_sec",
      "verify.protect.0",
      "verify.protect.1",
      "verify.protect.2",
    ]);
    expect(problems.find((problem) => problem.path === "verify.protect.0")?.message).toMatch(/relative to the repository's top level/);
    expect(problems.find((problem) => problem.path === "commit.max_total_size")?.message).toMatch(/"100m"/);
  });

  it("rejects YAML syntax errors and non-mapping documents", async () => {
    await using directory = temporaryDirectory();
    expect(problemsOf(writeTask(directory.path, "name: [unclosed\n"))[0]?.message).toMatch(/YAML syntax/);
    expect(problemsOf(writeTask(directory.path, "- a list\n"))[0]?.message).toMatch(/expected a mapping/);
    expect(problemsOf(join(directory.path, "missing.yaml"))[0]?.message).toBe("file not found");
  });
});
