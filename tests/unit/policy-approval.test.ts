import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { promptForApproval } from "../../src/policy/approval-prompt.js";
import { decideApproval, resolveApprovalAnswer, type ApprovalContext } from "../../src/policy/approval.js";
import type { PermissionDecision } from "../../src/policy/permission-checker.js";

const gitPush: PermissionDecision = {
  decision: "confirm",
  reason: "`git push`: publishes commits",
  rule: "commands.git-push",
  subject: "git push",
  findings: [{ risk: "confirm", rule: "commands.git-push", reason: "publishes commits", command: "git push" }],
};
const deleteAll: PermissionDecision = {
  decision: "confirm",
  reason: "`rm -rf /`: deletes everything",
  rule: "commands.delete-everything",
  subject: "rm -rf /",
  findings: [{ risk: "confirm", rule: "commands.delete-everything", reason: "deletes everything", command: "rm -rf /" }],
};

function context(overrides: Partial<ApprovalContext> = {}): ApprovalContext {
  return {
    toolName: "run_shell",
    decision: gitPush,
    interactive: true,
    policy: { name: "worker", confirmations: "prompt", remember: ["run_shell"] },
    remembered: new Set(),
    ...overrides,
  };
}

describe("decideApproval", () => {
  it("allow and deny verdicts stand, whatever the terminal and the policy say", () => {
    const allowed: PermissionDecision = { decision: "allow", reason: "fine", rule: "tools.allow" };
    const denied: PermissionDecision = { decision: "deny", reason: "never", rule: "hard.protected-path" };
    for (const confirmations of ["prompt", "deny", "allow"] as const) {
      const policy = { name: "p", confirmations, remember: ["*"] };
      expect(decideApproval(context({ decision: allowed, policy, interactive: false }))).toEqual({ kind: "allow", reason: "fine", rule: "tools.allow" });
      expect(decideApproval(context({ decision: denied, policy, remembered: new Set(["run_shell hard.protected-path"]) }))).toEqual({
        kind: "deny",
        reason: "never",
        rule: "hard.protected-path",
      });
    }
  });

  it("with no terminal a confirmation is refused, unless the policy allows it", () => {
    const refused = decideApproval(context({ interactive: false }));
    expect(refused).toMatchObject({ kind: "deny", rule: "commands.git-push" });
    expect(refused.kind === "deny" && refused.reason).toMatch(/publishes commits — this needs confirmation and there is no terminal to ask/);
    expect(decideApproval(context({ interactive: false, policy: { name: "trusting", confirmations: "allow", remember: [] } }))).toMatchObject({
      kind: "allow",
      rule: "commands.git-push",
    });
  });

  it("confirmations: deny refuses even on a terminal, with the reason", () => {
    const step = decideApproval(context({ policy: { name: "ci", confirmations: "deny", remember: [] } }));
    expect(step).toMatchObject({ kind: "deny", rule: "commands.git-push" });
    expect(step.kind === "deny" && step.reason).toMatch(
      /publishes commits — this needs confirmation, and policy ci refuses everything that does \(confirmations: deny\)/,
    );
  });

  it("on a terminal it asks, offering 'always' only for tools the policy lets be remembered", () => {
    expect(decideApproval(context())).toMatchObject({ kind: "ask", canRemember: true });
    expect(decideApproval(context()).kind === "ask" && (decideApproval(context()) as { question: string }).question).toMatch(
      /policy worker: run_shell "git push" needs confirmation/,
    );
    expect(decideApproval(context({ toolName: "mcp__github__create_issue" }))).toMatchObject({ kind: "ask", canRemember: false });
  });

  it("'always' is remembered for that tool and rule only, for tools listed in remember", () => {
    const first = resolveApprovalAnswer(context(), { answer: "always" });
    expect(first).toMatchObject({ kind: "allow", remember: ["run_shell commands.git-push"] });
    const remembered = new Set(first.remember);
    // The same rule again: allowed without asking.
    expect(decideApproval(context({ remembered }))).toMatchObject({ kind: "allow", rule: "commands.git-push" });
    // Another rule of the same tool: asked again.
    expect(decideApproval(context({ remembered, decision: deleteAll }))).toMatchObject({ kind: "ask" });
    // Even with confirmations: deny a remembered answer counts (it was given in this run).
    expect(decideApproval(context({ remembered, interactive: false }))).toMatchObject({ kind: "allow" });
  });

  it("remember covers only listed tools: 'always' for an unlisted tool approves once", () => {
    const mcp = context({ toolName: "mcp__github__create_issue", decision: { decision: "confirm", reason: "acts on GitHub", rule: "tools.allow" } });
    const answer = resolveApprovalAnswer(mcp, { answer: "always" });
    expect(answer).toMatchObject({ kind: "allow", remember: [] });
    expect(answer.reason).toMatch(/this once: policy worker does not let answers for mcp__github__create_issue be remembered/);
    expect(decideApproval({ ...mcp, remembered: new Set(["mcp__github__create_issue tools.allow"]) })).toMatchObject({ kind: "ask" });
  });

  it("an answer needs every confirming part of a command line to be remembered", () => {
    const both: PermissionDecision = { ...gitPush, findings: [...gitPush.findings!, ...deleteAll.findings!] };
    expect(decideApproval(context({ decision: both, remembered: new Set(["run_shell commands.git-push"]) }))).toMatchObject({ kind: "ask" });
    const always = resolveApprovalAnswer(context({ decision: both }), { answer: "always" });
    expect(always.remember).toEqual(["run_shell commands.git-push", "run_shell commands.delete-everything"]);
  });

  it("no, no with a reason, and a timeout are refusals the model can read", () => {
    expect(resolveApprovalAnswer(context(), { answer: "yes" })).toMatchObject({ kind: "allow", remember: [] });
    expect(resolveApprovalAnswer(context(), { answer: "no" }).reason).toBe("the user refused (`git push`: publishes commits)");
    expect(resolveApprovalAnswer(context(), { answer: "no", reason: "open a PR instead" }).reason).toBe(
      "the user refused: open a PR instead (`git push`: publishes commits)",
    );
    expect(resolveApprovalAnswer(context(), { answer: "no", timedOut: true })).toMatchObject({
      kind: "deny",
      reason: expect.stringMatching(/^no answer came in time/),
    });
  });
});

describe("promptForApproval", () => {
  function streams() {
    const input = new PassThrough();
    const output = new PassThrough();
    let written = "";
    output.on("data", (chunk: Buffer) => (written += chunk.toString()));
    return { input, output, written: () => written };
  }

  it.each([
    ["y\n", { answer: "yes" }],
    ["YES\n", { answer: "yes" }],
    ["n\n", { answer: "no" }],
    ["n   use the fixture instead \n", { answer: "no", reason: "use the fixture instead" }],
    ["no\r\n", { answer: "no" }],
    ["a\n", { answer: "always" }],
    ["always\n", { answer: "always" }],
  ])("%j answers %j", async (typed, expected) => {
    const { input, output, written } = streams();
    const answer = promptForApproval({ input, output, question: "run_shell git push?", canRemember: true, timeoutMs: 5_000 });
    input.write(typed);
    expect(await answer).toEqual(expected);
    expect(written()).toMatch(/run_shell git push\?\nAllow\? \[y\]es \/ \[n\]o \[reason\] \/ \[a\]lways for this run: $/);
  });

  it("does not offer or accept 'a' when the answer cannot be remembered, and asks again", async () => {
    const { input, output, written } = streams();
    const answer = promptForApproval({ input, output, question: "q", canRemember: false, timeoutMs: 5_000 });
    input.write("a\n");
    input.write("y\n");
    expect(await answer).toEqual({ answer: "yes" });
    expect(written()).not.toMatch(/\[a\]lways/);
    expect(written()).toMatch(/please answer y, n \[reason\] \(got "a"\)/);
  });

  it("three answers it does not understand count as no", async () => {
    const { input, output } = streams();
    const answer = promptForApproval({ input, output, question: "q", canRemember: true, timeoutMs: 5_000 });
    input.write("maybe\nperhaps\nsure?\n");
    expect(await answer).toEqual({ answer: "no", reason: "no valid answer" });
  });

  it("a timeout answers no", async () => {
    const { input, output, written } = streams();
    const started = Date.now();
    expect(await promptForApproval({ input, output, question: "q", canRemember: true, timeoutMs: 50 })).toEqual({ answer: "no", timedOut: true });
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
    expect(written()).toMatch(/no answer within 50 ms; refusing/);
    // A late answer is not taken for the next question.
    input.write("y\n");
    expect(input.listenerCount("data")).toBe(0);
  });

  it("the end of input and an abort answer no", async () => {
    const ended = streams();
    const first = promptForApproval({ input: ended.input, output: ended.output, question: "q", canRemember: true, timeoutMs: 5_000 });
    ended.input.end();
    expect(await first).toEqual({ answer: "no", reason: "input closed before an answer" });

    const aborted = streams();
    const controller = new AbortController();
    const second = promptForApproval({
      input: aborted.input,
      output: aborted.output,
      question: "q",
      canRemember: true,
      timeoutMs: 5_000,
      signal: controller.signal,
    });
    controller.abort();
    expect(await second).toEqual({ answer: "no", reason: "cancelled" });
  });

  it("answers split across chunks are put together", async () => {
    const { input, output } = streams();
    const answer = promptForApproval({ input, output, question: "q", canRemember: true, timeoutMs: 5_000 });
    input.write("n not ");
    input.write(Buffer.from("now\n"));
    expect(await answer).toEqual({ answer: "no", reason: "not now" });
  });
});
