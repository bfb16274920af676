/**
 * The batch's reports (src/batch/junit.ts, summary.ts, batch-report.ts) from
 * synthetic journals: JUnit XML that XML parsers accept whatever the task
 * ids and error texts hold, a markdown summary that fits
 * $GITHUB_STEP_SUMMARY, and the totals.
 */
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { XMLParser, XMLValidator } from "fast-xml-parser";
import { parse as parseJunit2json } from "junit2json";
import { parseV2 } from "test-results-parser";
import type { Task } from "../../src/config/load-task.js";
import { buildBatchReport, mergeBatchReports, nearestRank, type BatchReport } from "../../src/batch/batch-report.js";
import { shardOf } from "../../src/batch/discover-tasks.js";
import { htmlReport, INLINE_BUDGET_BYTES } from "../../src/batch/html-report.js";
import { MAX_DIFF_BYTES, MAX_TIMELINE_ENTRIES, readRunDetails } from "../../src/batch/run-details.js";
import type { RunEvent } from "../../src/events/event-catalogue.js";
import { writeRunFiles } from "../helpers/run-event-files.js";
import type { BatchPlan, JournalLine } from "../../src/batch/batch-state.js";
import { JUNIT_MAX_BYTES, junitXml } from "../../src/batch/junit.js";
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

describe("junit.xml as CI tools read it", () => {
  const pytestTail = "F.\n=== FAILURES ===\ntest_calc.py:4: AssertionError: assert add(2, 2) == 4\n1 failed, 1 passed in 0.02s\n";
  const failedVerify = (command: string, exitCode: number | null) => ({
    timeline: [],
    timelineOmitted: 0,
    eventsCut: false,
    diff: null,
    verifyOutput: pytestTail,
    verify: { command, exitCode, timedOut: false, passed: false, outputTail: pytestTail },
    finalMessage: "I fixed add().",
  });
  const report = () =>
    buildBatchReport(
      plan(["suite/fix-add", "suite/passes", "suite/typo"]),
      [
        ...finished("suite/fix-add", "failed", "verify_failed", { error: "verify failed (exit 1)" }),
        {
          type: "attempt.finished",
          at: new Date((clock += 1000)).toISOString(),
          task: "suite/typo",
          attempt: 1,
          try: 1,
          run_id: null,
          status: "error",
          reason: "task_invalid",
          error: "/in/suite/typo/task.yaml: 1 problem:\n  - (file): unknown field verfy",
          steps: null,
          tokens: null,
          duration_ms: null,
          patch: null,
        },
        ...finished("suite/passes", "succeeded", "verified"),
      ],
      "/home",
      ended,
    );

  it("the failure's text holds the verify command, its exit and its output's tail; each task directory is its own classname; no /task.yaml in names", () => {
    const xml = junitXml(report(), (attempt) => (attempt.status === "failed" ? failedVerify("python3 -m pytest -q", 1) : null));
    const suite = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: "", isArray: (name) => name === "testcase" }).parse(xml).testsuites
      .testsuite as {
      testcase: { classname: string; name: string; failure?: { "#text": string }; error?: { message: string; "#text": string }; "system-out": string }[];
    };
    expect(suite.testcase.map((testcase) => [testcase.classname, testcase.name])).toEqual([
      ["suite/fix-add", "suite/fix-add"],
      ["suite/passes", "suite/passes"],
      ["suite/typo", "suite/typo"],
    ]);
    const failure = suite.testcase[0]!.failure!["#text"];
    expect(failure).toContain("$ python3 -m pytest -q\nexit 1\noutput (tail):\nF.\n=== FAILURES ===\ntest_calc.py:4: AssertionError");
    expect(failure).toMatch(/1 failed, 1 passed in 0\.02s\nrun: \/home\/runs\/run-/);
    // Not twice: system-out keeps the paths and the agent's last message.
    expect(suite.testcase[0]!["system-out"]).not.toContain("AssertionError");
    expect(suite.testcase[0]!["system-out"]).toContain("I fixed add().");
    expect(suite.testcase[2]!.error!.message).toBe("task_invalid");
    expect(suite.testcase[2]!.error!["#text"]).toContain("unknown field verfy");
  });

  it("cut to a small share, the failure's text keeps the command, the exit and the end of the output", () => {
    const long = {
      ...failedVerify("pytest -q", 2),
      verify: { command: "pytest -q", exitCode: 2, timedOut: false, passed: false, outputTail: `${"x".repeat(50_000)}\nLAST LINE: 1 failed` },
    };
    const xml = junitXml(report(), (attempt) => (attempt.status === "failed" ? long : null));
    const failure = /<failure[^>]*>([^<]*)<\/failure>/.exec(xml)![1]!;
    expect(failure.length).toBeLessThanOrEqual(16 * 1024);
    expect(failure).toMatch(
      /^verify failed \(exit 1\)\n\$ pytest -q\nexit 2\noutput \(tail\):\n\[\.\.\. \d+ characters cut \.\.\.\]x+\nLAST LINE: 1 failed\nrun: /,
    );
  });

  it("two JUnit consumers' parsers (test-results-parser, junit2json) read the names, statuses and failure text", async () => {
    const xml = junitXml(report(), (attempt) => (attempt.status === "failed" ? failedVerify("python3 -m pytest -q", 1) : null));
    const home = mkdtempSync(join(tmpdir(), "agent-runner-junit-"));
    try {
      const file = join(home, "junit.xml");
      writeFileSync(file, xml);
      const { result, errors } = parseV2({ type: "junit", files: [file] });
      expect(errors).toEqual([]);
      const cases = result.suites.flatMap((suite) => suite.cases);
      expect(cases.map((testcase) => [testcase.name, testcase.status])).toEqual([
        ["suite/fix-add", "FAIL"],
        ["suite/passes", "PASS"],
        ["suite/typo", "FAIL"],
      ]);
      expect(cases[0]!.failure).toBe("verify_failed");
      expect(cases[0]!.stack_trace).toContain("$ python3 -m pytest -q\nexit 1\noutput (tail):");
      expect(cases[2]!.stack_trace).toContain("unknown field verfy");
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
    const parsed = await parseJunit2json(xml);
    const testcases = (
      parsed as { testsuite?: { testcase?: { classname?: string; name?: string; failure?: { inner?: string }[]; error?: { message?: string }[] }[] }[] }
    ).testsuite![0]!.testcase!;
    expect(testcases.map((testcase) => testcase.classname)).toEqual(["suite/fix-add", "suite/passes", "suite/typo"]);
    expect(testcases[0]!.failure![0]!.inner).toContain("test_calc.py:4: AssertionError");
    expect(testcases[2]!.error![0]!.message).toBe("task_invalid");
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
    expect(summary).toContain("2 tasks: 1 succeeded, 0 failed, 1 error, 0 skipped; pass rate 50.0% (100.0% of the tasks without errors)");
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

/** What an attacker can put in a task id, a tool argument or a diff. */
const SCRIPT = `<script>window.__injected = "script"</script>`;
const IMG = `"><img src=x onerror="window.__injected='img'">`;

/** A run's events: a tool call (arguments carrying markup), a denial, verify, the commit and the merge. */
function runEvents(runId: string, extra: RunEvent[] = []): RunEvent[] {
  return [
    { type: "run.started", data: { run_id: runId, task: "t", workspace: "/w", branch: `agent/${runId}`, base_commit: "0123456789abcdef" } },
    {
      type: "tool_call.started",
      data: { agent_id: "main", step: 1, tool_call_id: "c1", name: "write_file", arguments: JSON.stringify({ path: IMG, content: SCRIPT }) },
    },
    {
      type: "tool_call.finished",
      data: { agent_id: "main", step: 1, tool_call_id: "c1", name: "write_file", is_error: false, duration_ms: 12, result_preview: `wrote ${IMG}` },
    },
    { type: "tool_call.denied", data: { agent_id: "main", tool_call_id: "c2", name: "run_shell", rule: "commands.deny", reason: `curl ${SCRIPT}` } },
    ...extra,
    { type: "verify.started", data: { agent_id: "main", command: "npm test" } },
    {
      type: "verify.finished",
      data: {
        agent_id: "main",
        command: "npm test",
        exit_code: 1,
        passed: false,
        timed_out: false,
        duration_ms: 1500,
        output_tail: `FAIL ${SCRIPT}`,
        sandbox_lost: null,
      },
    },
    {
      type: "workspace.committed",
      data: { branch: `agent/${runId}`, commit: "fedcba9876543210", changed: true, left_out: [], left_out_count: 0, timed_out: false },
    },
    { type: "workspace.merged", data: { merged: false, branch: null, detail: "verify failed: not merged" } },
    { type: "run.finished", data: { status: "failed", exit_code: 1, duration_ms: 9000 } },
  ];
}

const PATCH = `diff --git a/x.html b/x.html\nindex 1111111..2222222 100644\n--- a/x.html\n+++ b/x.html\n@@ -1,2 +1,2 @@\n context line\n-${IMG}\n+${SCRIPT}\n`;

/** One element of the page as fast-xml-parser's `preserveOrder` gives it: its tag, its attributes, its children in order. */
interface Element {
  tag: string;
  attributes: Record<string, string>;
  children: Node[];
}
type Node = Element | string;

/** The page as XML (report.html is well-formed XML), text and children in document order. */
function parseHtml(html: string): Element {
  expect(XMLValidator.validate(html)).toBe(true);
  const raw = new XMLParser({
    ignoreAttributes: false,
    attributeNamePrefix: "",
    htmlEntities: true,
    preserveOrder: true,
    parseTagValue: false,
    trimValues: false,
  }).parse(html) as unknown[];
  const convert = (entry: Record<string, unknown>): Node => {
    if ("#text" in entry) return String(entry["#text"]);
    const tag = Object.keys(entry).find((key) => key !== ":@")!;
    return { tag, attributes: (entry[":@"] as Record<string, string>) ?? {}, children: (entry[tag] as Record<string, unknown>[]).map(convert) };
  };
  return { tag: "#document", attributes: {}, children: (raw as Record<string, unknown>[]).map(convert) };
}

/** Elements named `tag` anywhere below `node`, in document order. */
function findAll(node: Node | undefined, tag: string): Element[] {
  if (!node || typeof node === "string") return [];
  return node.children.flatMap((child) => [...(typeof child !== "string" && child.tag === tag ? [child] : []), ...findAll(child, tag)]);
}

function textOf(node: Node | undefined): string {
  if (!node) return "";
  return typeof node === "string" ? node : node.children.map(textOf).join("");
}

describe("report.html", () => {
  function batchWithRuns(home: string, names: string[]) {
    const journal = names.flatMap((name, index) => finished(name, index === 0 ? "failed" : "succeeded", index === 0 ? "verify_failed" : "verified"));
    const report = buildBatchReport(plan(names), journal, home, ended);
    for (const task of report.tasks) for (const attempt of task.attempts) writeRunFiles(attempt.run_dir!, runEvents(attempt.run_id!), PATCH);
    return report;
  }

  it("per task an expandable section: a timeline of tool calls, denials, verify and merge from events.jsonl, and the diff coloured by line", () => {
    const home = mkdtempSync(join(tmpdir(), "agent-runner-html-"));
    try {
      const report = batchWithRuns(home, [`${SCRIPT}/task.yaml`, "plain/task.yaml"]);
      const html = htmlReport(report, join(home, "batches", "b1"), (attempt) => readRunDetails(attempt.run_dir!, attempt.patch));
      const page = parseHtml(html);
      const sections = findAll(page, "details");
      expect(sections.map((section) => section.attributes["data-status"])).toEqual(["failed", "succeeded"]);
      const items = findAll(sections[0], "li").filter((item) => item.attributes.class?.includes(" "));
      expect(items.map((item) => item.attributes.class)).toEqual([
        "run neutral",
        "tool ok",
        "denied bad",
        "verify bad",
        "merge neutral",
        "merge neutral",
        "run bad",
      ]);
      expect(textOf(items[1])).toContain(`write_file (12 ms)`);
      expect(textOf(items[1])).toContain(JSON.stringify({ path: IMG, content: SCRIPT }));
      expect(textOf(items[2])).toBe(`+3.0 sdeniedmainrun_shell denied (commands.deny)curl ${SCRIPT}`);
      expect(textOf(items[3])).toMatch(/^\+4\.0 sverifymainverify failed \(exit 1\) in 1\.5 s\$ npm test\nFAIL <script>/);
      expect(textOf(items[4])).toContain("committed fedcba987654 on agent/");
      const diff = findAll(sections[0], "pre").find((pre) => pre.attributes.class === "diff")!;
      const lines = findAll(diff, "span").map((span) => [span.attributes.class, textOf(span)]);
      expect(lines).toEqual([
        ["d-meta", "diff --git a/x.html b/x.html"],
        ["d-meta", "index 1111111..2222222 100644"],
        ["d-meta", "--- a/x.html"],
        ["d-meta", "+++ b/x.html"],
        ["d-hunk", "@@ -1,2 +1,2 @@"],
        ["d-ctx", " context line"],
        ["d-del", `-${IMG}`],
        ["d-add", `+${SCRIPT}`],
      ]);
      // The attacker's markup is text: one script element (the filter's), no img, and a CSP that lets only that script run.
      expect(findAll(page, "script")).toHaveLength(1);
      expect(findAll(page, "img")).toHaveLength(0);
      expect(html.match(/<script/g)).toHaveLength(1);
      expect(html).not.toMatch(/<img/);
      const script = textOf(findAll(page, "script")[0]);
      const csp = findAll(page, "meta").find((meta) => meta.attributes["http-equiv"] === "Content-Security-Policy")!.attributes.content!;
      expect(csp).toContain(`script-src 'sha256-${createHash("sha256").update(script).digest("base64")}'`);
      expect(csp).toMatch(/^default-src 'none';/);
      // The table links each task to its section, and each run to its directory and patch (relative to the batch directory).
      const rows = findAll(findAll(page, "tbody")[0], "tr");
      expect(rows.map((row) => textOf(findAll(row, "td")[0]))).toEqual([`${SCRIPT}/task.yaml`, "plain/task.yaml"]);
      const runId = report.tasks[1]!.attempts[0]!.run_id!;
      expect(findAll(rows[1], "a").map((anchor) => anchor.attributes.href)).toEqual(["#task-1", `../../runs/${runId}`, `../../runs/${runId}/patch.diff`]);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });

  it("bounded: a diff cut at 64 KiB, a timeline of 400 entries, the page's inline budget; each with a note", () => {
    const home = mkdtempSync(join(tmpdir(), "agent-runner-html-"));
    try {
      const runDirectory = join(home, "runs", "r1");
      const many: RunEvent[] = Array.from({ length: 1000 }, (_, index) => ({
        type: "tool_call.started",
        data: { agent_id: "main", step: index, tool_call_id: `c${index}`, name: "run_shell", arguments: "x".repeat(2000) },
      }));
      const bigPatch = `diff --git a/a b/a\n${Array.from({ length: 4000 }, (_, index) => `+line ${index} ${"y".repeat(40)}`).join("\n")}\n`;
      writeRunFiles(runDirectory, runEvents("r1", many), bigPatch);
      const details = readRunDetails(runDirectory, join(runDirectory, "patch.diff"));
      expect(details.timeline).toHaveLength(MAX_TIMELINE_ENTRIES);
      expect(details.timelineOmitted).toBe(1007 - MAX_TIMELINE_ENTRIES);
      expect(details.timeline.at(-1)!.title).toMatch(/^run finished/);
      expect(details.timeline[3]!.detail).toMatch(/^x{1500}\n\[\.\.\. 500 more characters\]$/);
      expect(details.diff!.shownBytes).toBeLessThanOrEqual(MAX_DIFF_BYTES);
      expect(details.diff!.text.endsWith("\n")).toBe(true);
      expect(details.diff!.totalBytes).toBe(Buffer.byteLength(bigPatch));
      const report = buildBatchReport(plan(["t"]), finished("t", "succeeded", "verified"), home, ended);
      const html = htmlReport(report, join(home, "batches", "b"), () => details);
      expect(html).toContain(`Diff cut: ${details.diff!.shownBytes} of ${details.diff!.totalBytes} bytes shown; patch.diff has all of it.`);
      expect(html).toContain(`${1007 - MAX_TIMELINE_ENTRIES} entries left out here`);

      // 1 000 runs of 64 KiB diffs: the page stops inlining at its budget and says so for the rest.
      const ids = Array.from({ length: 1000 }, (_, index) => `t${String(index).padStart(4, "0")}`);
      const bigBatch = buildBatchReport(
        plan(ids),
        ids.flatMap((id) => finished(id, "succeeded", "verified")),
        home,
        ended,
      );
      const page = htmlReport(bigBatch, join(home, "batches", "b"), () => ({ ...details, timeline: [], timelineOmitted: 0 }));
      expect(page.length).toBeLessThan(INLINE_BUDGET_BYTES + 2 * 1024 * 1024);
      expect(page).toContain("Timeline and diff not shown: this page already holds");
      expect(page.match(/<details /g)).toHaveLength(1000);
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});

describe("junit.xml size", () => {
  it("system-out carries the verify output and the agent's last message", () => {
    const report = buildBatchReport(plan(["a"]), finished("a", "failed", "verify_failed"), "/home", ended);
    const details = { timeline: [], timelineOmitted: 0, eventsCut: false, diff: null, verifyOutput: "FAIL test_x", verify: null, finalMessage: "I fixed it." };
    const xml = junitXml(report, () => details);
    expect(xml).toMatch(/<system-out>[^<]*verify output \(tail\):\nFAIL test_x\n\nthe agent's last message:\nI fixed it\.<\/system-out>/);
  });

  it("at most 30 MB: system-out cut per testcase first, then the testcases' texts dropped, with a note; every testcase stays", () => {
    // 2 000 testcases of a 16 KiB failure text (33 MB of them alone) and 10 000 characters of verify output: 53 MB whole.
    const ids = Array.from({ length: 2000 }, (_, index) => `suite/task-${index}/task.yaml`);
    const journal = ids.flatMap((id) => finished(id, "failed", "verify_failed", { error: "e".repeat(20_000) }));
    const report = buildBatchReport(plan(ids), journal, "/home", ended);
    const verbose = { timeline: [], timelineOmitted: 0, eventsCut: false, diff: null, verifyOutput: "v".repeat(10_000), verify: null, finalMessage: null };
    const xml = junitXml(report, () => verbose);
    expect(Buffer.byteLength(xml)).toBeLessThanOrEqual(JUNIT_MAX_BYTES);
    const suite = parseJunit(xml);
    expect(suite.testcase).toHaveLength(2000);
    expect(suite).toMatchObject({ tests: "2000", failures: "2000" });
    const share = Math.floor(JUNIT_MAX_BYTES / 2000 / 4);
    // Plain includes: a failing toContain would print 30 MB.
    expect(xml.includes(`junit.xml is kept under ${JUNIT_MAX_BYTES} bytes: each testcase's system-out and failure text are cut to ${share} characters`)).toBe(
      true,
    );
    expect(xml.includes(`verify output (tail):\n${"v".repeat(share - 300)}`)).toBe(true);
    expect(/v\n\[\.\.\. cut: \d+ more characters in the run directory\]<\/system-out>/.test(xml)).toBe(true);
    expect(suite.testcase[0]!.failure!.message).toBe("verify_failed");

    const dropped = junitXml(report, () => verbose, 400_000);
    expect(Buffer.byteLength(dropped)).toBeLessThanOrEqual(400_000);
    const small = parseJunit(dropped);
    expect(small.testcase).toHaveLength(2000);
    expect(small.testcase[1999]!.failure!.message).toBe("verify_failed");
    expect(dropped.includes("eeee")).toBe(false);
    expect(dropped).toContain("junit.xml is kept under 400000 bytes: the testcases' failure texts and system-out are left out");
  });
});

describe("summary.md size", () => {
  it("20 000 flaky tasks: the totals line names 20 of them and counts the rest; the summary stays under 1 MiB", () => {
    const ids = Array.from(
      { length: 20_000 },
      (_, index) => `suite/a-flaky-task-with-a-name-long-enough-to-matter-${String(index).padStart(5, "0")}/task.yaml`,
    );
    const journal = ids.flatMap((id) => [...finished(id, "succeeded", "verified", { attempt: 1 }), ...finished(id, "failed", "verify_failed", { attempt: 2 })]);
    const report = buildBatchReport(plan(ids, 2), journal, "/home", ended);
    expect(report.flaky).toHaveLength(20_000);
    const summary = markdownSummary(report, "/r.json");
    expect(Buffer.byteLength(summary)).toBeLessThanOrEqual(1024 * 1024);
    expect(summary).toContain("flaky: suite/a-flaky-task-with-a-name-long-enough-to-matter-00000/task.yaml, ");
    expect(summary).toContain(" and 19980 more");
    expect(summary.trimEnd().split("\n").at(-1)).toMatch(/^_Truncated: \d+ more tasks not shown/);
  });
});
