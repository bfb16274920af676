import { Command } from "commander";
import { ConfigError } from "../errors.js";
import { terminalSafe } from "../terminal-text.js";

/** Flags of `runner worker`. */
interface WorkerFlags {
  nats: string;
  pool?: string;
  jobs: string;
  ackWait?: string;
  maxDeliver?: string;
}

/**
 * `runner worker --nats URL [--pool NAME] [-j N]` (docs/scale-out.md
 * "Workers"). `signal` is the CLI's interrupt: the first SIGTERM or Ctrl-C
 * drains (no new task; the tasks it runs finish), then the worker exits 0; a
 * second one quits at once (its tasks come back to the pool after ack_wait,
 * its containers are swept when it starts again).
 */
export function workerCommand(signal: AbortSignal, exit: (code: number) => void, onInterrupt: (text: string) => void): Command {
  return new Command("worker")
    .exitOverride()
    .description("run tasks of a NATS JetStream pool, as `runner exec` would, until SIGTERM (docs/scale-out.md)")
    .requiredOption("--nats <urls>", "the cluster: nats://host:port[,host:port…] (credentials from the RUNNER_NATS_* variables)")
    .option("--pool <name>", "the pool whose tasks to run", "default")
    .option("-j, --jobs <n>", "tasks at once", "2")
    .option("--ack-wait <seconds>", "when this worker creates the pool: how long a silent worker keeps a task (default 60)")
    .option("--max-deliver <n>", "when this worker creates the pool: deliveries of a task before it is recorded as an error (default 3)")
    .addHelpText("after", "\nExit codes: 0 drained after SIGTERM/Ctrl-C, 2 bad flags or credentials, 3 NATS or JetStream unusable.")
    .action(async (flags: WorkerFlags) => {
      onInterrupt("draining: no new task; the running ones finish (again to quit at once; they come back to the pool)");
      exit(await runWorker(flags, signal));
    });
}

async function runWorker(flags: WorkerFlags, signal: AbortSignal): Promise<number> {
  const jobs = Number(flags.jobs);
  if (!/^\d+$/.test(flags.jobs) || jobs < 1) throw new ConfigError(`-j: expected a whole number of at least 1, got "${flags.jobs}"`);
  const [{ openPool, parseNatsFlags }, { TaskWorker }, { recordDeadLetters }, { Runner }, { runnerHome }] = await Promise.all([
    import("../worker/nats-pool.js"),
    import("../worker/task-worker.js"),
    import("../worker/dead-letters.js"),
    import("../runner/runner.js"),
    import("../runner/runner-home.js"),
  ]);
  const settings = parseNatsFlags(flags);
  const log = (line: string) => process.stderr.write(`${terminalSafe(`worker: ${line}`)}\n`);
  const { connection, queue } = await openPool(settings, "worker", log);
  const runner = Runner.create({ home: runnerHome(), sharedRateLimits: true });
  const worker = new TaskWorker({ queue, runner, jobs, environment: process.env, log });
  process.stdout.write(
    `worker pool ${queue.pool} -j ${jobs} (ack_wait ${Math.round(queue.settings.ackWaitMs / 1000)} s, max_deliver ${queue.settings.maxDeliver})\n`,
  );
  const stopDeadLetters = new AbortController();
  const deadLetters = recordDeadLetters(queue, stopDeadLetters.signal, log).catch((error: unknown) => log(`dead letters: ${String(error)}`));
  try {
    await worker.run(signal);
  } finally {
    stopDeadLetters.abort();
    await deadLetters;
    await runner.close();
    await connection.drain().catch(() => connection.close());
  }
  log("drained; exiting");
  return 0;
}
