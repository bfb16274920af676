/**
 * The batch core (src/batch/run-batch.ts) over a fake BatchRunner: each fake
 * run's report comes from a per-task script, so outcomes, retries, attempts,
 * the gate, interrupts and resume are checked without Docker. The real CLI
 * with real runs is tests/e2e/batch.test.ts.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Task } from "../../src/config/load-task.js";
import { ConfigError, SandboxError } from "../../src/errors.js";
import { ImageUnavailableError } from "../../src/batch/prepare-images.js";
import { exitCodeOfReport, type RunReport } from "../../src/run/run-report.js";
import type { RunHandle, StartOptions } from "../../src/runner/runner.js";
import type { BatchReport } from "../../src/batch/batch-report.js";
import { BatchDirectory, type BatchOptions, type JournalLine } from "../../src/batch/batch-state.js";
import { outcomeOfReport } from "../../src/batch/outcomes.js";
import { runBatch, type BatchRunner } from "../../src/batch/run-batch.js";
import { currentOwner } from "../../src/process/process-owner.js";

type Scripted = (Pick<RunReport, "status" | "reason"> & { cost_usd?: number }) | "hang" | { throws: Error };

/**
 * A BatchRunner whose runs end as `script(task, n)` says (n: the task's nth
 * start, from 1); "hang" runs until cancelled (status cancelled, as a real
 * run reports a cancel). Records starts and resumes.
 */
class FakeRunner implements BatchRunner {
  readonly starts: string[] = [];
  readonly resumes: string[] = [];
  /** Starts and resumes in the order they were called. */
  readonly calls: string[] = [];
  readonly running = new Set<string>();
  private counter = 0;
  private readonly runsOf = new Map<string, number>();
  private readonly taskOfRun = new Map<string, string>();
  constructor(
    readonly home: string,
    private readonly script: (task: string, n: number) => Scripted,
    private readonly onResume: (task: string) => Scripted = () => ({ status: "succeeded", reason: "verified" }),
  ) {}

  async startTask(task: Task, options: StartOptions = {}): Promise<RunHandle> {
    const n = (this.runsOf.get(task.name) ?? 0) + 1;
    this.runsOf.set(task.name, n);
    this.starts.push(task.name);
    this.calls.push(`start ${task.name}`);
    return this.handle(task, this.script(task.name, n), options);
  }

  async resume(runId: string, options: StartOptions = {}): Promise<RunHandle> {
    this.resumes.push(runId);
    this.calls.push(`resume ${runId}`);
    const name = this.taskOfRun.get(runId) ?? runId.split("#")[0]!;
    return this.handle({ name } as Task, this.onResume(name), options, runId);
  }

  private handle(task: Task, scripted: Scripted, options: StartOptions, existingId?: string): RunHandle {
    if (typeof scripted === "object" && "throws" in scripted) throw scripted.throws;
    const id = existingId ?? `${task.name}#${(this.counter += 1)}`;
    this.taskOfRun.set(id, task.name);
    this.running.add(id);
    let cancel!: () => void;
    const cancelled = new Promise<void>((resolve) => (cancel = resolve));
    options.signal?.addEventListener("abort", () => cancel(), { once: true });
    const result = (scripted === "hang" ? cancelled.then(() => ({ status: "cancelled" as const, reason: "interrupted" })) : Promise.resolve(scripted)).then(
      (outcome) => {
        this.running.delete(id);
        return report(id, outcome);
      },
    );
    return {
      id,
      directory: join(this.home, "runs", id),
      task,
      events: () => (async function* () {})(),
      result,
      resumed: existingId ? { atModelCall: 2, earlierEvents: 3 } : null,
      async cancel() {
        cancel();
        await result;
      },
    };
  }
}

function report(runId: string, outcome: Pick<RunReport, "status" | "reason">): RunReport {
  return {
    ...outcome,
    run_id: runId,
    error: outcome.status === "error" ? `fake ${outcome.reason}` : null,
    steps: 2,
    usage: { prompt_tokens: 100, completion_tokens: 10, cached_tokens: 40 },
    duration_ms: 1000,
    patch: "patch.diff",
  } as RunReport;
}

const homes: string[] = [];
afterEach(() => {
  for (const home of homes.splice(0)) rmSync(home, { recursive: true, force: true });
});

/** A batch of `tasks` (ids `<name>/task.yaml`); the names in `invalid` are tasks the loader refused, with that message. */
function makeBatch(tasks: string[], options: Partial<BatchOptions> = {}, invalid: Record<string, string> = {}): { home: string; directory: BatchDirectory } {
  const home = mkdtempSync(join(tmpdir(), "agent-runner-batch-unit-"));
  homes.push(home);
  const directory = BatchDirectory.of(home, "b1");
  directory.create({
    batch_id: "b1",
    created_at: new Date().toISOString(),
    input: { path: "/in", kind: "directory", root: "/in" },
    options: {
      jobs: 2,
      attempts: 1,
      retries: 0,
      min_pass_rate: 1,
      max_errors: 0,
      filter: null,
      shard: null,
      limit: null,
      junit: null,
      summary: null,
      ...options,
    },
    tasks: tasks.map((name) =>
      invalid[name] === undefined
        ? { id: `${name}/task.yaml`, task_file: `/in/${name}/task.yaml`, task: { name } as Task }
        : { id: `${name}/task.yaml`, task_file: `/in/${name}/task.yaml`, task: null, invalid: invalid[name] },
    ),
    discovered: tasks.length,
  });
  return { home, directory };
}

const ok = { status: "succeeded", reason: "verified" } as const;
const failedVerify = { status: "failed", reason: "verify_failed" } as const;
const rateLimited = { status: "error", reason: "rate_limited" } as const;

function task(result: BatchReport, name: string) {
  return result.tasks.find((entry) => entry.name === `${name}/task.yaml`)!;
}

describe("batch outcomes: the report.json status and reason of each run decide, and never lie", () => {
  it.each([
    ["succeeded", "verified", "succeeded"],
    ["succeeded", "finished_unverified_with_denials", "succeeded"],
    ["failed", "verify_failed", "failed"],
    ["failed", "verify_timed_out", "failed"],
    ["failed", "max_steps", "failed"],
    ["failed", "commit_timed_out", "failed"],
    ["failed", "disk_limit_exceeded", "failed"],
    ["error", "context_window_exceeded", "failed"],
    ["error", "docker_unreachable", "error"],
    ["error", "image_missing", "error"],
    ["error", "rate_limited", "error"],
    ["error", "server_error", "error"],
    ["error", "connection_error", "error"],
    ["error", "timeout", "error"],
    ["error", "runner_died", "error"],
    ["error", "internal_error", "error"],
  ] as const)("run %s/%s → batch %s", (status, reason, expected) => {
    expect(outcomeOfReport({ status, reason, error: null })?.status).toBe(expected);
  });

  it("a success whose on_success: merge did not happen is failed/not_merged with the merge's reason, as runner exec exits 4 for it", () => {
    const merge = { merged: false, branch: "refs/heads/main", detail: "refs/heads/main moved since the run started" };
    expect(outcomeOfReport({ status: "succeeded", reason: "verified", error: null, merge })).toEqual({
      status: "failed",
      reason: "not_merged",
      error: "refs/heads/main moved since the run started",
    });
    expect(exitCodeOfReport({ status: "succeeded", merge })).toBe(4);
    const landed = { ...merge, merged: true, detail: "fast-forwarded refs/heads/main to runner/x" };
    expect(outcomeOfReport({ status: "succeeded", reason: "verified", error: null, merge: landed })?.status).toBe("succeeded");
    expect(exitCodeOfReport({ status: "succeeded", merge: landed })).toBe(0);
    expect(exitCodeOfReport({ status: "succeeded", merge: null })).toBe(0);
    expect(exitCodeOfReport({ status: "failed", merge: null })).toBe(1);
  });

  it("a cancelled run has no outcome (it is unfinished, for resume)", () => {
    expect(outcomeOfReport({ status: "cancelled", reason: "interrupted", error: null })).toBeNull();
  });
});

describe("runBatch", () => {
  it("--retries retries infrastructure errors only and keeps every attempt with its run id", async () => {
    const { home, directory } = makeBatch(["flaky-infra", "agent-fails", "passes"], { retries: 3, max_errors: 5 });
    const runner = new FakeRunner(home, (name, n) => (name === "flaky-infra" ? (n < 3 ? rateLimited : ok) : name === "agent-fails" ? failedVerify : ok));
    const result = await runBatch(runner, directory, new AbortController().signal);
    const infra = task(result, "flaky-infra");
    expect(infra.status).toBe("succeeded");
    expect(infra.attempts.map((attempt) => [attempt.try, attempt.status, attempt.reason])).toEqual([
      [1, "error", "rate_limited"],
      [2, "error", "rate_limited"],
      [3, "succeeded", "verified"],
    ]);
    expect(new Set(infra.attempts.map((attempt) => attempt.run_id)).size).toBe(3);
    expect(infra.attempts[0]!.run_dir).toBe(join(home, "runs", infra.attempts[0]!.run_id!));
    // An agent failure never earns a retry.
    expect(task(result, "agent-fails")).toMatchObject({ status: "failed", reason: "verify_failed" });
    expect(task(result, "agent-fails").attempts).toHaveLength(1);
    expect(runner.starts.filter((name) => name === "agent-fails")).toHaveLength(1);
    expect(result.totals).toMatchObject({ tasks: 3, succeeded: 2, failed: 1, error: 0, runs: 5, retries: 2, errored_attempts: 0 });
    expect(result.totals.tokens).toEqual({ prompt: 500, completion: 50, cached: 200, total: 550 });
    expect(result.status).toBe("failed");
    expect(result.exit_code).toBe(1);
  });

  it("an infrastructure error after its retries is `error`, and the gate's pass rate leaves it out", async () => {
    const { home, directory } = makeBatch(["down", "passes"], { retries: 1, max_errors: 1 });
    const runner = new FakeRunner(home, (name) => (name === "down" ? { throws: new SandboxError("Docker is not answering") } : ok));
    const result = await runBatch(runner, directory, new AbortController().signal);
    expect(task(result, "down")).toMatchObject({ status: "error", reason: "sandbox_failed", error: "Docker is not answering" });
    expect(task(result, "down").attempts.map((attempt) => attempt.run_id)).toEqual([null, null]);
    expect(result.totals).toMatchObject({ pass_rate: 0.5, pass_rate_without_errors: 1, errored_attempts: 1 });
    expect(result).toMatchObject({ status: "passed", exit_code: 0 });
  });

  it("more infrastructure errors than --max-errors stop the batch: exit 3, tasks not started are skipped", async () => {
    const { home, directory } = makeBatch(["a", "b", "c", "d"], { jobs: 1, max_errors: 0 });
    const runner = new FakeRunner(home, (name) => (name === "a" ? ok : rateLimited));
    const result = await runBatch(runner, directory, new AbortController().signal);
    expect(runner.starts).toEqual(["a", "b"]);
    expect(result.tasks.map((entry) => [entry.name, entry.status, entry.reason])).toEqual([
      ["a/task.yaml", "succeeded", "verified"],
      ["b/task.yaml", "error", "rate_limited"],
      ["c/task.yaml", "skipped", "stopped_after_errors"],
      ["d/task.yaml", "skipped", "stopped_after_errors"],
    ]);
    expect(result).toMatchObject({ status: "error", exit_code: 3 });
  });

  it("--attempts k: pass@k and the flaky list", async () => {
    const { home, directory } = makeBatch(["sometimes", "always", "never"], { attempts: 3, min_pass_rate: 0.6 });
    const runner = new FakeRunner(home, (name, n) => (name === "always" ? ok : name === "never" ? failedVerify : n === 2 ? ok : failedVerify));
    const result = await runBatch(runner, directory, new AbortController().signal);
    expect(task(result, "sometimes")).toMatchObject({ status: "succeeded", flaky: true });
    expect(task(result, "sometimes").attempts.map((attempt) => attempt.attempt)).toEqual([1, 2, 3]);
    expect(task(result, "always").flaky).toBe(false);
    expect(task(result, "never")).toMatchObject({ status: "failed", flaky: false });
    expect(result.flaky).toEqual(["sometimes/task.yaml"]);
    expect(result.totals.pass_rate).toBeCloseTo(2 / 3);
    expect(result).toMatchObject({ status: "passed", exit_code: 0 });
  });

  it("an interrupt cancels the runs in flight (exit 130, reports written); resume continues them and runs the rest, nothing finished runs again", async () => {
    const { home, directory } = makeBatch(["a-done", "b-slow", "c-slow", "d-later"], { jobs: 2 });
    const controller = new AbortController();
    const runner = new FakeRunner(home, (name) => (name.endsWith("slow") ? "hang" : ok));
    const started = runBatch(runner, directory, controller.signal, {
      finished() {
        // a-done has finished; both slow runs hold the two slots, d-later waits.
        queueMicrotask(() => void waitUntil(() => runner.running.size === 2).then(() => controller.abort()));
      },
    });
    const interrupted = await started;
    expect(interrupted).toMatchObject({ status: "interrupted", exit_code: 130 });
    expect(interrupted.tasks.map((entry) => [entry.name, entry.status, entry.reason])).toEqual([
      ["a-done/task.yaml", "succeeded", "verified"],
      ["b-slow/task.yaml", "skipped", "interrupted"],
      ["c-slow/task.yaml", "skipped", "interrupted"],
      ["d-later/task.yaml", "skipped", "interrupted"],
    ]);
    expect(JSON.parse(readFileSync(directory.file("batch-report.json"), "utf8")).status).toBe("interrupted");
    const slowRuns = interrupted.tasks.filter((entry) => entry.name.includes("slow")).map((entry) => entry.attempts[0]!.run_id);

    const again = new FakeRunner(home, () => ok);
    const resumed = await runBatch(again, directory, new AbortController().signal);
    expect(again.resumes.sort()).toEqual(slowRuns.sort());
    expect(again.starts).toEqual(["d-later"]);
    // The first resume (which sweeps the dead batch's leftovers) comes before any new run starts.
    expect(again.calls[0]).toMatch(/^resume /);
    expect(resumed).toMatchObject({ status: "passed", exit_code: 0 });
    // The resumed runs are the same attempts (one run each), not new ones.
    for (const entry of resumed.tasks) expect(entry.attempts.map((attempt) => attempt.status)).toEqual(["succeeded"]);
    expect(resumed.totals).toMatchObject({ tasks: 4, succeeded: 4, runs: 4 });
    const types = directory.readJournal().map((line: JournalLine) => line.type);
    expect(types.filter((type) => type === "attempt.interrupted")).toHaveLength(2);
    expect(types.filter((type) => type === "attempt.resumed")).toHaveLength(2);
  });

  it("resume takes the report.json of a run that finished before the batch wrote that down: no resume, no new run", async () => {
    const { home, directory } = makeBatch(["x"]);
    const controller = new AbortController();
    const first = new FakeRunner(home, () => "hang");
    const running = runBatch(first, directory, controller.signal);
    await waitUntil(() => first.running.size === 1);
    controller.abort();
    const runId = (await running).tasks[0]!.attempts[0]!.run_id!;
    mkdirSync(join(home, "runs", runId), { recursive: true });
    writeFileSync(join(home, "runs", runId, "report.json"), JSON.stringify(report(runId, failedVerify)));
    const again = new FakeRunner(home, () => ok);
    const result = await runBatch(again, directory, new AbortController().signal);
    expect(again.calls).toEqual([]);
    expect(task(result, "x")).toMatchObject({ status: "failed", reason: "verify_failed" });
    expect(task(result, "x").attempts.map((attempt) => attempt.run_id)).toEqual([runId]);
  });

  it("a batch whose process still runs is not resumed by another (exit 2)", async () => {
    const { home, directory } = makeBatch(["x"]);
    // As a live batch process leaves its journal: started, no batch.finished.
    writeFileSync(
      directory.file("batch.jsonl"),
      `${JSON.stringify({ type: "batch.started", at: new Date().toISOString(), pid: process.pid, owner: currentOwner() })}\n`,
    );
    const runner = new FakeRunner(home, () => ok);
    await expect(runBatch(runner, directory, new AbortController().signal)).rejects.toThrow(/batch b1 is still running \(process \d+\); stop it first/);
    expect(runner.calls).toEqual([]);
  });

  it("resume starts a new try when the run in flight cannot be resumed (it stays in attempts[] as abandoned, costing no retry)", async () => {
    const { home, directory } = makeBatch(["x"], { retries: 0 });
    const controller = new AbortController();
    const first = new FakeRunner(home, () => "hang");
    const running = runBatch(first, directory, controller.signal);
    await waitUntil(() => first.running.size === 1);
    controller.abort();
    await running;
    const again = new FakeRunner(
      home,
      () => ok,
      () => ({ throws: new ConfigError("run x#1 ended before its agent started") }),
    );
    const result = await runBatch(again, directory, new AbortController().signal);
    expect(again.starts).toEqual(["x"]);
    expect(task(result, "x").status).toBe("succeeded");
    expect(task(result, "x").attempts.map((attempt) => [attempt.try, attempt.status, attempt.reason])).toEqual([
      [1, "skipped", "abandoned"],
      [2, "succeeded", "verified"],
    ]);
  });
});

describe("errors known before any run starts are their task's outcome and never stop the batch", () => {
  const loaderMessage = "/in/typo/task.yaml: 1 problem:\n  - (file): unknown field verfy (did you mean verify?)";

  it("a task file the loader refused is error/task_invalid with the loader's message; the others run; the gate counts it", async () => {
    const { home, directory } = makeBatch(["a", "b", "typo", "c", "d"], { jobs: 1, retries: 2, max_errors: 0 }, { typo: loaderMessage });
    const runner = new FakeRunner(home, () => ok);
    const result = await runBatch(runner, directory, new AbortController().signal);
    expect(runner.starts).toEqual(["a", "b", "c", "d"]);
    expect(task(result, "typo")).toMatchObject({ status: "error", reason: "task_invalid", error: loaderMessage });
    // Never retried: another try fails the same way.
    expect(task(result, "typo").attempts.map((attempt) => [attempt.run_id, attempt.status, attempt.reason])).toEqual([[null, "error", "task_invalid"]]);
    expect(result.totals).toMatchObject({ tasks: 5, succeeded: 4, error: 1, skipped: 0, errored_attempts: 1 });
    // The gate counts it against --max-errors 0, and says it was no infrastructure error.
    expect(result.gate).toMatchObject({
      passed: false,
      detail: "1 attempt ended in an error before its run (a refused task file or an image not to be had); --max-errors allows 0",
    });
    // What a person reads says why, not only the reason: the table of `batch show` and the CI summary.
    expect(readFileSync(directory.file("summary.md"), "utf8")).toContain(
      "| typo/task.yaml | error | task_invalid: /in/typo/task.yaml: 1 problem: - (file): unknown field verfy (did you mean verify?) |",
    );
    expect(result).toMatchObject({ status: "error", exit_code: 3 });
    const xml = readFileSync(directory.file("junit.xml"), "utf8");
    expect(xml).toMatch(/<error message="task_invalid" type="task_invalid">[^<]*unknown field verfy/);
  });

  it("a batch whose every task file was refused still writes every report (CI gets its JUnit file), exit 3", async () => {
    const { home, directory } = makeBatch(["typo"], {}, { typo: loaderMessage });
    const runner = new FakeRunner(home, () => ok);
    const result = await runBatch(runner, directory, new AbortController().signal);
    expect(runner.starts).toEqual([]);
    expect(result).toMatchObject({ status: "error", exit_code: 3 });
    // No run was made: nothing was spent, and nothing is "unpriced".
    expect(result.totals).toMatchObject({ runs: 0, cost_usd: 0 });
    expect(readFileSync(directory.file("junit.xml"), "utf8")).toMatch(/<error message="task_invalid" type="task_invalid">[^<]*unknown field verfy/);
  });

  it("with --max-errors 1 the same batch passes: the refused task is the one error it allows", async () => {
    const { home, directory } = makeBatch(["a", "typo"], { max_errors: 1 }, { typo: loaderMessage });
    const result = await runBatch(new FakeRunner(home, () => ok), directory, new AbortController().signal);
    expect(result).toMatchObject({ status: "passed", exit_code: 0 });
  });

  it("a task whose image cannot be had ends error/image_unavailable and does not stop the others (--max-errors 0)", async () => {
    const { home, directory } = makeBatch(["a-absent", "b", "c"], { jobs: 1, retries: 1, max_errors: 0 });
    const runner = new FakeRunner(home, (name) =>
      name === "a-absent" ? { throws: new ImageUnavailableError("image example.com/absent:1 not found: pull access denied") } : ok,
    );
    const result = await runBatch(runner, directory, new AbortController().signal);
    expect(task(result, "a-absent")).toMatchObject({ status: "error", reason: "image_unavailable" });
    expect(task(result, "a-absent").attempts).toHaveLength(1);
    expect(task(result, "b").status).toBe("succeeded");
    expect(task(result, "c").status).toBe("succeeded");
    expect(runner.starts).toEqual(["a-absent", "b", "c"]);
  });

  it("a start the runner refuses as bad input (ConfigError) is task_invalid, not retried, and stops nothing", async () => {
    const { home, directory } = makeBatch(["a-bad", "b"], { jobs: 1, retries: 2 });
    const runner = new FakeRunner(home, (name) =>
      name === "a-bad" ? { throws: new ConfigError("verify.command: program pytset is not in image example.com/img:1") } : ok,
    );
    const result = await runBatch(runner, directory, new AbortController().signal);
    expect(task(result, "a-bad")).toMatchObject({ status: "error", reason: "task_invalid", error: expect.stringMatching(/verify\.command: program pytset/) });
    expect(runner.starts).toEqual(["a-bad", "b"]);
    expect(task(result, "b").status).toBe("succeeded");
  });

  it("an error of a run still stops the batch after --max-errors, refused tasks aside", async () => {
    const { home, directory } = makeBatch(["a", "b-typo", "c-down", "d"], { jobs: 1, max_errors: 0 }, { "b-typo": loaderMessage });
    const runner = new FakeRunner(home, (name) => (name === "c-down" ? rateLimited : ok));
    const result = await runBatch(runner, directory, new AbortController().signal);
    expect(result.tasks.map((entry) => [entry.name, entry.status, entry.reason])).toEqual([
      ["a/task.yaml", "succeeded", "verified"],
      ["b-typo/task.yaml", "error", "task_invalid"],
      ["c-down/task.yaml", "error", "rate_limited"],
      ["d/task.yaml", "skipped", "stopped_after_errors"],
    ]);
  });
});

async function waitUntil(condition: () => boolean): Promise<void> {
  for (let spins = 0; !condition(); spins += 1) {
    if (spins > 10_000) throw new Error("condition never held");
    await new Promise((resolve) => setImmediate(resolve));
  }
}

describe("batch budgets: --budget-usd and --deadline stop starting runs; the rest are skipped", () => {
  it("once the finished runs cost the budget no run starts; the attempts not started are skipped (budget_exhausted)", async () => {
    const { home, directory } = makeBatch(["a", "b", "c", "d"], { jobs: 1, budget_usd: 1 });
    const runner = new FakeRunner(home, () => ({ ...ok, cost_usd: 0.6 }));
    const result = await runBatch(runner, directory, new AbortController().signal);
    expect(runner.starts).toEqual(["a", "b"]);
    expect(task(result, "c")).toMatchObject({ status: "skipped", reason: "budget_exhausted" });
    expect(task(result, "d")).toMatchObject({ status: "skipped", reason: "budget_exhausted" });
    const finished = directory.readJournal().filter((line) => line.type === "attempt.finished");
    expect(finished.map((line) => (line as { cost_usd?: number }).cost_usd)).toEqual([0.6, 0.6]);
  });

  it("past the deadline no run starts; the runs in flight finish", async () => {
    vi.useFakeTimers({ toFake: ["Date"] });
    try {
      const { home, directory } = makeBatch(["a", "b", "c"], { jobs: 1, deadline_ms: 60_000 });
      // The first run takes (in the batch's clock) two minutes.
      const runner = new FakeRunner(home, (name) => {
        if (name === "a") vi.setSystemTime(Date.now() + 120_000);
        return ok;
      });
      const result = await runBatch(runner, directory, new AbortController().signal);
      expect(runner.starts).toEqual(["a"]);
      expect(task(result, "a").status).toBe("succeeded");
      expect(task(result, "b")).toMatchObject({ status: "skipped", reason: "deadline_reached" });
    } finally {
      vi.useRealTimers();
    }
  });
});
