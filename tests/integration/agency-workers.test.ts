/**
 * An agency whose invocations run on `runner worker`s (issue 25, "Done when"
 * 7; docs/scale-out.md "Agencies on workers") on a real nats-server on
 * loopback: the orchestrator submits each invocation to its pool's queue
 * (src/worker/nats-invocations.ts), workers on fake-tier Runners (the
 * host-directory sandbox, the scripted model, real git) run it with the
 * agency's host tools rebuilt from the job, and the orchestrator lands the
 * commits and merges them into agency/<id>. The agency's bus is the file bus
 * here: the executor is given as the `executor` option.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse, stringify } from "yaml";
import { HostDirectorySandboxProvider, type HostDirectoryExecHandler } from "../../src/sandbox/fake/host-directory-sandbox.js";
import { createRunner as createPackageRunner } from "../../src/worker/agency-runner.js";
import type { RunReport } from "../../src/run/run-report.js";
import { invocationKey } from "../../src/worker/invocation-job.js";
import { eventTypes, fakeAgencyRunner, writeAgency } from "../helpers/agency-fixture.js";
import { copyFixPipeline, openPool, startWorker } from "../helpers/agency-workers.js";
import { fakeShell, fakeTierEnvironment, toolCall } from "../helpers/fake-runner.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { startNatsCluster, type NatsCluster } from "../helpers/nats-cluster.js";
import { ROOT, runCli } from "../helpers/runner-cli.js";

const CHILD = fileURLToPath(new URL("../helpers/nats-worker-child.ts", import.meta.url));
const ORCHESTRATOR_CHILD = fileURLToPath(new URL("../helpers/agency-workers-child.ts", import.meta.url));

let cluster: NatsCluster;
beforeAll(async () => {
  cluster = await startNatsCluster(1);
}, 60_000);
afterAll(async () => {
  await cluster?.close();
});

/** One coder agent: appends ok to out.txt, runs `command`, publishes the goal; verify checks out.txt. */
function writeCoderAgency(directory: string, command: string) {
  return writeAgency(directory, {
    agents: {
      coder: {
        triggers: ["task.ready"],
        capabilities: ["read_file", "write_file", "run_shell"],
        emits: ["review.approved"],
        verify: { command: "grep -q ok out.txt", timeout_sec: 30 },
        turns: [
          { tool_calls: [toolCall("run_shell", { command: "echo ok >> out.txt" })] },
          { tool_calls: [toolCall("run_shell", { command })] },
          { tool_calls: [toolCall("emit_event", { type: "review.approved", subject: "t1" })] },
          { content: "done" },
        ],
      },
    },
  });
}

/** The run directories a worker's home holds. */
function runsOf(home: string): string[] {
  return readdirSync(join(home, "runs")).filter((name) => /^\d{8}-\d{6}-/.test(name));
}

describe("an agency's invocations on runner workers", () => {
  it("runs the fix-pipeline example on two workers; the orchestrator lands and merges the coder's commits into agency/<id>", async () => {
    await using directory = temporaryDirectory();
    await using orchestrator = await fakeAgencyRunner();
    await using pool = await openPool(cluster.urls, orchestrator.home);
    const { agencyFile, git } = copyFixPipeline(directory.path);
    await using first = await startWorker(cluster.urls, pool.pool, "worker-one");
    const agency = await orchestrator.runner.agency(agencyFile, { executor: await pool.executor() });
    // worker-one takes the first invocation and then drains; worker-two takes the rest from the pool.
    await first.finishedOne;
    await first.drain();
    await using second = await startWorker(cluster.urls, pool.pool, "worker-two");
    const report = await agency.result;

    expect(report).toMatchObject({ status: "succeeded", reason: "goal_reached", branch: `agency/${agency.id}` });
    expect(report.invocations.map((invocation) => [invocation.agent, invocation.status])).toEqual([
      ["analyst", "succeeded"],
      ["coder", "succeeded"],
      ["tester", "succeeded"],
      ["reviewer", "succeeded"],
      ["coder", "succeeded"],
      ["tester", "succeeded"],
      ["reviewer", "succeeded"],
    ]);
    // Both workers ran invocations, as the records say; no run happened in the orchestrator's own Runner's sandbox.
    expect(report.invocations[0]!.worker).toBe("worker-one");
    expect(new Set(report.invocations.map((invocation) => invocation.worker))).toEqual(new Set(["worker-one", "worker-two"]));
    expect(runsOf(first.home).length + runsOf(second.home).length).toBe(7);
    expect(orchestrator.provider.created).toHaveLength(0);
    // The reviewer's final answer was checked on its worker against output_schema; the orchestrator took the object.
    expect(report.invocations.at(-1)!.output).toEqual({ verdict: "approve", comment: "fixed and documented" });

    // The agency branch holds the coder's verified commits, merged by the orchestrator; main and the tests are untouched.
    const calc = git("show", `agency/${agency.id}:calc.py`);
    expect(calc).toContain("return a + b");
    expect(calc).toContain('"""Return the sum of a and b."""');
    expect(git("show", "main:calc.py")).toContain("return a - b");
    for (const invocation of report.invocations) {
      const run = JSON.parse(readFileSync(join(orchestrator.home, "runs", invocation.run_id, "report.json"), "utf8")) as RunReport;
      expect(run.status).toBe("succeeded");
      if (invocation.agent !== "coder") {
        expect(invocation.merged).toBeNull();
        continue;
      }
      expect(invocation.merged).toBe(true);
      expect(run.merge).toMatchObject({ merged: true, branch: `refs/heads/agency/${agency.id}` });
      expect(run.verify).toMatchObject({ passed: true });
      // The run branch made in your repository from the worker's bundle is an ancestor of the agency branch.
      expect(run.branch).toMatch(/^runner\/fix-pipeline-coder-[0-9a-f]{4}/);
      expect(git("merge-base", "--is-ancestor", run.branch!, `agency/${agency.id}`)).toBe("");
    }
    // What the agents emitted on their workers was published by the orchestrator, each once.
    const types = eventTypes(orchestrator.home, report).filter((type) => !type.startsWith("agency."));
    expect(types).toEqual([
      "coding.task.received",
      "coding.task.ready",
      "coding.code.ready",
      "coding.tests.passed",
      "coding.review.changes_requested",
      "coding.code.ready",
      "coding.tests.passed",
      "coding.review.approved",
    ]);
    // `runner agency show` reads the records: the worker of each invocation is in invocations.jsonl.
    const lines = readFileSync(join(agency.directory, "invocations.jsonl"), "utf8").split("\n").filter(Boolean);
    expect(lines.filter((line) => line.includes('"kind":"started"')).every((line) => /"worker":"worker-(one|two)"/.test(line))).toBe(true);
    const shown = await runCli(["agency", "show", agency.id], { RUNNER_HOME: orchestrator.home });
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toMatch(new RegExp(`analyst .* run ${report.invocations[0]!.run_id} on worker-one`));
  }, 180_000);

  it("agency.yaml's bus: nats:// through the package's createRunner: the bus on JetStream, every invocation on the pool's two workers", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory("agent-runner-agency-home-");
    await using pool = await openPool(cluster.urls, home.path);
    const { agencyFile, git } = copyFixPipeline(directory.path);
    const agencyYaml = parse(readFileSync(agencyFile, "utf8")) as Record<string, unknown>;
    writeFileSync(agencyFile, stringify({ ...agencyYaml, bus: cluster.url, pool: pool.pool }));
    const provider = new HostDirectorySandboxProvider();
    const runner = await createPackageRunner({ home: home.path, sandboxProvider: provider, environment: fakeTierEnvironment(home.path) });
    await using first = await startWorker(cluster.urls, pool.pool, "worker-one");
    await using second = await startWorker(cluster.urls, pool.pool, "worker-two");
    try {
      const agency = await runner.agency(agencyFile);
      const report = await agency.result;
      expect(report).toMatchObject({ status: "succeeded", reason: "goal_reached" });
      expect(report.invocations).toHaveLength(7);
      // Every invocation ran on a worker of the pool, none in this process's sandbox.
      expect(report.invocations.every((invocation) => ["worker-one", "worker-two"].includes(invocation.worker ?? ""))).toBe(true);
      expect(provider.created).toHaveLength(0);
      expect(runsOf(first.home).length + runsOf(second.home).length).toBe(7);
      // The bus is the JetStream stream: nothing of it on disk but the owner's lock.
      expect(existsSync(join(agency.directory, "bus.jsonl"))).toBe(false);
      expect(git("show", `agency/${agency.id}:calc.py`)).toContain("return a + b");
    } finally {
      await runner.close();
    }
  });

  it("a worker killed mid-invocation: the invocation is redelivered to another worker and finishes once", async () => {
    await using directory = temporaryDirectory();
    await using orchestrator = await fakeAgencyRunner();
    await using pool = await openPool(cluster.urls, orchestrator.home);
    const { agencyFile, git } = writeCoderAgency(directory.path, "die-now");
    await using childHome = temporaryDirectory("agent-runner-worker-home-");
    const child = spawn(process.execPath, ["--import", "tsx", CHILD, childHome.path, cluster.url, pool.pool, "die-now"], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    });
    const exited = once(child, "exit");
    const agency = await orchestrator.runner.agency(agencyFile, { executor: await pool.executor() });
    const [, signal] = await exited;
    expect(signal).toBe("SIGKILL");
    await using survivor = await startWorker(cluster.urls, pool.pool, "survivor", fakeShell());
    const report = await agency.result;

    expect(report).toMatchObject({ status: "succeeded", reason: "goal_reached" });
    expect(report.invocations).toEqual([expect.objectContaining({ agent: "coder", status: "succeeded", merged: true, worker: "survivor" })]);
    expect(runsOf(survivor.home)).toEqual([report.invocations[0]!.run_id]);
    // The lease names both deliveries: the dead worker's with why it did not finish, then the survivor's.
    const lease = await pool.queue.lease(invocationKey(agency.id, report.invocations[0]!.invocation_id));
    expect(lease!.lease.attempts.map((attempt) => attempt.worker)).toEqual([`child-${child.pid}`, "survivor"]);
    expect(lease!.lease.attempts[0]!.reason).toMatch(/stopped answering/);
    expect(eventTypes(orchestrator.home, report).filter((type) => type === "agency.invocation.finished")).toHaveLength(1);
    expect(git("show", `agency/${agency.id}:out.txt`)).toBe("ok\n");
  }, 120_000);

  it("an orchestrator stopped mid-invocation (Ctrl-C) and resumed waits for the submitted job's result: no second run", async () => {
    await using directory = temporaryDirectory();
    await using orchestrator = await fakeAgencyRunner();
    await using pool = await openPool(cluster.urls, orchestrator.home);
    const { agencyFile, git } = writeCoderAgency(directory.path, "hold");
    let arrived: () => void = () => undefined;
    const holding = new Promise<void>((resolve) => (arrived = resolve));
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    const shell = fakeShell();
    const exec: HostDirectoryExecHandler = async (call) => {
      if (call.request.command !== "hold") return shell(call);
      arrived();
      await released;
      return { stdout: "released\n" };
    };
    await using worker = await startWorker(cluster.urls, pool.pool, "worker-one", exec);
    const agency = await orchestrator.runner.agency(agencyFile, { executor: await pool.executor() });
    await holding;
    // The orchestrator stops (as a crash leaves it: the invocation started, not finished, its event unacked).
    await agency.cancel();
    const stopped = await agency.result;
    expect(stopped.invocations).toEqual([expect.objectContaining({ agent: "coder", status: "running", worker: "worker-one" })]);

    // A new orchestrator process (a new executor) resumes the agency; the run on the worker is still going.
    const resumed = await orchestrator.runner.resumeAgency(agency.id, { executor: await pool.executor() });
    release();
    const report = await resumed.result;
    expect(report).toMatchObject({ status: "succeeded", reason: "goal_reached" });
    expect(report.invocations).toEqual([
      expect.objectContaining({ agent: "coder", status: "succeeded", merged: true, run_id: stopped.invocations[0]!.run_id, worker: "worker-one" }),
    ]);
    expect(runsOf(worker.home)).toEqual([stopped.invocations[0]!.run_id]);
    const lease = await pool.queue.lease(invocationKey(agency.id, report.invocations[0]!.invocation_id));
    expect(lease!.lease.attempts).toHaveLength(1);
    expect(git("show", `agency/${agency.id}:out.txt`)).toBe("ok\n");
  }, 120_000);

  it("an orchestrator killed (SIGKILL) mid-invocation: the resumed agency waits for the submitted job's result, no second run", async () => {
    await using directory = temporaryDirectory();
    await using orchestrator = await fakeAgencyRunner();
    await using pool = await openPool(cluster.urls, orchestrator.home);
    const { agencyFile, git } = writeCoderAgency(directory.path, "hold");
    let arrived: () => void = () => undefined;
    const holding = new Promise<void>((resolve) => (arrived = resolve));
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    const shell = fakeShell();
    const exec: HostDirectoryExecHandler = async (call) => {
      if (call.request.command !== "hold") return shell(call);
      arrived();
      await released;
      return { stdout: "released\n" };
    };
    await using worker = await startWorker(cluster.urls, pool.pool, "worker-one", exec);
    const child = spawn(process.execPath, ["--import", "tsx", ORCHESTRATOR_CHILD, orchestrator.home, agencyFile, cluster.url, pool.pool], {
      cwd: ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    });
    const exited = once(child, "exit");
    const agencyId = await new Promise<string>((resolve) => {
      let out = "";
      child.stdout!.on("data", (chunk: Buffer) => {
        out += chunk.toString();
        const id = /^agency (\S+)\n/.exec(out)?.[1];
        if (id) resolve(id);
      });
    });
    await holding;
    child.kill("SIGKILL");
    expect((await exited)[1]).toBe("SIGKILL");

    const resumed = await orchestrator.runner.resumeAgency(agencyId, { executor: await pool.executor() });
    release();
    const report = await resumed.result;
    expect(report).toMatchObject({ status: "succeeded", reason: "goal_reached" });
    expect(report.invocations).toEqual([expect.objectContaining({ agent: "coder", status: "succeeded", merged: true, worker: "worker-one" })]);
    expect(runsOf(worker.home)).toEqual([report.invocations[0]!.run_id]);
    const lease = await pool.queue.lease(invocationKey(agencyId, report.invocations[0]!.invocation_id));
    expect(lease!.lease.attempts).toHaveLength(1);
    expect(eventTypes(orchestrator.home, report).filter((type) => type === "agency.invocation.finished")).toHaveLength(1);
    expect(git("show", `agency/${agencyId}:out.txt`)).toBe("ok\n");
  }, 120_000);
});
