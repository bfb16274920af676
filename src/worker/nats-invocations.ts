import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { emittedEventProblem, MAX_EMITTED_EVENTS } from "../agency/agent-task.js";
import type { InvocationExecutor, InvocationRequest, InvocationRun } from "../agency/invocation-executor.js";
import { MAX_EVENT_DATA_BYTES, type AgencyEvent } from "../bus/event-bus.js";
import { validateTask } from "../config/load-task.js";
import { CancelledError } from "../errors.js";
import { RUN_FILES, writeAtomically } from "../run/run-store.js";
import type { RunReport } from "../run/run-report.js";
import { authorshipConfig, commitAuthorship } from "../workspace/commit-authorship.js";
import { mergeIntoBranch } from "../workspace/merge.js";
import { branchHead, resolveRepository } from "../workspace/run-worktree.js";
import { driverOverrides } from "../workspace/safe-git.js";
import { invocationKey, type InvocationJob } from "./invocation-job.js";
import { NatsBatchRunner, runDirectory } from "./nats-batch-runner.js";
import { wireTask } from "./task-job.js";
import type { WorkQueue } from "./work-queue.js";

/**
 * An agency's invocations on the `runner worker`s of a pool (`bus: nats://…`,
 * docs/scale-out.md "Agencies on workers"), for the orchestrator's process:
 *
 * - `start` packs the invocation as an {@link InvocationJob} (the task without
 *   paths, the agent's policy as text, its context, emits, served event,
 *   output schema and trace as data), stores the agency branch's head as the
 *   base bundle, publishes the job under {@link invocationKey}, and resolves
 *   once a worker has a run for it (the lease names run and worker) or its
 *   result exists. The pool's queue semantics apply: a worker killed
 *   mid-invocation → redelivered after `ack_wait` to another worker, one result.
 * - When the result exists: the run's records are copied into
 *   `$RUNNER_HOME/runs/<run-id>/` and its branch (`runner/<task-name>-<short-id>`) is made in
 *   your repository from the worker's commits (NatsBatchRunner); the events
 *   the agent emitted, each checked as this process's `emit_event` would have
 *   built it, are queued in the invocation's outbox (`request.emit`): one that
 *   fails makes the invocation `error` / `worker_result_invalid` (the worker's
 *   doing, not the agent's, whose events the worker's tool builds), with
 *   none queued and nothing merged;
 *   a writing agent's success is merged into the agency branch here, by the
 *   rule a local run's `mergeInto` follows (only a `succeeded` run — verified,
 *   or without a verify command — through `mergeIntoBranch`, conflicts
 *   refused), and report.json `merge` says how. Only this process writes your
 *   repository.
 * - `resume` (an orchestrator restarted mid-invocation) submits the same job
 *   again: JetStream's publish dedupe drops it, or a worker that receives it
 *   finds its result and runs nothing; either way this waits for the one run.
 * - An aborted `request.signal` stops waiting (null result: the agency resumes
 *   it later); the run on its worker goes on.
 */
export class NatsInvocations implements InvocationExecutor {
  readonly where = "workers";

  private constructor(
    private readonly queue: WorkQueue,
    private readonly submitter: NatsBatchRunner,
    private readonly environment: NodeJS.ProcessEnv,
    private readonly ownsConnection: boolean,
  ) {}

  /**
   * Follows the pool's leases and results (`home`: the orchestrator's RUNNER_HOME, where remote runs' records
   * are copied; `environment`: where the merge commits' git identity is read). `ownsConnection`: `close` also
   * closes the queue's NATS connection.
   */
  static async open(
    queue: WorkQueue,
    home: string,
    options: { environment?: NodeJS.ProcessEnv; log?: (line: string) => void; ownsConnection?: boolean } = {},
  ): Promise<NatsInvocations> {
    const submitter = await NatsBatchRunner.open(queue, home, options.log);
    return new NatsInvocations(queue, submitter, options.environment ?? process.env, options.ownsConnection === true);
  }

  async start(request: InvocationRequest): Promise<InvocationRun> {
    const task = validateTask(request.task, null, process.cwd());
    const { task: document, script, policy } = wireTask(task, "carry");
    const repository = await resolveRepository(task.workspacePath);
    const base = request.embedding.baseBranch === undefined ? repository.head : await branchHead(repository.root, request.embedding.baseBranch);
    const trace = request.embedding.trace;
    const job: InvocationJob = {
      kind: "invocation",
      version: 1,
      key: invocationKey(request.agencyId, request.invocationId),
      name: task.name,
      task: document,
      script,
      policy: policy ?? "",
      base_commit: base,
      bundle: await this.submitter.storeBundle(repository.root, base),
      submitter: this.submitter.submitter,
      invocation: {
        agency_id: request.agencyId,
        trace_id: request.traceId,
        invocation_id: request.invocationId,
        agent: { name: request.agent.name, emits: request.agent.emits },
        context: request.context,
        cause: request.event as unknown as Record<string, unknown>,
        read_only: request.embedding.readOnlyWorkspace === true,
        output_schema: request.agent.output_schema ?? null,
        trace: trace ? { trace_id: trace.traceId, parent_span_id: trace.parentSpanId } : null,
      },
    };
    const handle = await this.submitter.submit(job, task, repository.root, request.signal);
    const stop = () => void handle.cancel("the agency stopped waiting");
    request.signal.addEventListener("abort", stop, { once: true });
    const result = handle.result
      .then(async (report) =>
        report.status === "cancelled" ? null : this.landed(request, job, withRunFields(report), handle.id, handle.worker, repository.root),
      )
      .catch((error: unknown) => {
        if (error instanceof CancelledError) return null;
        throw error;
      })
      .finally(() => request.signal.removeEventListener("abort", stop));
    return {
      get id() {
        return handle.id;
      },
      get directory() {
        return handle.directory;
      },
      get worker() {
        return handle.worker;
      },
      handle: null,
      result,
    };
  }

  /** The same job again: its key finds the one run (see the class comment); `runId` is the run recorded, which may since have been redelivered. */
  resume(_runId: string, request: InvocationRequest): Promise<InvocationRun> {
    return this.start(request);
  }

  /** Stops following the pool (the runs on workers go on). */
  async close(): Promise<void> {
    await this.submitter.close();
    if (this.ownsConnection) await this.queue.connection.close();
  }

  /**
   * The emitted events queued, the success merged into the agency branch; report.json rewritten with `merge`.
   * `runId`: the run id the submitter checked (the handle's), never the worker's report's.
   */
  private async landed(
    request: InvocationRequest,
    job: InvocationJob,
    report: RunReport,
    runId: string,
    worker: string | null,
    repositoryRoot: string,
  ): Promise<RunReport> {
    // Refused already (its run id): nothing of that result is used.
    if (report.reason === "worker_result_invalid") return report;
    const emitted = await this.emittedEvents(request, job);
    if (typeof emitted === "string") {
      const error = `worker ${worker ?? "(unnamed)"} returned events the agent could not have emitted (${emitted}): none is published, nothing is merged`;
      const refused: RunReport = { ...report, status: "error", reason: "worker_result_invalid", error };
      this.rewriteReport(runId, { status: refused.status, reason: refused.reason, error });
      return refused;
    }
    for (const event of emitted) await request.emit(event);
    const target = request.embedding.mergeInto;
    if (target === undefined || report.status !== "succeeded" || !report.branch) return report;
    const model = (job.task.model as { name?: string; provider?: string } | undefined) ?? {};
    const authorship = await commitAuthorship(repositoryRoot, this.environment, model.name ?? model.provider ?? "model");
    const gitConfig = [...(await driverOverrides(repositoryRoot)), ...authorshipConfig(authorship)];
    const message = `agent-runner: merge ${report.branch} (${job.name}, run ${runId})`;
    const merged: RunReport = { ...report, merge: await mergeIntoBranch(repositoryRoot, gitConfig, report.branch, target, message) };
    this.rewriteReport(runId, { merge: merged.merge });
    return merged;
  }

  /** Run `runId`'s report.json (copied from its worker) with `fields` changed; nothing when it was never written (a refused result). */
  private rewriteReport(runId: string, fields: Partial<RunReport>): void {
    const file = join(runDirectory(this.submitter.home, runId), RUN_FILES.report);
    if (!existsSync(file)) return;
    writeAtomically(file, `${JSON.stringify({ ...(JSON.parse(readFileSync(file, "utf8")) as object), ...fields }, null, 2)}\n`);
  }

  /**
   * The events the worker says the agent emitted (`emitted` of the job's result, JSON lines), each checked as the
   * orchestrator's own `emit_event` would have built it ({@link emittedEventProblem}); at most
   * {@link MAX_EMITTED_EVENTS} of at most {@link MAX_EMITTED_EVENT_BYTES} bytes each. A string says what is wrong
   * (the first problem found): then none of them is queued.
   */
  private async emittedEvents(request: InvocationRequest, job: InvocationJob): Promise<AgencyEvent[] | string> {
    const stored = await this.queue.result(job.key);
    const name = stored?.objects?.emitted;
    if (!name) return [];
    const size = (await this.queue.objectSize(name)) ?? 0;
    if (size > MAX_EMITTED_EVENTS * MAX_EMITTED_EVENT_BYTES)
      return `${name} is ${size} bytes, over ${MAX_EMITTED_EVENTS} events of ${MAX_EMITTED_EVENT_BYTES} bytes`;
    const lines = Buffer.from((await this.queue.getObject(name)) ?? new Uint8Array())
      .toString("utf8")
      .split("\n")
      .filter(Boolean);
    if (lines.length > MAX_EMITTED_EVENTS) return `${lines.length} events, over the ${MAX_EMITTED_EVENTS} an invocation may emit`;
    const expected = { agencyId: request.agencyId, traceId: request.traceId, invocationId: request.invocationId, agent: request.agent, cause: request.event };
    const events: AgencyEvent[] = [];
    for (const [index, line] of lines.entries()) {
      if (Buffer.byteLength(line) > MAX_EMITTED_EVENT_BYTES) return `event ${index + 1} is ${Buffer.byteLength(line)} bytes, over ${MAX_EMITTED_EVENT_BYTES}`;
      let event: unknown;
      try {
        event = JSON.parse(line);
      } catch {
        return `event ${index + 1} is not JSON`;
      }
      const problem = emittedEventProblem(event, expected);
      if (problem) return `event ${index + 1}: ${problem}`;
      events.push(event as AgencyEvent);
    }
    return events;
  }
}

/** Most bytes of one emitted event's JSON line: its data (at most MAX_EVENT_DATA_BYTES, 16 KiB) and the envelope's attributes, with room to spare. */
const MAX_EMITTED_EVENT_BYTES = 4 * MAX_EVENT_DATA_BYTES;

/** A report as the orchestrator reads it: a dead letter's (no run finished) has none of a run's fields, which then say so (null). */
function withRunFields(report: RunReport): RunReport {
  const absent: Partial<RunReport> = { head_commit: null, branch: null, base_commit: null, merge: null, final_message: null, cost_usd: null };
  return { ...absent, ...report };
}
