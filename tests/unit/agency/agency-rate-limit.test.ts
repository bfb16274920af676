/**
 * Token buckets per agent (issue 22 item 3) on the Docker-free tier: with
 * `tool_calls_per_minute: 30` the 31st tool call in a minute waits — with an
 * `agency.rate_limited` event — until the (fake) clock has refilled one
 * token; a fresh orchestrator over the same agency starts from the buckets
 * as they were (rate-limits.json). No sleeps: the clock moves when the test says.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { AgencyHandle } from "../../../src/agency/agency.js";
import type { AgencyEvent } from "../../../src/bus/event-bus.js";
import { fakeAgencyRunner, writeAgency } from "../../helpers/agency-fixture.js";
import { FakeClock } from "../../helpers/fake-clock.js";
import { eventData, eventsFile, fakeShell } from "../../helpers/fake-runner.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { toolCall } from "../../helpers/runner-cli.js";

/** The first event of the agency that matches; throws when the agency ends without one. */
async function firstAgencyEvent(agency: AgencyHandle, match: (event: AgencyEvent) => boolean): Promise<AgencyEvent> {
  for await (const event of agency.events()) if (match(event)) return event;
  throw new Error("the agency ended without the event");
}

/** The run of the agency's `index`-th invocation (invocations.jsonl, start order). */
function runOfInvocation(agencyDirectory: string, index: number): string {
  const started = readFileSync(join(agencyDirectory, "invocations.jsonl"), "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { kind: string; run_id: string })
    .filter((line) => line.kind === "started");
  return started[index]!.run_id;
}

describe("an agent's rate_limit", () => {
  it("makes the 31st tool call in a minute wait for a refilled token, once announced; a fresh orchestrator keeps the bucket", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeAgencyRunner({ exec: fakeShell() });
    const clock = new FakeClock();
    const read = () => toolCall("read_file", { path: "README.md" });
    const first = { turns: [{ tool_calls: Array.from({ length: 30 }, read) }, { tool_calls: [read()] }, { content: "read it 31 times" }] };
    const second = { turns: [{ tool_calls: [read()] }, { content: "read it once more" }] };
    const scripts = Object.entries({ first, second }).map(([name, script]) => {
      const file = join(directory.path, `${name}.yaml`);
      writeFileSync(file, JSON.stringify(script));
      return file;
    });
    const { agencyFile } = writeAgency(directory.path, {
      agents: {
        reader: {
          triggers: ["task.ready"],
          policies: { rate_limit: { tool_calls_per_minute: 30 } },
          turns: [],
          extra: { model: { provider: "scripted", script: scripts } },
        },
      },
    });

    const agency = await fake.runner.agency(agencyFile, { clock });
    const limited = await firstAgencyEvent(agency, (event) => event.type === "agency.rate_limited");
    expect(limited.data).toMatchObject({ agent: "reader", limit: "tool_calls_per_minute", per_minute: 30, wait_ms: 2000, tool: "read_file" });
    // The 31st waits: 30 calls have started, and nothing more until the clock moves.
    const run = join(fake.home, "runs", runOfInvocation(agency.directory, 0));
    expect(eventData(eventsFile(run), "tool_call.started")).toHaveLength(30);
    clock.advance(2000);
    const report = await agency.result;
    expect(report.invocations.map((invocation) => invocation.status)).toEqual(["succeeded"]);
    expect(eventData(eventsFile(run), "tool_call.started")).toHaveLength(31);
    const bucket = JSON.parse(readFileSync(join(agency.directory, "rate-limits.json"), "utf8"));
    expect(bucket.agents.reader.tool_calls_per_minute).toEqual({ tokens: -1, updated_at: clock.now() - 2000 });

    // A new orchestrator at the same moment: the bucket is still empty, so the next call waits too.
    await agency.publish({ type: "task.ready", subject: "t2", id: "t2" });
    const resumed = await fake.runner.resumeAgency(agency.id, { clock });
    const again = await firstAgencyEvent(resumed, (event) => event.type === "agency.rate_limited" && event.id !== limited.id);
    expect(again.data).toMatchObject({ agent: "reader", wait_ms: 2000 });
    expect((again.data as { invocation_id: string }).invocation_id).not.toBe((limited.data as { invocation_id: string }).invocation_id);
    clock.advance(2000);
    const resumedReport = await resumed.result;
    expect(resumedReport.invocations.map((invocation) => [invocation.event_id, invocation.status])).toEqual([
      [`${agency.id}-start-0`, "succeeded"],
      ["t2", "succeeded"],
    ]);
    // Once per wait.
    const types = readFileSync(join(agency.directory, "bus.jsonl"), "utf8")
      .split("\n")
      .filter(Boolean)
      .map((line) => (JSON.parse(line) as AgencyEvent).type);
    expect(types.filter((type) => type === "agency.rate_limited")).toHaveLength(2);
  });

  it("tokens_per_minute holds a model call until the last one's tokens are paid back, events_per_minute holds an emit_event", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeAgencyRunner({ exec: fakeShell() });
    const clock = new FakeClock();
    const emit = (n: number) => toolCall("emit_event", { type: "note.made", data: { n } });
    const { agencyFile } = writeAgency(directory.path, {
      agents: {
        writer: {
          triggers: ["task.ready"],
          emits: ["note.made"],
          policies: { rate_limit: { tokens_per_minute: 600, events_per_minute: 1 } },
          turns: [{ tool_calls: [emit(1)] }, { tool_calls: [emit(2)] }, { content: "two notes" }],
        },
      },
    });
    const agency = await fake.runner.agency(agencyFile, { clock });
    const waits: { limit: string; tool: string | null }[] = [];
    // Each wait is announced once; the test pays it with the clock and the invocation goes on.
    for await (const event of agency.events()) {
      if (event.type !== "agency.rate_limited") continue;
      const data = event.data as { limit: string; tool: string | null; wait_ms: number };
      waits.push({ limit: data.limit, tool: data.tool });
      clock.advance(data.wait_ms);
    }
    const report = await agency.result;
    expect(report.invocations.map((invocation) => invocation.status)).toEqual(["succeeded"]);
    // The first model call (about 950 tokens) is over 600 a minute: the second and third calls wait; the second event waits for its token.
    expect(waits).toEqual([
      { limit: "tokens_per_minute", tool: null },
      { limit: "events_per_minute", tool: "emit_event" },
      { limit: "tokens_per_minute", tool: null },
    ]);
  });
});
