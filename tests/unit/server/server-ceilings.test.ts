/**
 * The operator's ceilings on what `runner serve`'s callers ask for
 * (docs/security.md "Ceilings", src/runner/operator-ceilings.ts), in-process
 * on the Docker-free tier: a task object, a task file, a batch, a resume and
 * an agency above a ceiling are refused 403 naming the field, the value asked
 * and the ceiling; a field left unset runs with the ceiling where its default
 * is higher; `--ceiling` raises or lowers each.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadTaskFile } from "../../../src/config/load-task.js";
import { builtInCeilings } from "../../../src/runner/operator-ceilings.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { fakeShell, writeScriptedTask } from "../../helpers/fake-runner.js";
import { writeAgency, type AgentSpec } from "../../helpers/agency-fixture.js";
import { allSse, fakeServer } from "../../helpers/server-client.js";

/** A problem+json body or a run record, as far as these tests read them. */
interface Body {
  id: string;
  title: string;
  detail: string;
  errors: { field: string; message: string }[];
  runs: unknown[];
  agencies: unknown[];
  batches: unknown[];
}

async function json(response: Response): Promise<Body> {
  return (await response.json()) as Body;
}

/** task.json as far as these tests read it. */
interface RecordedTask {
  timeout_sec?: number;
  max_steps: number;
  sandbox: { limits: { cpus: number; memory: number; pids: number } };
}

const BASE = { name: "object-task", instruction: "Do it.", workspace: "./repo", model: { provider: "scripted", script: "./script.yaml" } };

/** The task a run was started with (task.json), once it ended. */
async function ranWith(server: Awaited<ReturnType<typeof fakeServer>>, response: Response): Promise<RecordedTask> {
  expect(response.status, JSON.stringify(await response.clone().json())).toBe(201);
  const record = await json(response);
  await allSse((await server.request(`/v1/runs/${record.id}/events`)).body!);
  return JSON.parse(readFileSync(join(server.home, "runs", record.id, "task.json"), "utf8")) as RecordedTask;
}

describe("runner serve: operator ceilings", () => {
  it("a task object above a ceiling is refused 403 naming every such field, the value asked and the ceiling; nothing starts", async () => {
    await using directory = temporaryDirectory();
    writeScriptedTask(directory.path, { script: { turns: [{ content: "Done." }] } });
    await using server = await fakeServer(directory.path, { exec: fakeShell() });
    const greedy = {
      ...BASE,
      max_steps: 5000,
      subagents: { max_steps: 5000 },
      timeout_sec: 86_400,
      model: { ...BASE.model, max_cost_usd: 500 },
      sandbox: { limits: { cpus: 16, memory: "64g", pids: 30_000, disk: "500g" } },
    };
    const response = await server.request("/v1/runs", { method: "POST", json: { task: greedy } });
    expect(response.status).toBe(403);
    const problem = await json(response);
    expect(problem.title).toBe("Above the server's ceiling");
    const messages = Object.fromEntries(problem.errors.map((error) => [error.field, error.message]));
    expect(Object.keys(messages).sort()).toEqual(
      [
        "body.task.max_steps",
        "body.task.model.max_cost_usd",
        "body.task.sandbox.limits.cpus",
        "body.task.sandbox.limits.disk",
        "body.task.sandbox.limits.memory",
        "body.task.sandbox.limits.pids",
        "body.task.subagents.max_steps",
        "body.task.timeout_sec",
      ].sort(),
    );
    expect(messages["body.task.sandbox.limits.cpus"]).toBe(
      "asked 16, above this server's ceiling of 2 cpus; ask for at most that (the operator sets it: --ceiling sandbox.limits.cpus=VALUE)",
    );
    expect(messages["body.task.sandbox.limits.memory"]).toContain(
      `asked "64g" (${64 * 1024 ** 3} bytes), above this server's ceiling of 4g (${4 * 1024 ** 3} bytes)`,
    );
    expect(messages["body.task.timeout_sec"]).toContain("asked 86400, above this server's ceiling of 3600 s");
    expect(messages["body.task.model.max_cost_usd"]).toContain("asked 500, above this server's ceiling of 10 USD");
    expect(problem.detail).toContain("body.task.max_steps: asked 5000");
    expect((await json(await server.request("/v1/runs"))).runs).toEqual([]);
  });

  it("a field left unset runs with the ceiling where its default is higher (a run's wall clock: none by default); at or under a ceiling runs as asked", async () => {
    await using directory = temporaryDirectory();
    writeScriptedTask(directory.path, { script: { turns: [{ content: "Done." }] } });
    await using server = await fakeServer(directory.path, { exec: fakeShell() });
    const unset = await ranWith(server, await server.request("/v1/runs", { method: "POST", json: { task: BASE } }));
    expect(unset.timeout_sec).toBe(3600);
    expect(unset.max_steps).toBe(50);
    expect(unset.sandbox.limits).toMatchObject({ cpus: 1, memory: 1024 ** 3, pids: 256 });
    const atCeiling = { ...BASE, timeout_sec: 600, max_steps: 100, sandbox: { limits: { cpus: 2, memory: "4g" } } };
    const asked = await ranWith(server, await server.request("/v1/runs", { method: "POST", json: { task: atCeiling } }));
    expect(asked).toMatchObject({ timeout_sec: 600, max_steps: 100, sandbox: { limits: { cpus: 2, memory: 4 * 1024 ** 3 } } });
  });

  it("--ceiling moves each ceiling: raised, a larger ask runs; lowered under the default, an unset field gets the ceiling", async () => {
    await using directory = temporaryDirectory();
    writeScriptedTask(directory.path, { script: { turns: [{ content: "Done." }] } });
    const ceilings = { ...builtInCeilings(), "sandbox.limits.cpus": 8, "sandbox.limits.memory": 512 * 1024 ** 2, max_steps: 20 };
    await using server = await fakeServer(directory.path, { exec: fakeShell(), ceilings });
    const raised = await ranWith(server, await server.request("/v1/runs", { method: "POST", json: { task: { ...BASE, sandbox: { limits: { cpus: 8 } } } } }));
    expect(raised.sandbox.limits.cpus).toBe(8);
    expect(raised.sandbox.limits.memory).toBe(512 * 1024 ** 2);
    expect(raised.max_steps).toBe(20);
    const above = await server.request("/v1/runs", { method: "POST", json: { task: { ...BASE, max_steps: 21 } } });
    expect(above.status).toBe(403);
    expect((await json(above)).errors).toEqual([
      {
        field: "body.task.max_steps",
        message: "asked 21, above this server's ceiling of 20 model calls; ask for at most that (the operator sets it: --ceiling max_steps=VALUE)",
      },
    ]);
  });

  it("binds task files under --tasks-root, batches of them and a resume's extra limits too", async () => {
    await using directory = temporaryDirectory();
    const { task } = writeScriptedTask(join(directory.path, "big"), {
      script: { turns: [{ content: "Done." }] },
      task: { name: "big", sandbox: { limits: { memory: "16g" } } },
    });
    await using server = await fakeServer(directory.path, { exec: fakeShell() });
    const file = await server.request("/v1/runs", { method: "POST", json: { task_file: task } });
    expect(file.status).toBe(403);
    expect((await json(file)).errors).toEqual([expect.objectContaining({ field: "body.task_file.sandbox.limits.memory" })]);
    const batch = await server.request("/v1/batches", { method: "POST", json: { path: directory.path } });
    expect(batch.status).toBe(403);
    expect((await json(batch)).detail).toContain('sandbox.limits.memory: asked "16g"');

    const ran = await server.request("/v1/runs", {
      method: "POST",
      json: { task: { ...BASE, workspace: "./big/repo", model: { provider: "scripted", script: "./big/script.yaml" } } },
    });
    expect(ran.status).toBe(201);
    const record = await json(ran);
    await allSse((await server.request(`/v1/runs/${record.id}/events`)).body!);
    const resumed = await server.request(`/v1/runs/${record.id}/resume`, { method: "POST", json: { max_steps: 1000, timeout_sec: 7200 } });
    expect(resumed.status).toBe(403);
    expect((await json(resumed)).errors.map((error) => error.field)).toEqual(["body.max_steps", "body.timeout_sec"]);
  });

  it("a batch's jobs (tasks at once) above batch.jobs is refused 403 before any task is read", async () => {
    await using directory = temporaryDirectory();
    writeScriptedTask(join(directory.path, "one"), { script: { turns: [{ content: "Done." }] }, task: { name: "one" } });
    await using server = await fakeServer(directory.path, { exec: fakeShell() });
    const wide = await server.request("/v1/batches", { method: "POST", json: { path: directory.path, jobs: 64 } });
    expect(wide.status).toBe(403);
    const problem = await json(wide);
    expect(problem.title).toBe("Above the server's ceiling");
    expect(problem.errors).toEqual([
      {
        field: "body.jobs",
        message: "asked 64, above this server's ceiling of 4 tasks at once; ask for at most that (the operator sets it: --ceiling batch.jobs=VALUE)",
      },
    ]);
    expect((await json(await server.request("/v1/batches"))).batches).toEqual([]);
  });

  it("binds agencies: the agency's budget and each agent's concurrency, invocation timeout, steps and sandbox, named per agent", async () => {
    await using directory = temporaryDirectory();
    const agents: Record<string, AgentSpec> = {
      coder: { triggers: ["task.ready"], capabilities: ["read_file"], emits: ["code.ready"], turns: [{ content: "done" }] },
    };
    writeAgency(directory.path, { agents });
    await using server = await fakeServer(directory.path, { exec: fakeShell() });
    const agent = JSON.parse(readFileSync(join(directory.path, "agents", "coder.yaml"), "utf8")) as { agent: { model: Record<string, unknown> } };
    agent.agent.model.script = join(directory.path, "scripts", "coder.yaml");
    const greedy = {
      ...agent.agent,
      max_steps: 400,
      sandbox: { limits: { cpus: 32 } },
      policies: { max_concurrency: 64, timeout_seconds: 86_400 },
    };
    const agency = {
      name: "greedy",
      workspace: "./repo",
      goal: "code.ready",
      start: [{ type: "task.ready" }],
      budget: { max_cost_usd: 10_000 },
      agents: [{ agent: greedy }],
    };
    const response = await server.request("/v1/agencies", { method: "POST", json: { agency } });
    expect(response.status).toBe(403);
    const errors = (await json(response)).errors;
    expect(errors.map((error) => error.field).sort()).toEqual(
      [
        "body.agency.budget.max_cost_usd",
        "body.agency.agents",
        "body.agency.agents.0.agent.max_steps",
        "body.agency.agents.0.agent.sandbox.limits.cpus",
        "body.agency.agents.0.agent.policies.max_concurrency",
        "body.agency.agents.0.agent.policies.timeout_seconds",
      ].sort(),
    );
    expect(errors.find((error) => error.field === "body.agency.budget.max_cost_usd")!.message).toContain(
      "asked 10000, above this server's ceiling of 50 USD; ask for at most that (the operator sets it: --ceiling agency.budget.max_cost_usd=VALUE)",
    );
    expect(errors.find((error) => error.field.endsWith("max_concurrency"))!.message).toContain("ceiling of 4 invocations");
    expect((await json(await server.request("/v1/agencies"))).agencies).toEqual([]);
  });

  it("a run not started under the ceilings (the operator's own, inside --tasks-root) is not resumed above them: 403 naming the recorded field, value and ceiling", async () => {
    await using directory = temporaryDirectory();
    const { task } = writeScriptedTask(directory.path, {
      script: { turns: [{ content: "Done." }] },
      task: { name: "wide", sandbox: { limits: { cpus: 8 } } },
    });
    await using server = await fakeServer(directory.path, { exec: fakeShell() });
    // Started on the operator's side (as `runner exec` would), so no ceiling applied: 8 cpus, no wall clock but the 4 h default.
    const own = await server.runner.startTask(loadTaskFile(task));
    await own.result;
    const resumed = await server.request(`/v1/runs/${own.id}/resume`, { method: "POST", json: {} });
    expect(resumed.status).toBe(403);
    const problem = await json(resumed);
    expect(problem.title).toBe("Above the server's ceiling");
    expect(problem.errors).toEqual([
      {
        field: "task.sandbox.limits.cpus",
        message:
          "the run was recorded with 8, above this server's ceiling of 2 cpus; resume it on the command line (runner resume), where you are the operator",
      },
      {
        field: "task.timeout_sec",
        message:
          "the run was recorded with none (the default, 14400), above this server's ceiling of 3600 s; give timeout_sec in the resume (at most the ceiling)",
      },
    ]);
    const bounded = await server.request(`/v1/runs/${own.id}/resume`, { method: "POST", json: { timeout_sec: 600 } });
    expect((await json(bounded)).errors.map((error) => error.field)).toEqual(["task.sandbox.limits.cpus"]);
  });

  it("an idle agency not started under the ceilings is not resumed by an event above them: 403 naming the agent's field; the event is not stored", async () => {
    await using directory = temporaryDirectory();
    const agents: Record<string, AgentSpec> = {
      coder: { triggers: ["task.ready"], emits: ["review.approved"], turns: [{ content: "done" }], policies: { max_concurrency: 8 } },
    };
    const { agencyFile } = writeAgency(directory.path, { agents });
    await using server = await fakeServer(directory.path, { exec: fakeShell() });
    const own = await server.runner.agency(agencyFile);
    await own.result;
    const events = () => readFileSync(join(server.home, "agencies", own.id, "bus.jsonl"), "utf8");
    const before = events();
    const posted = await server.request(`/v1/agencies/${own.id}/events`, {
      method: "POST",
      headers: { "content-type": "application/cloudevents+json" },
      body: JSON.stringify({ specversion: "1.0", id: "e1", source: "https://ci.example.com", type: "task.ready" }),
    });
    expect(posted.status).toBe(403);
    const problem = await json(posted);
    expect(problem.title).toBe("Above the server's ceiling");
    expect(problem.errors.map((error) => error.field)).toEqual(["agency.agents.coder.policies.max_concurrency", "agency.agents"]);
    expect(problem.errors[0]!.message).toMatch(/^recorded with 8, above this server's ceiling of 4 invocations/);
    expect(events()).toBe(before);
  });
});
