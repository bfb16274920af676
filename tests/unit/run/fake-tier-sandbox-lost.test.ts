/**
 * Issue 20 item 6: a sandbox lost to what ran in it, once more after its
 * restarts are spent, is the agent's failure (`failed` / `sandbox_lost`,
 * exit 1) in the main run too, as in verification, not an infrastructure
 * error (exit 3): Docker went on creating and removing sandboxes.
 */
import { describe, expect, it } from "vitest";
import { exitCodeOfReport } from "../../../src/run/run-report.js";
import { SandboxGoneError } from "../../../src/sandbox/sandbox.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { fakeRunner, toolCall, writeScriptedTask } from "../../helpers/fake-runner.js";

describe("a sandbox lost to the agent's own processes", () => {
  it("restarts three times, then ends the run failed / sandbox_lost (exit 1), its work committed", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({
      exec: async ({ request }) => {
        if (request.command === "fill-memory") throw new SandboxGoneError("the sandbox's control process died (killed)");
        return { exitCode: 127 };
      },
    });
    const fill = { tool_calls: [toolCall("run_shell", { command: "fill-memory" })] };
    const { task } = writeScriptedTask(directory.path, {
      script: { turns: [{ tool_calls: [toolCall("write_file", { path: "work.txt", content: "partial\n" })] }, fill, fill, fill, fill, { content: "Done." }] },
    });
    const run = await fake.runner.start(task);
    const report = await run.result;
    expect(report.status).toBe("failed");
    expect(report.reason).toBe("sandbox_lost");
    expect(report.error).toMatch(/lost 4 times to what ran in it/);
    expect(exitCodeOfReport(report)).toBe(1);
    expect(report.head_commit).not.toBeNull();
  });
});
