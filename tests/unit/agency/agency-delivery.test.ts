/**
 * The orchestrator's delivery guarantees in the Docker-free tier (issue 21,
 * "Done when"): max_concurrency under a burst, one invocation per event id,
 * the 16 KiB cap, capabilities and emits enforced, concurrent writers, a late
 * subscriber replaying from 0.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { EventRejectedError } from "../../../src/bus/event-bus.js";
import type { HostDirectoryExecHandler } from "../../../src/sandbox/fake/host-directory-sandbox.js";
import { eventTypes, fakeAgencyRunner, modelRequestsOf, writeAgency } from "../../helpers/agency-fixture.js";
import { fakeShell } from "../../helpers/fake-runner.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { toolCall } from "../../helpers/runner-cli.js";

/**
 * `work`: a command that holds until `limit` of them run at once (or all that are left, at the end),
 * recording the most that ever ran together. Anything else goes to the fake shell.
 */
function concurrencyProbe(total: number, limit: number) {
  let active = 0;
  let finished = 0;
  let most = 0;
  let waiting: (() => void)[] = [];
  const release = () => {
    if (active >= Math.min(limit, total - finished)) {
      const released = waiting;
      waiting = [];
      for (const resume of released) resume();
    }
  };
  const shell = fakeShell();
  const exec: HostDirectoryExecHandler = async (call) => {
    if (call.request.command !== "work") return shell(call);
    active += 1;
    most = Math.max(most, active);
    const held = new Promise<void>((resolve) => waiting.push(resolve));
    release();
    await held;
    active -= 1;
    finished += 1;
    return { stdout: "worked\n" };
  };
  return { exec, most: () => most };
}

describe("delivery", () => {
  it("a burst of 20 events runs at most max_concurrency invocations at once, one invocation each, none dropped", async () => {
    const probe = concurrencyProbe(20, 3);
    await using directory = temporaryDirectory();
    await using fake = await fakeAgencyRunner({ exec: probe.exec });
    const { agencyFile } = writeAgency(directory.path, {
      agents: {
        worker: {
          triggers: ["burst.item"],
          policies: { max_concurrency: 3 },
          capabilities: ["read_file", "run_shell"],
          turns: [{ tool_calls: [toolCall("run_shell", { command: "work" })] }, { content: "done" }],
        },
      },
      agency: { start: Array.from({ length: 20 }, (_, index) => ({ type: "burst.item", subject: `item-${index}` })), goal: "never.happens" },
    });
    const agency = await fake.runner.agency(agencyFile);
    const report = await agency.result;
    // Without the goal the agency ends quiescent: every event handled, nothing running.
    expect(report).toMatchObject({ status: "failed", reason: "quiescent" });
    expect(probe.most()).toBe(3);
    expect(report.invocations).toHaveLength(20);
    expect(report.invocations.every((invocation) => invocation.status === "succeeded")).toBe(true);
    expect(new Set(report.invocations.map((invocation) => invocation.event_id)).size).toBe(20);
    expect(report.invocations.map((invocation) => modelRequestsOf(fake.home, invocation.run_id))).toEqual(Array(20).fill(2));
  });

  it("a duplicate event id starts one invocation; a late subscriber replays the log from 0", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeAgencyRunner({ exec: fakeShell() });
    const { agencyFile } = writeAgency(directory.path, {
      agents: { solo: { triggers: ["task.ready"], turns: [{ content: "seen" }] } },
      agency: {
        start: [
          { type: "task.ready", id: "same-id", data: { n: 1 } },
          { type: "task.ready", id: "same-id", data: { n: 2 } },
        ],
        goal: "never.happens",
      },
    });
    const agency = await fake.runner.agency(agencyFile);
    const report = await agency.result;
    expect(report.invocations.map((invocation) => invocation.event_id)).toEqual(["same-id"]);
    expect(eventTypes(fake.home, report).filter((type) => type === "task.ready")).toHaveLength(1);
    // After the end: everything from sequence 0, as the log holds it.
    const replayed = [];
    for await (const event of agency.events({ from: 0 })) replayed.push(event);
    const log = readFileSync(join(agency.directory, "bus.jsonl"), "utf8")
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line));
    expect(replayed).toEqual(log);
    expect(replayed[0]).toMatchObject({ id: "same-id", data: { n: 1 } });
    const fromThree = [];
    for await (const event of agency.events({ from: 3 })) fromThree.push(event);
    expect(fromThree).toEqual(log.slice(3));
  });

  it("refuses, as tool errors the model sees: a tool outside the capabilities, a type outside emits, 16 KiB + 1 of data", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeAgencyRunner({ exec: fakeShell() });
    const big = "x".repeat(16 * 1024 + 1 - 2); // a JSON string: its two quotes make 16 KiB + 1 bytes
    const { agencyFile } = writeAgency(directory.path, {
      files: { "a.txt": "a\n" },
      agents: {
        reader: {
          triggers: ["task.ready"],
          capabilities: ["read_file"],
          emits: ["review.approved"],
          turns: [
            { tool_calls: [toolCall("write_file", { path: "a.txt", content: "changed\n" }), toolCall("run_shell", { command: "echo hi >> a.txt" })] },
            {
              expect: { tool_result_matches: "write_file" },
              tool_calls: [toolCall("emit_event", { type: "code.ready", data: {} })],
            },
            { expect: { tool_result_matches: 'may not publish "code.ready"' }, tool_calls: [toolCall("emit_event", { type: "review.approved", data: big })] },
            { expect: { tool_result_matches: "16385 bytes of JSON, over the 16384-byte limit" }, content: "gave up" },
          ],
        },
      },
    });
    const agency = await fake.runner.agency(agencyFile);
    const report = await agency.result;
    expect(report).toMatchObject({ status: "failed", reason: "quiescent" });
    expect(report.invocations).toEqual([expect.objectContaining({ agent: "reader", status: "succeeded" })]);
    const run = readFileSync(join(fake.home, "runs", report.invocations[0]!.run_id, "events.jsonl"), "utf8");
    expect(run).toMatch(/write_file/);
    // Nothing was written, no command ran, nothing was published.
    expect(fake.provider.commands.filter((command) => command.request.command.startsWith("echo"))).toEqual([]);
    expect(eventTypes(fake.home, report).filter((type) => !type.startsWith("agency."))).toEqual(["task.ready"]);
    // The outside publish of the library refuses it too.
    await expect(agency.publish({ type: "task.ready", data: big })).rejects.toThrow(EventRejectedError);
  });

  it("two writing agents at once: changes to different files both merge; the same line conflicts, reported as an event, the branch kept", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeAgencyRunner({ exec: fakeShell() });
    const writer = (path: string, content: string) => ({
      triggers: ["task.ready"],
      capabilities: ["read_file", "write_file"],
      turns: [{ tool_calls: [toolCall("write_file", { path, content })] }, { content: "wrote" }],
    });
    const { agencyFile, git } = writeAgency(directory.path, {
      files: { "a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n" },
      agents: { left: writer("a.txt", "left\n"), right: writer("b.txt", "right\n") },
      agency: { goal: "never.happens" },
    });
    const agency = await fake.runner.agency(agencyFile);
    const report = await agency.result;
    expect(report.invocations.map((invocation) => [invocation.agent, invocation.status, invocation.merged]).sort()).toEqual([
      ["left", "succeeded", true],
      ["right", "succeeded", true],
    ]);
    expect(git("show", `agency/${agency.id}:a.txt`)).toBe("left\n");
    expect(git("show", `agency/${agency.id}:b.txt`)).toBe("right\n");

    await using conflicting = temporaryDirectory();
    const second = writeAgency(conflicting.path, {
      files: { "c.txt": "c\n" },
      agents: { left: writer("c.txt", "left\n"), right: writer("c.txt", "right\n") },
      agency: { goal: "never.happens" },
    });
    const clash = await fake.runner.agency(second.agencyFile);
    const clashed = await clash.result;
    const merged = clashed.invocations.filter((invocation) => invocation.merged === true);
    const kept = clashed.invocations.filter((invocation) => invocation.merged === false);
    expect([merged.length, kept.length]).toEqual([1, 1]);
    expect(second.git("show", `agency/${clash.id}:c.txt`)).toBe(`${merged[0]!.agent}\n`);
    const keptBranch = (JSON.parse(readFileSync(join(fake.home, "runs", kept[0]!.run_id, "report.json"), "utf8")) as { branch: string }).branch;
    expect(keptBranch).toMatch(/^runner\//);
    expect(second.git("show", `${keptBranch}:c.txt`)).toBe(`${kept[0]!.agent}\n`);
    const log = readFileSync(join(clash.directory, "bus.jsonl"), "utf8")
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line));
    expect(log.filter((event) => event.type === "agency.merge.conflict").map((event) => event.data)).toEqual([
      expect.objectContaining({ agent: kept[0]!.agent, run_id: kept[0]!.run_id, files: ["c.txt"] }),
    ]);
  });
});
