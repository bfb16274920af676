/**
 * The main agent's reply shown as it streams (issue 12, item 4): the built
 * CLI on a real pseudo-terminal (util-linux `script`), the scripted model
 * streaming chat completion chunks through the real openai client, a real
 * sandbox. The scripted model stalls half-way through the reply (`stall_ms`),
 * so text seen on the terminal before the second half exists was shown while
 * the reply was still streaming. The pieces are live only: events.jsonl holds
 * the whole reply, never a piece of it.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { requireDocker } from "../helpers/docker.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { onlyRunDirectory, runCli, writeScriptedTask } from "../helpers/runner-cli.js";
import { startCliOnTerminal } from "../helpers/terminal-cli.js";

// 96 characters: the scripted chat wire sends 8 a piece, and stalls after half the events (the first 6 pieces).
const REPLY = "STREAM-START the fix is in calc.py, add now returns a plus b and the tests pass again STREAM-END";
/** Long against the test's polling (25 ms), short against the 60 s idle timeout. */
const STALL_MS = 4_000;

function streamingTask(directory: string) {
  return writeScriptedTask(directory, {
    task: { name: "streamed-text", model: { provider: "scripted", script: "./script.yaml", request_timeout_sec: 60, max_retries: 0 } },
    script: { turns: [{ content: REPLY, faults: [{ stall_ms: STALL_MS }] }] },
  });
}

describe("streamed model text on the terminal (real CLI, scripted model streaming, real Docker)", () => {
  it("shows the main agent's reply while it streams, dim on a line of its own, then the whole reply; events.jsonl has no pieces", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task } = streamingTask(directory.path);
    const terminal = startCliOnTerminal(["exec", task], { RUNNER_HOME: home.path });
    try {
      await terminal.waitForOutput(/STREAM-START/);
      // The second half is sent only after the stall: what is on the screen now was shown mid-reply.
      const midReply = terminal.output();
      expect(midReply).not.toContain("STREAM-END");
      expect(midReply).toMatch(/\r\x1b\[2K\x1b\[2m\[ *[\d.]+s\] step 1 model: STREAM-START the fix/);
      const result = await terminal.result;
      expect(result.code, result.stdout).toBe(0);
      // The status line is erased and the reply printed whole, not dim.
      expect(result.stdout).toMatch(/\r\x1b\[2K\x1b\[2m\[ *[\d.]+s\]\x1b\[22m \x1b\[36mstep 1\x1b\[39m model: STREAM-START .* STREAM-END/);
      const events = readFileSync(join(onlyRunDirectory(home.path)!, "events.jsonl"), "utf8")
        .split("\n")
        .filter(Boolean);
      const carrying = events.filter((line) => line.includes("STREAM-START"));
      expect(carrying.length).toBeGreaterThan(0);
      expect(carrying.every((line) => line.includes(REPLY))).toBe(true);
    } finally {
      terminal.kill();
      await terminal.result;
    }
  });

  it("without a terminal nothing of the stream is drawn", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task } = writeScriptedTask(directory.path, { script: { turns: [{ content: REPLY }] } });
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).not.toContain("\x1b[2K");
    expect(result.stderr.match(/STREAM-START/g)).toHaveLength(1);
  });
});
