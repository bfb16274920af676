/**
 * The batch's reports (src/batch/junit.ts, summary.ts, batch-report.ts) from
 * synthetic journals: JUnit XML that XML parsers accept whatever the task
 * ids and error texts hold, a markdown summary that fits
 * $GITHUB_STEP_SUMMARY, and the totals.
 */
import { describe, expect, it } from "vitest";
import { XMLParser, XMLValidator } from "fast-xml-parser";
import type { Task } from "../../src/config/load-task.js";
import { buildBatchReport, mergeBatchReports, nearestRank, type BatchReport } from "../../src/batch/batch-report.js";
import { shardOf } from "../../src/batch/discover-tasks.js";
import { htmlReport } from "../../src/batch/html-report.js";
import type { BatchPlan, JournalLine } from "../../src/batch/batch-state.js";
import { junitXml } from "../../src/batch/junit.js";
import { markdownSummary } from "../../src/batch/summary.js";

function plan(ids: string[], attempts = 1, taskFile = (id: string, index: number) => `/in/tasks.jsonl:${index + 1}`): BatchPlan {
  return {
    batch_id: "20261201-120000-abcd",
    created_at: "2026-12-01T12:00:00.000Z",
    input: { path: "/in", kind: "jsonl", root: "/in" },
    options: { jobs: 4, attempts, retries: 1, min_pass_rate: 0.5, max_errors: 10, filter: null, shard: null, limit: null, junit: null, summary: null },
    tasks: ids.map((id, index) => ({ id, task_file: taskFile(id, index), task: { name: "t" } as Task })),
    discovered: ids.length,
  };
}

let clock = Date.parse("2026-12-01T12:00:00.000Z");
function finished(
  task: string,
  status: "succeeded" | "failed" | "error",
  reason: string,
  extra: { attempt?: number; try?: number; error?: string | null; duration?: number; cost?: number | null } = {},
): JournalLine[] {
  const at = () => new Date((clock += 1000)).toISOString();
  const runId = `run-${task.length}-${clock}`;
  const common = { task, attempt: extra.attempt ?? 1, try: extra.try ?? 1 };
  return [
    { type: "attempt.started", at: at(), ...common, run_id: runId },
    {
      type: "attempt.finished",
      at: at(),
      ...common,
      run_id: runId,
      status,
      reason,
      error: extra.error ?? null,
      steps: 3,
      tokens: { prompt: 1000, completion: 100, cached: 400 },
      ...(extra.cost === undefined ? {} : { cost_usd: extra.cost }),
      duration_ms: extra.duration ?? 2000,
      patch: "patch.diff",
    },
  ];
}

const ended = { ended: true, interrupted: false, skipReason: "not_run" as const };
const NASTY = "weird <&\"'> ]]> \u0001\u001b[31m\u0008 tab\there ✓ 🚀";

type Parsed = {
  testsuites: {
    testsuite: {
      tests: string;
      failures: string;
      errors: string;
      skipped: string;
      testcase: { name: string; failure?: { message: string; "#text"?: string }; error?: { message: string }; skipped?: { message: string } }[];
    };
  };
};

function parseJunit(xml: string): Parsed["testsuites"]["testsuite"] {
  expect(XMLValidator.validate(xml)).toBe(true);
  return (new XMLParser({ ignoreAttributes: false, attributeNamePrefix: "", isArray: (name) => name === "testcase" }).parse(xml) as Parsed).testsuites
    .testsuite;
}

describe("junit.xml", () => {
  it("one testcase per run with unique names; failure = agent, error = infrastructure, skipped = not run; any text is escaped and control characters removed", () => {
    const ids = [`a/${NASTY}/task.yaml`, "b/task.yaml", "c/task.yaml", "d/task.yaml"];
    const journal = [
      { type: "batch.started" as const, at: new Date(clock).toISOString(), pid: 1 },
      ...finished(ids[0]!, "failed", "verify_failed", { error: `exit 1: ${NASTY}` }),
      ...finished("b/task.yaml", "error", "rate_limited", { error: "429 <html>" }),
      ...finished("b/task.yaml", "succeeded", "verified", { try: 2 }),
      ...finished("c/task.yaml", "error", "docker_unreachable", { error: "Docker: no such image" }),
      ...finished("c/task.yaml", "error", "docker_unreachable", { try: 2, error: "Docker: no such image" }),
    ];
    const report = buildBatchReport(plan(ids), journal, "/home", ended);
    const suite = parseJunit(junitXml(report));
    expect(suite).toMatchObject({ tests: "6", failures: "1", errors: "3", skipped: "1" });
    const names = suite.testcase.map((testcase) => testcase.name);
    expect(new Set(names).size).toBe(names.length);
    expect(names).toEqual([
      "a/weird <&\"'> ]]> [31m tab\there ✓ 🚀/task.yaml",
      "b/task.yaml [attempt 1, try 1]",
      "b/task.yaml [attempt 1, try 2]",
      "c/task.yaml [attempt 1, try 1]",
      "c/task.yaml [attempt 1, try 2]",
      "d/task.yaml",
    ]);
    expect(suite.testcase[0]!.failure!.message).toBe("verify_failed");
    expect(suite.testcase[0]!.failure!["#text"]).toMatch(/^exit 1: weird <&"'> \]\]> \[31m tab\there ✓ 🚀\nrun: /);
    expect(suite.testcase[1]!.error!.message).toBe("rate_limited");
    expect(suite.testcase[2]!.failure ?? suite.testcase[2]!.error).toBeUndefined();
    expect(suite.testcase[5]!.skipped!.message).toBe("not_run");
  });

  it("--attempts k: every attempt is a testcase", () => {
    const journal = [...finished("x", "succeeded", "verified", { attempt: 1 }), ...finished("x", "failed", "max_steps", { attempt: 2 })];
    const suite = parseJunit(junitXml(buildBatchReport(plan(["x"], 2), journal, "/home", ended)));
    expect(suite.testcase.map((testcase) => testcase.name)).toEqual(["x [attempt 1, try 1]", "x [attempt 2, try 1]"]);
  });
});

describe("summary.md", () => {
  it("fits the limit: rows that do not fit are left out, with a line saying how many", () => {
    const ids = Array.from({ length: 20_000 }, (_, index) => `suite/task-${String(index).padStart(5, "0")}/with a long name | and a pipe/task.yaml`);
    const journal = ids.flatMap((id, index) => finished(id, index % 3 === 0 ? "failed" : "succeeded", index % 3 === 0 ? "verify_failed" : "verified"));
    const report = buildBatchReport(plan(ids), journal, "/home", ended);
    const summary = markdownSummary(report, "/home/batches/b/batch-report.json");
    expect(Buffer.byteLength(summary)).toBeLessThanOrEqual(1024 * 1024);
    expect(Buffer.byteLength(summary)).toBeGreaterThan(1000 * 1024);
    const shown = summary.split("\n").filter((line) => line.startsWith("| suite/")).length;
    expect(summary.trimEnd().split("\n").at(-1)).toBe(
      `_Truncated: ${20_000 - shown} more tasks not shown (this summary is kept under 1048576 bytes); every task is in /home/batches/b/batch-report.json._`,
    );
    // Failures come first, so they are what survives the cut; pipes in ids are escaped.
    expect(summary).toMatch(/\n\| suite\/task-00000\/with a long name \\\| and a pipe\/task\.yaml \| failed \| verify_failed \| 1 \| \/home\/runs\/run-/);
  });

  it("a small batch: every task, the totals and the gate", () => {
    const report = buildBatchReport(plan(["a", "b"]), [...finished("a", "succeeded", "verified"), ...finished("b", "error", "rate_limited")], "/home", ended);
    const summary = markdownSummary(report, "/r.json");
    expect(summary).toContain("## Batch 20261201-120000-abcd: passed");
    expect(summary).toContain("2 tasks: 1 succeeded, 0 failed, 1 error, 0 skipped; pass rate 50.0% (100.0% without infrastructure errors)");
    expect(summary).toMatch(/\| b \| error \| rate_limited \| 1 \|.*\n\| a \| succeeded \| verified \| 1 \|/);
    expect(summary).not.toContain("Truncated");
  });
});

describe("batch-report.json totals", () => {
  it("tokens incl. cached, nearest-rank duration percentiles, both pass rates", () => {
    const durations = [1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10_000];
    const ids = durations.map((_, index) => `t${index}`);
    const journal = ids.flatMap((id, index) =>
      finished(id, index < 8 ? "succeeded" : "error", index < 8 ? "verified" : "server_error", { duration: durations[index]! }),
    );
    const report: BatchReport = buildBatchReport(plan(ids), journal, "/home", ended);
    expect(report.totals.tokens).toEqual({ prompt: 10_000, completion: 1000, cached: 4000, total: 11_000 });
    expect(report.totals.duration_ms).toEqual({ p50: 5000, p90: 9000, max: 10_000 });
    expect(report.totals).toMatchObject({ pass_rate: 0.8, pass_rate_without_errors: 1, errored_attempts: 2 });
    expect(nearestRank([5], 0.9)).toBe(5);
  });

  it("cost: the runs' costs summed where tokens are, null when a run was not priced; the summary line shows it", () => {
    const priced = [...finished("a", "succeeded", "verified", { cost: 0.1 }), ...finished("b", "failed", "budget_exceeded", { cost: 0.2 })];
    const report = buildBatchReport(plan(["a", "b"]), priced, "/home", ended);
    expect(report.totals.cost_usd).toBe(0.3);
    expect(report.tasks.map((task) => task.attempts[0]!.cost_usd)).toEqual([0.1, 0.2]);
    expect(markdownSummary(report, "/r.json")).toContain("2 runs, 2200 tokens (800 cached), cost $0.3");
    // A run without a price (or a line of an older runner, without cost_usd) makes the total unknown, not smaller.
    for (const cost of [null, undefined]) {
      const partly = buildBatchReport(
        plan(["a", "b"]),
        [...finished("a", "succeeded", "verified", { cost: 0.1 }), ...finished("b", "succeeded", "verified", { cost })],
        "/home",
        ended,
      );
      expect(partly.totals.cost_usd).toBeNull();
      expect(markdownSummary(partly, "/r.json")).toContain("cost unknown (a run was not priced)");
    }
  });

  it("an empty shard (a CI matrix wider than the batch) passes", () => {
    expect(buildBatchReport(plan([]), [], "/home", ended)).toMatchObject({
      status: "passed",
      exit_code: 0,
      gate: { passed: true },
      totals: { tasks: 0, pass_rate: null },
    });
  });
});

describe("runner batch merge", () => {
  it("the shards' reports merge into the unsharded report (ids and timings aside)", () => {
    // Sorted, as discovery hands them over.
    const ids = Array.from({ length: 30 }, (_, index) => `suite/t${index}/task.yaml`).sort();
    const journal: JournalLine[] = [{ type: "batch.started", at: new Date(clock).toISOString(), pid: 1 }];
    for (const [index, id] of ids.entries()) {
      if (index % 5 === 0) journal.push(...finished(id, "error", "rate_limited"), ...finished(id, "succeeded", "verified", { try: 2 }));
      else if (index % 7 === 0) journal.push(...finished(id, "error", "docker_unreachable"), ...finished(id, "error", "docker_unreachable", { try: 2 }));
      else journal.push(...finished(id, index % 3 ? "succeeded" : "failed", index % 3 ? "verified" : "verify_failed", { duration: 1000 + index * 100 }));
    }
    const unsharded = buildBatchReport(plan(ids), journal, "/home", ended);
    const shards = [1, 2, 3].map((index) => {
      const shardIds = ids.filter((id) => shardOf(id, 3) === index);
      const shardPlan = { ...plan(shardIds, 1, (id) => `/in/tasks.jsonl:${ids.indexOf(id) + 1}`), batch_id: `shard-${index}` };
      shardPlan.options.shard = `${index}/3`;
      const lines = journal.filter((line) => !("task" in line) || shardIds.includes(line.task));
      return { file: `shard-${index}.json`, report: buildBatchReport(shardPlan, lines, "/home", ended) };
    });
    expect(shards.every(({ report }) => report.tasks.length > 0)).toBe(true);
    const merged = mergeBatchReports(shards, "merged");
    const comparable = (report: BatchReport) => ({
      ...report,
      batch_id: null,
      updated_at: null,
      merged_from: null,
      options: { ...report.options, shard: null },
      totals: { ...report.totals, wall_ms: null },
    });
    expect(comparable(merged)).toEqual(comparable(unsharded));
    expect(merged.merged_from).toEqual(["shard-1", "shard-2", "shard-3"]);
    expect(merged.totals).toMatchObject({ tasks: 30, error: unsharded.totals.error, errored_attempts: unsharded.totals.errored_attempts });
  });

  it("refuses reports that do not belong together: a task twice, other outcome options, a running batch", () => {
    const one = buildBatchReport(plan(["a"]), finished("a", "succeeded", "verified"), "/home", ended);
    expect(() =>
      mergeBatchReports(
        [
          { file: "x.json", report: one },
          { file: "y.json", report: one },
        ],
        "m",
      ),
    ).toThrow(/task a is in both x\.json and y\.json/);
    const other = buildBatchReport({ ...plan(["b"]), options: { ...plan(["b"]).options, attempts: 3 } }, [], "/home", ended);
    expect(() =>
      mergeBatchReports(
        [
          { file: "x.json", report: one },
          { file: "z.json", report: other },
        ],
        "m",
      ),
    ).toThrow(/z\.json: options\.attempts is 3 but x\.json has 1/);
    const running = buildBatchReport(plan(["c"]), [], "/home", { ...ended, ended: false });
    expect(() => mergeBatchReports([{ file: "r.json", report: running }], "m")).toThrow(/r\.json: batch .* is still running/);
  });
});

describe("report.html", () => {
  it("a table of every task with links (relative to the batch directory) to each run and its patch; text escaped", () => {
    const ids = [`<script>alert("x")</script> & 'q'/task.yaml`, "plain/task.yaml"];
    const report = buildBatchReport(
      plan(ids),
      [...finished(ids[0]!, "failed", "verify_failed"), ...finished(ids[1]!, "succeeded", "verified")],
      "/home",
      ended,
    );
    const html = htmlReport(report, "/home/batches/b1");
    expect(html).not.toContain("<script>");
    expect(XMLValidator.validate(html)).toBe(true);
    const parsed = new XMLParser({
      ignoreAttributes: false,
      attributeNamePrefix: "",
      htmlEntities: true,
      isArray: (name) => ["tr", "a", "li"].includes(name),
    }).parse(html) as {
      html: { body: { table: { tbody: { tr: { td: (string | { ul: { li: { a: { href: string; "#text": string }[] }[] } })[] }[] } } } };
    };
    const rows = parsed.html.body.table.tbody.tr;
    expect(rows.map((row) => row.td[0])).toEqual([`<script>alert("x")</script> & 'q'/task.yaml`, "plain/task.yaml"]);
    const links = (rows[1]!.td[3] as { ul: { li: { a: { href: string; "#text": string }[] }[] } }).ul.li[0]!.a;
    const runId = report.tasks[1]!.attempts[0]!.run_id!;
    expect(links.map((anchor) => [anchor.href, anchor["#text"]])).toEqual([
      [`../../runs/${runId}`, runId],
      [`../../runs/${runId}/patch.diff`, "patch.diff"],
    ]);
  });
});
