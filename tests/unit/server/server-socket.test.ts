/**
 * `runner serve` over a real loopback socket (issue 23): the SSE stream of
 * a run is cut mid-run and resumed with Last-Event-ID; what the client got
 * over both connections is events.jsonl exactly, no gap, no duplicate.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { listen } from "../../../src/server/listen.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { eventsFile, fakeShell, Gates, toolCall, writeScriptedTask } from "../../helpers/fake-runner.js";
import { fakeServer, readSse, TOKEN, type SseEvent } from "../../helpers/server-client.js";

describe("runner serve over a socket", () => {
  it("an SSE connection cut mid-run resumes from Last-Event-ID with no gap and no duplicate", async () => {
    await using directory = temporaryDirectory();
    const gates = new Gates();
    const script = {
      turns: [
        { tool_calls: [toolCall("run_shell", { command: "echo one >> notes.txt" })] },
        { tool_calls: [toolCall("run_shell", { command: "wait-for resume" })] },
        { tool_calls: [toolCall("run_shell", { command: "echo two >> notes.txt" })] },
        { content: "Done." },
      ],
    };
    const { task } = writeScriptedTask(directory.path, { script });
    await using server = await fakeServer(directory.path, { exec: fakeShell(gates) });
    const listening = await listen(server.app, "127.0.0.1", 0);
    try {
      const headers = { authorization: `Bearer ${TOKEN}` };
      const started = await fetch(`${listening.url}/v1/runs`, {
        method: "POST",
        headers: { ...headers, "content-type": "application/json" },
        body: JSON.stringify({ task_file: task }),
      });
      expect(started.status).toBe(201);
      const { id } = (await started.json()) as { id: string };
      expect((await fetch(`${listening.url}/v1/runs/${id}`)).status).toBe(401);

      const received: SseEvent[] = [];
      const cut = new AbortController();
      const first = await fetch(`${listening.url}/v1/runs/${id}/events`, { headers, signal: cut.signal });
      await readSse(first.body!, (event) => {
        received.push(event);
        return event.event.includes("tool_call.started") && event.data.includes("wait-for resume");
      });
      cut.abort();
      gates.open("resume");

      const last = received.at(-1)!.id!;
      const second = await fetch(`${listening.url}/v1/runs/${id}/events`, { headers: { ...headers, "last-event-id": last } });
      await readSse(second.body!, (event) => void received.push(event));

      const lines = eventsFile(join(server.home, "runs", id));
      const events = received.filter((event) => event.id !== null);
      expect(events.map((event) => Number(event.id))).toEqual(lines.map((_line, index) => index));
      expect(events.map((event) => JSON.parse(event.data))).toEqual(lines);
      expect(received.at(-1)!.event).toBe("end");
    } finally {
      await listening.close();
    }
  });
});
