/**
 * `runner serve` answers an agency's `confirm` gates (issue 23, docs/agency.md
 * "Human gates: confirm"): an agency started through `POST /v1/agencies`
 * puts each gated call into the server's approvals inbox, listed by
 * `GET /v1/approvals` next to the runs' own (with the agency, agent and
 * invocation), answered through `POST /v1/runs/{id}/approvals/{approval_id}`;
 * questions of invocations running at once wait side by side; nobody
 * answering takes the policy's non-interactive answer and says so.
 * Docker-free: the host-directory sandbox and scripted models.
 */
import { copyFileSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { writeAgency, type AgentSpec } from "../../helpers/agency-fixture.js";
import { eventData, eventsFile, fakeShell, toolCall } from "../../helpers/fake-runner.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { allSse, fakeServer, readSse } from "../../helpers/server-client.js";

async function json(response: Response): Promise<Record<string, any>> {
  return (await response.json()) as Record<string, any>;
}

type Server = Awaited<ReturnType<typeof fakeServer>>;

/** Reads the board's stream until `count` approvals wait (from its snapshot and `approval.requested`); returns them by tool call subject. */
async function waitForApprovals(server: Server, count: number): Promise<Map<string, Record<string, any>>> {
  const waiting = new Map<string, Record<string, any>>();
  const board = await server.request("/v1/events");
  await readSse(board.body!, (event) => {
    const data = JSON.parse(event.data) as Record<string, any>;
    if (event.event === "snapshot") for (const approval of data.approvals as Record<string, any>[]) waiting.set(approval.id, approval);
    if (event.event === "approval.requested") waiting.set(data.id, data);
    if (event.event === "approval.resolved") waiting.delete(data.id);
    return waiting.size >= count;
  });
  return new Map([...waiting.values()].map((approval) => [approval.subject as string, approval]));
}

/** An agent woken by the start event that runs `command` (gated by the agency's `confirm`), then reports. */
function shellAgent(command: string, afterCall: Record<string, unknown> = {}): AgentSpec {
  return {
    triggers: ["task.ready"],
    capabilities: ["read_file", "run_shell"],
    turns: [{ tool_calls: [toolCall("run_shell", { command })] }, { ...afterCall, content: "done" }],
  };
}

function agencyLog(home: string, id: string): Record<string, any>[] {
  return readFileSync(join(home, "agencies", id, "bus.jsonl"), "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, any>);
}

describe("runner serve: an agency's confirm questions in the approvals inbox", () => {
  it("lists two invocations' questions at once with their agency, agent and invocation; allow runs the call, deny refuses it with the reason", async () => {
    await using directory = temporaryDirectory();
    writeAgency(directory.path, {
      agents: {
        alpha: shellAgent("echo alpha >> alpha.txt"),
        // The scripted model fails the run unless the refusal and its reason reached the model.
        beta: shellAgent("echo beta >> beta.txt", { expect: { tool_result_matches: "^\\[denied\\] the user refused: not beta" } }),
      },
      agency: { confirm: ["run_shell"], goal: "never.happens" },
    });
    await using server = await fakeServer(directory.path, { exec: fakeShell() });
    const agency = await json(await server.request("/v1/agencies", { method: "POST", json: { agency_file: "agency.yaml" } }));

    // Both invocations ask before either is answered: the inbox does not queue an agency's questions one at a time.
    const waiting = await waitForApprovals(server, 2);
    const alpha = waiting.get("echo alpha >> alpha.txt")!;
    const beta = waiting.get("echo beta >> beta.txt")!;
    expect(alpha).toMatchObject({
      tool: "run_shell",
      rule: "tools.confirm[0]",
      agency: { id: agency.id, agent: "alpha", invocation_id: expect.stringMatching(/^alpha-[0-9a-f]{12}$/) },
    });
    expect(beta).toMatchObject({ agency: { id: agency.id, agent: "beta", invocation_id: expect.stringMatching(/^beta-/) } });
    expect(alpha.run_id).not.toBe(beta.run_id);
    expect(alpha.question).toContain(`agent alpha (${alpha.agency.invocation_id})`);
    expect((await json(await server.request("/v1/approvals"))).approvals.map((approval: { id: string }) => approval.id).sort()).toEqual(
      [alpha.id, beta.id].sort(),
    );
    expect(server.provider.commands.map((command) => command.request.command)).not.toContain("echo alpha >> alpha.txt");
    // The invocation's run is as visible as its agency: the inbox's link to it works.
    expect(await json(await server.request(`/v1/runs/${alpha.run_id}`))).toMatchObject({ id: alpha.run_id, status: "running", pending_approvals: 1 });

    const allowed = await server.request(`/v1/runs/${alpha.run_id}/approvals/${alpha.id}`, { method: "POST", json: { decision: "allow" } });
    expect(allowed.status).toBe(200);
    const denied = await server.request(`/v1/runs/${beta.run_id}/approvals/${beta.id}`, { method: "POST", json: { decision: "deny", reason: "not beta" } });
    expect(denied.status).toBe(200);
    // An answer names its question's run: another run's id finds nothing.
    const crossed = await server.request(`/v1/runs/${alpha.run_id}/approvals/${beta.id}`, { method: "POST", json: { decision: "allow" } });
    expect(crossed.status).toBe(404);

    await allSse((await server.request(`/v1/agencies/${agency.id}/events`)).body!);
    const commands = server.provider.commands.map((command) => command.request.command);
    expect(commands).toContain("echo alpha >> alpha.txt");
    expect(commands).not.toContain("echo beta >> beta.txt");
    const betaResults = eventData(eventsFile(join(server.home, "runs", beta.run_id)), "tool_call.finished");
    expect(betaResults[0]).toMatchObject({ name: "run_shell", is_error: true });
    const finished = await json(await server.request(`/v1/agencies/${agency.id}`));
    expect(finished.invocations.map((invocation: { agent: string; status: string }) => [invocation.agent, invocation.status]).sort()).toEqual([
      ["alpha", "succeeded"],
      ["beta", "succeeded"],
    ]);
    const resolved = agencyLog(server.home, agency.id).filter((event) => event.type === "agency.approval.resolved");
    expect(resolved.map((event) => [event.data.agent, event.data.answer, event.data.reason, event.data.by]).sort()).toEqual([
      ["alpha", "yes", null, "broker"],
      ["beta", "no", "not beta", "broker"],
    ]);
    expect((await json(await server.request("/v1/approvals"))).approvals).toEqual([]);
  });

  it("a question nobody answers takes the policy's non-interactive answer after the timeout, and the run and the agency say so", async () => {
    await using directory = temporaryDirectory();
    writeAgency(directory.path, {
      agents: { alpha: shellAgent("echo alpha >> alpha.txt", { expect: { tool_result_matches: "^\\[denied\\] no answer came in time" } }) },
      agency: { confirm: ["run_shell"], goal: "never.happens" },
    });
    await using server = await fakeServer(directory.path, { exec: fakeShell(), approvalTimeoutMs: 50 });
    const agency = await json(await server.request("/v1/agencies", { method: "POST", json: { agency_file: "agency.yaml" } }));
    await allSse((await server.request(`/v1/agencies/${agency.id}/events`)).body!);

    expect(server.provider.commands.map((command) => command.request.command)).not.toContain("echo alpha >> alpha.txt");
    const [resolved] = agencyLog(server.home, agency.id).filter((event) => event.type === "agency.approval.resolved");
    expect(resolved!.data).toMatchObject({ agent: "alpha", answer: "no", by: "broker", timed_out: true, reason: expect.stringContaining("no answer within") });
    const runId = resolved!.data.run_id as string;
    expect(eventData(eventsFile(join(server.home, "runs", runId)), "approval.resolved")[0]).toMatchObject({ answer: "no", timed_out: true });
    expect((await json(await server.request(`/v1/agencies/${agency.id}`))).invocations[0]).toMatchObject({ agent: "alpha", status: "succeeded" });
  });

  it("the runs of an agency the server's callers may not use stay out of reach, its generated policy notwithstanding", async () => {
    await using directory = temporaryDirectory();
    await using elsewhere = temporaryDirectory();
    // Inside the root but for its agent's script, which lies outside: the user's own agency, not one a caller could start.
    const { agencyFile } = writeAgency(directory.path, { agents: { alpha: { triggers: ["task.ready"], turns: [{ content: "done" }] } } });
    copyFileSync(join(directory.path, "scripts", "alpha.yaml"), join(elsewhere.path, "alpha.yaml"));
    const agentFile = join(directory.path, "agents", "alpha.yaml");
    const agent = JSON.parse(readFileSync(agentFile, "utf8")) as { agent: { model: Record<string, unknown> } };
    agent.agent.model.script = join(elsewhere.path, "alpha.yaml");
    writeFileSync(agentFile, JSON.stringify(agent));
    await using server = await fakeServer(directory.path, { exec: fakeShell() });
    const foreign = await server.runner.agency(agencyFile);
    const report = await foreign.result;
    expect((await server.request(`/v1/agencies/${foreign.id}`)).status).toBe(403);
    const refused = await server.request(`/v1/runs/${report.invocations[0]!.run_id}`);
    expect(refused.status).toBe(403);
    expect((await json(refused)).detail).toContain("its task has a policy file");
    expect((await json(await server.request("/v1/runs"))).runs).toEqual([]);
  });
});
