/**
 * A failure's reason says what failed, never an error class's name (issue
 * 13): report.json `reason`, the batch outcome of a refused start, and the
 * run summary built from them.
 */
import { describe, expect, it } from "vitest";
import { outcomeOfStartFailure } from "../../src/batch/outcomes.js";
import { SetupFailedError } from "../../src/delivery/setup-commands.js";
import { CancelledError, ConfigError, ModelError, SandboxError } from "../../src/errors.js";
import { McpServerStartError } from "../../src/mcp/index.js";
import { SandboxGoneError } from "../../src/sandbox/sandbox.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { fakeRunner, toolCall, writeScriptedTask } from "../helpers/fake-runner.js";

const CLASS_NAME = /^[A-Z]\w*(Error)?$/;

describe("failure reasons", () => {
  it("every runner error has a snake_case reason naming what failed, not its class", () => {
    const errors = [
      new ConfigError("x"),
      new SandboxError("x"),
      new SandboxError("x", { reason: "image_missing" }),
      new SandboxGoneError("x"),
      new ModelError("x", "rate_limited"),
      new CancelledError(),
      new McpServerStartError("x"),
      new SetupFailedError({ command: "make", exit_code: 2, timed_out: false, output_tail: "", duration_ms: 1 }),
    ];
    expect(errors.map((error) => error.reason)).toEqual([
      "invalid_task",
      "sandbox_failed",
      "image_missing",
      "sandbox_lost",
      "rate_limited",
      "interrupted",
      "mcp_server_failed",
      "setup_failed",
    ]);
    for (const error of errors) expect(error.reason).not.toMatch(CLASS_NAME);
  });

  it("a refused start's batch outcome takes the error's reason", () => {
    expect(outcomeOfStartFailure(new SandboxError("cannot reach the Docker daemon", { reason: "docker_unreachable" }))).toEqual({
      status: "error",
      reason: "docker_unreachable",
      error: "cannot reach the Docker daemon",
    });
    expect(outcomeOfStartFailure(new Error("boom")).reason).toBe("internal_error");
  });

  it("a run whose sandbox fails mid-run ends error/sandbox_failed with the message, not SandboxError", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({
      exec: async () => {
        throw new SandboxError("sandbox fake-1-main: no answer 15000 ms after a 60000 ms command timeout");
      },
    });
    const { task } = writeScriptedTask(directory.path, {
      script: { turns: [{ tool_calls: [toolCall("run_shell", { command: "make" })] }, { content: "Done." }] },
    });
    const run = await fake.runner.start(task);
    const report = await run.result;
    expect(report).toMatchObject({
      status: "error",
      reason: "sandbox_failed",
      error: "sandbox fake-1-main: no answer 15000 ms after a 60000 ms command timeout",
    });
  });
});
