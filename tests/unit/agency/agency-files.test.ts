/**
 * Bad agency and agent files (issue 21, "Done when"): every problem named
 * with its file, field and fix, exit 2, and nothing of an agency created.
 */
import { spawnSync } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { AgencyFileError, loadAgency } from "../../../src/agency/load-agency.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { writeAgency } from "../../helpers/agency-fixture.js";

const CLI = fileURLToPath(new URL("../../../src/cli/main.ts", import.meta.url));

async function problemsOf(agencyFile: string): Promise<{ file: string; field: string; message: string }[]> {
  const error = await loadAgency(agencyFile).catch((caught: unknown) => caught);
  expect(error).toBeInstanceOf(AgencyFileError);
  return (error as AgencyFileError).problems;
}

describe("agency and agent files", () => {
  it("a valid agency loads with its defaults", async () => {
    await using directory = temporaryDirectory();
    const { agencyFile, repo } = writeAgency(directory.path, { agents: { solo: { triggers: ["task.*"], turns: [] } } });
    const agency = await loadAgency(agencyFile);
    expect(agency).toMatchObject({
      name: "test-agency",
      bus: "file",
      goal: "review.approved",
      context: {},
      workspacePath: expect.stringContaining(repo.split("/").at(-1)!),
    });
    expect(agency.agents[0]).toMatchObject({
      name: "solo",
      triggers: ["task.*"],
      capabilities: ["read_file"],
      emits: [],
      policies: { max_concurrency: 1, timeout_seconds: 600 },
      permissions: { allowed_paths: ["**"], denied_paths: [] },
      max_steps: 50,
      scripts: [join(directory.path, "scripts", "solo.yaml")],
    });
  });

  it("names every problem of every file: agency field, agent fields, missing script, duplicate name", async () => {
    await using directory = temporaryDirectory();
    const { agencyFile } = writeAgency(directory.path, {
      agents: {
        first: { triggers: ["task.ready"], turns: [], capabilities: ["read_file", "teleport"], emits: ["agency.hijack"], policies: { max_concurency: 2 } },
        second: { triggers: ["Bad Trigger"], turns: [], extra: { name: "first", model: { provider: "scripted", script: "../scripts/missing.yaml" } } },
      },
      agency: { bus: "amqp://example.com:5672", goal: "review.approved" },
    });
    const problems = await problemsOf(agencyFile);
    const first = join(directory.path, "agents", "first.yaml");
    const second = join(directory.path, "agents", "second.yaml");
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ file: agencyFile, field: "bus", message: expect.stringContaining("nats://host:port") }),
        expect.objectContaining({ file: first, field: "agent.capabilities.1.tool", message: expect.stringContaining("read_file") }),
        expect.objectContaining({ file: first, field: "agent.emits.0", message: expect.stringContaining("orchestrator") }),
        expect.objectContaining({ file: first, field: "agent.policies", message: expect.stringContaining("max_concurrency") }),
        expect.objectContaining({ file: second, field: "agent.triggers.0.event", message: expect.stringContaining("trailing .*") }),
      ]),
    );
    // The second file's script problem shows once the schema problems are fixed; the duplicate name too.
    writeAgency(directory.path + "/fixed", {
      agents: {
        first: { triggers: ["task.ready"], turns: [] },
        second: { triggers: ["task.ready"], turns: [], extra: { name: "first" } },
        third: { triggers: ["task.ready"], turns: [], extra: { model: { provider: "scripted", script: "../scripts/missing.yaml" } } },
      },
    });
    const fixed = await problemsOf(join(directory.path, "fixed", "agency.yaml"));
    expect(fixed).toEqual([
      expect.objectContaining({ field: "agent.model.script", message: expect.stringContaining("missing.yaml does not exist") }),
      expect.objectContaining({
        file: join(directory.path, "fixed", "agents", "second.yaml"),
        field: "agent.name",
        message: expect.stringContaining("unique"),
      }),
    ]);
  });

  it("a nats:// bus is checked seed by seed before anything is created: a port, no credentials in the URL", async () => {
    await using directory = temporaryDirectory();
    const agents = { solo: { triggers: ["task.*"], turns: [] } };
    const { agencyFile } = writeAgency(directory.path, { agents, agency: { bus: "nats://a.example.com:4222,b.example.com" } });
    expect(await problemsOf(agencyFile)).toEqual([
      expect.objectContaining({ file: agencyFile, field: "bus", message: '"b.example.com" must be nats://host:port (or tls://host:port)' }),
    ]);
    const withCredentials = writeAgency(join(directory.path, "credentials"), { agents, agency: { bus: "nats://user:secret@a.example.com:4222" } });
    const [problem] = await problemsOf(withCredentials.agencyFile);
    expect(problem!.message).toContain("RUNNER_NATS_USER");
    expect(problem!.message).not.toContain("secret");
    const good = writeAgency(join(directory.path, "good"), { agents, agency: { bus: "nats://a.example.com:4222,b.example.com:4222" } });
    expect((await loadAgency(good.agencyFile)).bus).toBe("nats://a.example.com:4222,b.example.com:4222");
  });

  it("an agency without a goal, an agents directory without agents, a workspace that is not a repository", async () => {
    await using directory = temporaryDirectory();
    const agencyFile = join(directory.path, "agency.yaml");
    writeFileSync(agencyFile, JSON.stringify({ name: "x", workspace: ".", agents: "./none" }));
    const problems = await problemsOf(agencyFile);
    expect(problems.map((problem) => problem.field)).toEqual(["goal", "agents"]);
    writeFileSync(agencyFile, JSON.stringify({ name: "x", workspace: ".", agents: "./none", goal: "done" }));
    const second = await problemsOf(agencyFile);
    expect(second).toEqual([
      expect.objectContaining({ field: "agents", message: expect.stringContaining("not a directory") }),
      expect.objectContaining({ field: "workspace", message: expect.stringContaining("git init") }),
    ]);
  });

  it("runner agency run on a bad file exits 2 naming file and field, and creates nothing", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { agencyFile } = writeAgency(directory.path, { agents: { solo: { triggers: ["task.ready"], turns: [], policies: { max_concurrency: 0 } } } });
    const result = spawnSync(process.execPath, ["--import", "tsx", CLI, "agency", "run", agencyFile], {
      encoding: "utf8",
      env: { ...process.env, RUNNER_HOME: home.path },
    });
    expect(result.status).toBe(2);
    expect(result.stderr).toContain(join(directory.path, "agents", "solo.yaml"));
    expect(result.stderr).toContain("agent.policies.max_concurrency");
    expect(result.stdout).toBe("");
    expect(existsSync(join(home.path, "agencies"))).toBe(false);
  });
});
