/**
 * Host programs (hooks, trusted MCP servers) are argv, never shell text, and
 * may not run from, or name, a tree the agent's work can change (issue 20
 * item 1; docs/policies.md "Hooks", "Trust"). Real files, links and PATH lookups.
 */
import { mkdirSync, realpathSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { checkHostProgram, type HostProgram } from "../../src/process/host-program.js";
import { temporaryDirectory } from "../helpers/git-repository.js";

/** A task directory holding the repository `repo/` (as a task file next to its checkout), with scripts inside and outside it. */
function layout(root: string) {
  const directory = realpathSync(root);
  const repository = join(directory, "repo");
  mkdirSync(join(repository, "tools"), { recursive: true });
  mkdirSync(join(directory, "hooks"));
  for (const script of [join(repository, "tools", "pre-hook.sh"), join(directory, "hooks", "check.sh")]) writeFileSync(script, "#!/bin/sh\n", { mode: 0o755 });
  const place = { cwd: directory, searchPath: process.env.PATH, agentTrees: [repository] };
  const check = (command: string, args: string[] = [], extra: Partial<HostProgram> = {}, where = place) =>
    checkHostProgram({ field: "hooks.pre_tool_use.0", command, args, ...extra }, where);
  return { directory, repository, place, check };
}

describe("host programs", () => {
  it("refuses shell text in command: `cd repo && ./tools/pre-hook.sh` names no path with a slash, yet runs the repository's script", async () => {
    await using root = temporaryDirectory();
    const { check } = layout(root.path);
    const checked = check("cd repo && ./tools/pre-hook.sh");
    expect(checked.executable).toBeNull();
    expect(checked.problems).toEqual([
      {
        path: "hooks.pre_tool_use.0.command",
        message: expect.stringMatching(
          /^`cd repo && \.\/tools\/pre-hook\.sh` is shell text, and host programs run without a shell; set `command` to one executable/,
        ),
      },
    ]);
  });

  it("refuses a shell or interpreter given inline code, options first, or nothing (stdin carries the agent's call), and launchers", async () => {
    await using root = temporaryDirectory();
    const { check, directory } = layout(root.path);
    for (const [command, args] of [
      ["sh", ["-c", "cd repo && ./tools/pre-hook.sh"]],
      ["/bin/sh", ["-c", "true"]],
      ["bash", []],
      ["python3", ["-c", "import os; os.system('repo/tools/pre-hook.sh')"]],
      ["node", ["-e", "require('child_process').execSync('repo/tools/pre-hook.sh')"]],
      ["perl", ["-e", "exec 'repo/tools/pre-hook.sh'"]],
      ["python3", ["not-a-file.py"]],
    ] as const) {
      const checked = check(command, [...args]);
      expect(
        checked.problems.map((problem) => problem.path),
        `${command} ${args.join(" ")}`,
      ).toContain("hooks.pre_tool_use.0.args");
    }
    // Known by its real file too: a link named `check` to a shell is a shell.
    symlinkSync(realpathSync("/bin/sh"), join(directory, "hooks", "check"));
    expect(check("./hooks/check", ["-c", "id"]).problems).toEqual([
      { path: "hooks.pre_tool_use.0.args", message: expect.stringContaining("runs code from its arguments") },
    ]);
    for (const launcher of ["env", "xargs", "nice", "timeout"]) {
      expect(check(launcher, ["sh", "-c", "true"]).problems[0], launcher).toEqual({
        path: "hooks.pre_tool_use.0.command",
        message: expect.stringContaining("starts the program its arguments name"),
      });
    }
  });

  it("refuses a command, a script argument, a module or a variable that reaches the repository, directly, by PATH or through a link", async () => {
    await using root = temporaryDirectory();
    const { check, directory, repository, place } = layout(root.path);
    const refused = (checked: ReturnType<typeof check>) => checked.problems.map((problem) => problem.path);
    expect(refused(check("./repo/tools/pre-hook.sh"))).toEqual(["hooks.pre_tool_use.0.command"]);
    expect(refused(check(join(repository, "tools", "pre-hook.sh")))).toEqual(["hooks.pre_tool_use.0.command"]);
    expect(refused(check("sh", ["repo/tools/pre-hook.sh"]))).toEqual(["hooks.pre_tool_use.0.args.0"]);
    expect(refused(check("/bin/true", ["--config=repo/x"]))).toEqual(["hooks.pre_tool_use.0.args.0"]);
    // A bare word is a path too: `repo` is the repository.
    expect(refused(check("/bin/true", ["repo"]))).toEqual(["hooks.pre_tool_use.0.args.0"]);
    expect(refused(check("python3", ["-m", "repo.tools.hook"]))).toEqual(["hooks.pre_tool_use.0.args.1"]);
    expect(check("python3", ["-m", "json.tool"]).problems).toEqual([]);
    // Found on a PATH entry inside the repository (a relative one counts from the working directory).
    expect(refused(check("pre-hook.sh", [], {}, { ...place, searchPath: `repo/tools:${process.env.PATH}` }))).toEqual(["hooks.pre_tool_use.0.command"]);
    // A link outside whose chain passes through the repository: the agent can re-point the link inside.
    symlinkSync(join(directory, "hooks", "check.sh"), join(repository, "tools", "relay"));
    symlinkSync(join(repository, "tools", "relay"), join(directory, "hooks", "linked.sh"));
    expect(check("./hooks/linked.sh").problems).toEqual([
      { path: "hooks.pre_tool_use.0.command", message: expect.stringContaining(`resolves to ${join(repository, "tools", "relay")}, inside ${repository}`) },
    ]);
    // Variables (a trusted MCP server's env), each `:`-separated part.
    expect(refused(check("/bin/true", [], { environmentValues: [`/usr/lib:${join(repository, "tools")}`] }))).toEqual(["hooks.pre_tool_use.0.env"]);
    // Run from inside the repository: refused whatever it runs.
    expect(refused(check("/bin/true", [], {}, { ...place, cwd: repository }))).toEqual(["hooks.pre_tool_use.0"]);
  });

  it("accepts an executable outside the repository, by path or on PATH, and resolves it to its real file", async () => {
    await using root = temporaryDirectory();
    const { check, directory } = layout(root.path);
    expect(check("./hooks/check.sh", ["--strict", "https://example.com/x"])).toEqual({ executable: join(directory, "hooks", "check.sh"), problems: [] });
    expect(check("true").executable).toBe(realpathSync(check("true").executable!));
    expect(check("sh", ["hooks/check.sh", "-x"]).problems).toEqual([]);
    expect(check("no-such-program-here").problems).toEqual([
      { path: "hooks.pre_tool_use.0.command", message: "no-such-program-here is not an executable file on PATH" },
    ]);
  });
});
