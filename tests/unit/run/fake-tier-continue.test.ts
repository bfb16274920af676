/**
 * `runner continue` / `Runner.continue` (issue 26 item 9), without Docker: a
 * run that ended (failed, then succeeded) gets the user's feedback as its
 * next user message and goes on as a new attempt of the same run, on the
 * same branch, in a new sandbox, verified and delivered as usual.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { HostDirectoryExecHandler } from "../../../src/sandbox/fake/host-directory-sandbox.js";
import { listRuns } from "../../../src/runner/run-records.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { eventData, eventsFile, fakeRunner, toolCall, writeScriptedTask } from "../../helpers/fake-runner.js";

/** `check-median`: passes when the checkout's median.txt says 3. */
const verifyMedian: HostDirectoryExecHandler = async ({ request, sandbox }) => {
  if (request.command !== "check-median") return { exitCode: 127, stderr: `${request.command}: not found\n` };
  const value = (await sandbox.readFile("median.txt"))?.content.toString().trim();
  return value === "3" ? { stdout: "median ok\n" } : { exitCode: 1, stdout: `expected 3, got ${value}\n` };
};

/** Calls 0-1: the first attempt (a wrong fix); 2-3: after the first feedback; 4-5: after the second. */
const SCRIPT = {
  turns: [
    { tool_calls: [toolCall("write_file", { path: "median.txt", content: "4\n" })] },
    { content: "Set the median." },
    { tool_calls: [toolCall("write_file", { path: "median.txt", content: "3\n" })] },
    { content: "Now it is 3." },
    { tool_calls: [toolCall("write_file", { path: "NOTES.md", content: "median of 1..5\n" })] },
    { content: "Added a note." },
  ],
};

type JournalLine = { type: string; agent_id: string; message?: { role: string; content: string | null } };

describe("continue an ended run in the Docker-free tier", () => {
  it("a failed run, then a succeeded one, each goes on with the feedback: same branch, whole-run report, verified", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: verifyMedian });
    const { task, git } = writeScriptedTask(directory.path, {
      script: SCRIPT,
      files: { "median.txt": "2\n" },
      task: { name: "fix-median", max_steps: 2, verify: { command: "check-median", timeout_sec: 30 } },
    });
    const first = await fake.runner.start(task);
    const firstReport = await first.result;
    expect(firstReport).toMatchObject({ status: "failed", reason: "verify_failed", steps: 2 });

    const fixed = await fake.runner.continue(first.id, "The median of 1..5 is 3, not 4.");
    expect(fixed.id).toBe(first.id);
    expect(fixed.resumed).toEqual({ atModelCall: 3, earlierEvents: expect.any(Number) });
    const fixedReport = await fixed.result;
    expect(fixedReport).toMatchObject({
      run_id: first.id,
      status: "succeeded",
      reason: "verified",
      resumes: 1,
      branch: firstReport.branch,
      // The whole run: 2 model calls before the feedback, 2 after (max_steps 2 more for the attempt).
      steps: 4,
      tool_calls: 2,
      final_message: "Now it is 3.",
      verify: { passed: true },
    });
    expect(git("show", `${firstReport.branch}:median.txt`)).toBe("3\n");
    expect(git("show", "main:median.txt")).toBe("2\n");
    // patch.diff is the run's whole change against its base commit.
    expect(readFileSync(join(fixed.directory, "patch.diff"), "utf8")).toMatch(/-2\n\+3/);

    // A succeeded run goes on too (the "talk back to a finished run"), with --merge.
    const noted = await fake.runner.continue(first.id.slice(0, 18), "Add a note on what the median is.", { merge: true });
    const notedReport = await noted.result;
    expect(notedReport).toMatchObject({ status: "succeeded", reason: "verified", resumes: 2, steps: 6, final_message: "Added a note." });
    expect(notedReport.merge).toMatchObject({ merged: true });
    expect(git("show", "main:NOTES.md")).toBe("median of 1..5\n");
    expect(git("log", "--format=%s", `main~3..main`).trim().split("\n")).toEqual([
      `agent-runner: fix-median (run ${first.id})`,
      `agent-runner: fix-median (run ${first.id})`,
      `agent-runner: fix-median (run ${first.id})`,
    ]);

    // Each attempt started in a sandbox of its own, and was verified in another.
    expect(fake.provider.created.map((sandbox) => sandbox.spec.agentId)).toEqual(["main", "verify", "main", "verify", "main", "verify"]);
    const events = eventsFile(first.directory);
    expect(eventData(events, "run.resumed")).toEqual([
      expect.objectContaining({ resumes: 1, next_step: 2, follow_up: "The median of 1..5 is 3, not 4." }),
      expect.objectContaining({ resumes: 2, next_step: 4, follow_up: "Add a note on what the median is." }),
    ]);
    expect(eventData(events, "run.finished").map((data) => data.status)).toEqual(["failed", "succeeded", "succeeded"]);
    // The model saw each feedback as the user's turn right after its earlier final answer.
    const journal = readFileSync(join(first.directory, "session.jsonl"), "utf8")
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line) as JournalLine)
      .filter((line) => line.type === "message" && line.agent_id === "main")
      .map((line) => `${line.message!.role}: ${line.message!.content ?? "(calls)"}`);
    expect(journal.slice(2)).toEqual([
      "assistant: (calls)",
      "assistant: Set the median.",
      "user: The median of 1..5 is 3, not 4.",
      "assistant: (calls)",
      "assistant: Now it is 3.",
      "user: Add a note on what the median is.",
      "assistant: (calls)",
      "assistant: Added a note.",
    ]);
  });

  it("a run that changed nothing leaves no branch; continuing it makes the branch again at its base commit", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: verifyMedian });
    const { task, git } = writeScriptedTask(directory.path, {
      script: {
        turns: [
          { content: "The median is already right." },
          { tool_calls: [toolCall("write_file", { path: "median.txt", content: "3\n" })] },
          { content: "Set it to 3." },
        ],
      },
      files: { "median.txt": "2\n" },
      task: { name: "unchanged", verify: { command: "check-median", timeout_sec: 30 } },
    });
    const first = await fake.runner.start(task);
    const report = await first.result;
    expect(report).toMatchObject({ status: "failed", reason: "verify_failed", branch: null });
    expect(report.head_commit).toBe(report.base_commit);
    expect(git("branch", "--list", "runner/*").trim()).toBe("");
    expect(listRuns(fake.home)).toEqual([expect.objectContaining({ id: first.id, branch: "-" })]);

    // The dropped branch's name stays recorded: the next attempt makes it again under that name.
    const recorded = (JSON.parse(readFileSync(join(first.directory, "run.json"), "utf8")) as { branch: string }).branch;
    const again = await fake.runner.continue(first.id, "It is 2; the median of 1..5 is 3.");
    expect(await again.result).toMatchObject({ status: "succeeded", reason: "verified", branch: recorded, base_commit: report.base_commit });
    expect(git("show", `${recorded}:median.txt`)).toBe("3\n");
    expect(git("rev-parse", `${recorded}~1`).trim()).toBe(report.base_commit);
  });

  it("refuses what it cannot continue, naming the fix; resume of a finished run points at continue", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: verifyMedian });
    const { task } = writeScriptedTask(directory.path, {
      script: { turns: [{ content: "Nothing to do." }] },
      task: { name: "nothing", verify: { command: "check-median", timeout_sec: 30 } },
    });
    const run = await fake.runner.start(task);
    await run.result;
    await expect(fake.runner.continue(run.id, "  ")).rejects.toThrow(/^message: expected your feedback/);
    await expect(fake.runner.continue("19990101-000000-none", "more")).rejects.toThrow(/no run 19990101-000000-none in .*runner runs/);
    await expect(fake.runner.resume(run.id)).rejects.toThrow(`runner continue ${run.id} "your feedback"`);
    await expect(fake.runner.continue(run.id, "go on", { maxSteps: 0 })).rejects.toThrow(/^maxSteps: expected a positive whole number/);
  });
});
