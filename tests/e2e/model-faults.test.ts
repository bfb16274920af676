/**
 * Model API robustness end to end: the built CLI against the scripted model
 * server playing HTTP faults (docs/scripted-model.md "Scripted model: faults and compaction"),
 * through the real openai client, with a real sandbox. Retries are made fast
 * with a low `model.max_retries` and small `retry_after` values.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { requireDocker } from "../helpers/docker.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { eventsOfType, onlyRunDirectory, readEvents, readJson, runCli, startCli, toolCall, waitForRunEvent, writeScriptedTask } from "../helpers/runner-cli.js";

const APPEND = toolCall("run_shell", { command: "echo applied >> applied.txt" });

async function runScripted(directory: string, home: string, script: unknown, model: Record<string, unknown>) {
  const { task, git } = writeScriptedTask(directory, {
    script,
    task: { name: "model-faults", model: { ...model, provider: "scripted", script: "./script.yaml" } },
  });
  const result = await runCli(["exec", task], { RUNNER_HOME: home });
  const runDirectory = onlyRunDirectory(home)!;
  return { result, runDirectory, git, report: readJson(join(runDirectory, "report.json")), events: readEvents(runDirectory) };
}

describe("model API faults (real CLI, scripted model over HTTP, real Docker)", () => {
  it("429 on every attempt: exit 3, status error, reason rate_limited, the error names the attempts", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const limited = { status: 429, retry_after: 0.05, message: "slow down" };
    const { result, report, events } = await runScripted(
      directory.path,
      home.path,
      { turns: [{ faults: [limited, limited, limited], tool_calls: [APPEND] }] },
      { max_retries: 2 },
    );
    expect(result.code, result.stderr + result.stdout).toBe(3);
    expect(report).toMatchObject({ status: "error", reason: "rate_limited", steps: 0, tool_calls: 0 });
    expect(String(report.error)).toMatch(/^model endpoint http:\/\/127\.0\.0\.1:\d+\/v1\/? answered 429: slow down; gave up after 3 attempts$/);
    expect(result.stdout).toMatch(/status: error \(rate_limited\)\nerror: model endpoint .* gave up after 3 attempts/);
    // Two retries, each after the delay the server asked for.
    expect(eventsOfType(events, "model_call.retrying").map((event) => event.data)).toEqual([
      expect.objectContaining({ step: 0, purpose: "turn", attempt: 1, delay_ms: 50, reason: "rate_limited", status: 429 }),
      expect.objectContaining({ step: 0, purpose: "turn", attempt: 2, delay_ms: 50, reason: "rate_limited", status: 429 }),
    ]);
    expect(eventsOfType(events, "tool_call.started")).toEqual([]);
    expect(eventsOfType(events, "run.finished").at(-1)?.data).toMatchObject({ status: "error", exit_code: 3 });
  });

  it("503 twice, then an answer: exit 0, two model_call.retrying events, the call applied once", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const unavailable = { status: 503, retry_after: 0.05, message: "overloaded" };
    const { result, report, events, git } = await runScripted(
      directory.path,
      home.path,
      {
        turns: [
          { faults: [unavailable, unavailable], tool_calls: [APPEND] },
          { expect: { tool_result_matches: "^exit_code: 0" }, content: "Appended." },
        ],
      },
      { max_retries: 2 },
    );
    expect(result.code, result.stderr + result.stdout).toBe(0);
    expect(report).toMatchObject({ status: "succeeded", reason: "finished_unverified", steps: 2, tool_calls: 1, final_message: "Appended." });
    expect(eventsOfType(events, "model_call.retrying").map((event) => event.data)).toEqual([
      expect.objectContaining({ step: 0, attempt: 1, reason: "server_error", status: 503 }),
      expect.objectContaining({ step: 0, attempt: 2, reason: "server_error", status: 503 }),
    ]);
    expect(git("show", `${report.branch}:applied.txt`)).toBe("applied\n");
  });

  it("a reply cut off mid-body once: retried, exit 0, the tool call it carried is applied exactly once", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { result, report, events, git } = await runScripted(
      directory.path,
      home.path,
      {
        turns: [
          { faults: [{ truncate: true }], tool_calls: [APPEND] },
          { faults: [{ truncate: true }], expect: { tool_result_matches: "^exit_code: 0" }, content: "Appended." },
        ],
      },
      { max_retries: 1 },
    );
    expect(result.code, result.stderr + result.stdout).toBe(0);
    expect(report).toMatchObject({ status: "succeeded", steps: 2, tool_calls: 1, final_message: "Appended." });
    expect(eventsOfType(events, "model_call.retrying").map((event) => event.data)).toEqual([
      expect.objectContaining({ step: 0, attempt: 1, reason: "truncated_response" }),
      expect.objectContaining({ step: 1, attempt: 1, reason: "truncated_response" }),
    ]);
    expect(eventsOfType(events, "model_call.finished")).toHaveLength(2);
    expect(eventsOfType(events, "tool_call.started")).toHaveLength(1);
    expect(git("show", `${report.branch}:applied.txt`)).toBe("applied\n");
  });

  it("an answer slower than model.request_timeout_sec: that attempt times out and is retried at once, exit 0", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { result, report, events, git } = await runScripted(
      directory.path,
      home.path,
      // 10 s, far beyond the 1 s timeout: the server's wait ends as soon as the client hangs up, so it costs nothing.
      { turns: [{ faults: [{ delay_ms: 10_000 }], tool_calls: [APPEND] }, { content: "Appended." }] },
      { max_retries: 1, request_timeout_sec: 1 },
    );
    expect(result.code, result.stderr + result.stdout).toBe(0);
    expect(report).toMatchObject({ status: "succeeded", steps: 2, tool_calls: 1 });
    expect(eventsOfType(events, "model_call.retrying").map((event) => event.data)).toEqual([
      expect.objectContaining({ step: 0, attempt: 1, reason: "timeout" }),
    ]);
    // The client gave up after ~1 s (then at most 0.5 s of backoff) instead of waiting out the delay.
    const first = eventsOfType(events, "model_call.finished")[0]!;
    expect(first.data.duration_ms).toBeGreaterThanOrEqual(1000);
    expect(first.data.duration_ms).toBeLessThan(9000);
    expect(git("show", `${report.branch}:applied.txt`)).toBe("applied\n");
  });

  it("401 is not retried: exit 3 after one attempt, reason unauthorized", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { result, report, events } = await runScripted(
      directory.path,
      home.path,
      { turns: [{ faults: [{ status: 401, message: "bad key" }], tool_calls: [APPEND] }] },
      { max_retries: 3 },
    );
    expect(result.code, result.stderr + result.stdout).toBe(3);
    expect(report).toMatchObject({ status: "error", reason: "unauthorized" });
    expect(String(report.error)).toMatch(/answered 401: bad key$/);
    expect(eventsOfType(events, "model_call.retrying")).toEqual([]);
  });

  it("Ctrl-C during a long retry-after backoff stops at once: exit 130, status cancelled", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task } = writeScriptedTask(directory.path, {
      script: { turns: [{ faults: [{ status: 429, retry_after: 50 }], tool_calls: [APPEND] }] },
      task: { name: "model-faults", model: { provider: "scripted", script: "./script.yaml", max_retries: 2 } },
    });
    const running = startCli(["exec", task], { RUNNER_HOME: home.path });
    try {
      const { runDirectory } = await waitForRunEvent(home.path, "model_call.retrying", (data) => data.delay_ms === 50_000, { process: running });
      const interrupted = Date.now();
      running.child.kill("SIGINT");
      const result = await running.result;
      expect(result.code, result.stderr).toBe(130);
      // Cleanup (container removal, commit) takes a few seconds; the 50 s backoff is not waited out.
      expect(Date.now() - interrupted).toBeLessThan(20_000);
      expect(readJson(join(runDirectory, "report.json"))).toMatchObject({ status: "cancelled", reason: "interrupted", steps: 0 });
    } finally {
      if (!running.exited) running.child.kill("SIGKILL");
    }
  });
});
