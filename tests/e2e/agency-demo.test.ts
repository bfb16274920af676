// examples/agency/fix-pipeline end to end on real Docker (issue 21, "Done when"): the real CLI
// `runner agency run`, four agents on scripted models, a review → fix round; the agency branch
// holds the verified change, every coder invocation verified and merged, the records complete.
import { execFileSync } from "node:child_process";
import { appendFileSync, cpSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import type { AgencyReport } from "../../src/agency/agency-directory.js";
import type { RunReport } from "../../src/run/run-report.js";
import { requireDocker, SANDBOX_IMAGE } from "../helpers/docker.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { runCli } from "../helpers/runner-cli.js";

const EXAMPLE = fileURLToPath(new URL("../../examples/agency/fix-pipeline", import.meta.url));

describe("examples/agency/fix-pipeline", () => {
  it("runs from a clean copy to the goal; agency/<id> holds the verified fix and the reviewer's requested change", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    cpSync(EXAMPLE, directory.path, { recursive: true });
    // The test project's image (the example names none: the default image).
    for (const file of readdirSync(join(directory.path, "agents")))
      appendFileSync(join(directory.path, "agents", file), `  sandbox: { image: ${SANDBOX_IMAGE} }\n`);
    const repo = join(directory.path, "repo");
    const git = (...args: string[]) => execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@localhost", ...args], { cwd: repo, encoding: "utf8" });
    git("init", "-q", "-b", "main");
    git("add", "-A");
    git("commit", "-qm", "initial");

    const result = await runCli(["agency", "run", join(directory.path, "agency.yaml")], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr + result.stdout).toBe(0);
    const id = /^agency (\S+)\n/.exec(result.stdout)?.[1];
    expect(id).toBeDefined();
    expect(result.stdout).toContain(`succeeded (goal_reached): work on agency/${id}`);
    // The reviewer's structured output, in the timeline and under its invocations.
    expect(result.stdout.match(/output \{"verdict":"changes_requested","comment":"give add\(\) a docstring"\}/g)).toHaveLength(2);

    const calc = git("show", `agency/${id}:calc.py`);
    expect(calc).toContain("return a + b");
    expect(calc).toContain('"""Return the sum of a and b."""');
    expect(git("show", "main:calc.py")).toContain("return a - b");
    expect(git("show", `agency/${id}:tests/test_calc.py`)).toBe(git("show", "main:tests/test_calc.py"));

    const report = JSON.parse(readFileSync(join(home.path, "agencies", id!, "agency-report.json"), "utf8")) as AgencyReport;
    expect(report).toMatchObject({ agency_id: id, status: "succeeded", reason: "goal_reached", branch: `agency/${id}` });
    expect(report.invocations.map((invocation) => [invocation.agent, invocation.status])).toEqual([
      ["analyst", "succeeded"],
      ["coder", "succeeded"],
      ["tester", "succeeded"],
      ["reviewer", "succeeded"],
      ["coder", "succeeded"],
      ["tester", "succeeded"],
      ["reviewer", "succeeded"],
    ]);
    // The coder's changes were verified (pytest in a fresh sandbox) and merged; the read-only agents merged nothing.
    for (const invocation of report.invocations) {
      const run = JSON.parse(readFileSync(join(home.path, "runs", invocation.run_id, "report.json"), "utf8")) as RunReport;
      if (invocation.agent === "coder") {
        expect(run.verify).toMatchObject({ command: "python3 -m pytest -q", passed: true });
        expect(invocation.merged).toBe(true);
      } else {
        expect(invocation.merged).toBeNull();
      }
    }
    expect(git("show", `agency/${id}`, "--format=%H", "--no-patch").trim()).toBe(report.head_commit);
    // The reviewer's verdicts are its structured output (output_schema), recorded per invocation.
    expect(report.invocations.filter((invocation) => invocation.agent === "reviewer").map((invocation) => invocation.output)).toEqual([
      { verdict: "changes_requested", comment: "give add() a docstring" },
      { verdict: "approve", comment: "fixed and documented" },
    ]);

    // show and events read the records.
    const shown = await runCli(["agency", "show", id!, "--json"], { RUNNER_HOME: home.path });
    // The report, and the trace tree beside it (issue 22 item 8).
    expect(JSON.parse(shown.stdout)).toMatchObject({ ...report, trace: expect.any(Object) });
    const events = await runCli(["agency", "events", id!, "--json", "--from", "0"], { RUNNER_HOME: home.path });
    const types = events.stdout
      .split("\n")
      .filter(Boolean)
      .map((line) => (JSON.parse(line) as { type: string }).type);
    expect(types.filter((type) => !type.startsWith("agency."))).toEqual([
      "coding.task.received",
      "coding.task.ready",
      "coding.code.ready",
      "coding.tests.passed",
      "coding.review.changes_requested",
      "coding.code.ready",
      "coding.tests.passed",
      "coding.review.approved",
    ]);
  });
});
