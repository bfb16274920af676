/**
 * The agency's bus on NATS JetStream (issue 25) against the file bus, in the
 * same run, on a loopback nats-server (Debian's 2.9, one node, its store in
 * the system temp dir): what moving an agency's bus to `bus: nats://…` costs.
 *
 *   npx tsx bench/agency-nats.bench.ts [--rounds=5] [--events=2000] [--in-flight=64] [--agencies=3]
 *
 * publish: `--events` durable publishes, `--in-flight` awaiting at once
 * (NatsEventBus: a JetStream PubAck each, stored to the server's file store;
 * FileEventBus: group-committed fdatasync'd lines).
 *
 * replay: the same events read from sequence 0 to the end without following
 * (an ordered consumer; the file bus reads its log), as `runner agency events` does.
 *
 * agency: examples/agency/fix-pipeline (4 agents, 7 invocations, scripted
 * models, host-directory sandboxes: no Docker) from start to its goal, on
 * `bus: file` and on `bus: nats://…`, `--agencies` of each.
 */
import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createRunner } from "../src/agency/agency.js";
import { createAgencyEvent } from "../src/bus/agency-event.js";
import type { AgencyEvent, EventBus } from "../src/bus/event-bus.js";
import { FileEventBus } from "../src/bus/file-event-bus.js";
import { NatsEventBus } from "../src/bus/nats-event-bus.js";
import { HostDirectorySandboxProvider, type HostDirectoryExecHandler } from "../src/sandbox/fake/host-directory-sandbox.js";
import { fakeShell, fakeTierEnvironment } from "../tests/helpers/fake-runner.js";
import { startNatsCluster } from "../tests/helpers/nats-cluster.js";
import { positiveOption } from "./lib/options.js";
import { interleave, median, printTable, time, type Row } from "./lib/stats.js";

const rounds = positiveOption("rounds", 5);
const eventCount = positiveOption("events", 2000);
const inFlight = positiveOption("in-flight", 64);
const agencyCount = positiveOption("agencies", 3);
const root = mkdtempSync(join(tmpdir(), "agency-nats-bench-"));
const cluster = await startNatsCluster(1);
const EXAMPLE = fileURLToPath(new URL("../examples/agency/fix-pipeline", import.meta.url));

let counter = 0;
const fresh = (): string => `bench-${process.pid}-${(counter += 1)}`;

function benchEvent(index: number): AgencyEvent {
  return createAgencyEvent({
    type: "coding.code.ready",
    source: "agent-runner://agencies/bench/agents/coder",
    correlationid: "bench",
    subject: `task-${index % 100}`,
    data: { index, summary: "changed calc.py so add() returns a + b; the tests in tests/test_calc.py pass" },
  });
}

async function publishAll(bus: EventBus, events: AgencyEvent[]): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < events.length) await bus.publish(events[next++]!);
  };
  await Promise.all(Array.from({ length: Math.min(inFlight, events.length) }, worker));
}

async function readAll(bus: EventBus): Promise<number> {
  let count = 0;
  for await (const _stored of bus.read({ follow: false })) count += 1;
  if (count !== eventCount) throw new Error(`read ${count} events, expected ${eventCount}`);
  return count;
}

const openFile = () => FileEventBus.open(join(root, fresh()));
const openNats = () => NatsEventBus.open({ servers: cluster.url, agencyId: fresh() });
const dispose = async (bus: EventBus): Promise<void> => {
  if (bus instanceof NatsEventBus) await bus.deleteStream();
  await bus.close();
};

async function benchBus(): Promise<void> {
  const events = Array.from({ length: eventCount }, (_, index) => benchEvent(index));
  const publishSamples: Record<string, number[]> = { file: [], nats: [] };
  const replaySamples: Record<string, number[]> = { file: [], nats: [] };
  for (let round = -1; round < rounds; round += 1) {
    for (const [name, open] of [
      ["file", openFile],
      ["nats", openNats],
    ] as const) {
      const bus = await open();
      const published = await time(() => publishAll(bus, events));
      const replayed = await time(() => readAll(bus));
      await dispose(bus);
      if (round < 0) continue;
      publishSamples[name]!.push(published);
      replaySamples[name]!.push(replayed);
    }
  }
  const rows = (samples: Record<string, number[]>): Row[] => [
    { name: "file bus", samples: samples.file! },
    { name: "nats bus (loopback, 1 node)", samples: samples.nats!, baseline: "file bus" },
  ];
  printTable(`durable publish of ${eventCount} events, ${inFlight} in flight, ms`, rows(publishSamples));
  const rate = (samples: number[]) => `${Math.round((eventCount * 1000) / median(samples)).toLocaleString("en")} events/s`;
  console.log(`file: ${rate(publishSamples.file!)}; nats: ${rate(publishSamples.nats!)}\n`);
  printTable(`replay of ${eventCount} events from sequence 0, ms`, rows(replaySamples));
}

const fakePytest: HostDirectoryExecHandler = async (call) => {
  if (call.request.command !== "python3 -m pytest -q") return fakeShell()(call);
  const calc = (await call.sandbox.readFile("calc.py"))?.content.toString() ?? "";
  return calc.includes("return a + b") ? { stdout: "3 passed in 0.01s\n" } : { exitCode: 1, stdout: "1 failed, 2 passed in 0.01s\n" };
};

function copyExample(bus: string): string {
  const directory = join(root, fresh());
  cpSync(EXAMPLE, directory, { recursive: true });
  const agencyFile = join(directory, "agency.yaml");
  writeFileSync(agencyFile, readFileSync(agencyFile, "utf8").replace(/^bus: file\b/m, `bus: ${bus}`));
  const git = (...args: string[]) => execFileSync("git", ["-c", "user.name=b", "-c", "user.email=b@localhost", ...args], { cwd: join(directory, "repo") });
  git("init", "-q", "-b", "main");
  git("add", "-A");
  git("commit", "-qm", "initial");
  return agencyFile;
}

async function benchAgency(): Promise<void> {
  const home = join(root, "home");
  const runner = await createRunner({
    home,
    sandboxProvider: new HostDirectorySandboxProvider({ exec: fakePytest }),
    environment: fakeTierEnvironment(home),
  });
  try {
    const run = async (bus: string) => {
      const report = await (await runner.agency(copyExample(bus))).result;
      if (report.status !== "succeeded") throw new Error(`the fix-pipeline on ${bus} ended ${report.status} (${report.reason})`);
    };
    const samples = await interleave({ file: () => run("file"), nats: () => run(cluster.url) }, agencyCount, 1);
    printTable("examples/agency/fix-pipeline start → goal (7 invocations, no Docker), ms", [
      { name: "bus: file", samples: samples.file! },
      { name: "bus: nats://", samples: samples.nats!, baseline: "bus: file" },
    ]);
  } finally {
    await runner.close();
  }
}

try {
  await benchBus();
  await benchAgency();
} finally {
  await cluster.close();
  rmSync(root, { recursive: true, force: true });
}
