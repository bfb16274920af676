/**
 * SharedFrames (src/server/shared-frames.ts): the one SSE frame log a run's
 * clients share. Any starting point reads every later event once, in order,
 * across page boundaries; a client behind gets a slice of a page (the same
 * memory for every client), a live one the newest frames; the end is told.
 */
import { describe, expect, it } from "vitest";
import { SharedFrames } from "../../../src/server/shared-frames.js";

function ids(bytes: Buffer): number[] {
  return [...bytes.toString("utf8").matchAll(/^id: (\d+)$/gm)].map((match) => Number(match[1]));
}

/** Everything from `from` until null or the end, with the chunks it came in. */
function drain(frames: SharedFrames, from: number): { sequences: number[]; chunks: Buffer[]; ended: boolean } {
  const chunks: Buffer[] = [];
  let next = from;
  for (;;) {
    const chunk = frames.read(next);
    if (chunk === null || chunk === "end") return { sequences: chunks.flatMap(ids), chunks, ended: chunk === "end" };
    expect(ids(chunk.bytes)).toHaveLength(chunk.count);
    chunks.push(chunk.bytes);
    next += chunk.count;
  }
}

describe("SharedFrames", () => {
  it("reads every event from any start once and in order, across pages; behind, the chunks are slices of one shared page", () => {
    const frames = new SharedFrames();
    for (let index = 0; index < 200; index++) frames.push({ type: `dev.example.t${index % 3}`, index } as { type: string });
    for (const from of [0, 1, 63, 64, 65, 130, 199, 200]) {
      const { sequences, ended } = drain(frames, from);
      expect(sequences, `from ${from}`).toEqual(Array.from({ length: 200 - from }, (_, index) => from + index));
      expect(ended).toBe(false);
    }
    const first = frames.read(0) as { bytes: Buffer };
    const second = frames.read(10) as { bytes: Buffer };
    expect(second.bytes.buffer).toBe(first.bytes.buffer);
    expect(first.bytes.toString()).toContain('event: dev.example.t0\ndata: {"type":"dev.example.t0","index":0}\n\n');
  });

  it("a waiting client is woken by the next event; after the end it reads what is left, then the end", async () => {
    const frames = new SharedFrames();
    expect(frames.read(0)).toBeNull();
    const woken = frames.wait();
    frames.push({ type: "dev.example.one" });
    await woken;
    expect(ids((frames.read(0) as { bytes: Buffer }).bytes)).toEqual([0]);
    frames.push({ type: "dev.example.two" });
    frames.end();
    await frames.wait();
    expect(drain(frames, 1)).toMatchObject({ sequences: [1], ended: true });
    expect(frames.read(5)).toBe("end");
  });
});
