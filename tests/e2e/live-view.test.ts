/**
 * What a person sees at a terminal (issue 26 items 5 and 6): the built CLI
 * on a real pseudo-terminal (util-linux `script`), the scripted model, a real
 * sandbox. The screen shows setup progress, a live timer while a command
 * runs, each call's outcome on its line with a multi-line command's lines
 * under it, and an approval prompt on lines of its own, asked before the
 * call it is about starts (its line comes after the answer, with the exit).
 */
import { describe, expect, it } from "vitest";
import { requireDocker } from "../helpers/docker.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { toolCall, writeScriptedTask } from "../helpers/runner-cli.js";
import { startCliOnTerminal } from "../helpers/terminal-cli.js";

/** The terminal's text without colours (the view's only escapes besides the status line's erasing). */
function plain(text: string): string {
  return text.replace(/\u001b\[[0-9;]*m/g, "");
}

describe("the live view on a terminal (real CLI, scripted model, real Docker)", () => {
  it("setup progress, a timer while a command runs, outcomes on the calls' lines, and an approval prompt standing alone before its call starts", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task } = writeScriptedTask(directory.path, {
      task: { name: "live-view", policy: "worker", sandbox: { setup: ["echo setting-up"] } },
      script: {
        turns: [
          { tool_calls: [toolCall("run_shell", { command: "sleep 3\necho slept" })] },
          { expect: { tool_result_matches: "^exit_code: 0\\nstdout:\\nslept" }, tool_calls: [toolCall("run_shell", { command: "git push origin main" })] },
          { expect: { tool_result_matches: "^exit_code: 128" }, content: "Could not push." },
        ],
      },
    });
    const terminal = startCliOnTerminal(["exec", task], { RUNNER_HOME: home.path });
    try {
      await terminal.waitForOutput(/setup\[0\] echo setting-up → exit 0/);
      // The timer counts while `sleep 3` runs: a status line, redrawn in place.
      await terminal.waitForOutput(/run_shell sleep 3 … [1-9]s/);
      const question = /Allow\? \[y\]es \/ \[n\]o \[reason\] \/ \[a\]lways for this run: /;
      await terminal.waitForOutput(question);
      const atPrompt = plain(terminal.output());
      const asked = atPrompt.indexOf('policy worker: run_shell "git push origin main" needs confirmation.');
      expect(asked).toBeGreaterThan(0);
      // The prompt starts a line of its own: after a finished line, or where the status line was erased.
      expect(atPrompt.slice(0, asked)).toMatch(/(\n|\r\u001b\[2K)$/);
      // Asked first: no line of the call it is about yet, and nothing after the question but the prompt.
      expect(atPrompt).not.toMatch(/step 2 run_shell git push/);
      expect(atPrompt.slice(asked)).toMatch(
        /^policy worker: run_shell "git push origin main" needs confirmation\.\r?\n[^\n]*\r?\nAllow\? \[y\]es \/ \[n\]o \[reason\] \/ \[a\]lways for this run: $/,
      );
      terminal.type("y");
      const result = await terminal.result;
      const screen = plain(result.stdout);
      expect(result.code, screen).toBe(0);
      expect(screen).toMatch(/\] step 1 run_shell sleep 3 → exit 0 · slept \([\d.]+ s\)\r?\n +│ echo slept\r?\n/);
      expect(screen).toMatch(/\] {3}approval: yes\r?\n/);
      expect(screen).toMatch(/\] step 2 run_shell git push origin main → exit 128 · fatal: [^\n]*\([\d.]+ s\)\r?\n/);
      expect(screen.indexOf("step 2 run_shell git push origin main →")).toBeGreaterThan(screen.indexOf("Allow? "));
    } catch (error) {
      throw new Error(`${String(error)}\nterminal: ${JSON.stringify(terminal.output())}`);
    } finally {
      terminal.kill();
      await terminal.result;
    }
  });
});
