import type { AgencyEvent } from "../bus/event-bus.js";
import type { RunReport } from "../run/run-report.js";
import type { ApprovalBroker, Runner, RunEmbedding, RunHandle } from "../runner/runner.js";
import type { AgencyProblem, AgencyDefinition, AgentDefinition } from "./load-agency.js";

/** One invocation as the orchestrator hands it to an {@link InvocationExecutor}. */
export interface InvocationRequest {
  agencyId: string;
  /** The agency's trace id (its events' envelopes). */
  traceId: string;
  /** `<agent>-<12 hex>` (agency-event.ts `invocationId`): an executor that submits work uses it as the job's identity. */
  invocationId: string;
  agent: AgentDefinition;
  /** The event the invocation serves (the cause of what its agent emits). */
  event: AgencyEvent;
  /** The agency's `context` (what `read_context` answers). */
  context: Record<string, unknown>;
  /** The run's task (task.yaml's schema, agent-task.ts `invocationTask`): its policy is a file in the agency's records. */
  task: Record<string, unknown>;
  /**
   * Where the run goes (src/run/run-embedding.ts): `baseBranch` and, for a writing agent, `mergeInto` = the
   * agency branch; `hostTools`, `checkFinalAnswer` and `gate` are functions of the orchestrator's process.
   */
  embedding: RunEmbedding;
  /** Queues an event the agent emitted in the invocation's outbox (resolves with the outbox's size). */
  emit(event: AgencyEvent): Promise<number>;
  /** Aborting it stops the invocation as Ctrl-C does (a local run is cancelled; a remote one is no longer waited for). */
  signal: AbortSignal;
  approvals?: ApprovalBroker;
}

/** An invocation's run, started or resumed by an {@link InvocationExecutor}. */
export interface InvocationRun {
  /** The run id (for a remote run: the run of the delivery that started it; the report names the one that finished). */
  readonly id: string;
  /** `$RUNNER_HOME/runs/<id>/` of the orchestrator's home (a remote run's records are copied there when it ends). */
  readonly directory: string;
  /** The worker that runs it (`host:pid`), or null for a run in the orchestrator's process. */
  readonly worker: string | null;
  /** The local run's handle, for the guards that follow a run live (budget, approvals); null for a remote run. */
  readonly handle: RunHandle | null;
  /** The run's report once it ended; null when the orchestrator stopped waiting (cancelled) and the run is to be resumed. */
  readonly result: Promise<RunReport | null>;
}

/**
 * Where an agency's invocations run: the seam between the orchestrator and
 * the machines that run its agents. The orchestrator builds each
 * invocation's task and placement and records, publishes and acks around
 * it; the executor only starts (or resumes) the run and reports how it ended.
 * {@link localInvocations} runs them on the orchestrator's Runner (`bus:
 * file`); `src/worker/nats-invocations.ts` submits them to the `runner
 * worker`s of a pool (`bus: nats://…`). Both merge a writing agent's verified
 * success into the agency branch with the same rule (`mergeIntoBranch` in
 * src/workspace/merge.ts), and report it in report.json `merge`.
 */
export interface InvocationExecutor {
  /** `local`: the orchestrator's own Runner; `workers`: another process, so the guards that act inside a run (see {@link remoteInvocationProblems}) cannot follow. */
  readonly where: "local" | "workers";
  /** Starts the invocation's run; rejects with ConfigError for a task that cannot run (the orchestrator ends the agency `error`). */
  start(request: InvocationRequest): Promise<InvocationRun>;
  /**
   * Goes on with the invocation whose run `runId` a crashed or cancelled orchestrator recorded. Rejects with
   * ConfigError when that run cannot be resumed (the orchestrator then takes its report, or starts it anew).
   */
  resume(runId: string, request: InvocationRequest): Promise<InvocationRun>;
}

/** The invocations on `runner` itself: `Runner.start` with the request's embedding, `Runner.resume` (its base branch is recorded with the run). */
export function localInvocations(runner: Runner): InvocationExecutor {
  const of = (handle: RunHandle): InvocationRun => ({ id: handle.id, directory: handle.directory, worker: null, handle, result: handle.result });
  const options = (request: InvocationRequest) => ({ signal: request.signal, ...(request.approvals ? { approvals: request.approvals } : {}) });
  return {
    where: "local",
    start: async (request) => of(await runner.start(request.task, { ...options(request), embedding: request.embedding })),
    resume: async (runId, request) => {
      const { baseBranch: _started, ...embedding } = request.embedding;
      return of(await runner.resume(runId, { ...options(request), embedding }));
    },
  };
}

/**
 * What an agency whose invocations run on workers cannot have, one problem
 * per field (exit 2 before anything exists; docs/scale-out.md "Agencies on
 * workers"): each of these guards acts inside a running invocation from the
 * orchestrator's process — `confirm` asks the approval broker before a call,
 * `policies.rate_limit` gates each model and tool call, `budget` follows each
 * run's cost live — and a run on another machine cannot reach it. Refused
 * rather than dropped; each run's own `model.max_cost_usd` still applies on
 * its worker. `sandbox.build` needs a build context on the orchestrator's disk.
 */
export function remoteInvocationProblems(definition: Pick<AgencyDefinition, "confirm" | "budget" | "agents">, label: string): AgencyProblem[] {
  const why = "with invocations on runner workers (bus: nats://…) is not built";
  const problems: AgencyProblem[] = [];
  if (definition.confirm.length > 0) {
    problems.push({
      file: label,
      field: "confirm",
      message: `confirm ${why}: approvals are asked from the orchestrator's process, which a run on a worker cannot reach; remove it or use bus: file`,
    });
  }
  if (definition.budget) {
    problems.push({
      file: label,
      field: "budget",
      message: `budget ${why}: the budget follows each running invocation's cost live, which a worker does not send back; use each agent's model.max_cost_usd (it applies on the worker) or bus: file`,
    });
  }
  for (const agent of definition.agents) {
    const file = agent.file ?? label;
    if (agent.confirm.length > 0)
      problems.push({
        file,
        field: "agent.confirm",
        message: `confirm ${why}: a worker's run cannot ask the orchestrator's approval broker; remove it or use bus: file`,
      });
    if (agent.policies.rate_limit)
      problems.push({
        file,
        field: "agent.policies.rate_limit",
        message: `rate_limit ${why}: its token buckets gate every model and tool call from the orchestrator's process; remove it or use bus: file`,
      });
    if ((agent.sandbox as { build?: unknown } | undefined)?.build !== undefined)
      problems.push({
        file,
        field: "agent.sandbox.build",
        message: `sandbox.build ${why}: the build context is on the orchestrator's disk; build and push the image, then name it in sandbox.image`,
      });
  }
  return problems;
}
