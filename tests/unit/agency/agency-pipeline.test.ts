/**
 * The orchestrator in the Docker-free tier (issue 21): agents as durable
 * consumers of the file bus, each invocation a run of the Runner over the
 * host-directory sandbox, work merged into agency/<id>.
 */
import { describe, expect, it } from "vitest";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { fakeShell } from "../../helpers/fake-runner.js";
import { toolCall } from "../../helpers/runner-cli.js";
import { exitCodeOfAgency } from "../../../src/agency/agency-directory.js";
import { eventTypes, fakeAgencyRunner, writeAgency } from "../../helpers/agency-fixture.js";

describe("an agency of two agents", () => {
  it("routes the start event to the coder, its event to the reviewer, merges the coder's change into agency/<id> and ends at the goal", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeAgencyRunner({ exec: fakeShell() });
    const { agencyFile, git } = writeAgency(directory.path, {
      files: { "calc.txt": "wrong\n" },
      agents: {
        coder: {
          triggers: ["task.ready"],
          capabilities: ["read_file", "write_file"],
          emits: ["code.ready"],
          turns: [
            { tool_calls: [toolCall("write_file", { path: "calc.txt", content: "right\n" })] },
            { tool_calls: [toolCall("emit_event", { type: "code.ready", subject: "t1", data: { files: ["calc.txt"] } })] },
            { content: "fixed" },
          ],
        },
        reviewer: {
          triggers: ["code.*"],
          capabilities: ["read_file"],
          emits: ["review.approved"],
          turns: [
            { tool_calls: [toolCall("read_file", { path: "calc.txt" })] },
            { expect: { tool_result_matches: "right" }, tool_calls: [toolCall("emit_event", { type: "review.approved", data: {} })] },
            { content: "approved" },
          ],
        },
      },
    });
    const agency = await fake.runner.agency(agencyFile);
    const report = await agency.result;
    expect(report).toMatchObject({ agency_id: agency.id, status: "succeeded", reason: "goal_reached", branch: `agency/${agency.id}` });
    expect(report.invocations.map((invocation) => [invocation.agent, invocation.status, invocation.merged])).toEqual([
      ["coder", "succeeded", true],
      ["reviewer", "succeeded", null],
    ]);
    expect(git("show", `agency/${agency.id}:calc.txt`)).toBe("right\n");
    expect(git("show", "main:calc.txt")).toBe("wrong\n");
    const types = eventTypes(fake.home, report);
    expect(types.filter((type) => !type.startsWith("agency.agent.state"))).toEqual([
      "task.ready",
      "code.ready",
      "agency.invocation.finished",
      "review.approved",
      "agency.invocation.finished",
    ]);
    const saved = JSON.parse(readFileSync(join(agency.directory, "agency-report.json"), "utf8"));
    expect(saved).toEqual(report);
    // Linked both ways: the run knows its agency.
    const link = JSON.parse(readFileSync(join(fake.home, "runs", report.invocations[0]!.run_id, "agency.json"), "utf8"));
    expect(link).toMatchObject({ agency_id: agency.id, agent: "coder" });
  });
});

describe("an agency cancelled mid-invocation", () => {
  it("ends cancelled (exit 130) with the invocation unfinished; a resume resumes its run and reaches the goal", async () => {
    await using directory = temporaryDirectory();
    let arrived: () => void = () => undefined;
    const waiting = new Promise<void>((resolve) => (arrived = resolve));
    const shell = fakeShell();
    await using fake = await fakeAgencyRunner({
      exec: async (call) => {
        if (call.request.command !== "hold") return shell(call);
        arrived();
        return new Promise((_resolve, reject) => call.signal.addEventListener("abort", () => reject(call.signal.reason), { once: true }));
      },
    });
    const { agencyFile } = writeAgency(directory.path, {
      agents: {
        coder: {
          triggers: ["task.ready"],
          capabilities: ["read_file", "run_shell"],
          emits: ["review.approved"],
          turns: [
            { tool_calls: [toolCall("run_shell", { command: "hold" })] },
            { tool_calls: [toolCall("emit_event", { type: "review.approved" })] },
            { content: "done" },
          ],
        },
      },
    });
    const agency = await fake.runner.agency(agencyFile);
    await waiting;
    await agency.cancel();
    const cancelled = await agency.result;
    expect(cancelled).toMatchObject({ status: "cancelled", reason: "cancelled" });
    expect(exitCodeOfAgency(cancelled.status)).toBe(130);
    expect(cancelled.invocations).toEqual([expect.objectContaining({ agent: "coder", status: "running" })]);

    const resumed = await fake.runner.resumeAgency(agency.id);
    const report = await resumed.result;
    expect(report).toMatchObject({ status: "succeeded", reason: "goal_reached" });
    expect(report.invocations).toEqual([expect.objectContaining({ agent: "coder", status: "succeeded", run_id: cancelled.invocations[0]!.run_id })]);
  });
});
