import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ApprovalInbox } from "../../src/runner/approval-inbox.js";
import type { ApprovalRequest } from "../../src/runner/runner.js";

function question(runId: string, subject: string): ApprovalRequest {
  return {
    runId,
    agentId: "main",
    toolCallId: `call-${subject}`,
    toolName: "run_shell",
    subject,
    rule: "git-push",
    reason: "publishes commits",
    question: `Allow run_shell: ${subject}?`,
    canRemember: true,
  };
}

describe("ApprovalInbox", () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: 1_000_000 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("keeps questions until answered by id, lists them per run oldest first, and tells onChange about each", async () => {
    const changes: string[] = [];
    const inbox = new ApprovalInbox({
      onChange: (change) => changes.push(`${change.kind} ${change.approval.request.subject} ${change.answer?.answer ?? ""}`.trim()),
    });
    const signal = new AbortController().signal;
    const first = inbox.request(question("run-a", "git push"), signal);
    vi.advanceTimersByTime(10);
    const second = inbox.request(question("run-b", "npm publish"), signal);
    const third = inbox.request(question("run-a", "gh pr create"), signal);
    expect(inbox.pending().map((approval) => approval.request.subject)).toEqual(["git push", "npm publish", "gh pr create"]);
    expect(inbox.pending("run-a").map((approval) => approval.request.subject)).toEqual(["git push", "gh pr create"]);
    const [a1, b1, a2] = inbox.pending();
    expect(a1!.askedAt).toBe(1_000_000);
    expect(a1!.deadline).toBe(1_000_000 + 5 * 60 * 1000);
    expect(new Set([a1!.id, b1!.id, a2!.id]).size).toBe(3);

    expect(inbox.answer(b1!.id, { answer: "no", reason: "not from here" })).toBe(true);
    expect(await second).toEqual({ answer: "no", reason: "not from here" });
    expect(inbox.answer(a1!.id, { answer: "always" })).toBe(true);
    expect(await first).toEqual({ answer: "always" });
    // A second answer to the same question changes nothing.
    expect(inbox.answer(a1!.id, { answer: "no" })).toBe(false);
    expect(inbox.answer("no-such-id", { answer: "yes" })).toBe(false);
    expect(inbox.pending().map((approval) => approval.id)).toEqual([a2!.id]);
    inbox.answer(a2!.id, { answer: "yes" });
    expect(await third).toEqual({ answer: "yes" });
    expect(changes).toEqual([
      "requested git push",
      "requested npm publish",
      "requested gh pr create",
      "resolved npm publish no",
      "resolved git push always",
      "resolved gh pr create yes",
    ]);
  });

  it("a question nobody answers within timeoutMs is a no with timedOut, and leaves the list", async () => {
    const inbox = new ApprovalInbox({ timeoutMs: 30_000 });
    const answer = inbox.request(question("run-a", "git push"), new AbortController().signal);
    vi.advanceTimersByTime(29_999);
    expect(inbox.pending()).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(await answer).toEqual({ answer: "no", reason: "no answer within 30 s", timedOut: true });
    expect(inbox.pending()).toEqual([]);
  });

  it("a run that stops waiting takes its question out: a no, and a late answer is refused", async () => {
    const inbox = new ApprovalInbox();
    const controller = new AbortController();
    const answer = inbox.request(question("run-a", "git push"), controller.signal);
    const id = inbox.pending()[0]!.id;
    controller.abort();
    expect(await answer).toEqual({ answer: "no", reason: "the run stopped waiting" });
    expect(inbox.pending()).toEqual([]);
    expect(inbox.answer(id, { answer: "yes" })).toBe(false);
    // Already aborted when asked: answered at once, never listed.
    expect(await inbox.request(question("run-a", "again"), controller.signal)).toEqual({ answer: "no", reason: "the run stopped waiting" });
    expect(inbox.pending()).toEqual([]);
    // The timers of settled questions are gone: nothing fires later.
    expect(vi.getTimerCount()).toBe(0);
  });

  it("uses the injected clock for askedAt and deadline", () => {
    const inbox = new ApprovalInbox({ now: () => 42, timeoutMs: 1000 });
    void inbox.request(question("run-a", "git push"), new AbortController().signal);
    expect(inbox.pending()[0]).toMatchObject({ askedAt: 42, deadline: 1042 });
  });
});
