import { DeliverPolicy } from "@nats-io/jetstream";
import { errorMessage } from "../errors.js";
import { jobSchema } from "./task-job.js";
import { deadLetterOutcome } from "./task-worker.js";
import type { WorkQueue } from "./work-queue.js";

/**
 * Records the tasks JetStream gave up on: for each max-deliveries advisory
 * kept in `RUNNER_DEAD_<pool>` (a task whose last delivery's worker died, so
 * no worker could write its outcome), the result `error`,
 * `deliveries_exhausted` with every attempt's reason from the lease, then the
 * task's message is deleted from the queue (work-queue retention keeps it
 * until then: nothing is dropped silently). Both workers and submitters run
 * it; the result is written with compare-and-set, so it is recorded once.
 * Runs until `signal` aborts; failures are logged and retried by the next advisory.
 */
export async function recordDeadLetters(queue: WorkQueue, signal: AbortSignal, log: (line: string) => void = () => undefined): Promise<void> {
  const consumer = await queue.retrying("JetStream did not open the dead letters", () =>
    queue.client.consumers.get(`RUNNER_DEAD_${queue.pool}`, { deliver_policy: DeliverPolicy.All }),
  );
  const messages = await consumer.consume();
  const stop = () => void messages.close();
  if (signal.aborted) stop();
  signal.addEventListener("abort", stop, { once: true });
  try {
    for await (const message of messages) {
      try {
        const advisory = message.json<{ stream_seq?: number }>();
        if (typeof advisory.stream_seq === "number") await recordDeadLetter(queue, advisory.stream_seq, log);
      } catch (error) {
        if (!signal.aborted) log(`dead letter ${message.seq}: ${errorMessage(error)}`);
      }
    }
  } finally {
    signal.removeEventListener("abort", stop);
  }
}

async function recordDeadLetter(queue: WorkQueue, sequence: number, log: (line: string) => void): Promise<void> {
  const stored = await queue.manager.streams.getMessage(queue.tasksStream, { seq: sequence }).catch(() => null);
  if (!stored) return;
  const parsed = jobSchema.safeParse(stored.json());
  if (parsed.success && !(await queue.result(parsed.data.key))) {
    const job = parsed.data;
    const lease = await queue.lease(job.key);
    const silent = `its worker stopped answering (no ack within ack_wait, ${Math.round(queue.settings.ackWaitMs / 1000)} s)`;
    const attempts = (lease?.lease.attempts ?? []).map((attempt) => ({ ...attempt, reason: attempt.reason ?? `${attempt.worker}: ${silent}` }));
    const result = await queue.writeResult({
      key: job.key,
      name: job.name,
      run_id: attempts.findLast((attempt) => attempt.run_id)?.run_id ?? null,
      worker: null,
      ...deadLetterOutcome(attempts, queue.settings.maxDeliver),
      attempts,
      objects: null,
    });
    log(`dead letter: ${job.name} ended ${result.status} (${result.reason}) after ${attempts.length} deliveries`);
  }
  await queue.manager.streams.deleteMessage(queue.tasksStream, sequence).catch(() => false);
}
