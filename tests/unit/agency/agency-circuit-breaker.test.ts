/**
 * The circuit breaker per agent (issue 22 item 2) on the Docker-free tier:
 * a coder that fails 4 of 4 opens its breaker, the fifth event goes to
 * backup-coder, a fresh orchestrator over the same bus keeps the state, and
 * after the cooldown the half-open probe closes it. The clock is a FakeClock:
 * the cooldown passes when the test says so.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { AgencyReport } from "../../../src/agency/agency-directory.js";
import type { AgencyEvent } from "../../../src/bus/event-bus.js";
import { readBusLog } from "../../../src/bus/read-bus-log.js";
import { fakeAgencyRunner, writeAgency } from "../../helpers/agency-fixture.js";
import { FakeClock } from "../../helpers/fake-clock.js";
import { fakeShell } from "../../helpers/fake-runner.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { toolCall } from "../../helpers/runner-cli.js";

async function busEvents(directory: string): Promise<AgencyEvent[]> {
  const events: AgencyEvent[] = [];
  for await (const stored of readBusLog(directory, { from: 0, follow: false })) events.push(stored.event);
  return events;
}

/**
 * The log without lifecycle noise and without the chains each failed invocation stops (agency-stop-reasons.test.ts
 * covers those): `type[:agent]` for the orchestrator's events, `type:subject` for the others.
 */
function timeline(events: AgencyEvent[]): string[] {
  return events
    .filter((event) => event.type !== "agency.agent.state" && event.type !== "agency.chain.stopped")
    .map((event) => {
      const data = event.data as { agent?: string } | undefined;
      return event.type.startsWith("agency.") ? `${event.type}:${data?.agent}` : `${event.type}:${event.subject}`;
    });
}

const invocationsOf = (report: AgencyReport) => report.invocations.map((invocation) => [invocation.agent, invocation.event_id, invocation.status]);

describe("a coder's circuit breaker", () => {
  it("opens after 4 failures of 4, sends the fifth event to backup-coder, keeps its state across orchestrators, and closes after a successful half-open probe", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeAgencyRunner({ exec: fakeShell() });
    const clock = new FakeClock();
    const failing = { turns: [{ tool_calls: [toolCall("write_file", { path: "out.txt", content: "bad\n" })] }, { content: "done" }] };
    const probe = {
      turns: [
        { tool_calls: [toolCall("write_file", { path: "out.txt", content: "good\n" })] },
        { tool_calls: [toolCall("emit_event", { type: "review.approved" })] },
        { content: "done, for real" },
      ],
    };
    const scripts = ["fail-1", "fail-2", "fail-3", "fail-4", "probe"].map((name) => {
      const file = join(directory.path, `${name}.yaml`);
      writeFileSync(file, JSON.stringify(name === "probe" ? probe : failing));
      return file;
    });
    const { agencyFile, git } = writeAgency(directory.path, {
      agents: {
        coder: {
          triggers: ["task.ready"],
          capabilities: ["read_file", "write_file"],
          emits: ["review.approved"],
          verify: { command: "grep -q good out.txt" },
          policies: {
            circuit_breaker: { window_seconds: 300, min_invocations: 4, failure_rate: 0.5, cooldown_seconds: 120, fallback: "backup-coder" },
          },
          turns: [],
          extra: { model: { provider: "scripted", script: scripts } },
        },
        "backup-coder": { triggers: ["task.*"], turns: [{ content: "looked at it" }] },
      },
      agency: { start: ["t1", "t2", "t3", "t4", "t5"].map((subject) => ({ type: "task.ready", subject })) },
    });

    const first = await fake.runner.agency(agencyFile, { clock });
    const firstReport = await first.result;
    // The agency ends with its first stopped chain's reason (guards/stop-reasons.ts): the coder's failed verify.
    expect(firstReport).toMatchObject({ status: "failed", reason: "verify_failed" });
    expect(invocationsOf(firstReport)).toEqual([
      ["coder", `${first.id}-start-0`, "failed"],
      ["coder", `${first.id}-start-1`, "failed"],
      ["coder", `${first.id}-start-2`, "failed"],
      ["coder", `${first.id}-start-3`, "failed"],
      ["backup-coder", `${first.id}-start-4`, "succeeded"],
    ]);
    let events = await busEvents(first.directory);
    expect(timeline(events).slice(5)).toEqual([
      "agency.invocation.finished:coder",
      "agency.invocation.finished:coder",
      "agency.invocation.finished:coder",
      "agency.invocation.finished:coder",
      "agency.breaker.opened:coder",
      "agency.invocation.finished:backup-coder",
    ]);
    const opened = events.find((event) => event.type === "agency.breaker.opened")!;
    expect(opened.data).toMatchObject({
      agent: "coder",
      reason: "failure_rate",
      invocations: 4,
      failures: 4,
      infrastructure_errors: 0,
      fallback: "backup-coder",
      until: new Date(clock.now() + 120_000).toISOString(),
    });
    expect(events.filter((event) => event.type === "agency.invocation.finished").at(-1)?.data).toMatchObject({
      agent: "backup-coder",
      fallback_for: "coder",
      event_id: `${first.id}-start-4`,
    });

    // A fresh orchestrator over the same bus, within the cooldown: the breaker is still open.
    await first.publish({ type: "task.ready", subject: "t6", id: "t6" });
    const second = await fake.runner.resumeAgency(first.id, { clock });
    expect(invocationsOf(await second.result).slice(5)).toEqual([["backup-coder", "t6", "succeeded"]]);

    // The cooldown passes: the next event is the coder's half-open probe, which succeeds and closes the breaker.
    clock.advance(120_000);
    await second.publish({ type: "task.ready", subject: "t7", id: "t7" });
    const third = await fake.runner.resumeAgency(first.id, { clock });
    const thirdReport = await third.result;
    expect(thirdReport).toMatchObject({ status: "succeeded", reason: "goal_reached" });
    expect(invocationsOf(thirdReport).slice(6)).toEqual([["coder", "t7", "succeeded"]]);
    events = await busEvents(first.directory);
    expect(timeline(events).slice(-5)).toEqual([
      "task.ready:t7",
      "agency.breaker.half_open:coder",
      "review.approved:undefined",
      "agency.invocation.finished:coder",
      "agency.breaker.closed:coder",
    ]);
    expect(git("show", `agency/${first.id}:out.txt`)).toBe("good\n");
  });
});
