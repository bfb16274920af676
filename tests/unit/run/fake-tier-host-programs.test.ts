/**
 * A hook never runs the agent's code on the host (issue 20 item 1): the
 * round-2 attack (`cd repo && ./tools/pre-hook.sh`, a script the agent can
 * rewrite and a merge brings into the checkout) is refused before anything
 * starts, and a hook or trusted MCP server under RUNNER_HOME's runs (the
 * agents' worktrees) is refused when the run starts.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { TaskValidationError } from "../../../src/config/load-task.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { eventData, eventsFile, fakeRunner, fakeShell, toolCall, writeScriptedTask } from "../../helpers/fake-runner.js";

/** A fresh directory under `root` for one more task. */
function subdirectory(root: string, name: string): string {
  const path = join(root, name);
  mkdirSync(path);
  return path;
}

const script = { turns: [{ tool_calls: [toolCall("read_file", { path: "README.md" })] }, { content: "Done." }] };

describe("host programs in a run", () => {
  it("a hook that runs the repository's script through shell text is refused (exit 2) and never runs", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell() });
    const marker = join(directory.path, "PWNED");
    const { task } = writeScriptedTask(directory.path, {
      files: { "README.md": "hello\n", "tools/pre-hook.sh": `#!/bin/sh\ntouch ${marker}\n` },
      script,
      task: { hooks: { pre_tool_use: [{ command: "cd repo && ./tools/pre-hook.sh" }] } },
    });
    chmodSync(join(directory.path, "repo", "tools", "pre-hook.sh"), 0o755);
    const started = fake.runner.start(task);
    await expect(started).rejects.toThrow(TaskValidationError);
    await expect(started).rejects.toMatchObject({
      exitCode: 2,
      message: expect.stringContaining("hooks.pre_tool_use.0.command: `cd repo && ./tools/pre-hook.sh` is shell text"),
    });
    expect(existsSync(marker)).toBe(false);
    // Nor through a shell given the same text as an argument.
    const viaShell = writeScriptedTask(subdirectory(directory.path, "second"), {
      script,
      task: { hooks: { pre_tool_use: [{ command: "sh", args: ["-c", "cd repo && ./tools/pre-hook.sh"] }] } },
    });
    await expect(fake.runner.start(viaShell.task)).rejects.toThrow(/hooks\.pre_tool_use\.0\.args: sh runs code from its arguments or stdin/);
    expect(existsSync(marker)).toBe(false);
  });

  it("a hook or trusted MCP server under RUNNER_HOME's runs is refused when the run starts; a hook outside runs as argv in the task's directory", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell() });
    const planted = join(fake.home, "runs", "planted");
    mkdirSync(planted, { recursive: true });
    const marker = join(directory.path, "PWNED");
    writeFileSync(join(planted, "hook.sh"), `#!/bin/sh\ntouch ${marker}\n`, { mode: 0o755 });
    const refused = writeScriptedTask(directory.path, {
      script,
      task: { hooks: { post_tool_use: [{ command: join(planted, "hook.sh") }] }, mcp_servers: { host: { command: join(planted, "hook.sh"), trusted: true } } },
    });
    const run = await fake.runner.start(refused.task);
    const report = await run.result;
    expect(report).toMatchObject({ status: "error", reason: "invalid_task" });
    expect(report.error).toContain(
      `hooks.post_tool_use.0.command: ${join(planted, "hook.sh")} resolves to ${join(planted, "hook.sh")}, inside ${join(fake.home, "runs")}`,
    );
    expect(existsSync(marker)).toBe(false);

    // A script outside both trees runs, with its arguments as written (no shell expands `$HOME`).
    const second = subdirectory(directory.path, "second");
    const seen = join(second, "seen.txt");
    mkdirSync(join(second, "hooks"));
    writeFileSync(join(second, "hooks", "note.sh"), `#!/bin/sh\nprintf '%s|' "$PWD" "$@" > ${seen}\n`, { mode: 0o755 });
    const fine = writeScriptedTask(second, { script, task: { hooks: { post_tool_use: [{ command: "./hooks/note.sh", args: ["$HOME", "two words"] }] } } });
    const handle = await fake.runner.start(fine.task);
    expect((await handle.result).status).toBe("succeeded");
    expect(eventData(eventsFile(handle.directory), "hook.finished")).toEqual([
      expect.objectContaining({ command: "./hooks/note.sh $HOME two words", outcome: "noted" }),
    ]);
    expect(readFileSync(seen, "utf8")).toBe(`${second}|$HOME|two words|`);
  });
});
