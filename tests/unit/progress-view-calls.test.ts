/**
 * What a person sees of tool calls, setup and approvals in the progress view
 * (issue 26 items 5 and 6): each call's outcome on its line, multi-line
 * commands readable, setup progress, a timer on a terminal only, and an
 * approval prompt that no line of the view interrupts. The view is fed
 * events as the run emits them; a terminal is a stream with `isTTY`.
 * (The built CLI on a real pseudo-terminal: tests/e2e/live-view.test.ts.)
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { ProgressView } from "../../src/cli/progress-view.js";
import type { RunEvent } from "../../src/events/run-events.js";

function captureView(isTTY: boolean) {
  let output = "";
  const stream = { isTTY, columns: 100, write: (chunk: string) => ((output += chunk), true) } as unknown as NodeJS.WriteStream;
  const view = new ProgressView(stream);
  return {
    view,
    output: () => output,
    /** What the screen shows: colours dropped, each erased status line gone. */
    screen: () =>
      output
        .replace(/\u001b\[[0-9;]*m/g, "")
        .split("\n")
        .map((line) => line.slice(line.lastIndexOf("\r\u001b[2K") + 1).replace(/^\u001b\[2K/, ""))
        .join("\n"),
  };
}

function started(id: string, name: string, args: Record<string, unknown>, step = 0): RunEvent {
  return { type: "tool_call.started", data: { agent_id: "main", step, tool_call_id: id, name, arguments: JSON.stringify(args) } };
}

function finished(id: string, name: string, preview: string, details: Record<string, unknown>, isError = false): RunEvent {
  return {
    type: "tool_call.finished",
    data: { agent_id: "main", step: 0, tool_call_id: id, name, is_error: isError, duration_ms: 1234, result_preview: preview, details },
  };
}

afterEach(() => {
  vi.useRealTimers();
});

describe("tool calls in the progress view", () => {
  it("shows each call once, on the line of its outcome: exit code and first output line, lines and bytes, the error", () => {
    const { view, screen } = captureView(false);
    view.emit(started("a", "run_shell", { command: "pytest -q" }));
    expect(screen()).toBe("");
    view.emit(
      finished("a", "run_shell", "exit_code: 1\nstdout:\n\nFAILED test_calc.py::test_add\n1 failed\nstderr:\n(empty)", { exit_code: 1, timed_out: false }),
    );
    view.emit(started("b", "run_shell", { command: "ls missing" }));
    view.emit(finished("b", "run_shell", "exit_code: 2\nstdout:\n(empty)\nstderr:\nls: cannot access 'missing'", { exit_code: 2, timed_out: false }));
    view.emit(started("c", "write_file", { path: "calc.py", content: "a\nb\n" }));
    view.emit(finished("c", "write_file", "Wrote 4 bytes to calc.py", { path: "calc.py", bytes: 4, lines: 2 }));
    view.emit(started("d", "read_file", { path: "nope.py" }));
    view.emit(finished("d", "read_file", "Error: file not found: nope.py", {}, true));
    view.emit(started("e", "run_shell", { command: "sleep 9", timeout_ms: 100 }));
    view.emit(
      finished("e", "run_shell", "exit_code: none (killed by SIGKILL)\ntimed_out: true\nstdout:\n(empty)\nstderr:\n(empty)", {
        exit_code: null,
        timed_out: true,
      }),
    );
    const lines = screen().trimEnd().split("\n");
    expect(lines).toHaveLength(5);
    expect(lines[0]).toMatch(/^\[ *[\d.]+s\] step 1 run_shell pytest -q → exit 1 · FAILED test_calc\.py::test_add \(1\.2 s\)$/);
    expect(lines[1]).toMatch(/step 1 run_shell ls missing → exit 2 · ls: cannot access 'missing' \(1\.2 s\)$/);
    expect(lines[2]).toMatch(/step 1 write_file calc\.py → 2 lines, 4 B \(1\.2 s\)$/);
    expect(lines[3]).toMatch(/step 1 read_file nope\.py → file not found: nope\.py \(1\.2 s\)$/);
    expect(lines[4]).toMatch(/step 1 run_shell sleep 9 → timed out \(1\.2 s\)$/);
  });

  it("a refused call is its denied line alone; a call the registry refuses by name shows its error", () => {
    const { view, screen } = captureView(false);
    view.emit({
      type: "tool_call.denied",
      data: { agent_id: "main", tool_call_id: "a", name: "run_shell", rule: "commands.git-push", reason: "`git push`: publishes commits" },
    });
    view.emit(finished("a", "run_shell", "[denied] `git push`: publishes commits", { denied: true }, true));
    view.emit(finished("b", "write_file", "[denied] a reviewer does not write", { denied: true }, true));
    const lines = screen().trimEnd().split("\n");
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(/denied run_shell \(commands\.git-push\): `git push`: publishes commits$/);
    expect(lines[1]).toMatch(/step 1 write_file → \[denied\] a reviewer does not write \(1\.2 s\)$/);
  });

  it("a multi-line command: its first line on the call's line, the next lines under it, the rest counted", () => {
    const { view, screen } = captureView(false);
    const command = [
      "cat > calc.py <<'EOF'",
      "def add(a, b):",
      "    return a + b",
      "EOF",
      "python3 -c 'import calc'",
      "echo one",
      "echo two",
      "echo three",
      "",
    ].join("\n");
    view.emit(started("a", "run_shell", { command }));
    view.emit(finished("a", "run_shell", "exit_code: 0\nstdout:\none\nstderr:\n(empty)", { exit_code: 0, timed_out: false }));
    expect(screen().trimEnd().split("\n")).toEqual([
      expect.stringMatching(/step 1 run_shell cat > calc\.py <<'EOF' → exit 0 · one \(1\.2 s\)$/),
      "              │ def add(a, b):",
      "              │     return a + b",
      "              │ EOF",
      "              │ python3 -c 'import calc'",
      "              │ echo one",
      "              │ echo two",
      "              │ … 1 more line",
    ]);
    expect(screen()).not.toContain("\\n");
  });

  it("sandbox.setup: one line per command with its outcome; a failure with the last line of its output", () => {
    const { view, screen } = captureView(false);
    const setup = (index: number, command: string, exit: number, tail: string): RunEvent[] => [
      { type: "setup.started", data: { agent_id: "main", phase: "agent", index, command } },
      {
        type: "setup.finished",
        data: { agent_id: "main", phase: "agent", index, command, exit_code: exit, timed_out: false, duration_ms: 2500, output_tail: tail },
      },
    ];
    for (const event of [
      ...setup(0, "pip install -e .", 0, "Successfully installed calc\n"),
      ...setup(1, "npm ci", 1, "npm error code EAI_AGAIN\nnpm error getaddrinfo EAI_AGAIN registry.example.com\n"),
    ])
      view.emit(event);
    expect(screen().trimEnd().split("\n")).toEqual([
      expect.stringMatching(/\] setup\[0\] pip install -e \. → exit 0 \(2\.5 s\)$/),
      expect.stringMatching(/\] setup\[1\] npm ci → exit 1 · npm error getaddrinfo EAI_AGAIN registry\.example\.com \(2\.5 s\)$/),
    ]);
  });
});

describe("the status line's timer", () => {
  it("on a terminal: what runs, with its seconds so far, redrawn each second and erased before the next line", () => {
    vi.useFakeTimers();
    const { view, output, screen } = captureView(true);
    view.emit({ type: "setup.started", data: { agent_id: "main", phase: "agent", index: 0, command: "pip install -e ." } });
    vi.advanceTimersByTime(3000);
    expect(output().slice(output().lastIndexOf("\r\u001b[2K"))).toMatch(/setup\[0\] pip install -e \. … 3s/);
    view.emit({
      type: "setup.finished",
      data: { agent_id: "main", phase: "agent", index: 0, command: "pip install -e .", exit_code: 0, timed_out: false, duration_ms: 3000, output_tail: "" },
    });
    view.emit({ type: "model_call.started", data: { agent_id: "main", step: 0, messages: 2, estimated_tokens: 100, prefix_stable: null } });
    vi.advanceTimersByTime(2000);
    expect(output().slice(output().lastIndexOf("\r\u001b[2K"))).toMatch(/step 1 model … 2s/);
    view.emit({
      type: "model_call.finished",
      data: { agent_id: "main", step: 0, duration_ms: 2000, usage: { prompt_tokens: 1, completion_tokens: 1, cached_tokens: 0 }, tool_calls: 1, content: null },
    });
    view.emit(started("a", "run_shell", { command: "make test" }));
    vi.advanceTimersByTime(61_000);
    expect(output().slice(output().lastIndexOf("\r\u001b[2K"))).toMatch(/step 1 run_shell make test … 61s/);
    view.emit(finished("a", "run_shell", "exit_code: 0\nstdout:\nok\nstderr:\n(empty)", { exit_code: 0, timed_out: false }));
    // Nothing runs: the status line is gone, and no timer redraws it.
    const before = output();
    vi.advanceTimersByTime(5000);
    expect(output()).toBe(before);
    expect(screen().trimEnd().split("\n")).toEqual([
      expect.stringMatching(/setup\[0\] pip install -e \. → exit 0 \(3\.0 s\)$/),
      expect.stringMatching(/step 1 run_shell make test → exit 0 · ok \(1\.2 s\)$/),
    ]);
  });

  it("without a terminal: no timer and no status line, however long a call runs", () => {
    vi.useFakeTimers();
    const { view, output } = captureView(false);
    view.emit(started("a", "run_shell", { command: "make test" }));
    vi.advanceTimersByTime(120_000);
    expect(output()).toBe("");
    view.emit(finished("a", "run_shell", "exit_code: 0\nstdout:\nok\nstderr:\n(empty)", { exit_code: 0, timed_out: false }));
    expect(output()).not.toMatch(/\r|\u001b/);
    expect(output().split("\n")).toHaveLength(2);
  });

  it("a call without a result when the view closes is shown as such", () => {
    const { view, screen } = captureView(false);
    view.emit(started("a", "run_shell", { command: "sleep 100" }));
    view.close();
    expect(screen()).toMatch(/step 1 run_shell sleep 100 → no result\n$/);
  });
});

describe("approval prompts and the view", () => {
  it("at approval.requested the view stops writing (its status line erased) until the prompt is answered; lines that came meanwhile follow", async () => {
    vi.useFakeTimers();
    const { view, output } = captureView(true);
    view.expectApprovalPrompts();
    view.emit({ type: "model_call.started", data: { agent_id: "w1", step: 2, messages: 2, estimated_tokens: 100, prefix_stable: null } });
    vi.advanceTimersByTime(1000);
    let shown = false;
    const waiting = view.questionShown("main", "push").then(() => (shown = true));
    await Promise.resolve();
    expect(shown).toBe(false);
    view.emit({
      type: "approval.requested",
      data: {
        agent_id: "main",
        tool_call_id: "push",
        name: "run_shell",
        question: 'policy worker: run_shell "git push" needs confirmation.',
        can_remember: true,
      },
    });
    await waiting;
    expect(shown).toBe(true);
    // The status line is erased and the cursor is at the start of an empty line: the prompt's place.
    expect(output().endsWith("\r\u001b[2K")).toBe(true);
    const atPrompt = output().length;
    vi.advanceTimersByTime(10_000);
    view.emit({
      type: "model_call.finished",
      data: {
        agent_id: "w1",
        step: 2,
        duration_ms: 1,
        usage: { prompt_tokens: 1, completion_tokens: 1, cached_tokens: 0 },
        tool_calls: 0,
        content: "w1 says hi",
      },
    });
    expect(output().length).toBe(atPrompt);
    view.releaseAfterPrompt();
    view.emit({ type: "approval.resolved", data: { agent_id: "main", tool_call_id: "push", answer: "yes", reason: null, timed_out: false } });
    const after = output()
      .slice(atPrompt)
      .replace(/\u001b\[[0-9;]*m/g, "");
    expect(after).toMatch(/^\[ *[\d.]+s\] w1 step 3 model: w1 says hi\n\[ *[\d.]+s\] {3}approval: yes\n$/);
    expect(output().slice(0, atPrompt)).not.toContain("needs confirmation");
  });

  it("read back (runner logs), the question and the answer are lines of their own", () => {
    const { view, screen } = captureView(false);
    view.emit({
      type: "approval.requested",
      data: {
        agent_id: "main",
        tool_call_id: "push",
        name: "run_shell",
        question: 'policy worker: run_shell "git push" needs confirmation.\nit publishes',
        can_remember: true,
      },
    });
    view.emit({ type: "approval.resolved", data: { agent_id: "main", tool_call_id: "push", answer: "no", reason: "too risky", timed_out: false } });
    expect(screen().trimEnd().split("\n")).toEqual([
      expect.stringMatching(/\] {3}approval asked: policy worker: run_shell "git push" needs confirmation\. it publishes$/),
      expect.stringMatching(/\] {3}approval: no \(too risky\)$/),
    ]);
  });
});
