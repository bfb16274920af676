// Reading runs from the command line (the built dist/cli/main.js, no Docker, no model):
// `runner show --full | --json` and `runner logs [-f]`, on run directories written
// with the runner's own record writers (CloudEventLog, SessionJournal, RunStore).
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { SessionJournal } from "../../src/agent/session-journal.js";
import { CloudEventLog } from "../../src/events/cloud-event-log.js";
import type { RunEvent } from "../../src/events/run-events.js";
import { currentOwner } from "../../src/process/process-owner.js";
import { RunStore } from "../../src/run/run-store.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { runCli, startCli, waitFor } from "../helpers/runner-cli.js";

/** A tool result of 30 numbered lines, longer than both the model's cap (the first 3 lines here) and show's 12-line preview. */
const WHOLE_RESULT = Array.from({ length: 30 }, (_, index) => `line ${index + 1}`).join("\n");
const CUT_RESULT = `line 1\nline 2\nline 3\n[cut: the whole result (${WHOLE_RESULT.length} characters) is kept]`;
const SHORT_RESULT = Array.from({ length: 20 }, (_, index) => `row ${index + 1}`).join("\n");

/**
 * A run's records as the runner writes them: events.jsonl, session.jsonl, a
 * kept whole result under tool-results/, and, unless `finished` is false,
 * session.json and report.json. Unfinished runs get a run.json owned by this
 * (live) test process, as a running runner's would be.
 */
function recordRun(home: string, id: string, options: { finished?: boolean } = {}) {
  const store = new RunStore(join(home, "runs", id));
  mkdirSync(store.directory, { recursive: true });
  const events = new CloudEventLog(store.path("events"), id, "0".repeat(32));
  const journal = new SessionJournal(store.path("journal"));
  const emit = (event: RunEvent) => events.emit(event);
  emit({ type: "run.started", data: { run_id: id, task: "records", workspace: "/repo", branch: `runner/${id}`, base_commit: "a".repeat(40) } });
  const calls = [
    { id: "call_1", type: "function" as const, function: { name: "run_shell", arguments: '{"command":"seq 30"}' } },
    { id: "call_2", type: "function" as const, function: { name: "run_shell", arguments: '{"command":"seq 20"}' } },
  ];
  const messages = [
    { role: "system" as const, content: "You are a coding agent." },
    { role: "user" as const, content: "Count." },
    { role: "assistant" as const, content: null, tool_calls: calls },
    { role: "tool" as const, tool_call_id: "call_1", content: CUT_RESULT },
    { role: "tool" as const, tool_call_id: "call_2", content: SHORT_RESULT },
    { role: "assistant" as const, content: "Counted to thirty." },
  ];
  for (const message of messages.slice(0, 3))
    journal.append({ type: "message", agent_id: "main", message, step: message.role === "assistant" ? 0 : undefined });
  mkdirSync(join(store.path("toolResults"), "main"), { recursive: true });
  writeFileSync(join(store.path("toolResults"), "main", "0-call_1.txt"), WHOLE_RESULT);
  journal.append({
    type: "tool_result",
    agent_id: "main",
    step: 0,
    key: "main/0/call_1",
    tool_call_id: "call_1",
    content: CUT_RESULT,
    is_error: false,
    full_output: "tool-results/main/0-call_1.txt",
  });
  journal.append({ type: "tool_result", agent_id: "main", step: 0, key: "main/0/call_2", tool_call_id: "call_2", content: SHORT_RESULT, is_error: false });
  emit({ type: "tool_call.started", data: { agent_id: "main", step: 0, tool_call_id: "call_1", name: "run_shell", arguments: '{"command":"seq 30"}' } });
  // The live view prints a call's line when it ends, with its outcome.
  emit({
    type: "tool_call.finished",
    data: {
      agent_id: "main",
      step: 0,
      tool_call_id: "call_1",
      name: "run_shell",
      is_error: false,
      duration_ms: 5,
      result_preview: "1",
      details: { exit_code: 0 },
    },
  });
  const finish = () => {
    journal.append({ type: "message", agent_id: "main", message: messages[5]!, step: 1 });
    journal.close();
    store.writeJson("session", { run_id: id, task: "records", agents: { main: { messages } } });
    const report = { run_id: id, task: "records", status: "succeeded", reason: "finished_unverified", steps: 2, tool_calls: 2, branch: `runner/${id}` };
    store.writeJson("report", report);
    emit({ type: "run.finished", data: { status: "succeeded", exit_code: 0, duration_ms: 1200 } });
    events.close();
    return report;
  };
  if (options.finished === false) {
    store.writeJson("lock", { run_id: id, owner: currentOwner(), branch: `runner/${id}` });
    return { store, emit, finish };
  }
  return { store, emit, finish, report: finish() };
}

describe("runner show", () => {
  it("cuts tool results to 12 lines and says how to see them whole; --full prints them whole, the kept file for a result the model got cut", async () => {
    await using home = temporaryDirectory();
    recordRun(home.path, "20260101-000000-show01");
    const cut = await runCli(["show", "20260101-000000-show01"], { RUNNER_HOME: home.path });
    expect(cut.code, cut.stderr).toBe(0);
    expect(cut.stdout).toContain("    row 12\n    [... 8 more lines: runner show --full]");
    expect(cut.stdout).not.toContain("row 13");
    expect(cut.stdout).toContain("    [cut: the whole result");

    const full = await runCli(["show", "2026", "--full"], { RUNNER_HOME: home.path });
    expect(full.code, full.stderr).toBe(0);
    expect(full.stdout).toContain(
      WHOLE_RESULT.split("\n")
        .map((line) => `    ${line}`)
        .join("\n"),
    );
    expect(full.stdout).toContain(
      SHORT_RESULT.split("\n")
        .map((line) => `    ${line}`)
        .join("\n"),
    );
    expect(full.stdout).not.toContain("[cut:");
    expect(full.stdout).not.toContain("more lines");
  });

  it("--json prints one JSON object: run id, directory, report and each agent's messages; with --full the tool results whole", async () => {
    await using home = temporaryDirectory();
    const { store, report } = recordRun(home.path, "20260101-000000-show02");
    const json = await runCli(["show", "20260101-000000-show02", "--json"], { RUNNER_HOME: home.path });
    expect(json.code, json.stderr).toBe(0);
    expect(json.stdout.trimEnd().split("\n")).toHaveLength(1);
    const record = JSON.parse(json.stdout) as { agents: Record<string, { messages: { role: string; content: string }[] }> };
    expect(record).toMatchObject({ run_id: "20260101-000000-show02", directory: store.directory, report });
    expect(record.agents.main!.messages.filter((message) => message.role === "tool").map((message) => message.content)).toEqual([CUT_RESULT, SHORT_RESULT]);

    const whole = await runCli(["show", "20260101-000000-show02", "--json", "--full"], { RUNNER_HOME: home.path });
    const wholeRecord = JSON.parse(whole.stdout) as typeof record;
    expect(wholeRecord.agents.main!.messages.filter((message) => message.role === "tool").map((message) => message.content)).toEqual([
      WHOLE_RESULT,
      SHORT_RESULT,
    ]);
  });
});

describe("runner logs", () => {
  it("prints a finished run's events as exec shows them, or with --json the events.jsonl lines as they are", async () => {
    await using home = temporaryDirectory();
    const { store } = recordRun(home.path, "20260101-000000-logs01");
    const human = await runCli(["logs", "20260101-000000-logs01"], { RUNNER_HOME: home.path });
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toMatch(/^\[ +0\.0s\] run 20260101-000000-logs01 {2}task records {2}branch runner\/20260101-000000-logs01$/m);
    expect(human.stdout).toMatch(/^\[ +0\.0s\] step 1 run_shell seq 30 → exit 0/m);
    const json = await runCli(["logs", "--json", "2026"], { RUNNER_HOME: home.path });
    expect(json.code, json.stderr).toBe(0);
    expect(json.stdout).toBe(readFileSync(store.path("events"), "utf8"));
  });

  it("-f follows a running run from another process: prints lines as they are written, ends with the run and its exit code", async () => {
    await using home = temporaryDirectory();
    const { emit, finish } = recordRun(home.path, "20260101-000000-logs02", { finished: false });
    const following = startCli(["logs", "-f", "20260101-000000-logs02"], { RUNNER_HOME: home.path });
    await waitFor("the recorded lines", () => following.output().stdout.includes("step 1 run_shell seq 30 → exit 0"), { process: following });
    emit({ type: "tool_call.started", data: { agent_id: "main", step: 1, tool_call_id: "call_3", name: "read_file", arguments: '{"path":"later.txt"}' } });
    emit({
      type: "tool_call.finished",
      data: { agent_id: "main", step: 1, tool_call_id: "call_3", name: "read_file", is_error: false, duration_ms: 2, result_preview: "x", details: {} },
    });
    await waitFor("a line written after logs -f started", () => following.output().stdout.includes("step 2 read_file later.txt"), {
      process: following,
    });
    expect(following.exited).toBeNull();
    finish();
    const result = await following.result;
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout.trimEnd().split("\n").at(-1)).toBe("status: succeeded (finished_unverified); runner show 20260101-000000-logs02");

    // A finished run: -f prints it all and returns at once.
    const again = await runCli(["logs", "-f", "--json", "20260101-000000-logs02"], { RUNNER_HOME: home.path });
    expect(again.code).toBe(0);
    expect(
      again.stdout
        .trimEnd()
        .split("\n")
        .map((line) => (JSON.parse(line) as { type: string }).type),
    ).toEqual([
      "dev.agent-runner.run.started.v1",
      "dev.agent-runner.tool_call.started.v1",
      "dev.agent-runner.tool_call.finished.v1",
      "dev.agent-runner.tool_call.started.v1",
      "dev.agent-runner.tool_call.finished.v1",
      "dev.agent-runner.run.finished.v1",
    ]);
  });

  it("-f on a run whose runner died without a report says so and exits 3", async () => {
    await using home = temporaryDirectory();
    const { store } = recordRun(home.path, "20260101-000000-logs03", { finished: false });
    // An owner label of this host whose process start time cannot match: a runner that is gone.
    store.writeJson("lock", { run_id: "20260101-000000-logs03", owner: `${hostname()}:${process.pid}:0`, branch: "runner/x" });
    const result = await runCli(["logs", "-f", "20260101-000000-logs03"], { RUNNER_HOME: home.path });
    expect(result.code).toBe(3);
    expect(result.stdout).toContain("step 1 run_shell");
    expect(result.stderr).toContain(
      "run 20260101-000000-logs03 has no runner any more and no report (it died); `runner resume 20260101-000000-logs03` continues it",
    );
    // The next start's sweep writes a report (no run.finished event): -f ends on it, with the report's exit code.
    store.writeJson("report", { run_id: "20260101-000000-logs03", status: "error", reason: "runner_died" });
    const swept = await runCli(["logs", "-f", "20260101-000000-logs03"], { RUNNER_HOME: home.path });
    expect(swept.code).toBe(3);
    expect(swept.stdout.trimEnd().split("\n").at(-1)).toBe("status: error (runner_died); runner show 20260101-000000-logs03");
  });
});
