import { describe, expect, it } from "vitest";
import { outcomeText } from "../../src/cli/run-summary.js";
import type { RunReport } from "../../src/run/run-report.js";

/** The fields of a report the summary reads; the rest of a RunReport does not matter here. */
function report(fields: Partial<RunReport>): RunReport {
  return {
    run_id: "20261202-050000-abcd",
    status: "error",
    reason: "verify_unrunnable",
    error: "verify.command: nosuchtool: not found (exit 127)",
    verify: null,
    final_message: null,
    branch: null,
    commit: null,
    steps: 5,
    tool_calls: 4,
    usage: { prompt_tokens: 10, completion_tokens: 5, cached_tokens: 0, cache_write_tokens: 0 },
    cost_usd: 0,
    pricing: null,
    duration_ms: 1000,
    patch: null,
    denials: {},
    merge: null,
    disk: null,
    agents: [],
    ...fields,
  } as unknown as RunReport;
}

describe("the summary's next step", () => {
  it("a verify command that could not run sends the user to the task file, not to `runner resume` (which would run it again)", () => {
    const text = outcomeText({ verify: { command: "nosuchtool --check" } } as never, { report: report({}), runDirectory: "/tmp/run" });
    expect(text).toContain("next: fix verify.command in the task file");
    expect(text).not.toContain("runner resume");
  });

  it("an infrastructure error still offers `runner resume`", () => {
    const text = outcomeText({ verify: undefined } as never, { report: report({ reason: "connection_error" }), runDirectory: "/tmp/run" });
    expect(text).toContain("continue it: runner resume 20261202-050000-abcd");
  });
});
