/**
 * `runner serve`'s HTTP API in-process (issue 23): runs started from a task
 * file and from a task object, their records, events as SSE with resume,
 * approvals answered through the API, merge, patch and report, the token on
 * every route but /v1/health, the trust rule for task objects, problem+json
 * errors naming the field, Idempotency-Key and the OpenAPI document. The
 * Runner is the Docker-free tier (HostDirectorySandboxProvider, the scripted
 * model over loopback, real git).
 */
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { eventsFile, fakeShell, Gates, toolCall, writeScriptedTask } from "../../helpers/fake-runner.js";
import { allSse, fakeServer, readSse, TOKEN } from "../../helpers/server-client.js";

const DONE = { turns: [{ tool_calls: [toolCall("write_file", { path: "median.txt", content: "3\n" })] }, { content: "Fixed the median." }] };

/** `check-median` passes when median.txt says 3; the fake shell's commands otherwise. */
function shell(gates = new Gates()) {
  const base = fakeShell(gates);
  return async (input: Parameters<typeof base>[0]) => {
    if (input.request.command !== "check-median") return base(input);
    const value = (await input.sandbox.readFile("median.txt"))?.content.toString().trim();
    return value === "3" ? { stdout: "median ok\n" } : { exitCode: 1, stdout: `expected 3, got ${value}\n` };
  };
}

async function json(response: Response): Promise<Record<string, any>> {
  return (await response.json()) as Record<string, any>;
}

describe("runner serve: the HTTP API", () => {
  it("starts a run from a task file, follows it over SSE, and serves its record, report and patch", async () => {
    await using directory = temporaryDirectory();
    const { task } = writeScriptedTask(directory.path, {
      script: DONE,
      files: { "median.txt": "2\n" },
      task: { verify: { command: "check-median", timeout_sec: 30 } },
    });
    await using server = await fakeServer(directory.path, { exec: shell() });

    const started = await server.request("/v1/runs", { method: "POST", json: { task_file: task } });
    expect(started.status).toBe(201);
    const record = await json(started);
    expect(record).toMatchObject({ task: "e2e-task", pending_approvals: 0 });
    expect(started.headers.get("location")).toBe(`/v1/runs/${record.id}`);

    const stream = await server.request(`/v1/runs/${record.id}/events`);
    expect(stream.headers.get("content-type")).toContain("text/event-stream");
    const events = await allSse(stream.body!);
    expect(events.at(-1)).toMatchObject({ event: "end", id: null });
    const lines = eventsFile(join(server.home, "runs", record.id));
    const sent = events.filter((event) => event.event !== "end");
    expect(sent.map((event) => Number(event.id))).toEqual(lines.map((_line, index) => index));
    expect(sent.map((event) => JSON.parse(event.data))).toEqual(lines);
    expect(sent.map((event) => event.event)).toEqual(lines.map((line) => line.type));

    const finished = await json(await server.request(`/v1/runs/${record.id}`));
    expect(finished).toMatchObject({ id: record.id, status: "succeeded", steps: 2, report: { status: "succeeded", reason: "verified" } });
    const report = await server.request(`/v1/runs/${record.id}/report`);
    expect(report.headers.get("content-type")).toContain("application/json");
    expect((await json(report)).run_id).toBe(record.id);
    const patch = await server.request(`/v1/runs/${record.id}/patch`);
    expect(patch.headers.get("content-type")).toContain("text/x-diff");
    expect(await patch.text()).toContain("+3");

    // Resume from Last-Event-ID: exactly the events after it; ?from= starts at it.
    const after = await allSse((await server.request(`/v1/runs/${record.id}/events`, { headers: { "last-event-id": "3" } })).body!);
    expect(after.filter((event) => event.id !== null).map((event) => Number(event.id))).toEqual(lines.slice(4).map((_line, index) => index + 4));
    const from = await allSse((await server.request(`/v1/runs/${record.id}/events?from=5`)).body!);
    expect(Number(from[0]!.id)).toBe(5);

    const list = await json(await server.request("/v1/runs"));
    expect(list.runs.map((run: { id: string }) => run.id)).toEqual([record.id]);
    expect(list.next_cursor).toBeNull();
    expect((await json(await server.request("/v1/runs?status=failed"))).runs).toEqual([]);
  });

  it("pages the run list newest first with a cursor", async () => {
    await using directory = temporaryDirectory();
    const { task } = writeScriptedTask(directory.path, { script: { turns: [{ content: "Done." }] } });
    await using server = await fakeServer(directory.path, { exec: shell() });
    const ids: string[] = [];
    for (let index = 0; index < 3; index++) {
      const record = await json(await server.request("/v1/runs", { method: "POST", json: { task_file: task } }));
      await allSse((await server.request(`/v1/runs/${record.id}/events`)).body!);
      ids.push(record.id);
    }
    // Newest first by run id (`<date>-<time>-<random>`): runs started within one second order by their random part.
    const newestFirst = [...ids].sort().reverse();
    const first = await json(await server.request("/v1/runs?limit=2"));
    expect(first.runs.map((run: { id: string }) => run.id)).toEqual(newestFirst.slice(0, 2));
    const second = await json(await server.request(`/v1/runs?limit=2&cursor=${first.next_cursor}`));
    expect(second.runs.map((run: { id: string }) => run.id)).toEqual(newestFirst.slice(2));
    expect(second.next_cursor).toBeNull();
    const bad = await server.request("/v1/runs?limit=0");
    expect(bad.status).toBe(400);
    expect(bad.headers.get("content-type")).toBe("application/problem+json");
    expect((await json(bad)).errors[0].field).toBe("query.limit");
  });

  it("an approval waits in the inbox, is answered through the API, and the run goes on", async () => {
    await using directory = temporaryDirectory();
    const script = { turns: [{ tool_calls: [toolCall("run_shell", { command: "git push origin main" })] }, { content: "Pushed." }] };
    const { task } = writeScriptedTask(directory.path, { script });
    await using server = await fakeServer(directory.path, { exec: shell() });
    const record = await json(await server.request("/v1/runs", { method: "POST", json: { task_file: task } }));

    // The board's stream announces the question; the inbox lists it with the exact command and the rule.
    const board = await server.request("/v1/events");
    let approval: Record<string, any> | undefined;
    await readSse(board.body!, (event) => {
      if (event.event === "snapshot") approval = (JSON.parse(event.data) as { approvals: Record<string, any>[] }).approvals[0];
      if (event.event === "approval.requested") approval = JSON.parse(event.data) as Record<string, any>;
      return approval !== undefined;
    });
    expect(approval).toMatchObject({ run_id: record.id, tool: "run_shell", subject: "git push origin main", rule: expect.stringContaining("git-push") });
    const pending = await json(await server.request("/v1/approvals"));
    expect(pending.approvals).toEqual([approval]);
    expect((await json(await server.request(`/v1/runs/${record.id}`))).pending_approvals).toBe(1);

    const wrong = await server.request(`/v1/runs/${record.id}/approvals/${approval!.id}`, { method: "POST", json: { decision: "maybe" } });
    expect(wrong.status).toBe(400);
    expect((await json(wrong)).errors[0].field).toBe("body.decision");
    const answered = await server.request(`/v1/runs/${record.id}/approvals/${approval!.id}`, { method: "POST", json: { decision: "allow" } });
    expect(answered.status).toBe(200);
    const again = await server.request(`/v1/runs/${record.id}/approvals/${approval!.id}`, { method: "POST", json: { decision: "deny" } });
    expect(again.status).toBe(404);

    const events = await allSse((await server.request(`/v1/runs/${record.id}/events`)).body!);
    const resolved = events.find((event) => event.event.includes("approval.resolved"));
    expect(JSON.parse(resolved!.data).data).toMatchObject({ answer: "yes", timed_out: false });
    expect((await json(await server.request(`/v1/approvals`))).approvals).toEqual([]);
  });

  it("an approval nobody answers takes the non-interactive answer after the timeout, and says so", async () => {
    await using directory = temporaryDirectory();
    const script = { turns: [{ tool_calls: [toolCall("run_shell", { command: "git push origin main" })] }, { content: "Gave up." }] };
    const { task } = writeScriptedTask(directory.path, { script });
    await using server = await fakeServer(directory.path, { exec: shell(), approvalTimeoutMs: 50 });
    const record = await json(await server.request("/v1/runs", { method: "POST", json: { task_file: task } }));
    const events = await allSse((await server.request(`/v1/runs/${record.id}/events`)).body!);
    const resolved = events.find((event) => event.event.includes("approval.resolved"));
    expect(JSON.parse(resolved!.data).data).toMatchObject({ answer: "no", timed_out: true, reason: expect.stringContaining("no answer within") });
  });

  it("a task object is untrusted: hooks, MCP server commands, policy files and paths outside the roots are refused 403 naming the field", async () => {
    await using directory = temporaryDirectory();
    await using elsewhere = temporaryDirectory();
    writeScriptedTask(directory.path, { script: { turns: [{ content: "Done." }] } });
    await using server = await fakeServer(directory.path, { exec: shell() });
    const base = { name: "object-task", instruction: "Do it.", workspace: "./repo", model: { provider: "scripted", script: "./script.yaml" } };
    const cases: [Record<string, unknown>, string][] = [
      [{ ...base, hooks: { pre_tool_use: [{ command: "touch /tmp/pwned" }] } }, "body.task.hooks"],
      [{ ...base, mcp_servers: { evil: { command: "sh", args: ["-c", "id"] } } }, "body.task.mcp_servers"],
      [{ ...base, policy: "/etc/passwd" }, "body.task.policy"],
      [{ ...base, workspace: elsewhere.path }, "body.task.workspace"],
    ];
    for (const [task, field] of cases) {
      const response = await server.request("/v1/runs", { method: "POST", json: { task } });
      expect(response.status, field).toBe(403);
      expect(response.headers.get("content-type")).toBe("application/problem+json");
      const problem = await json(response);
      expect(problem.errors.map((error: { field: string }) => error.field)).toContain(field);
      expect(problem.detail).toContain(field.replace("body.", ""));
    }
    const outside = await server.request("/v1/runs", { method: "POST", json: { task_file: join(elsewhere.path, "task.yaml") } });
    expect(outside.status).toBe(403);
    expect((await json(outside)).errors[0].field).toBe("body.task_file");
    // A task object within the rules runs.
    const ok = await server.request("/v1/runs", { method: "POST", json: { task: base } });
    expect(ok.status).toBe(201);
    const record = await json(ok);
    await allSse((await server.request(`/v1/runs/${record.id}/events`)).body!);
    expect((await json(await server.request(`/v1/runs/${record.id}`))).status).toBe("succeeded");
    // A bad task is a 422 naming each field.
    const invalid = await server.request("/v1/runs", { method: "POST", json: { task: { ...base, max_steps: "many" } } });
    expect(invalid.status).toBe(422);
    expect((await json(invalid)).errors.map((error: { field: string }) => error.field)).toContain("body.task.max_steps");
    const neither = await server.request("/v1/runs", { method: "POST", json: {} });
    expect(neither.status).toBe(400);
    expect((await json(neither)).detail).toContain("exactly one of task_file");
  });

  it("Idempotency-Key: a retry gets the first run back and starts nothing; the key with another body is a 422", async () => {
    await using directory = temporaryDirectory();
    const { task } = writeScriptedTask(directory.path, { script: { turns: [{ content: "Done." }] } });
    await using server = await fakeServer(directory.path, { exec: shell() });
    const headers = { "idempotency-key": "3f1c0c52-key" };
    const [first, second] = await Promise.all([
      server.request("/v1/runs", { method: "POST", json: { task_file: task }, headers }),
      server.request("/v1/runs", { method: "POST", json: { task_file: task }, headers }),
    ]);
    const [a, b] = [await json(first), await json(second)];
    expect(a.id).toBe(b.id);
    await allSse((await server.request(`/v1/runs/${a.id}/events`)).body!);
    expect((await json(await server.request("/v1/runs"))).runs).toHaveLength(1);
    const other = await server.request("/v1/runs", { method: "POST", json: { task_file: task, merge: true }, headers });
    expect(other.status).toBe(422);
  });

  it("merge lands the verified commit on your branch; a failed run is refused with the reason --merge gives", async () => {
    await using directory = temporaryDirectory();
    const { task, git } = writeScriptedTask(directory.path, {
      script: DONE,
      files: { "median.txt": "2\n" },
      task: { verify: { command: "check-median", timeout_sec: 30 } },
    });
    await using server = await fakeServer(directory.path, { exec: shell() });
    const record = await json(await server.request("/v1/runs", { method: "POST", json: { task_file: task } }));
    await allSse((await server.request(`/v1/runs/${record.id}/events`)).body!);
    const head = (await json(await server.request(`/v1/runs/${record.id}`))).report.head_commit;
    const merged = await server.request(`/v1/runs/${record.id}/merge`, { method: "POST" });
    expect(merged.status).toBe(200);
    expect(await json(merged)).toMatchObject({ merged: true, branch: "refs/heads/main" });
    expect(git("rev-parse", "main").trim()).toBe(head);
    expect(JSON.parse(readFileSync(join(server.home, "runs", record.id, "report.json"), "utf8")).merge.merged).toBe(true);

    await using other = temporaryDirectory();
    const failing = writeScriptedTask(other.path, {
      script: { turns: [{ tool_calls: [toolCall("write_file", { path: "median.txt", content: "4\n" })] }, { content: "Done." }] },
      files: { "median.txt": "2\n" },
      task: { verify: { command: "check-median", timeout_sec: 30 } },
    });
    await using second = await fakeServer(other.path, { exec: shell() });
    const failed = await json(await second.request("/v1/runs", { method: "POST", json: { task_file: failing.task } }));
    await allSse((await second.request(`/v1/runs/${failed.id}/events`)).body!);
    const refused = await second.request(`/v1/runs/${failed.id}/merge`, { method: "POST" });
    expect(refused.status).toBe(409);
    const problem = await json(refused);
    expect(problem.detail).toContain("only a verified run is merged");
    expect(problem.merge).toMatchObject({ merged: false });
    expect(failing.git("rev-parse", "main").trim()).not.toBe(JSON.parse(readFileSync(join(second.home, "runs", failed.id, "report.json"), "utf8")).head_commit);
  });

  it("cancel ends a running run; a finished one is a 409; an unknown one a 404", async () => {
    await using directory = temporaryDirectory();
    const gates = new Gates();
    const script = { turns: [{ tool_calls: [toolCall("run_shell", { command: "sleep 600" })] }, { content: "Done." }] };
    const { task } = writeScriptedTask(directory.path, { script });
    await using server = await fakeServer(directory.path, { exec: shell(gates) });
    const record = await json(await server.request("/v1/runs", { method: "POST", json: { task_file: task } }));
    await readSse((await server.request(`/v1/runs/${record.id}/events`)).body!, (event) => event.event.includes("tool_call.started"));
    const cancelled = await server.request(`/v1/runs/${record.id}/cancel`, { method: "POST" });
    expect(await json(cancelled)).toEqual({ id: record.id, status: "cancelled" });
    expect((await json(await server.request(`/v1/runs/${record.id}`))).status).toBe("cancelled");
    expect((await server.request(`/v1/runs/${record.id}/cancel`, { method: "POST" })).status).toBe(409);
    const unknown = await server.request("/v1/runs/no-such-run");
    expect(unknown.status).toBe(404);
    expect((await json(unknown)).detail).toContain("GET /v1/runs");
  });

  it("every route but /v1/health needs the token; ?token= sets an httpOnly SameSite=Strict cookie once", async () => {
    await using directory = temporaryDirectory();
    await using server = await fakeServer(directory.path, { exec: shell() });
    const health = await server.app.request("/v1/health");
    expect(health.status).toBe(200);
    const document = await json(await server.request("/v1/openapi.json"));
    const paths = Object.keys(document.paths as object);
    expect(paths).toEqual(
      expect.arrayContaining(["/v1/runs", "/v1/runs/{id}", "/v1/runs/{id}/events", "/v1/approvals", "/v1/runs/{id}/approvals/{approval_id}", "/v1/batches"]),
    );
    for (const [path, methods] of Object.entries(document.paths as Record<string, Record<string, unknown>>)) {
      for (const method of Object.keys(methods)) {
        const url = path.replace("{id}", "x").replace("{approval_id}", "y");
        const response = await server.app.request(url, { method: method.toUpperCase() });
        if (path === "/v1/health") continue;
        expect(response.status, `${method} ${path}`).toBe(401);
        expect(response.headers.get("content-type")).toBe("application/problem+json");
        const wrong = await server.app.request(url, { method: method.toUpperCase(), headers: { authorization: "Bearer wrong" } });
        expect(wrong.status, `${method} ${path} with a wrong token`).toBe(401);
      }
    }
    const login = await server.app.request(`/v1/runs?token=${TOKEN}`);
    expect(login.status).toBe(303);
    expect(login.headers.get("location")).toBe("/v1/runs");
    const cookie = login.headers.get("set-cookie")!;
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/SameSite=Strict/);
    const withCookie = await server.app.request("/v1/runs", { headers: { cookie: cookie.split(";")[0]! } });
    expect(withCookie.status).toBe(200);
    // The cookie does not carry a request from another site's page.
    const crossSite = await server.app.request("http://127.0.0.1:7420/v1/runs", {
      method: "POST",
      headers: { cookie: cookie.split(";")[0]!, origin: "http://evil.example.com", "content-type": "application/json" },
      body: "{}",
    });
    expect(crossSite.status).toBe(403);
    expect(document.paths["/v1/runs"].post.requestBody.content["application/json"].schema.properties).toHaveProperty("task_file");
  });

  it("starts a batch of the task files under a root and serves its report; a batch outside the roots is a 403", async () => {
    await using directory = temporaryDirectory();
    for (const name of ["alpha", "beta"]) writeScriptedTask(join(directory.path, name), { script: { turns: [{ content: "Done." }] }, task: { name } });
    await using server = await fakeServer(directory.path, { exec: shell() });
    const started = await server.request("/v1/batches", { method: "POST", json: { path: directory.path, jobs: 2 } });
    expect(started.status).toBe(201);
    const batch = await json(started);
    expect(batch).toMatchObject({ tasks: 2 });
    await expect.poll(async () => (await json(await server.request(`/v1/batches/${batch.id}`))).status, { timeout: 60_000, interval: 200 }).toBe("passed");
    const report = (await json(await server.request(`/v1/batches/${batch.id}`))).report;
    expect(report.tasks.map((task: { name: string; status: string }) => [task.name, task.status])).toEqual([
      ["alpha", "succeeded"],
      ["beta", "succeeded"],
    ]);
    expect((await json(await server.request("/v1/batches"))).batches.map((entry: { id: string }) => entry.id)).toEqual([batch.id]);
    const html = await server.request(`/v1/batches/${batch.id}/report.html`);
    expect(html.headers.get("content-type")).toContain("text/html");
    expect(html.headers.get("content-security-policy")).toContain("default-src 'none'");
    const outside = await server.request("/v1/batches", { method: "POST", json: { path: "/" } });
    expect(outside.status).toBe(403);
    expect((await json(outside)).errors[0].field).toBe("body.path");
  });

  it("a batch reads no file outside the roots: a list file is refused 403 and a task.yaml linked out is refused without its content", async () => {
    await using directory = temporaryDirectory();
    await using elsewhere = temporaryDirectory();
    const secret = join(elsewhere.path, "credentials");
    writeFileSync(secret, "[default]\naws_secret_access_key = SECRET-do-not-show-0xC0FFEE\n");
    writeFileSync(join(directory.path, "tasks.txt"), `${secret}\n`);
    mkdirSync(join(directory.path, "linked", "t"), { recursive: true });
    symlinkSync(secret, join(directory.path, "linked", "t", "task.yaml"));
    await using server = await fakeServer(directory.path, { exec: shell() });

    const list = await server.request("/v1/batches", { method: "POST", json: { path: join(directory.path, "tasks.txt") } });
    expect(list.status).toBe(403);
    const listText = await list.text();
    expect(listText).not.toContain("SECRET-do-not-show");
    expect(JSON.parse(listText).errors[0].field).toBe("body.path");

    const linked = await server.request("/v1/batches", { method: "POST", json: { path: join(directory.path, "linked") } });
    expect([403, 422]).toContain(linked.status);
    const linkedText = await linked.text();
    expect(linkedText).toMatch(/outside (every --tasks-root|the allowed roots)/);
    expect(linkedText).not.toContain("SECRET-do-not-show");
    expect(linkedText).not.toContain("aws_secret_access_key");
  });
});

describe("runner serve: runs a caller could not have started are out of reach", () => {
  it("answers 403 for a run whose workspace is outside the tasks roots, and leaves it out of the list", async () => {
    await using directory = temporaryDirectory("agent-runner-serve-visible-");
    await using outside = temporaryDirectory("agent-runner-serve-private-");
    await using server = await fakeServer(directory.path);
    const id = "20260101-000000-priv";
    mkdirSync(join(server.runner.home, "runs", id), { recursive: true });
    writeFileSync(join(server.runner.home, "runs", id, "task.json"), JSON.stringify({ name: "private", workspacePath: outside.path, policy: "worker" }));
    writeFileSync(join(server.runner.home, "runs", id, "events.jsonl"), "");
    for (const path of [`/v1/runs/${id}`, `/v1/runs/${id}/events`, `/v1/runs/${id}/patch`, `/v1/runs/${id}/report`]) {
      const response = await server.request(path);
      expect(response.status, path).toBe(403);
      expect(await response.text()).toMatch(/not one this server's callers may use: its workspace .* is outside the allowed roots/);
    }
    expect((await server.request(`/v1/runs/${id}/resume`, { method: "POST", json: {} })).status).toBe(403);
    expect((await server.request(`/v1/runs/${id}/merge`, { method: "POST", json: {} })).status).toBe(403);
    const list = (await (await server.request("/v1/runs")).json()) as { runs: { id: string }[] };
    expect(list.runs.map((run) => run.id)).not.toContain(id);
  });
});
