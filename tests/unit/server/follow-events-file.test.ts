/**
 * Following the events.jsonl of a run another process runs
 * (src/server/follow-events-file.ts): an appended event arrives when the
 * file changes, not at the next poll (the poll here is a minute, the test's
 * limit ten seconds); `from` skips what a client has; report.json ends it.
 */
import { appendFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { followEventsFile } from "../../../src/server/follow-events-file.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";

const line = (index: number) => `${JSON.stringify({ type: "dev.agent-runner.test.v1", id: `e${index}` })}\n`;

describe("following events.jsonl", () => {
  it("wakes on the file's change, resumes from a sequence, and ends with report.json", { timeout: 10_000 }, async () => {
    await using directory = temporaryDirectory();
    const file = join(directory.path, "events.jsonl");
    writeFileSync(file, line(0) + line(1));
    const events = followEventsFile(directory.path, 1, { pollMs: 60_000 });
    expect(((await events.next()).value as { id: string }).id).toBe("e1");

    // Nothing to read: the follower waits, and an append wakes it long before its poll.
    const waiting = events.next();
    appendFileSync(file, line(2));
    expect(((await waiting).value as { id: string }).id).toBe("e2");

    // A half-written line waits for its newline; the report ends the stream once all is read.
    const rest = events.next();
    appendFileSync(file, line(3).slice(0, 10));
    appendFileSync(file, line(3).slice(10));
    writeFileSync(join(directory.path, "report.json"), "{}");
    expect(((await rest).value as { id: string }).id).toBe("e3");
    expect((await events.next()).done).toBe(true);
  });
});
