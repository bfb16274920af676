/**
 * budget.max_cost_usd (issue 22 item 7) in the Docker-free tier: scripted
 * models priced by `model.prices`; once the invocations have spent the
 * budget the next invocation does not start, the agency ends
 * failed/budget_exhausted, and the work so far stays merged.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { AgencyBudget } from "../../src/agency/guards/agency-budget.js";
import { AgencyFileError } from "../../src/agency/load-agency.js";
import type { RunEnvelope } from "../../src/events/event-catalogue.js";
import { fakeAgencyRunner, writeAgency } from "../helpers/agency-fixture.js";
import { fakeShell } from "../helpers/fake-runner.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { toolCall } from "../helpers/runner-cli.js";

/** Output tokens at a cent each (USD 10 000 per million), prompts free: a call costs about its reply's length / 4 cents. */
const PRICES = { input: 0, output: 10_000 };

describe("budget.max_cost_usd", () => {
  it("stops the next invocation once spent: failed/budget_exhausted, the spent invocation's work merged, the reviewer never started", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeAgencyRunner({ exec: fakeShell() });
    const { agencyFile, git } = writeAgency(directory.path, {
      files: { "calc.txt": "wrong\n" },
      agents: {
        coder: {
          triggers: ["task.ready"],
          capabilities: ["read_file", "write_file"],
          emits: ["code.ready"],
          // Two short calls (under the budget together), then an 800-character answer (200 tokens: USD 2) past it.
          turns: [
            { tool_calls: [toolCall("write_file", { path: "calc.txt", content: "right\n" })] },
            { tool_calls: [toolCall("emit_event", { type: "code.ready" })] },
            { content: "x".repeat(800) },
          ],
          extra: { model: { provider: "scripted", script: "../scripts/coder.yaml", prices: PRICES } },
        },
        reviewer: {
          triggers: ["code.ready"],
          emits: ["review.approved"],
          turns: [{ tool_calls: [toolCall("emit_event", { type: "review.approved" })] }, { content: "approved" }],
          extra: { model: { provider: "scripted", script: "../scripts/reviewer.yaml", prices: PRICES } },
        },
      },
      agency: { budget: { max_cost_usd: 1.2 } },
    });
    const agency = await fake.runner.agency(agencyFile);
    const report = await agency.result;

    expect(report).toMatchObject({ status: "failed", reason: "budget_exhausted", stop: { class: "budget_exhausted", reason: "budget_exhausted" } });
    expect(report.invocations).toEqual([expect.objectContaining({ agent: "coder", status: "succeeded", merged: true })]);
    const coderCost = report.invocations[0]!.cost_usd!;
    expect(coderCost).toBeGreaterThanOrEqual(1.2);
    expect(report.budget).toEqual({ max_cost_usd: 1.2, spent_usd: coderCost });
    expect(report.stops).toEqual([
      expect.objectContaining({
        class: "budget_exhausted",
        reason: "budget_exhausted",
        agent: "reviewer",
        run_id: null,
        last_event: expect.objectContaining({ type: "code.ready", hops: 1 }),
      }),
    ]);
    // The work so far is on the agency branch.
    expect(git("show", `agency/${agency.id}:calc.txt`)).toBe("right\n");
    // The coder's run had what was left of the budget as its own cap.
    const task = JSON.parse(readFileSync(join(fake.home, "runs", report.invocations[0]!.run_id, "task.json"), "utf8")) as { model: { max_cost_usd?: number } };
    expect(task.model.max_cost_usd).toBe(1.2);
  });

  it("is refused (exit 2, nothing created) over an agent whose model has no prices", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeAgencyRunner({ exec: fakeShell() });
    const { agencyFile } = writeAgency(directory.path, {
      agents: { solo: { triggers: ["task.ready"], turns: [{ content: "seen" }] } },
      agency: { budget: { max_cost_usd: 1 } },
    });
    const refused = fake.runner.agency(agencyFile);
    await expect(refused).rejects.toThrow(AgencyFileError);
    await expect(refused).rejects.toThrow(
      /agent\.model: the agency's budget\.max_cost_usd needs every agent's model priced, and the scripted model has no model to price as/,
    );
    expect(existsSync(join(fake.home, "agencies"))).toBe(false);
  });

  it("counts what running invocations have cost so far, from their runs' model calls, until their cost is recorded", async () => {
    const finished: (number | null)[] = [0.25, null];
    const budget = new AgencyBudget(1, () => finished);
    const queue: (RunEnvelope | null)[] = [];
    let waiting: (() => void) | null = null;
    const publish = (envelope: RunEnvelope | null) => {
      queue.push(envelope);
      waiting?.();
    };
    const handle = {
      async *events() {
        for (;;) {
          while (queue.length === 0) await new Promise<void>((resolve) => (waiting = resolve));
          const next = queue.shift()!;
          if (next === null) return;
          yield next;
        }
      },
    };
    // The follower consumes what was published within the same turn of the event loop (no timers, no I/O).
    const seen = () => new Promise<void>((resolve) => setImmediate(resolve));
    budget.follow("coder-1", handle);
    expect(budget.spent()).toBe(0.25);
    expect(budget.capFor(undefined)).toBe(0.75);
    expect(budget.capFor(0.5)).toBe(0.5);
    publish({ specversion: "1.0", id: "a", source: "s", type: "dev.agent-runner.model_call.finished.v1", data: { cost_usd: 0.5 } });
    publish({ specversion: "1.0", id: "b", source: "s", type: "dev.agent-runner.tool_call.finished.v1", data: { cost_usd: 9 } });
    await seen();
    expect(budget.spent()).toBe(0.75);
    expect(budget.exhausted()).toBe(false);
    publish({ specversion: "1.0", id: "c", source: "s", type: "dev.agent-runner.context.summary_usage.v1", data: { cost_usd: 0.25 } });
    await seen();
    expect(budget.exhausted()).toBe(true);
    // Recorded: the finished costs hold it now, the running count is dropped.
    finished.push(0.75);
    budget.finished("coder-1");
    publish(null);
    expect(budget.spent()).toBe(1);
    expect(new AgencyBudget(null, () => [100]).exhausted()).toBe(false);
  });
});
