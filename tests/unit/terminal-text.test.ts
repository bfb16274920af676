/**
 * Issue 10, item 7: agent-controlled text shown on a terminal cannot drive it.
 * The progress view, `runner runs` and `runner show` print file names,
 * commands, branch and task names, model text and transcripts; an OSC 52
 * clipboard write, a window title or a bidirectional override in any of them
 * must arrive as visible text.
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ProgressView } from "../../src/cli/progress-view.js";
import type { RunEvent } from "../../src/events/run-events.js";
import type { ModelText } from "../../src/runner/runner.js";
import { oneLine, terminalSafe, terminalSafeJson } from "../../src/terminal-text.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { runCli } from "../helpers/runner-cli.js";

const OSC52 = "\u001b]52;c;Y3VybCBldmlsLnRlc3QgfCBzaA==\u0007";
const TITLE = "\u001b]0;owned\u0007";
const CSI = "\u001b[2K\u001b[1A\u009b31m";
const BIDI = "\u202eexe.txt\u202c\u2066x\u2069";
const HOSTILE = `a${OSC52}b${TITLE}c${CSI}d${BIDI}e\u007f\rf\nstatus: succeeded`;

/** Any character the terminal could act on (newline aside: it ends the view's lines). */
const RAW = /[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

function captureView(isTTY = false) {
  let output = "";
  const stream = { isTTY, write: (chunk: string) => ((output += chunk), true) } as unknown as NodeJS.WriteStream;
  return { view: new ProgressView(stream), output: () => output };
}

/** One event of every type the view prints, every string field hostile. */
function hostileEvents(text: string): RunEvent[] {
  const usage = { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2, cached_tokens: 0 };
  return [
    { type: "run.started", data: { run_id: text, task: text, workspace: text, branch: text, base_commit: text } },
    { type: "sandbox.created", data: { sandbox_id: text, image: text, ready_ms: 1, uid: 1 } },
    { type: "sandbox.restarted", data: { sandbox_id: text } },
    { type: "model_call.finished", data: { agent_id: text, step: 0, duration_ms: 1, usage, tool_calls: 0, content: text } },
    { type: "tool_call.started", data: { agent_id: text, step: 0, tool_call_id: text, name: text, arguments: text } },
    { type: "tool_call.finished", data: { agent_id: text, step: 0, tool_call_id: text, name: text, is_error: true, duration_ms: 1, result_preview: text } },
    {
      type: "workspace.committed",
      data: { branch: text, commit: text, changed: true, left_out: [{ path: text, reason: "dotgit_name" }], left_out_count: 1, timed_out: false },
    },
    { type: "verify.started", data: { agent_id: text, command: text } },
    {
      type: "verify.finished",
      data: { agent_id: text, command: text, exit_code: 1, passed: false, timed_out: false, duration_ms: 1, output_tail: text, sandbox_lost: text },
    },
    { type: "network.denied", data: { method: text, host: text, port: 80, reason: text } },
    { type: "network.proxy_exited", data: { detail: text } },
    { type: "run.resumed", data: { run_id: text, resumes: 1, next_step: 1, worktree: "reused" } },
    { type: "model_call.retrying", data: { agent_id: text, step: 0, purpose: "turn", attempt: 1, delay_ms: 1, reason: text } },
    { type: "tool_call.replayed", data: { agent_id: text, step: 0, tool_call_id: text, name: text, key: text } },
    { type: "tool_call.interrupted", data: { agent_id: text, step: 0, tool_call_id: text, name: text } },
    { type: "context.compaction_failed", data: { agent_id: text, step: 0, error: text } },
    { type: "context.repaired", data: { agent_id: text, step: 0, repairs: [text] } },
    { type: "subagent.started", data: { agent_id: text, parent_id: text, mode: "worker", description: text, branch: text, fork: false, background: true } },
    { type: "subagent.finished", data: { agent_id: text, status: text, steps: 1, verify_passed: true, merge: text, files: [text, text], duration_ms: 1 } },
    { type: "task.finished", data: { task_id: text, kind: "shell", status: text, duration_ms: 1, agent_id: null } },
    { type: "workspace.merged", data: { merged: false, branch: text, detail: text } },
    { type: "tool_call.denied", data: { agent_id: text, tool_call_id: text, name: text, rule: text, reason: text } },
    {
      type: "hook.failed",
      data: { phase: "pre_tool_use", command: text, tool_name: text, tool_call_id: text, exit_code: 1, timed_out: false, outcome: "failed", error: text },
    },
    { type: "cleanup.failed", data: { what: text, error: text } },
    { type: "approval.requested", data: { agent_id: text, tool_call_id: text, name: text, question: text, can_remember: false } },
    { type: "approval.resolved", data: { agent_id: text, tool_call_id: text, answer: "no", reason: text, timed_out: false } },
    {
      type: "setup.finished",
      data: { agent_id: text, phase: "agent", index: 0, command: text, exit_code: 1, timed_out: false, duration_ms: 1, output_tail: text },
    },
  ];
}

describe("terminalSafe", () => {
  it("makes C0/C1 controls, DEL and bidirectional overrides visible, keeps tabs, newlines and ordinary Unicode", () => {
    expect(terminalSafe(`${OSC52}|${TITLE}`)).toBe("\\x1b]52;c;Y3VybCBldmlsLnRlc3QgfCBzaA==\\x07|\\x1b]0;owned\\x07");
    expect(terminalSafe("\u009b\u007f\u0000\r")).toBe("\\x9b\\x7f\\x00\\x0d");
    expect(terminalSafe(BIDI)).toBe("\\u202eexe.txt\\u202c\\u2066x\\u2069");
    expect(terminalSafe("tab\there\nnext line: é ü 日本 →")).toBe("tab\there\nnext line: é ü 日本 →");
    expect(oneLine(`x\n${TITLE}`, 100)).toBe("x \\x1b]0;owned\\x07");
  });

  it("terminalSafeJson writes the same characters as \\u escapes: the JSON value is unchanged", () => {
    const value = { text: HOSTILE };
    const line = terminalSafeJson(JSON.stringify(value));
    expect(line).not.toMatch(RAW);
    expect(JSON.parse(line)).toEqual(value);
  });
});

const usage = { prompt_tokens: 1, completion_tokens: 1, cached_tokens: 0, cache_write_tokens: 0 };

describe("ProgressView", () => {
  it("prints a worker merge whose file names write the clipboard and the window title as visible text", () => {
    const { view, output } = captureView();
    view.emit({
      type: "subagent.finished",
      data: {
        agent_id: "w1",
        status: "merged",
        steps: 3,
        verify_passed: true,
        merge: "merged",
        files: [`src/${OSC52}.py`, `docs/${TITLE}.md`],
        duration_ms: 5,
      },
    });
    const printed = output();
    expect(printed).not.toContain("\u001b");
    expect(printed).not.toContain("\u0007");
    expect(printed).toContain("w1 merged (src/\\x1b]52;c;Y3VybCBldmlsLnRlc3QgfCBzaA==\\x07.py, docs/\\x1b]0;owned\\x07.md) after 3 steps");
  });

  it("writes no raw control character from any string of any event it prints, and one line per event", () => {
    const { view, output } = captureView();
    const events = hostileEvents(HOSTILE);
    for (const event of events) view.emit(event);
    const lines = output().split("\n").slice(0, -1);
    // tool_call.started has no line of its own: the call's line comes with tool_call.finished, with its outcome.
    expect(lines).toHaveLength(events.length - 1);
    for (const line of lines) expect(line).not.toMatch(RAW);
    // context.repaired shows none of the event's strings; every other line shows them, escaped.
    expect(lines.filter((line) => line.includes("\\x1b]52;c;"))).toHaveLength(events.length - 2);
  });

  it("on a TTY, its own colours and the status line's erasing are the only escape sequences", () => {
    const { view, output } = captureView(true);
    for (const event of hostileEvents(HOSTILE)) view.emit(event);
    view.close();
    const withoutColours = output()
      .replaceAll("\r\u001b[2K", "")
      .replace(/\u001b\[[0-9;]*m/g, "");
    expect(withoutColours.split("\n").join("")).not.toMatch(RAW);
  });

  it("on a TTY, streamed reply text is one dim status line, redrawn in place, terminal-safe, erased before the next line", () => {
    const { view, output } = captureView(true);
    const text = (delta: string, extra: Partial<ModelText> = {}) =>
      view.showModelText({ agentId: "main", step: 0, purpose: "turn", attempt: 0, delta, ...extra });
    text("Reading ");
    text(`calc.py ${HOSTILE}`);
    expect(output()).not.toContain("\n");
    expect(output().split("\r\u001b[2K")).toHaveLength(3);
    const withoutOwnEscapes = output()
      .replaceAll("\r\u001b[2K", "")
      .replace(/\u001b\[[0-9;]*m/g, "");
    expect(withoutOwnEscapes).not.toMatch(RAW);
    expect(withoutOwnEscapes).toMatch(/step 1 model: Reading \[/);
    // Longer than the row (80 columns without a size): the end of the reply so far, never wrapping.
    const status = withoutOwnEscapes.slice(withoutOwnEscapes.lastIndexOf("["));
    expect(status).toMatch(/^\[ *[\d.]+s\] step 1 model: ….* f status: succeeded$/);
    expect(status.length).toBeLessThan(80);
    // A subagent's text and a summary's are not shown; a retry's text starts over.
    const before = output().length;
    text("sub", { agentId: "w1" });
    text("summary", { purpose: "compaction" });
    expect(output().length).toBe(before);
    text("Again", { attempt: 1 });
    expect(output().slice(before)).toMatch(/step 1 model: Again\u001b\[22m$/);
    view.emit({ type: "model_call.finished", data: { agent_id: "main", step: 0, duration_ms: 1, usage, tool_calls: 0, content: "Again, whole." } });
    expect(output().endsWith("\n")).toBe(true);
    const last = output().slice(output().lastIndexOf("\r\u001b[2K"));
    expect(last).toMatch(/^\r\u001b\[2K\u001b\[2m\[ *[\d.]+s\]\u001b\[22m \u001b\[36mstep 1\u001b\[39m model: Again, whole\.\n$/);
  });

  it("without a TTY, streamed text is not drawn", () => {
    const { view, output } = captureView(false);
    expect(view.showsStreamedText).toBe(false);
    view.showModelText({ agentId: "main", step: 0, purpose: "turn", attempt: 0, delta: "hello" });
    expect(output()).toBe("");
  });

  it("has one way to the terminal, and it passes every string of the event through terminalSafe", () => {
    const source = readFileSync(join(import.meta.dirname, "..", "..", "src", "cli", "progress-view.ts"), "utf8");
    expect(source.match(/\.write\(/g)).toHaveLength(1);
    expect(source.match(/this\.describe\(/g)).toEqual(["this.describe("]);
    expect(source).toContain("const safe = safeStrings(event);");
    expect(source).toContain("this.describe(safe)");
    expect(source.match(/this\.track\(/g)).toEqual(["this.track("]);
    expect(source).toContain("this.track(safe)");
    expect(source).not.toMatch(/console\.|process\.stdout/);
  });
});

describe("runner runs and runner show (built CLI)", () => {
  it("print task names, branches and transcripts from run records as visible text", async () => {
    await using home = temporaryDirectory();
    const id = "20240101-000000-abcd";
    const directory = join(home.path, "runs", id);
    mkdirSync(directory, { recursive: true });
    writeFileSync(join(directory, "report.json"), JSON.stringify({ run_id: id, task: `task${TITLE}`, status: "failed", branch: `runner/${BIDI}` }));
    const messages = [
      { role: "system", content: `system ${CSI}` },
      { role: "user", content: `do it ${OSC52}` },
      {
        role: "assistant",
        content: `done ${TITLE}`,
        tool_calls: [{ id: "c1", type: "function", function: { name: `mcp__x${CSI}`, arguments: JSON.stringify({ path: `${OSC52}.txt` }) } }],
      },
      { role: "tool", tool_call_id: "c1", content: `output ${OSC52}\n${BIDI}` },
    ];
    writeFileSync(join(directory, "session.json"), JSON.stringify({ agents: { main: { messages } } }));

    const listed = await runCli(["runs"], { RUNNER_HOME: home.path });
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toContain("task\\x1b]0;owned\\x07");
    expect(listed.stdout.replace(/\n/g, "")).not.toMatch(RAW);
    const json = await runCli(["runs", "--json"], { RUNNER_HOME: home.path });
    expect(json.stdout.replace(/\n/g, "")).not.toMatch(RAW);
    expect(JSON.parse(json.stdout.trim()).branch).toBe(`runner/${BIDI}`);

    const shown = await runCli(["show", id], { RUNNER_HOME: home.path });
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout.replace(/\n/g, "")).not.toMatch(RAW);
    expect(shown.stdout).toContain("[user] do it \\x1b]52;c;");
    expect(shown.stdout).toContain("→ mcp__x\\x1b[2K");
  });
});
