/**
 * The trust rule for an API caller's agency (src/server/untrusted-agency.ts,
 * docs/http-api.md "Agencies"): the NATS bus and worker pool are the
 * operator's, so a caller's agency, sent or recorded, runs on the embedded
 * `file` bus and names no pool; the server never connects, with its own
 * RUNNER_NATS_* credentials, to a host a caller chose.
 */
import { describe, expect, it } from "vitest";
import { loadAgency } from "../../../src/agency/load-agency.js";
import { builtInCeilings } from "../../../src/runner/operator-ceilings.js";
import { readUntrustedAgency, recordedAgencyRefusal } from "../../../src/server/untrusted-agency.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { writeAgency, type AgentSpec } from "../../helpers/agency-fixture.js";

const AGENTS: Record<string, AgentSpec> = { coder: { triggers: ["task.ready"], emits: ["code.ready"], turns: [{ content: "done" }] } };
const AGENCY = { name: "remote", workspace: "./repo", goal: "code.ready", start: [{ type: "task.ready" }], agents: "./agents" };

describe("an API caller's agency: bus, pool and concurrency", () => {
  it("refuses a nats:// bus and any pool, naming each field; the file bus, set or unset, passes", async () => {
    await using directory = temporaryDirectory();
    writeAgency(directory.path, { agents: AGENTS });
    const roots = [directory.path];
    const remote = readUntrustedAgency({ object: { ...AGENCY, bus: "nats://192.0.2.1:4222", pool: "gpu" } }, roots);
    expect(remote.refused.map((problem) => [problem.where, problem.field])).toEqual([
      ["body.agency", "bus"],
      ["body.agency", "pool"],
    ]);
    expect(remote.refused[0]!.message).toContain('asked "nats://192.0.2.1:4222"');
    expect(remote.refused[0]!.message).toContain("leave bus unset or write bus: file");
    expect(readUntrustedAgency({ object: { ...AGENCY, pool: "default" } }, roots).refused.map((problem) => problem.field)).toEqual(["pool"]);
    expect(readUntrustedAgency({ object: { ...AGENCY, bus: "file" } }, roots).refused).toEqual([]);
    expect(readUntrustedAgency({ object: AGENCY }, roots).refused).toEqual([]);
  });

  it("a recorded agency on a nats:// bus is not the server's callers' to use", async () => {
    await using directory = temporaryDirectory();
    const { agencyFile } = writeAgency(directory.path, { agents: AGENTS });
    const definition = await loadAgency(agencyFile);
    const roots = [directory.path];
    expect(recordedAgencyRefusal(definition, roots)).toBeNull();
    expect(recordedAgencyRefusal({ ...definition, bus: "nats://192.0.2.1:4222", pool: "gpu" }, roots)).toMatch(
      /^bus: an API caller's agency runs on the server's embedded bus only/,
    );
  });

  it("an agency's agents may run at most agency.max_concurrent_invocations invocations at once, summed over its agents", async () => {
    await using directory = temporaryDirectory();
    writeAgency(directory.path, { agents: AGENTS });
    const roots = [directory.path];
    const agent = (name: string, policies?: Record<string, unknown>) => ({
      agent: { name, model: { provider: "scripted", script: "./scripts/coder.yaml" }, ...(policies ? { policies } : {}) },
    });
    const wide = { ...AGENCY, agents: [agent("a", { max_concurrency: 2 }), agent("b", { max_concurrency: 2 }), agent("c")] };
    const refused = readUntrustedAgency({ object: wide }, roots, builtInCeilings()).refused;
    expect(refused).toEqual([
      {
        where: "body.agency",
        field: "agents",
        message: expect.stringContaining("its 3 agents may run 5 invocations at once"),
      },
    ]);
    expect(refused[0]!.message).toContain("above this server's ceiling of 4 invocations at once");
    expect(refused[0]!.message).toContain("--ceiling agency.max_concurrent_invocations=VALUE");
    const four = { ...AGENCY, agents: [agent("a", { max_concurrency: 2 }), agent("b"), agent("c")] };
    expect(readUntrustedAgency({ object: four }, roots, builtInCeilings()).refused).toEqual([]);
    const raised = { ...builtInCeilings(), "agency.max_concurrent_invocations": 5 };
    expect(readUntrustedAgency({ object: wide }, roots, raised).refused).toEqual([]);
  });
});
