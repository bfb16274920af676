// What `runner exec` says when verification times out and a worker is not
// merged (issue 13): no `exit null`, and the whole reason a worker was not
// merged (no 160-character cut) in the terminal line and the summary.
import { describe, expect, it } from "vitest";
import { requireDocker } from "../helpers/docker.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { onlyRunDirectory, readJson, runCli, toolCall, writeScriptedTask } from "../helpers/runner-cli.js";

describe("runner exec summary: a verify timeout and a worker not merged", () => {
  it("says `timed out after 2 s` for the run's and the worker's verification, and the worker's whole not-merged reason", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    // A shell comment makes the worker's verify command (and so its reason) longer than the old 160-character cut.
    const workerVerify = `sleep 30 # ${"waits-for-a-service-that-never-comes-".repeat(5)}end`;
    const { task } = writeScriptedTask(directory.path, {
      task: { name: "verify-timeouts", verify: { command: "sleep 30", timeout_sec: 2 } },
      script: {
        turns: [
          { tool_calls: [toolCall("agent", { mode: "worker", description: "add notes", prompt: "Write notes.txt.", verify: workerVerify })] },
          {
            expect: { tool_result_matches: "^Worker w1's work was NOT merged: verification `sleep 30 # .*end` failed \\(timed out after 2 s\\)\\." },
            content: "w1 timed out.",
          },
        ],
        subagents: {
          "add notes": { turns: [{ tool_calls: [toolCall("write_file", { path: "notes.txt", content: "notes\n" })] }, { content: "Wrote notes." }] },
        },
      },
    });
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path });
    expect(result.code, result.stdout + result.stderr).toBe(1);
    const reason = `verification \`${workerVerify}\` failed (timed out after 2 s)`;
    expect(reason.length).toBeGreaterThan(160);
    expect(result.stdout).toContain("status: failed (verify_timed_out)");
    expect(result.stdout).toContain("verify: sleep 30 → timed out after 2 s");
    expect(result.stdout).toContain(`subagents: w1 not_merged\n  w1 not merged: ${reason}\n`);
    expect(result.stdout + result.stderr).not.toContain("exit null");
    expect(result.stderr).toContain(`w1 not_merged after 2 steps: ${reason}\n`);
    expect(result.stderr).toMatch(/\[w1\] verify failed: timed out\n/);
    const report = readJson<{ agents: { id: string; not_merged_reason: string | null }[] }>(`${onlyRunDirectory(home.path)!}/report.json`);
    expect(report.agents).toEqual([expect.objectContaining({ id: "w1", not_merged_reason: reason })]);
  });
});
