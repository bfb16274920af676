/**
 * kill -9 of the agency's process mid-invocation, then a resume (issue 21,
 * "Done when"): no event lost, no invocation run twice. The model requests
 * are counted from each run's events: every scripted turn is asked for once.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import type { RunEnvelope } from "../../../src/events/event-catalogue.js";
import { eventTypes, fakeAgencyRunner, writeAgency } from "../../helpers/agency-fixture.js";
import { fakeShell } from "../../helpers/fake-runner.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { toolCall } from "../../helpers/runner-cli.js";

const CHILD = fileURLToPath(new URL("../../helpers/agency-child.ts", import.meta.url));

function agencyUntilKilled(home: string, agencyFile: string, dieAt: string): Promise<{ agencyId: string; signal: NodeJS.Signals | null; stderr: string }> {
  const child = spawn(process.execPath, ["--import", "tsx", CHILD, home, agencyFile, dieAt], { stdio: ["ignore", "pipe", "pipe"] });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve) => child.on("close", (_code, signal) => resolve({ agencyId: stdout.trim().replace(/^agency /, ""), signal, stderr })));
}

/** The steps of a run's model requests (`model_call.started`), over every attempt. */
function modelSteps(home: string, runId: string): number[] {
  return readFileSync(join(home, "runs", runId, "events.jsonl"), "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as RunEnvelope)
    .filter((envelope) => envelope.type.includes("model_call.started"))
    .map((envelope) => (envelope.data as { step: number }).step);
}

describe("an agency killed mid-invocation", () => {
  it("resumes: the running invocation's run is resumed, not restarted; every event handled once; the goal is reached", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeAgencyRunner({ exec: fakeShell() });
    const { agencyFile, git } = writeAgency(directory.path, {
      files: { "calc.txt": "wrong\n" },
      agents: {
        coder: {
          triggers: ["task.ready"],
          capabilities: ["read_file", "write_file", "run_shell"],
          emits: ["code.ready"],
          turns: [
            { tool_calls: [toolCall("write_file", { path: "calc.txt", content: "right\n" })] },
            { tool_calls: [toolCall("emit_event", { type: "code.ready", data: { n: 1 } }), toolCall("run_shell", { command: "die-here" })] },
            { expect: { tool_result_matches: "interrupted" }, content: "fixed, after a restart" },
          ],
        },
        reviewer: {
          triggers: ["code.ready"],
          emits: ["review.approved"],
          turns: [
            { tool_calls: [toolCall("read_file", { path: "calc.txt" })] },
            { expect: { tool_result_matches: "right" }, tool_calls: [toolCall("emit_event", { type: "review.approved" })] },
            { content: "approved" },
          ],
        },
      },
    });
    const killed = await agencyUntilKilled(fake.home, agencyFile, "die-here");
    expect(killed.signal, killed.stderr).toBe("SIGKILL");
    const started = readFileSync(join(fake.home, "agencies", killed.agencyId, "invocations.jsonl"), "utf8")
      .split("\n")
      .filter(Boolean);
    expect(started.map((line) => JSON.parse(line).kind)).toEqual(["started"]);

    const agency = await fake.runner.resumeAgency(killed.agencyId);
    const report = await agency.result;
    expect(report).toMatchObject({ agency_id: killed.agencyId, status: "succeeded", reason: "goal_reached" });
    const [coder, reviewer] = report.invocations;
    expect(report.invocations.map((invocation) => [invocation.agent, invocation.status])).toEqual([
      ["coder", "succeeded"],
      ["reviewer", "succeeded"],
    ]);
    // One run per invocation; the coder's run was resumed (steps 0, 1 before the kill, 2 after), no model call made twice.
    expect(coder!.run_id).toBe(JSON.parse(started[0]!).run_id);
    expect(modelSteps(fake.home, coder!.run_id)).toEqual([0, 1, 2]);
    expect(modelSteps(fake.home, reviewer!.run_id)).toEqual([0, 1, 2]);
    const lines = readFileSync(join(agency.directory, "invocations.jsonl"), "utf8")
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line));
    expect(lines.filter((line) => line.kind === "started")).toHaveLength(2);
    // No event lost, none twice: the start event, the coder's (queued before the kill), the goal.
    const types = eventTypes(fake.home, report).filter((type) => !type.startsWith("agency.agent.state"));
    expect(types).toEqual(["task.ready", "code.ready", "agency.invocation.finished", "review.approved", "agency.invocation.finished"]);
    expect(git("show", `agency/${killed.agencyId}:calc.txt`)).toBe("right\n");
  });
});
