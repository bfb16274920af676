import { describe, expect, it } from "vitest";
import type { BatchReport } from "../../src/batch/batch-report.js";
import { reverifyBatch } from "../../src/batch/reverify-batch.js";
import { SandboxError } from "../../src/errors.js";
import type { Reverified } from "../../src/run/reverify-run.js";

const attempt = (runId: string | null, status: string, tryNumber = 1) => ({ attempt: 1, try: tryNumber, run_id: runId, status, reason: "x" });
const report = {
  batch_id: "b",
  options: { min_pass_rate: 0.5 },
  tasks: [
    { name: "verified", attempts: [attempt("r1", "failed")] },
    { name: "unverified", attempts: [attempt("r2", "succeeded")] },
    { name: "retried", attempts: [attempt("r3", "error"), attempt("r4", "failed", 2)] },
    { name: "never-ran", attempts: [attempt(null, "error")] },
  ],
} as unknown as BatchReport;

describe("reverifyBatch (runner batch verify)", () => {
  it("verifies the last try of attempts that ran to an outcome; nothing to verify keeps the outcome; a failure to verify is that run's error", async () => {
    const asked: string[] = [];
    const regraded = await reverifyBatch(
      report,
      async (runId): Promise<Reverified> => {
        asked.push(runId);
        if (runId === "r4") throw new SandboxError("image gone");
        const verify =
          runId === "r1"
            ? {
                command: "t",
                exit_code: 0,
                passed: true,
                timed_out: false,
                output_head: "",
                output_omitted: 0,
                output_tail: "",
                sandbox_lost: null,
                protected: null,
              }
            : null;
        return { runId, commit: "c", verify, before: runId === "r1" ? false : null };
      },
      { jobs: 2 },
    );
    expect(asked.sort()).toEqual(["r1", "r2", "r4"]);
    expect(regraded.totals).toEqual({ tasks: 4, passed: 2, pass_rate: 0.5, changed: 1, errors: 1 });
    expect(regraded.runs.find((run) => run.run_id === "r4")).toMatchObject({ error: "image gone", after: null });
    expect(regraded.gate).toEqual({ min_pass_rate: 0.5, passed: true });
  });
});
