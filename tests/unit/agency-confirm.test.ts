/**
 * Human gates (issue 22 item 5) in the Docker-free tier: the agency's and the
 * agent's `confirm` tools ask the agency's ApprovalBroker (here a program),
 * one question at a time, recorded as agency.approval.requested / resolved;
 * without a broker the policy refuses them and says nobody could be asked,
 * and a chain that then fails is stopped as `needs_approval`.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { AgencyEvent } from "../../src/bus/event-bus.js";
import type { ApprovalAnswer } from "../../src/policy/approval.js";
import type { ApprovalRequest } from "../../src/runner/runner.js";
import { fakeAgencyRunner, writeAgency } from "../helpers/agency-fixture.js";
import { fakeShell } from "../helpers/fake-runner.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { toolCall } from "../helpers/runner-cli.js";

function agencyLog(directory: string): AgencyEvent[] {
  return readFileSync(join(directory, "bus.jsonl"), "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as AgencyEvent);
}

describe("confirm", () => {
  it("sends the agency's and the agent's confirm tools to the broker: a yes runs the call, a no refuses it; ungated tools are not asked", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeAgencyRunner({ exec: fakeShell() });
    const { agencyFile, git } = writeAgency(directory.path, {
      files: { "calc.txt": "wrong\n" },
      agents: {
        coder: {
          triggers: ["task.ready"],
          capabilities: ["read_file", "write_file", "run_shell"],
          emits: ["review.approved"],
          turns: [
            { tool_calls: [toolCall("read_file", { path: "calc.txt" })] },
            { tool_calls: [toolCall("run_shell", { command: "echo checked >> log.txt" })] },
            { tool_calls: [toolCall("write_file", { path: "calc.txt", content: "right\n" })] },
            {
              expect: { tool_result_matches: "^\\[denied\\] the user refused: not this file" },
              tool_calls: [toolCall("emit_event", { type: "review.approved" })],
            },
            { content: "done" },
          ],
          extra: { confirm: ["write_file"] },
        },
      },
      agency: { confirm: ["run_shell"] },
    });
    const asked: ApprovalRequest[] = [];
    const approvals = {
      async request(approval: ApprovalRequest): Promise<ApprovalAnswer> {
        asked.push(approval);
        return approval.toolName === "run_shell" ? { answer: "yes" } : { answer: "no", reason: "not this file" };
      },
    };
    const agency = await fake.runner.agency(agencyFile, { approvals });
    const report = await agency.result;

    expect(report).toMatchObject({ status: "succeeded", stop: null, stops: [] });
    expect(asked.map((approval) => [approval.toolName, approval.subject, approval.rule])).toEqual([
      ["run_shell", "echo checked >> log.txt", "tools.confirm[0]"],
      ["write_file", "calc.txt", "tools.confirm[1]"],
    ]);
    expect(asked[0]!.question).toMatch(/^agent coder \(coder-[0-9a-f]{12}\): policy agency-coder: run_shell "echo checked >> log.txt" needs confirmation\./);
    expect(asked[0]!.runId).toBe(report.invocations[0]!.run_id);
    expect(asked[0]!.agency).toEqual({ agencyId: agency.id, agent: "coder", invocationId: report.invocations[0]!.invocation_id });
    // The approved command ran and its change merged; the refused write did not happen.
    expect(git("show", `agency/${agency.id}:log.txt`)).toBe("checked\n");
    expect(git("show", `agency/${agency.id}:calc.txt`)).toBe("wrong\n");
    const approvalEvents = agencyLog(agency.directory).filter((event) => event.type.startsWith("agency.approval."));
    expect(approvalEvents.map((event) => [event.type, (event.data as { tool: string }).tool, (event.data as { answer?: string }).answer ?? null])).toEqual([
      ["agency.approval.requested", "run_shell", null],
      ["agency.approval.resolved", "run_shell", "yes"],
      ["agency.approval.requested", "write_file", null],
      ["agency.approval.resolved", "write_file", "no"],
    ]);
    expect(approvalEvents[3]!.data).toMatchObject({
      agent: "coder",
      run_id: report.invocations[0]!.run_id,
      reason: "not this file",
      by: "broker",
      asked: true,
    });
    expect(approvalEvents[0]!.data).toMatchObject({ rule: "tools.confirm[0]", subject: "echo checked >> log.txt" });
  });

  it("without a broker the policy refuses the call and says nobody could be asked; the failed chain stops as needs_approval", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeAgencyRunner({ exec: fakeShell() });
    const { agencyFile } = writeAgency(directory.path, {
      agents: {
        coder: {
          triggers: ["task.ready"],
          capabilities: ["read_file", "run_shell"],
          emits: ["review.approved"],
          turns: [
            { tool_calls: [toolCall("run_shell", { command: "echo checked >> log.txt" })] },
            { tool_calls: [toolCall("emit_event", { type: "review.approved" })] },
            { content: "done" },
          ],
          // One model call: refused, the invocation ends at its step limit without publishing.
          extra: { max_steps: 1 },
        },
      },
      agency: { confirm: ["run_shell"] },
    });
    const agency = await fake.runner.agency(agencyFile);
    const report = await agency.result;

    expect(report).toMatchObject({ status: "failed", reason: "max_steps", stop: { class: "needs_approval", reason: "max_steps" } });
    expect(report.stops).toEqual([expect.objectContaining({ class: "needs_approval", agent: "coder", reason: "max_steps" })]);
    expect(fake.provider.commands.filter((command) => command.request.command.startsWith("echo"))).toEqual([]);
    const resolved = agencyLog(agency.directory).filter((event) => event.type.startsWith("agency.approval."));
    expect(resolved.map((event) => event.type)).toEqual(["agency.approval.resolved"]);
    expect(resolved[0]!.data).toMatchObject({ agent: "coder", tool: "run_shell", answer: "no", by: "policy", asked: false });
    expect((resolved[0]!.data as { reason: string }).reason).toMatch(/every run_shell call needs a person's approval .* there is no terminal to ask/);
  });
});
