/**
 * Agencies whose invocations run on `runner worker`s (docs/scale-out.md
 * "Agencies on workers"), for tests: in-process TaskWorkers on fake-tier
 * Runners of their own (the host-directory sandbox, the scripted model, real
 * git), an orchestrator-side NatsInvocations on a pool, and a copy of
 * examples/agency/fix-pipeline whose `python3 -m pytest -q` the fake shell
 * answers from calc.py.
 */
import { execFileSync } from "node:child_process";
import { cpSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { connect } from "@nats-io/transport-node";
import { createRunner } from "../../src/runner/runner.js";
import { HostDirectorySandboxProvider, type HostDirectoryExecHandler } from "../../src/sandbox/fake/host-directory-sandbox.js";
import { NatsInvocations } from "../../src/worker/nats-invocations.js";
import { TaskWorker } from "../../src/worker/task-worker.js";
import { WorkQueue, type WorkQueueOptions } from "../../src/worker/work-queue.js";
import { fakeShell, fakeTierEnvironment } from "./fake-runner.js";
import { temporaryDirectory } from "./git-repository.js";

const EXAMPLE = fileURLToPath(new URL("../../examples/agency/fix-pipeline", import.meta.url));

/** Copies the fix-pipeline example into `directory` and makes repo/ a git repository; returns agency.yaml's path and a git helper. */
export function copyFixPipeline(directory: string): { agencyFile: string; git: (...args: string[]) => string } {
  cpSync(EXAMPLE, directory, { recursive: true });
  const repo = join(directory, "repo");
  const git = (...args: string[]) => execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@localhost", ...args], { cwd: repo, encoding: "utf8" });
  git("init", "-q", "-b", "main");
  git("add", "-A");
  git("commit", "-qm", "initial");
  return { agencyFile: join(directory, "agency.yaml"), git };
}

/** {@link fakeShell}, and `python3 -m pytest -q` answered from calc.py: 3 passed when add() adds, else 1 failed. */
export const pytestShell: HostDirectoryExecHandler = async (exec) => {
  if (exec.request.command !== "python3 -m pytest -q") return fakeShell()(exec);
  const calc = (await exec.sandbox.readFile("calc.py"))?.content.toString() ?? "";
  return calc.includes("return a + b") ? { stdout: "...\n3 passed in 0.01s\n" } : { exitCode: 1, stdout: "F..\n1 failed, 2 passed in 0.01s\n" };
};

/** An in-process `runner worker` of `pool` named `name`, on a fake-tier Runner of its own; `drain` stops it pulling; `await using` closes it. */
export async function startWorker(servers: string[], pool: string, name: string, exec: HostDirectoryExecHandler = pytestShell) {
  const home = temporaryDirectory("agent-runner-worker-home-");
  const runner = await createRunner({
    home: home.path,
    sandboxProvider: new HostDirectorySandboxProvider({ exec }),
    environment: fakeTierEnvironment(home.path),
  });
  const connection = await connect({ servers, maxReconnectAttempts: -1 });
  const queue = await WorkQueue.open(connection, { pool });
  const drainer = new AbortController();
  let finished: () => void = () => undefined;
  const finishedOne = new Promise<void>((resolve) => (finished = resolve));
  const log = (line: string) => line.startsWith("finished ") && finished();
  const running = new TaskWorker({ queue, runner, jobs: 1, environment: fakeTierEnvironment(home.path), name, log }).run(drainer.signal);
  return {
    name,
    home: home.path,
    /** Resolves once this worker has finished its first job. */
    finishedOne,
    /** Stops pulling; resolves once what it runs has finished. */
    async drain() {
      drainer.abort();
      await running;
    },
    async [Symbol.asyncDispose]() {
      drainer.abort();
      await running.catch(() => undefined);
      await runner.close();
      await connection.close();
      await home[Symbol.asyncDispose]();
    },
  };
}

/** A pool of its own (short ack_wait) and the orchestrator's executor on it; `await using` closes both and deletes the pool. */
export async function openPool(servers: string[], home: string, options: WorkQueueOptions = {}) {
  const settings: WorkQueueOptions = {
    pool: `a${Math.random().toString(16).slice(2, 10)}`,
    ackWaitMs: 3_000,
    maxDeliver: 3,
    redeliveryDelayMs: 200,
    ...options,
  };
  const connection = await connect({ servers, maxReconnectAttempts: -1 });
  const queue = await WorkQueue.open(connection, settings);
  const executors: NatsInvocations[] = [];
  return {
    pool: settings.pool!,
    queue,
    /** A new orchestrator-side executor (a restarted orchestrator opens another). */
    async executor() {
      const executor = await NatsInvocations.open(queue, home);
      executors.push(executor);
      return executor;
    },
    async [Symbol.asyncDispose]() {
      for (const executor of executors) await executor.close();
      await queue.destroy();
      await connection.close();
    },
  };
}
