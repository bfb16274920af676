/**
 * What `runner batch run` prints while it goes on (src/cli/batch-progress.ts):
 * a line per start and per outcome, a periodic one-line status while runs
 * are in flight (fake timers: no sleeps), and after Ctrl-C a resume hint and
 * totals that count the interrupted runs (the batch core over a fake runner).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Task } from "../../src/config/load-task.js";
import type { RunReport } from "../../src/run/run-report.js";
import type { RunHandle } from "../../src/runner/runner.js";
import { BatchDirectory } from "../../src/batch/batch-state.js";
import { runBatch, type BatchRunner } from "../../src/batch/run-batch.js";
import { formatBatchTable } from "../../src/batch/summary.js";
import { BatchProgressView, resumeHint, STATUS_INTERVAL_MS } from "../../src/cli/batch-progress.js";

afterEach(() => {
  vi.useRealTimers();
});

describe("batch progress lines", () => {
  it("a line when each run starts, one per outcome, and every interval a status line naming the runs in flight and their ages", () => {
    vi.useFakeTimers({ now: Date.parse("2026-12-01T12:00:00Z") });
    const lines: string[] = [];
    const view = new BatchProgressView((line) => lines.push(line));
    view.start(3);
    view.started("suite/a", 1, 1, "run-a", false);
    vi.advanceTimersByTime(20_000);
    view.started("suite/b", 1, 1, "run-b", false);
    expect(lines).toEqual(["start suite/a run run-a", "start suite/b run run-b"]);
    vi.advanceTimersByTime(STATUS_INTERVAL_MS - 20_000);
    expect(lines.at(-1)).toBe("status 30s: 0/3 settled, 2 running: suite/a (30s), suite/b (10s)");
    view.finished("suite/a", 1, 1, "run-a", { status: "failed", reason: "verify_failed", error: null }, { done: 1, total: 3 });
    expect(lines.at(-1)).toBe("[1/3] suite/a: failed (verify_failed) run run-a");
    vi.advanceTimersByTime(STATUS_INTERVAL_MS * 3);
    expect(lines.at(-1)).toBe("status 2m00s: 1/3 settled (1 failed), 1 running: suite/b (1m40s)");
    view.finished("suite/b", 1, 1, "run-b", { status: "succeeded", reason: "verified", error: null }, { done: 2, total: 3 });
    view.started("suite/c\u001b[2J", 1, 2, "run-c", true);
    // Task ids are the user's text: no terminal control sequence gets through.
    expect(lines.at(-1)).toBe("resume suite/c\\x1b[2J (attempt 1, try 2) run run-c");
    const count = lines.length;
    view.finished("suite/c", 1, 2, "run-c", { status: "succeeded", reason: "verified", error: null }, { done: 3, total: 3 });
    // Nothing in flight: no status lines.
    vi.advanceTimersByTime(STATUS_INTERVAL_MS * 2);
    expect(lines).toHaveLength(count + 1);
    // An error says why on its own line, on one line and cut short (the reports keep it whole).
    const loader = `/in/typo/task.yaml: 1 problem:\n  - (file): unknown field verfy (did you mean verify?)${" and more".repeat(40)}`;
    view.finished("typo", 1, 1, null, { status: "error", reason: "task_invalid", error: loader }, { done: 3, total: 3 });
    expect(lines.at(-1)).toContain(
      "[3/3] typo: error (task_invalid): /in/typo/task.yaml: 1 problem: - (file): unknown field verfy (did you mean verify?) and more",
    );
    expect(lines.at(-1)).toMatch(/…$/);
    expect(lines.at(-1)!.length).toBeLessThan(260);
    view.stop();
  });
});

describe("after Ctrl-C", () => {
  const homes: string[] = [];
  afterEach(() => {
    for (const home of homes.splice(0)) rmSync(home, { recursive: true, force: true });
  });

  it("the totals count the interrupted runs as the table does, and the hint names `runner batch resume <id>`", async () => {
    const home = mkdtempSync(join(tmpdir(), "agent-runner-batch-progress-"));
    homes.push(home);
    const directory = BatchDirectory.of(home, "b1");
    directory.create({
      batch_id: "b1",
      created_at: new Date().toISOString(),
      input: { path: "/in", kind: "directory", root: "/in" },
      options: { jobs: 1, attempts: 1, retries: 0, min_pass_rate: 1, max_errors: 0, filter: null, shard: null, limit: null, junit: null, summary: null },
      tasks: ["hangs", "later"].map((name) => ({ id: name, task_file: `/in/${name}/task.yaml`, task: { name } as Task })),
      discovered: 2,
    });
    const controller = new AbortController();
    // One run that hangs until it is cancelled, reporting `cancelled` as a real run does.
    const runner: BatchRunner = {
      home,
      resume: () => Promise.reject(new Error("no resume here")),
      startTask: async (task: Task) => {
        let cancel!: () => void;
        const cancelled = new Promise<void>((resolve) => (cancel = resolve));
        return {
          id: `${task.name}-run`,
          result: cancelled.then(() => ({ run_id: `${task.name}-run`, status: "cancelled", reason: "interrupted", error: null }) as unknown as RunReport),
          cancel: async () => cancel(),
        } as unknown as RunHandle;
      },
    };
    const lines: string[] = [];
    const view = new BatchProgressView((line) => lines.push(line));
    const report = await runBatch(runner, directory, controller.signal, {
      started: (...args) => {
        view.started(...args);
        controller.abort();
      },
      finished: (...args) => view.finished(...args),
    });
    expect(lines).toEqual(["start hangs run hangs-run"]);
    expect(report.status).toBe("interrupted");
    expect(report.totals.runs).toBe(1);
    const table = formatBatchTable(report);
    expect(table).toMatch(/\nhangs +skipped +interrupted +1 +hangs-run\n/);
    expect(table).toContain("; 1 run,");
    expect(resumeHint(report)).toBe("2 task(s) did not finish; continue with: runner batch resume b1");
  });

  it("no hint for a batch that ended", () => {
    expect(resumeHint({ batch_id: "b1", status: "passed", tasks: [] })).toBeNull();
    expect(resumeHint({ batch_id: "b1", status: "error", tasks: [] })).toBeNull();
  });
});
