/**
 * `runner agency show | events | publish | init` on an agency's records (the
 * real CLI through tsx; the agency itself ran in the Docker-free tier), and
 * an event published into an idle agency handled by its resume.
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { loadAgency } from "../../../src/agency/load-agency.js";
import { fakeAgencyRunner, writeAgency } from "../../helpers/agency-fixture.js";
import { fakeShell } from "../../helpers/fake-runner.js";
import { createGitRepository, temporaryDirectory } from "../../helpers/git-repository.js";

const CLI = fileURLToPath(new URL("../../../src/cli/main.ts", import.meta.url));

function cli(home: string, ...args: string[]) {
  return spawnSync(process.execPath, ["--import", "tsx", CLI, "agency", ...args], { encoding: "utf8", env: { ...process.env, RUNNER_HOME: home } });
}

describe("runner agency show, events, publish", () => {
  it("show --json is the report with its trace; show draws the trace tree; events --json prints the log from --from; publish into an idle agency is handled by resume", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeAgencyRunner({ exec: fakeShell() });
    const { agencyFile } = writeAgency(directory.path, {
      agents: { solo: { triggers: ["task.*"], turns: [{ content: "seen" }] } },
      agency: { goal: "never.happens" },
    });
    const agency = await fake.runner.agency(agencyFile);
    const report = await agency.result;
    expect(report.invocations).toHaveLength(1);

    const shown = cli(fake.home, "show", agency.id, "--json");
    expect(shown.status, shown.stderr).toBe(0);
    const { trace, ...shownReport } = JSON.parse(shown.stdout);
    expect(shownReport).toEqual(report);
    expect(trace).toMatchObject({
      kind: "workflow",
      name: "test-agency",
      children: [{ kind: "event", name: "task.ready", children: [{ kind: "invocation", name: "solo" }] }],
    });
    const timeline = cli(fake.home, "show", agency.id);
    expect(timeline.stdout).toContain(`agency ${agency.id} (test-agency): failed (quiescent)`);
    expect(timeline.stdout).toMatch(
      /└─ event task\.ready #0 \[t1\] \+\d+\.\ds\n {3}└─ invoke solo \+\d+\.\ds \d+\.\ds succeeded run \S+ \(finished_unverified\)\n {6}└─ chat scripted step 0 /,
    );

    const log = readFileSync(join(agency.directory, "bus.jsonl"), "utf8").split("\n").filter(Boolean);
    const events = cli(fake.home, "events", agency.id, "--json", "--from", "2");
    expect(
      events.stdout
        .split("\n")
        .filter(Boolean)
        .map((line) => JSON.parse(line)),
    ).toEqual(log.slice(2).map((line) => JSON.parse(line)));

    const published = cli(fake.home, "publish", agency.id, "task.more", "--subject", "t2", "--data", '{"n":2}', "--id", "outside-1");
    expect(published.status, published.stderr).toBe(0);
    expect(published.stdout).toContain(`published task.more (outside-1) at sequence ${log.length}`);

    const resumed = await fake.runner.resumeAgency(agency.id);
    const after = await resumed.result;
    expect(after.invocations.map((invocation) => invocation.event_id)).toEqual([report.invocations[0]!.event_id, "outside-1"]);
  });
});

describe("runner agency init", () => {
  it("writes an agency and four least-privilege agents that load; refuses to overwrite", async () => {
    await using home = temporaryDirectory();
    await using repository = createGitRepository({ "tests/test_app.py": "def test_x(): pass\n", "app.py": "\n" });
    const first = cli(home.path, "init", repository.root);
    expect(first.status, first.stderr).toBe(0);
    expect(first.stdout).toContain("verify: python3 -m pytest -q");
    const agency = await loadAgency(join(repository.root, "agency.yaml"));
    expect(agency.agents.map((agent) => [agent.name, agent.capabilities.includes("write_file") || agent.capabilities.includes("edit_file")])).toEqual([
      ["analyst", false],
      ["coder", true],
      ["reviewer", false],
      ["tester", false],
    ]);
    expect(agency.agents.find((agent) => agent.name === "coder")!.verify).toMatchObject({ command: "python3 -m pytest -q", protect: ["tests/**"] });
    expect(agency).toMatchObject({ goal: "coding.review.approved", start: [expect.objectContaining({ type: "coding.task.received" })] });
    expect(agency).toMatchObject({ max_hops: 8, mode: "normal", confirm: [] });
    expect(readFileSync(join(repository.root, "agency.yaml"), "utf8")).toContain("# budget: { max_cost_usd: 5.00 }");
    const again = cli(home.path, "init", repository.root);
    expect(again.status).toBe(2);
    expect(again.stderr).toContain("already exist");
  });
});
