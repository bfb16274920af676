import { z } from "zod";
import { defineTool, toolError } from "../define-tool.js";

/** Longest timeout a single command may ask for, ms. */
const MAX_SHELL_TIMEOUT_MS = 60 * 60 * 1000;
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
    "Run a bash command in the task's sandbox container, in the workspace root. Returns the exit code, stdout and stderr " +
    "(long output keeps its head and tail). The command and every process it starts are killed at the timeout. " +
    "There is no network access.",
  input: z.strictObject({
    command: z.string().min(1).describe("Bash command line"),
    timeout_ms: z.number().int().min(1).max(MAX_SHELL_TIMEOUT_MS).optional().describe("Timeout in milliseconds"),
    background: z
      .boolean()
      .optional()
      .describe("Run as a background task: returns a task id at once; the result arrives as a message when it ends (task_output, task_stop)"),
  }),
  async execute(input, { sandbox, signal, defaultTimeoutMs, startBackground }) {
    const timeoutMs = input.timeout_ms ?? defaultTimeoutMs;
    const run = async (runSignal: AbortSignal) => {
      const result = await sandbox.exec({ command: input.command, timeoutMs, maxOutputBytes: MAX_STREAM_BYTES, signal: runSignal });
      const lines = [`exit_code: ${result.exitCode ?? "none"}${result.signal ? ` (killed by ${result.signal})` : ""}`];
      if (result.timedOut) lines.push(`timed_out: true (killed after ${timeoutMs} ms; output so far below)`);
      lines.push("stdout:", result.stdout === "" ? "(empty)" : result.stdout.replace(/\n$/, ""));
      lines.push("stderr:", result.stderr === "" ? "(empty)" : result.stderr.replace(/\n$/, ""));
      return { result, content: lines.join("\n") };
    };
    if (input.background) {
      if (!startBackground) return toolError("background commands are not available to this agent; run it without background");
      const id = startBackground(input.command, async (taskSignal) => {
        const { result, content } = await run(taskSignal);
        return { status: result.exitCode === 0 ? "completed" : "failed", output: content };
      });
      return {
        content: `started background task ${id}; its result arrives as a message when it ends (task_get, task_output, task_stop)`,
        details: { task_id: id },
      };
    }
    const { result, content } = await run(signal);
    return {
      content,
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
