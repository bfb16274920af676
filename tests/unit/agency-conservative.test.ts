/**
 * mode: conservative (issue 22 item 6) in the Docker-free tier: an agent whose
 * capabilities and policy would let it write is refused the write and the
 * shell, runs on a read-only mount, merges nothing; the report states the mode.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { fakeAgencyRunner, writeAgency } from "../helpers/agency-fixture.js";
import { fakeShell } from "../helpers/fake-runner.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { toolCall } from "../helpers/runner-cli.js";

describe("mode: conservative", () => {
  it("blocks a write and a shell command the agent's capabilities and permissions allow; nothing lands on the agency branch", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeAgencyRunner({ exec: fakeShell() });
    const { agencyFile, git } = writeAgency(directory.path, {
      files: { "calc.txt": "wrong\n" },
      agents: {
        coder: {
          triggers: ["task.ready"],
          capabilities: ["read_file", "write_file", "edit_file", "run_shell"],
          emits: ["review.approved"],
          turns: [
            { tool_calls: [toolCall("write_file", { path: "calc.txt", content: "right\n" }), toolCall("run_shell", { command: "echo right > calc.txt" })] },
            {
              // Not offered at all: the policy denies them, so the run never registers them.
              expect: { tool_result_matches: 'unknown tool "write_file"\\. Available tools: read_file, emit_event, read_context' },
              tool_calls: [toolCall("read_file", { path: "calc.txt" })],
            },
            { expect: { tool_result_matches: "wrong" }, tool_calls: [toolCall("emit_event", { type: "review.approved" })] },
            { content: "read only" },
          ],
        },
      },
      agency: { mode: "conservative" },
    });
    const agency = await fake.runner.agency(agencyFile);
    const report = await agency.result;
    expect(report).toMatchObject({ status: "succeeded", mode: "conservative" });
    expect(report.invocations).toEqual([expect.objectContaining({ agent: "coder", status: "succeeded", merged: null })]);
    const policy = parse(readFileSync(join(agency.directory, "policies", "coder.yaml"), "utf8")) as {
      name: string;
      tools: { allow: string[]; deny: string[] };
    };
    expect(policy.name).toBe("agency-coder-conservative");
    expect(policy.tools.allow).toEqual(["read_file", "read_context", "emit_event"]);
    expect(policy.tools.deny).toEqual(expect.arrayContaining(["write_file", "edit_file", "run_shell"]));
    expect(fake.provider.commands.filter((command) => command.request.command.includes("echo"))).toEqual([]);
    expect(git("show", `agency/${agency.id}:calc.txt`)).toBe("wrong\n");
    const instruction = JSON.parse(readFileSync(join(fake.home, "runs", report.invocations[0]!.run_id, "task.json"), "utf8")).instruction as string;
    expect(instruction).toContain("The agency runs in conservative mode: you only read.");
  });
});
