/**
 * A worker process of the Docker-free tier that dies: a TaskWorker on a
 * host-directory Runner (RUNNER_HOME argv[2]) of pool argv[4] at servers
 * argv[3], which kills itself with SIGKILL (no ack, no clean-up) when an
 * agent runs the command argv[5]; other commands go to {@link fakeShell}.
 * Prints `ready` once it has swept its home's dead runs and is about to pull. Run with `node --import tsx`
 * (tests/integration/nats-worker.test.ts).
 */
import { connect } from "@nats-io/transport-node";
import { HostDirectorySandboxProvider } from "../../src/sandbox/fake/host-directory-sandbox.js";
import { createRunner } from "../../src/runner/runner.js";
import { TaskWorker } from "../../src/worker/task-worker.js";
import { WorkQueue } from "../../src/worker/work-queue.js";
import { fakeShell, fakeTierEnvironment } from "./fake-runner.js";

const [home, servers, pool, dieAt] = process.argv.slice(2);
if (!home || !servers || !pool || !dieAt) throw new Error("usage: nats-worker-child.ts <runner-home> <servers> <pool> <command to die at>");

const shell = fakeShell();
const provider = new HostDirectorySandboxProvider({
  exec: (exec) => {
    if (exec.request.command === dieAt) process.kill(process.pid, "SIGKILL");
    return shell(exec);
  },
});
const runner = await createRunner({ home, sandboxProvider: provider, environment: fakeTierEnvironment(home) });
// The sweep a worker does first (TaskWorker.run waits for the same one): `ready` means it is done.
await runner.sweepLeftovers();
const connection = await connect({ servers: servers.split(","), maxReconnectAttempts: -1 });
const queue = await WorkQueue.open(connection, { pool });
const drain = new AbortController();
process.on("SIGTERM", () => drain.abort());
const worker = new TaskWorker({ queue, runner, jobs: 1, environment: fakeTierEnvironment(home), name: `child-${process.pid}` });
const running = worker.run(drain.signal);
process.stdout.write("ready\n");
await running;
await runner.close();
await connection.close();
