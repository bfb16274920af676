import { describe, expect, it } from "vitest";
import { CancelledError } from "../../src/errors.js";
import type { RunEvent } from "../../src/events/run-events.js";
import { validatePolicy } from "../../src/policy/load-policy.js";
import { PermissionChecker } from "../../src/policy/permission-checker.js";
import { PermissionGuard, writePreview, type AskApproval } from "../../src/run/permission-guard.js";

/** A guard whose policy asks before every command, answered by `ask`. */
async function guardAsking(ask: AskApproval, signal = new AbortController().signal) {
  const checker = await PermissionChecker.create(
    validatePolicy(
      { name: "ask", description: "asks before every command", tools: { allow: ["*"] }, default_command_risk: "confirm", confirmations: "prompt" },
      "ask",
    ),
  );
  const events: RunEvent[] = [];
  const guard = new PermissionGuard({
    checker,
    hooks: null,
    events: { emit: (event) => events.push(event) },
    signal,
    ask,
    remembered: new Set(),
    denials: {},
    redact: (text) => text.replaceAll("hunter2-secret", "[redacted]"),
  });
  const call = (command: string) => guard.check({ name: "run_shell", arguments: { command }, toolCallId: "c1", agentId: "main", readOnly: false });
  return { guard, events, call };
}

describe("PermissionGuard and whoever answers its questions", () => {
  it("a file write's question shows what it would write (size and first lines; an edit's old and new text), redacted", async () => {
    const checker = await PermissionChecker.create(
      validatePolicy(
        { name: "writes", description: "asks before writes", tools: { allow: ["*"], confirm: ["write_file", "edit_file"] }, confirmations: "prompt" },
        "writes",
      ),
    );
    const seen: { question: string }[] = [];
    const guard = new PermissionGuard({
      checker,
      hooks: null,
      events: { emit: () => undefined },
      signal: new AbortController().signal,
      ask: async (question) => (seen.push(question), { answer: "yes" }),
      remembered: new Set(),
      denials: {},
      redact: (text) => text.replaceAll("hunter2-secret", "[redacted]"),
    });
    const content = ["def add(a, b):", "    return a + b  # hunter2-secret", ...Array.from({ length: 20 }, (_, index) => `# line ${index}`)].join("\n") + "\n";
    await guard.check({ name: "write_file", arguments: { path: "calc.py", content }, toolCallId: "c1", agentId: "main", readOnly: false });
    expect(seen[0]!.question).toContain(`content (${Buffer.byteLength(content)} bytes, 22 lines):\n  | def add(a, b):\n  |     return a + b  # [redacted]`);
    expect(seen[0]!.question).toContain("  | … 10 more lines");
    expect(seen[0]!.question).not.toContain("hunter2-secret");
    await guard.check({
      name: "edit_file",
      arguments: { path: "calc.py", old_string: "a - b", new_string: "a + b" },
      toolCallId: "c2",
      agentId: "main",
      readOnly: false,
    });
    expect(seen[1]!.question).toMatch(/replace:\n {2}\| a - b\nwith:\n {2}\| a \+ b$/);
    expect(writePreview("run_shell", { command: "ls" })).toBe("");
  });

  it("a previewed line is cut at 200 characters with an ellipsis: one minified line cannot fill the question", () => {
    const long = "x".repeat(5000);
    const preview = writePreview("write_file", { path: "app.min.js", content: `${long}\nshort\n` });
    const lines = preview.split("\n");
    expect(lines[2]).toBe(`  | ${"x".repeat(200)}…`);
    expect(lines[3]).toBe("  | short");
    expect(preview.length).toBeLessThan(300);
    const edit = writePreview("edit_file", { path: "a", old_string: "a".repeat(201), new_string: "b".repeat(200) });
    expect(edit).toContain(`  | ${"a".repeat(200)}…\n`);
    expect(edit).toContain(`  | ${"b".repeat(200)}`);
    expect(edit).not.toContain(`${"b".repeat(200)}…`);
  });

  it("the answerer never sees a secret in clear: question, subject and reason are redacted", async () => {
    const seen: unknown[] = [];
    const { call } = await guardAsking(async (question) => (seen.push(question), { answer: "yes" }));
    expect(await call("mysql -phunter2-secret")).toEqual({ allowed: true });
    expect(JSON.stringify(seen)).not.toContain("hunter2-secret");
    expect(seen[0]).toMatchObject({ subject: "mysql -p[redacted]" });
  });

  it("an answer that is not yes/always/no, or a broker that throws, is a no saying so; the run goes on", async () => {
    for (const [given, reason] of [
      [{ answer: "yes please" }, /no valid answer/],
      [null, /no valid answer .*got null/],
      ["yes", /no valid answer .*got a string/],
    ] as const) {
      const { call, events } = await guardAsking(async () => given as never);
      expect(await call("ls")).toMatchObject({ allowed: false });
      expect(events.find((event) => event.type === "approval.resolved")).toMatchObject({ data: { answer: "no", reason: expect.stringMatching(reason) } });
    }
    const { call } = await guardAsking(() => {
      throw new Error("broker down");
    });
    expect(await call("ls")).toEqual({ allowed: false, reason: expect.stringContaining("") });
  });

  it("a broker that never answers does not hold a cancelled run: the check ends with CancelledError at once", async () => {
    const controller = new AbortController();
    const { call } = await guardAsking(() => new Promise(() => {}), controller.signal);
    const checked = call("ls");
    controller.abort(new CancelledError("stop"));
    await expect(checked).rejects.toBeInstanceOf(CancelledError);
  });
});
