/**
 * The runs board's stream (src/server/event-streams.ts BoardStream): a
 * message's data is serialised once for all clients; `publishLater` merges
 * the messages of one key asked for in one turn of the event loop into one,
 * made after the turn, and makes none while no client is connected (a run's
 * record is read from its files at every step of every run).
 */
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import { BoardStream } from "../../../src/server/event-streams.js";
import { readSse, type SseEvent } from "../../helpers/server-client.js";

/** Connects a client to `board` and resolves, once its snapshot arrived, with the messages it receives after it. */
async function connect(board: BoardStream): Promise<{ messages: SseEvent[]; next: (count: number) => Promise<SseEvent[]> }> {
  const app = new Hono();
  app.get("/", (c) => board.respond(c, () => ({ runs: [] })));
  const response = await app.request("/");
  const reader = response.body!;
  const messages: SseEvent[] = [];
  let waiter: { count: number; resolve: () => void } | null = null;
  let snapshot!: () => void;
  const connected = new Promise<void>((resolve) => (snapshot = resolve));
  void readSse(reader, (event) => {
    if (event.event === "snapshot") return void snapshot();
    messages.push(event);
    if (waiter && messages.length >= waiter.count) waiter.resolve();
  });
  await connected;
  return {
    messages,
    next: (count) =>
      new Promise((resolve) => {
        waiter = { count, resolve: () => resolve(messages.slice(0, count)) };
        if (messages.length >= count) waiter.resolve();
      }),
  };
}

describe("the board's stream", () => {
  it("makes nothing while no client is connected; merges one key's messages of a turn into the last one; serialises once for all clients", async () => {
    const board = new BoardStream();
    let made = 0;
    board.publishLater("run:a", () => (made++, { event: "run", data: { id: "a" } }));
    board.publish({ event: "approval.requested", data: { id: "nobody" } });
    await new Promise((resolve) => setImmediate(resolve));
    expect(made).toBe(0);

    const clients = await Promise.all([connect(board), connect(board), connect(board)]);
    let serialised = 0;
    const data = (step: number) => ({ toJSON: () => (serialised++, { id: "a", step }) });
    for (let step = 1; step <= 3; step++) board.publishLater("run:a", () => (made++, { event: "run", data: data(step) }));
    board.publishLater("run:b", () => null);
    board.publish({ event: "approval.requested", data: { id: "q1" } });
    for (const client of clients) {
      expect((await client.next(2)).map((message) => [message.event, JSON.parse(message.data)])).toEqual([
        ["approval.requested", { id: "q1" }],
        ["run", { id: "a", step: 3 }],
      ]);
    }
    expect(made).toBe(1);
    expect(serialised).toBe(1);
  });
});
