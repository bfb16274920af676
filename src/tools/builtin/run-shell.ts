import { z } from "zod";
import { defineTool } from "../define-tool.js";

/** Longest timeout a single command may ask for, ms. */
export const MAX_SHELL_TIMEOUT_MS = 60 * 60 * 1000;
/**
 * Bytes kept per stream (head and tail halves). The agent loop cuts the
 * result to the model's budget and keeps the whole text in the run directory
 * for read_tool_result, so this only bounds memory and transfer.
 */
const MAX_STREAM_BYTES = 4 * 1024 * 1024;

export const runShellTool = defineTool({
  name: "run_shell",
  readOnly: false,
  description:
    "Run a bash command in the task's sandbox container, in /workspace. Returns the exit code, stdout and stderr " +
    "(long output keeps its head and tail). The command and every process it starts are killed at the timeout. " +
    "There is no network access.",
  input: z.strictObject({
    command: z.string().min(1).describe("Bash command line"),
    timeout_ms: z.number().int().min(1).max(MAX_SHELL_TIMEOUT_MS).optional().describe("Timeout in milliseconds"),
  }),
  async execute(input, { sandbox, signal, defaultTimeoutMs }) {
    const timeoutMs = input.timeout_ms ?? defaultTimeoutMs;
    const result = await sandbox.exec({ command: input.command, timeoutMs, maxOutputBytes: MAX_STREAM_BYTES, signal });
    const lines = [`exit_code: ${result.exitCode ?? "none"}${result.signal ? ` (killed by ${result.signal})` : ""}`];
    if (result.timedOut) lines.push(`timed_out: true (killed after ${timeoutMs} ms; output so far below)`);
    lines.push("stdout:", result.stdout === "" ? "(empty)" : result.stdout.replace(/\n$/, ""));
    lines.push("stderr:", result.stderr === "" ? "(empty)" : result.stderr.replace(/\n$/, ""));
    return {
      content: lines.join("\n"),
      details: {
        exit_code: result.exitCode,
        timed_out: result.timedOut,
        truncated: result.truncated,
        stdout_bytes: result.stdoutBytes,
        stderr_bytes: result.stderrBytes,
        duration_ms: result.durationMs,
      },
    };
  },
});
