/**
 * `runner serve` end to end (issue 23): the built CLI as a child process on
 * loopback, real Docker, real git, the scripted model. A task object is
 * POSTed, its SSE stream followed to the end (every event of events.jsonl,
 * in order, once), the approval it asks for answered through the API, the
 * patch fetched and the run merged: the verified fast-forward lands on the
 * user's branch. One run.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { requireDocker } from "../helpers/docker.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { readEvents, startCli, toolCall, waitFor, writeScriptedTask } from "../helpers/runner-cli.js";
import { readSse, type SseEvent } from "../helpers/server-client.js";

describe("runner serve (the CLI, real Docker)", () => {
  beforeAll(async () => {
    await requireDocker();
  });

  it("a task object POSTed, followed over SSE to the end, its approval answered, its patch fetched and merged", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task, repo, git } = writeScriptedTask(directory.path, {
      files: { "app.txt": "broken\n" },
      task: { name: "serve-e2e", verify: { command: "grep -qx fixed app.txt", timeout_sec: 60 } },
      script: {
        turns: [
          // The default policy asks before a push: the question waits for the API.
          { tool_calls: [toolCall("run_shell", { command: "git push origin main" })] },
          { tool_calls: [toolCall("write_file", { path: "app.txt", content: "fixed\n" })] },
          { content: "Fixed app.txt." },
        ],
      },
    });
    const base = git("rev-parse", "main").trim();
    const server = startCli(["serve", "--port", "0", "--tasks-root", directory.path], { RUNNER_HOME: home.path });
    try {
      const [, url, token] = await waitFor("the URL", () => /runner serve: (http:\/\/127\.0\.0\.1:\d+)\/\?token=(\S+)/.exec(server.output().stdout), {
        timeoutMs: 30_000,
        process: server,
      });
      const api = (path: string, init: RequestInit & { json?: unknown } = {}) =>
        fetch(`${url}${path}`, {
          ...init,
          headers: { authorization: `Bearer ${token}`, ...(init.json === undefined ? {} : { "content-type": "application/json" }), ...init.headers },
          ...(init.json === undefined ? {} : { body: JSON.stringify(init.json) }),
        });

      // A task object: task.yaml's fields, its relative paths against the --tasks-root.
      const started = await api("/v1/runs", { method: "POST", json: { task: JSON.parse(readFileSync(task, "utf8")) } });
      expect(started.status, await started.clone().text()).toBe(201);
      const { id } = (await started.json()) as { id: string };

      const events: SseEvent[] = [];
      const answers: Promise<Response>[] = [];
      const stream = await api(`/v1/runs/${id}/events`);
      expect(stream.headers.get("content-type")).toContain("text/event-stream");
      await readSse(stream.body!, (event) => {
        events.push(event);
        if (!event.event.endsWith(".approval.requested.v1")) return;
        const question = JSON.parse(event.data) as { data: { name: string; question: string } };
        expect(question.data).toMatchObject({ name: "run_shell", question: expect.stringContaining("git push origin main") });
        answers.push(
          (async () => {
            const { approvals } = (await (await api("/v1/approvals")).json()) as { approvals: { id: string; run_id: string; subject: string }[] };
            expect(approvals).toMatchObject([{ run_id: id, subject: "git push origin main" }]);
            return api(`/v1/runs/${id}/approvals/${approvals[0]!.id}`, { method: "POST", json: { decision: "allow" } });
          })(),
        );
      });
      expect(answers).toHaveLength(1);
      expect((await answers[0]!).status).toBe(200);

      // Every event of events.jsonl, in order, once; then `end`.
      expect(events.at(-1)).toMatchObject({ event: "end", id: null });
      const lines = readEvents(join(home.path, "runs", id));
      const sent = events.filter((event) => event.id !== null);
      expect(sent.map((event) => Number(event.id))).toEqual(lines.map((_line, index) => index));
      expect(sent.map((event) => JSON.parse(event.data).id)).toEqual(lines.map((line) => line.id));
      expect(sent.find((event) => event.event.endsWith(".approval.resolved.v1"))?.data).toContain('"answer":"yes"');

      const record = (await (await api(`/v1/runs/${id}`)).json()) as { status: string; report: { reason: string; head_commit: string } };
      expect(record).toMatchObject({ status: "succeeded", report: { reason: "verified" } });
      const patch = await api(`/v1/runs/${id}/patch`);
      expect(await patch.text()).toMatch(/^\+fixed$/m);

      const merged = await api(`/v1/runs/${id}/merge`, { method: "POST" });
      expect(merged.status, await merged.clone().text()).toBe(200);
      expect(await merged.json()).toMatchObject({ merged: true, branch: "refs/heads/main" });
      expect(git("rev-parse", "main").trim()).toBe(record.report.head_commit);
      expect(git("rev-parse", "main~1").trim()).toBe(base);
      expect(readFileSync(join(repo, "app.txt"), "utf8")).toBe("fixed\n");
    } finally {
      // Stopped before the temporary directories go: it holds the run's records until it has cleaned up.
      server.child.kill("SIGINT");
      await server.result;
    }
    expect(server.exited?.code).toBe(0);
  }, 240_000);
});
