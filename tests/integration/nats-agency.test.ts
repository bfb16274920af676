/**
 * An agency whose bus is NATS JetStream (`bus: nats://…`, issue 25 "Done
 * when" 7) on a real loopback nats-server (Debian's 2.9), in the Docker-free
 * tier (host-directory sandboxes, scripted models): the fix-pipeline example
 * to its goal as on the file bus; `runner agency events/publish/show` from
 * other processes; serve refusing them (the bus is the operator's); kill -9 of the orchestrator
 * and a resume; a NATS URL that does not answer.
 */
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { cpSync, existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgencyBus } from "../../src/agency/agency-bus.js";
import { AgencyDirectory } from "../../src/agency/agency-directory.js";
import type { AgencyEvent } from "../../src/bus/event-bus.js";
import { NatsEventBus } from "../../src/bus/nats-event-bus.js";
import type { HostDirectoryExecHandler } from "../../src/sandbox/fake/host-directory-sandbox.js";
import { eventTypes, fakeAgencyRunner, writeAgency } from "../helpers/agency-fixture.js";
import { testEvent } from "../helpers/event-bus-conformance.js";
import { fakeShell, Gates } from "../helpers/fake-runner.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { freePort, startNatsCluster, type NatsCluster } from "../helpers/nats-cluster.js";
import { toolCall, waitFor } from "../helpers/runner-cli.js";
import { fakeServer } from "../helpers/server-client.js";

const EXAMPLE = fileURLToPath(new URL("../../examples/agency/fix-pipeline", import.meta.url));
const CLI = fileURLToPath(new URL("../../src/cli/main.ts", import.meta.url));
const AGENCY_CHILD = fileURLToPath(new URL("../helpers/agency-child.ts", import.meta.url));

let cluster: NatsCluster;
beforeAll(async () => {
  cluster = await startNatsCluster(1);
});
afterAll(async () => {
  await cluster?.close();
});

/** The real CLI (through tsx) as another process, to its end. */
function cli(home: string, ...args: string[]) {
  return spawnSync(process.execPath, ["--import", "tsx", CLI, ...args], { encoding: "utf8", env: { ...process.env, RUNNER_HOME: home } });
}

/** The agency's events as its bus (here JetStream) holds them. */
async function storedEvents(home: string, id: string): Promise<AgencyEvent[]> {
  const events: AgencyEvent[] = [];
  for await (const stored of AgencyBus.of(AgencyDirectory.existing(home, id)).read()) events.push(stored.event);
  return events;
}

/** Every event's cause (causationid) was stored before it. */
function causesComeFirst(events: AgencyEvent[]): boolean {
  const seen = new Set<string>();
  for (const event of events) {
    if (event.causationid !== undefined && !seen.has(event.causationid)) return false;
    seen.add(event.id);
  }
  return true;
}

/** examples/agency/fix-pipeline copied to `directory` with `bus`, its repo/ a git repository. */
function copyFixPipeline(directory: string, bus: string): string {
  cpSync(EXAMPLE, directory, { recursive: true });
  const agencyFile = join(directory, "agency.yaml");
  writeFileSync(agencyFile, readFileSync(agencyFile, "utf8").replace(/^bus: file\b/m, `bus: ${bus}`));
  const git = (...args: string[]) => execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@localhost", ...args], { cwd: join(directory, "repo") });
  git("init", "-q", "-b", "main");
  git("add", "-A");
  git("commit", "-qm", "initial");
  return agencyFile;
}

/** `python3 -m pytest -q` of the example, answered from calc.py (nothing runs on the host): 3 pass once add() adds. */
const fakePytest: HostDirectoryExecHandler = async (call) => {
  if (call.request.command !== "python3 -m pytest -q") return fakeShell()(call);
  const calc = (await call.sandbox.readFile("calc.py"))?.content.toString() ?? "";
  return calc.includes("return a + b") ? { stdout: "...\n3 passed in 0.01s\n" } : { exitCode: 1, stdout: "F..\n1 failed, 2 passed in 0.01s\n" };
};

describe("an agency on NATS JetStream", () => {
  it("runs examples/agency/fix-pipeline to its goal: the stream holds the file run's event types in the same causal order", async () => {
    await using fileCopy = temporaryDirectory();
    await using natsCopy = temporaryDirectory();
    await using fake = await fakeAgencyRunner({ exec: fakePytest });
    const onFile = await (await fake.runner.agency(copyFixPipeline(fileCopy.path, "file"))).result;
    const onNats = await (await fake.runner.agency(copyFixPipeline(natsCopy.path, cluster.url))).result;
    expect(onFile).toMatchObject({ status: "succeeded", reason: "goal_reached" });
    expect(onNats).toMatchObject({ status: "succeeded", reason: "goal_reached" });
    const agents = (report: typeof onFile) => report.invocations.map((invocation) => [invocation.agent, invocation.status, invocation.merged]);
    expect(agents(onNats)).toEqual(agents(onFile));
    expect(agents(onNats).map(([agent]) => agent)).toEqual(["analyst", "coder", "tester", "reviewer", "coder", "tester", "reviewer"]);

    // The NATS agency's events are in its stream, not in a file; the records stay on local disk.
    const directory = join(fake.home, "agencies", onNats.agency_id);
    expect(existsSync(join(directory, "bus.jsonl"))).toBe(false);
    expect(existsSync(join(directory, "invocations.jsonl"))).toBe(true);
    const connection = await connect({ servers: cluster.url });
    const stream = await (await jetstreamManager(connection)).streams.info(`AGENCY_${onNats.agency_id}`);
    await connection.close();
    const events = await storedEvents(fake.home, onNats.agency_id);
    expect(stream.state.messages).toBe(events.length);
    expect(onNats.events).toBe(events.length);

    // The same event types in the same order (agent state changes interleave by timing: compared per agent).
    const withoutStates = (types: AgencyEvent[]) => types.filter((event) => event.type !== "agency.agent.state").map((event) => event.type);
    const fileEvents = readFileSync(join(fake.home, "agencies", onFile.agency_id, "bus.jsonl"), "utf8")
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line) as AgencyEvent);
    expect(eventTypes(fake.home, onFile)).toEqual(fileEvents.map((event) => event.type));
    expect(withoutStates(events)).toEqual(withoutStates(fileEvents));
    expect(withoutStates(events)).toContain("coding.review.changes_requested");
    const states = (list: AgencyEvent[], agent: string) =>
      list
        .filter((event) => event.type === "agency.agent.state" && (event.data as { agent: string }).agent === agent)
        .map((event) => (event.data as { state: string }).state);
    for (const agent of ["analyst", "coder", "tester", "reviewer"]) expect(states(events, agent)).toEqual(states(fileEvents, agent));
    expect(causesComeFirst(events)).toBe(true);
    expect(causesComeFirst(fileEvents)).toBe(true);
  });

  it("runner agency events, publish and show work from other processes while it runs and after", async () => {
    await using directory = temporaryDirectory();
    const gates = new Gates();
    let arrived: () => void = () => undefined;
    const atGate = new Promise<void>((resolve) => (arrived = resolve));
    const shell = fakeShell(gates);
    await using fake = await fakeAgencyRunner({
      exec: (call) => {
        if (call.request.command === "wait-for go") arrived();
        return shell(call);
      },
    });
    const { agencyFile } = writeAgency(directory.path, {
      agents: {
        solo: {
          triggers: ["task.*"],
          capabilities: ["read_file", "run_shell"],
          turns: [{ tool_calls: [toolCall("run_shell", { command: "wait-for go" })] }, { content: "done" }],
        },
      },
      agency: { goal: "never.happens", bus: cluster.url },
    });
    const agency = await fake.runner.agency(agencyFile);
    await atGate;

    const shown = cli(fake.home, "agency", "show", agency.id, "--json");
    expect(shown.status, shown.stderr).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({ agency_id: agency.id, status: "running", invocations: [{ agent: "solo", status: "running" }] });
    const printed = cli(fake.home, "agency", "events", agency.id, "--json");
    expect(printed.status, printed.stderr).toBe(0);
    const early = printed.stdout
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line) as AgencyEvent);
    expect(early.map((event) => event.type)).toContain("task.ready");

    const follower = spawn(process.execPath, ["--import", "tsx", CLI, "agency", "events", agency.id, "--json", "--follow"], {
      env: { ...process.env, RUNNER_HOME: fake.home },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let followed = "";
    follower.stdout.on("data", (chunk: Buffer) => (followed += chunk.toString()));
    const followerEnded = new Promise<NodeJS.Signals | null>((resolve) => follower.on("close", (_code, signal) => resolve(signal)));

    const published = cli(fake.home, "agency", "publish", agency.id, "task.more", "--data", '{"n":2}', "--id", "outside-1");
    expect(published.status, published.stderr).toBe(0);
    expect(published.stdout).toMatch(/^published task\.more \(outside-1\) at sequence \d+\n$/);
    const again = cli(fake.home, "agency", "publish", agency.id, "task.more", "--data", '{"n":2}', "--id", "outside-1");
    expect(again.stdout).toBe(published.stdout);

    gates.open("go");
    const report = await agency.result;
    expect(report).toMatchObject({ status: "failed", reason: "quiescent" });
    expect(report.invocations.map((invocation) => [invocation.event_id, invocation.status])).toEqual([
      [`${agency.id}-start-0`, "succeeded"],
      ["outside-1", "succeeded"],
    ]);
    const events = await storedEvents(fake.home, agency.id);
    expect(events.filter((event) => event.id === "outside-1")).toHaveLength(1);
    expect(early).toEqual(events.slice(0, early.length));

    // The follower saw every event as it was stored, and still waits for more.
    await waitFor("the follower to print every event", () => followed.split("\n").filter(Boolean).length === events.length);
    expect(
      followed
        .split("\n")
        .filter(Boolean)
        .map((line) => JSON.parse(line) as AgencyEvent),
    ).toEqual(events);
    follower.kill("SIGINT");
    await followerEnded;

    const after = cli(fake.home, "agency", "show", agency.id, "--json");
    const { trace, ...shownReport } = JSON.parse(after.stdout);
    expect(shownReport).toEqual(report);
    expect(trace.children.map((child: { name: string }) => child.name)).toEqual(expect.arrayContaining(["task.ready", "task.more"]));
  });

  it("runner serve keeps NATS agencies from its callers (the bus and its credentials are the operator's): one sent is refused 403, one another Runner runs is out of reach", async () => {
    await using directory = temporaryDirectory();
    const { agencyFile } = writeAgency(directory.path, {
      agents: { solo: { triggers: ["task.*", "ci.*"], turns: [{ content: "done" }] } },
      agency: { goal: "never.happens", bus: cluster.url },
    });
    await using server = await fakeServer(directory.path, { exec: fakeShell() });
    const sent = await server.request("/v1/agencies", { method: "POST", json: { agency_file: "agency.yaml" } });
    expect(sent.status).toBe(403);
    expect(((await sent.json()) as { errors: { field: string }[] }).errors.map((error) => error.field)).toEqual([`${agencyFile}: bus`]);

    // The operator's own agency on the cluster, inside --tasks-root: its record names the nats:// bus, so the API serves none of it.
    const own = await server.runner.agency(agencyFile);
    await own.result;
    const stored = (await storedEvents(server.home, own.id)).length;
    expect((await server.request(`/v1/agencies/${own.id}/events`)).status).toBe(403);
    const posted = await server.request(`/v1/agencies/${own.id}/events`, {
      method: "POST",
      headers: { "content-type": "application/cloudevents+json" },
      body: JSON.stringify({ specversion: "1.0", id: "delivery-1", source: "https://ci.example.com/p/1", type: "ci.build.failed", data: {} }),
    });
    expect(posted.status).toBe(403);
    expect(await storedEvents(server.home, own.id)).toHaveLength(stored);
  });

  it("killed (kill -9) mid-invocation, resumes at once: every invocation runs once, the goal is reached", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeAgencyRunner({ exec: fakeShell() });
    const { agencyFile, git } = writeAgency(directory.path, {
      files: { "calc.txt": "wrong\n" },
      agents: {
        coder: {
          triggers: ["task.ready"],
          capabilities: ["read_file", "write_file", "run_shell"],
          emits: ["code.ready"],
          turns: [
            { tool_calls: [toolCall("write_file", { path: "calc.txt", content: "right\n" })] },
            { tool_calls: [toolCall("emit_event", { type: "code.ready" }), toolCall("run_shell", { command: "die-here" })] },
            { expect: { tool_result_matches: "interrupted" }, content: "fixed, after a restart" },
          ],
        },
        reviewer: {
          triggers: ["code.ready"],
          emits: ["review.approved"],
          turns: [{ tool_calls: [toolCall("emit_event", { type: "review.approved" })] }, { content: "approved" }],
        },
      },
      agency: { bus: cluster.url },
    });
    const child = spawn(process.execPath, ["--import", "tsx", AGENCY_CHILD, fake.home, agencyFile, "die-here"], { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    const signal = await new Promise<NodeJS.Signals | null>((resolve) => child.on("close", (_code, killed) => resolve(killed)));
    expect(signal, stderr).toBe("SIGKILL");
    const agencyId = stdout.trim().replace(/^agency /, "");
    const killedAt = Date.now();

    const report = await (await fake.runner.resumeAgency(agencyId)).result;
    expect(report).toMatchObject({ status: "succeeded", reason: "goal_reached" });
    const lines = readFileSync(join(fake.home, "agencies", agencyId, "invocations.jsonl"), "utf8")
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { kind: string; agent: string });
    expect(lines.filter((line) => line.kind === "started").map((line) => line.agent)).toEqual(["coder", "reviewer"]);
    expect(report.invocations.map((invocation) => [invocation.agent, invocation.status])).toEqual([
      ["coder", "succeeded"],
      ["reviewer", "succeeded"],
    ]);
    const types = (await storedEvents(fake.home, agencyId)).map((event) => event.type).filter((type) => type !== "agency.agent.state");
    expect(types).toEqual(["task.ready", "code.ready", "agency.invocation.finished", "review.approved", "agency.invocation.finished"]);
    expect(git("show", `agency/${agencyId}:calc.txt`)).toBe("right\n");
    // The coder's consumer, left with the dead process's delivery pending, was recreated by the resume: its event came
    // at once, not after ack_wait (60 s).
    const connection = await connect({ servers: cluster.url });
    const manager = await jetstreamManager(connection);
    const created = async (agent: string) => Date.parse((await manager.consumers.info(`AGENCY_${agencyId}`, `agent-${agent}`)).created);
    expect(await created("coder")).toBeGreaterThan(killedAt);
    await connection.close();
  });

  it("the owner's open hands a dead process's pending deliveries back at once, not after ack_wait", async () => {
    const agencyId = `abandoned-${Date.now()}`;
    const options = { servers: cluster.url, agencyId, ackWaitMs: 600_000 };
    const bus = await NatsEventBus.open(options);
    try {
      const events = [testEvent("one"), testEvent("two"), testEvent("three")];
      for (const event of events) await bus.publish(event);
      const consumer = bus.consume("worker");
      const iterator = consumer[Symbol.asyncIterator]();
      expect((await iterator.next()).value).toMatchObject({ sequence: 0 });
      await bus.ack("worker", 0);
      await iterator.return?.();
      // Another connection takes sequences 1 and 2, acks 2 and dies (closes without a nak): 1 stays pending for 10 minutes.
      const connection = await connect({ servers: cluster.url });
      const stolen = await jetstream(connection).consumers.get(`AGENCY_${agencyId}`, "worker");
      const one = await stolen.next();
      const two = await stolen.next();
      expect([one?.seq, two?.seq]).toEqual([2, 3]);
      await two!.ackAck();
      await connection.close();
      const watcher = await connect({ servers: cluster.url });
      const manager = await jetstreamManager(watcher);
      expect((await manager.consumers.info(`AGENCY_${agencyId}`, "worker")).num_ack_pending).toBe(1);

      expect(await bus.redeliverAbandoned()).toEqual(["worker"]);
      const again: number[] = [];
      for await (const delivery of bus.consume("worker")) {
        again.push(delivery.sequence);
        await bus.ack("worker", delivery.sequence);
        if (delivery.sequence === 2) break;
      }
      // The pending one at once; the one acked above the floor again too (consumers are idempotent).
      expect(again).toEqual([1, 2]);
      expect(await bus.ackFloor("worker")).toBe(3);
      await bus.deleteStream();
      await watcher.close();
    } finally {
      await bus.close();
    }
  });

  it("a NATS URL that does not answer: runner agency run exits 3 naming the URL, in bounded time", { timeout: 60_000 }, async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const url = `nats://127.0.0.1:${await freePort()}`;
    const { agencyFile } = writeAgency(directory.path, {
      agents: { solo: { triggers: ["task.*"], turns: [{ content: "seen" }] } },
      agency: { bus: url },
    });
    const result = cli(home.path, "agency", "run", agencyFile);
    expect(result.status, result.stderr).toBe(3);
    expect(result.stderr).toContain(`bus ${url}: cannot reach NATS at ${url}`);
    // The agency's records were written before its bus was reached: reading its events fails the same way.
    const [agencyId] = readdirSync(join(home.path, "agencies"));
    const events = cli(home.path, "agency", "events", agencyId!);
    expect(events.status).toBe(3);
    expect(events.stderr).toContain(url);
  });
});
