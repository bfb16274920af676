/**
 * `runner show` reads like `runner exec` ended (issue 26 item 8): the
 * summary first, then the transcript, then the diff; `--json` keeps the raw
 * record. A run of the Docker-free tier, read back by the built CLI.
 */
import { describe, expect, it } from "vitest";
import { runCli } from "../../helpers/runner-cli.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { fakeRunner, fakeShell, toolCall, writeScriptedTask } from "../../helpers/fake-runner.js";

describe("runner show", () => {
  it("leads with the summary runner exec prints, then the transcript, then the diff; --json is the raw record", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell() });
    const { task } = writeScriptedTask(directory.path, {
      task: { name: "show-me", verify: { command: "grep -q fixed notes.txt", timeout_sec: 60 } },
      script: {
        turns: [{ tool_calls: [toolCall("write_file", { path: "notes.txt", content: "fixed\n" })] }, { content: "I wrote notes.txt; the check passes." }],
      },
    });
    const run = await fake.runner.start(task);
    const report = await run.result;
    expect(report.status).toBe("succeeded");

    const shown = await runCli(["show", run.id.slice(0, 18)], { RUNNER_HOME: fake.home });
    expect(shown.code, shown.stderr).toBe(0);
    const text = shown.stdout;
    expect(text.split("\n").slice(0, 4)).toEqual([
      `run ${run.id}  (${run.directory})`,
      "status: succeeded (verified)",
      "verify: grep -q fixed notes.txt → exit 0",
      "answer:",
    ]);
    expect(text).toContain(`branch: ${report.branch}\n`);
    expect(text).toMatch(/^steps: 2, tool calls: 1, tokens: /m);
    // No raw JSON at the top: the record is behind --json.
    expect(text).not.toContain('"run_id"');
    const transcript = text.indexOf("== transcript (main)");
    const diff = text.indexOf(`== diff (${run.directory}/patch.diff)`);
    expect(transcript).toBeGreaterThan(text.indexOf("run directory: "));
    expect(diff).toBeGreaterThan(transcript);
    expect(text.slice(transcript, diff)).toContain("  → write_file ");
    expect(text.slice(diff)).toMatch(/\+\+\+ b\/notes\.txt\n@@ -0,0 \+1 @@\n\+fixed\n$/);

    const json = await runCli(["show", run.id, "--json"], { RUNNER_HOME: fake.home });
    expect(json.code, json.stderr).toBe(0);
    const record = JSON.parse(json.stdout) as { run_id: string; report: { status: string; branch: string } };
    expect(record.run_id).toBe(run.id);
    expect(record.report).toMatchObject({ status: "succeeded", branch: report.branch });
  });
});
