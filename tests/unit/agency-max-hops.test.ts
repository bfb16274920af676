/**
 * max_hops (issue 22 item 1) in the Docker-free tier: the review → fix
 * ping-pong is stopped at hop 8 (the default), the event past it is not
 * delivered, and the agency ends failed (exit 1) saying why, in the report,
 * the log and `runner agency show`.
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { exitCodeOfAgency } from "../../src/agency/agency-directory.js";
import type { AgencyEvent } from "../../src/bus/event-bus.js";
import { fakeAgencyRunner, writeAgency } from "../helpers/agency-fixture.js";
import { fakeShell } from "../helpers/fake-runner.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { toolCall } from "../helpers/runner-cli.js";

const CLI = fileURLToPath(new URL("../../src/cli/main.ts", import.meta.url));

describe("max_hops", () => {
  it("a reviewer that always asks for changes and a coder that always answers are stopped at hop 8; the agency fails (exit 1) with max_hops", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeAgencyRunner({ exec: fakeShell() });
    const { agencyFile } = writeAgency(directory.path, {
      agents: {
        coder: {
          triggers: ["task.ready", "review.changes_requested"],
          emits: ["code.ready"],
          turns: [{ tool_calls: [toolCall("emit_event", { type: "code.ready", subject: "t1" })] }, { content: "changed it" }],
        },
        reviewer: {
          triggers: ["code.ready"],
          emits: ["review.changes_requested", "review.approved"],
          turns: [{ tool_calls: [toolCall("emit_event", { type: "review.changes_requested", subject: "t1" })] }, { content: "not yet" }],
        },
      },
    });
    const agency = await fake.runner.agency(agencyFile);
    const report = await agency.result;

    expect(report).toMatchObject({ status: "failed", reason: "max_hops", max_hops: 8, stop: { class: "hops_exhausted", reason: "max_hops" } });
    expect(exitCodeOfAgency(report.status)).toBe(1);
    // task.ready is hop 0; the coder answers at 0, 2, 4, 6, 8 and the reviewer at 1, 3, 5, 7.
    expect(report.invocations.map((invocation) => invocation.agent)).toEqual([
      "coder",
      "reviewer",
      "coder",
      "reviewer",
      "coder",
      "reviewer",
      "coder",
      "reviewer",
      "coder",
    ]);
    const log = readFileSync(join(agency.directory, "bus.jsonl"), "utf8")
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line) as AgencyEvent);
    const hand = log.filter((event) => !event.type.startsWith("agency."));
    expect(hand.map((event) => event.hops)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    expect(hand.at(-1)).toMatchObject({ type: "review.changes_requested", hops: 8 });
    // The coder's ninth hand-off was not delivered: discarded, and the chain says why.
    const lastFinished = log.filter((event) => event.type === "agency.invocation.finished").at(-1)!;
    expect(lastFinished.data).toMatchObject({ agent: "coder", status: "succeeded", emitted: [], discarded: ["code.ready"] });
    const stopped = log.filter((event) => event.type === "agency.chain.stopped");
    expect(stopped.map((event) => event.data)).toEqual([
      expect.objectContaining({
        class: "hops_exhausted",
        reason: "max_hops",
        hops: 8,
        last_event: { id: hand.at(-1)!.id, type: "review.changes_requested", hops: 8 },
        agent: "coder",
      }),
    ]);
    expect(report.stops).toEqual(stopped.map((event) => event.data));

    const shown = spawnSync(process.execPath, ["--import", "tsx", CLI, "agency", "show", agency.id], {
      encoding: "utf8",
      env: { ...process.env, RUNNER_HOME: fake.home },
    });
    expect(shown.status, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(`agency ${agency.id} (test-agency): failed (max_hops)`);
    // The trace tree marks the guard's event (src/agency/trace/trace-text.ts).
    expect(shown.stdout).toMatch(/!!.*agency\.chain\.stopped/);
    expect(shown.stdout).toContain("stopped chains:\n  hops_exhausted (max_hops) at hop 8 after review.changes_requested");
    expect(shown.stdout).toContain("why: hops_exhausted: the chain reached max_hops");
    expect(shown.stdout).toContain("mode normal · max_hops 8");
  });

  it("an agent woken by agency.chain.stopped is not stopped again when its own event passes max_hops (no loop)", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeAgencyRunner({ exec: fakeShell() });
    const emitter = (type: string) => ({ turns: [{ tool_calls: [toolCall("emit_event", { type })] }, { content: "sent" }], emits: [type] });
    const { agencyFile } = writeAgency(directory.path, {
      agents: {
        coder: { triggers: ["task.ready"], ...emitter("code.ready") },
        reviewer: { triggers: ["code.ready"], ...emitter("review.changes_requested") },
        notifier: { triggers: ["agency.chain.stopped"], ...emitter("note.sent") },
      },
      agency: { max_hops: 1 },
    });
    const agency = await fake.runner.agency(agencyFile);
    const report = await agency.result;
    expect(report).toMatchObject({ status: "failed", reason: "max_hops", max_hops: 1 });
    expect(report.invocations.map((invocation) => invocation.agent)).toEqual(["coder", "reviewer", "notifier"]);
    expect(report.stops).toEqual([expect.objectContaining({ agent: "reviewer", hops: 1, last_event: expect.objectContaining({ type: "code.ready" }) })]);
  });
});
