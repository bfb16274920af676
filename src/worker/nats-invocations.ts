import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { InvocationExecutor, InvocationRequest, InvocationRun } from "../agency/invocation-executor.js";
import type { AgencyEvent } from "../bus/event-bus.js";
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
 *   the agent emitted are queued in the invocation's outbox (`request.emit`);
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
      .then(async (report) => (report.status === "cancelled" ? null : this.landed(request, job, withRunFields(report), handle.id, repository.root)))
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
  private async landed(request: InvocationRequest, job: InvocationJob, report: RunReport, runId: string, repositoryRoot: string): Promise<RunReport> {
    const stored = await this.queue.result(job.key);
    const emitted = stored?.objects?.emitted ? await this.queue.getObject(stored.objects.emitted) : null;
    for (const line of Buffer.from(emitted ?? new Uint8Array())
      .toString("utf8")
      .split("\n")) {
      if (line) await request.emit(JSON.parse(line) as AgencyEvent);
    }
    const target = request.embedding.mergeInto;
    if (target === undefined || report.status !== "succeeded" || !report.branch) return report;
    const model = (job.task.model as { name?: string; provider?: string } | undefined) ?? {};
    const authorship = await commitAuthorship(repositoryRoot, this.environment, model.name ?? model.provider ?? "model");
    const gitConfig = [...(await driverOverrides(repositoryRoot)), ...authorshipConfig(authorship)];
    const message = `agent-runner: merge ${report.branch} (${job.name}, run ${runId})`;
    const merged: RunReport = { ...report, merge: await mergeIntoBranch(repositoryRoot, gitConfig, report.branch, target, message) };
    const file = join(runDirectory(this.submitter.home, runId), RUN_FILES.report);
    writeAtomically(file, `${JSON.stringify({ ...(JSON.parse(readFileSync(file, "utf8")) as object), merge: merged.merge }, null, 2)}\n`);
    return merged;
  }
}

/** A report as the orchestrator reads it: a dead letter's (no run finished) has none of a run's fields, which then say so (null). */
function withRunFields(report: RunReport): RunReport {
  const absent: Partial<RunReport> = { head_commit: null, branch: null, base_commit: null, merge: null, final_message: null, cost_usd: null };
  return { ...absent, ...report };
}
