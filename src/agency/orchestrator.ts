import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { E_CANCELED, Semaphore } from "async-mutex";
import type { AgencyEvent, Delivery, EventBus } from "../bus/event-bus.js";
import { ConfigError, errorMessage } from "../errors.js";
import { roundUsd } from "../model/pricing.js";
import type { RunReport } from "../run/run-report.js";
import type { ApprovalBroker, Runner } from "../runner/runner.js";
import { branchHead } from "../workspace/run-worktree.js";
import { agencyEvent, invocationId, invocationSpanId, triggerMatches, type Publisher } from "./agency-event.js";
import type { AgencyDirectory, AgencyRecord, AgencyReport, AgencyStatus, InvocationRecord } from "./agency-directory.js";
import { lifecycleTransitions, type AgentState, type LifecycleChange } from "./agent-lifecycle.js";
import { invocationTask, invocationTools, writeAgentPolicy, writesWorkspace } from "./agent-task.js";
import { localInvocations, type InvocationExecutor, type InvocationRequest, type InvocationRun } from "./invocation-executor.js";
import { StructuredOutput } from "./guards/structured-output.js";
import { AgencyApprovals } from "./guards/agency-approvals.js";
import { AgencyBudget } from "./guards/agency-budget.js";
import { CHAIN_STOPPED, ChainStops, invocationStop } from "./guards/chain-stops.js";
import { hopsExhausted, withinHops } from "./guards/hop-limit.js";
import type { ChainStop } from "./guards/stop-reasons.js";
import { BreakerRouter, type BreakerRoute } from "./guards/breaker-router.js";
import { systemClock, type AgencyClock } from "./guards/clock.js";
import { RateLimits } from "./guards/rate-limits.js";
import type { AgentDefinition } from "./load-agency.js";
import { triggeredBy } from "./trigger-rule.js";

/** The durable consumer of agent `name` on the bus. */
function consumerName(agent: string): string {
  return `agent-${agent}`;
}

export interface OrchestratorOptions {
  runner: Runner;
  bus: EventBus;
  record: AgencyRecord;
  directory: AgencyDirectory;
  /** Aborting it cancels the agency as Ctrl-C does: running invocations are cancelled (resumable), status `cancelled`. */
  signal: AbortSignal;
  /** Events published before the agents start: the agency's `start` ones and the caller's (`--event`). Ids make them publish once across resumes. */
  startEvents: { type: string; subject?: string; data?: unknown; id: string }[];
  /** The clock, ms (durations); injectable for tests. */
  now?: () => number;
  /** Who answers the `confirm` gates' questions (guards/agency-approvals.ts); absent: nobody, the policy refuses them. */
  approvals?: ApprovalBroker;
  /** The clock the guards decide by (breaker cooldowns and windows, token buckets); default the wall clock. */
  clock?: AgencyClock;
  /** Where the invocations run (invocation-executor.ts); default {@link localInvocations} on `runner`. */
  executor?: InvocationExecutor;
}

/**
 * Runs an agency until its goal event is published (then waits for the
 * invocations still running), or until it is quiescent — every agent's
 * consumer has acked every event and no invocation runs — or until it is
 * cancelled. Each agent is a durable consumer of the bus: an event whose type
 * its triggers match becomes an invocation (a run of the Runner, see
 * agent-task.ts), at most `max_concurrency` at once; further events wait in
 * the log. The invocation id is derived from (agent, event id) and recorded
 * with its run before any model call, so a redelivered event starts nothing
 * new: a finished invocation is only acked, a running one (the process died)
 * is resumed with `Runner.resume`. An event is acked only after its
 * invocation's `agency.invocation.finished` is published and recorded.
 * Guards: an agent's circuit breaker runs its event on its fallback or holds
 * it (guards/breaker-router.ts); its token buckets gate each run's tool and
 * model calls through the embedding's `gate` (guards/rate-limits.ts).
 */
export class Orchestrator {
  private readonly invocations: Map<string, InvocationRecord>;
  /** The event each running invocation serves (the cause of its `agency.rate_limited` events). */
  private readonly invocationEvents = new Map<string, AgencyEvent>();
  private readonly inFlight = new Set<string>();
  private readonly running = new Map<string, number>();
  private readonly states = new Map<string, AgentState>();
  private readonly consuming = new AbortController();
  private readonly runs: AbortController;
  private readonly work = new Set<Promise<void>>();
  private outcome: { status: AgencyStatus; reason: string } | null = null;
  private ended!: () => void;
  private readonly endedPromise = new Promise<void>((resolve) => (this.ended = resolve));
  private watched = 0;
  private checking = false;
  private checkAgain = false;
  private readonly now: () => number;
  private readonly structuredOutputs = new Map<string, StructuredOutput>();
  private readonly stops = new ChainStops();
  private readonly budget: AgencyBudget;
  private readonly approvals: AgencyApprovals;
  private readonly clock: AgencyClock;
  private readonly breakers: BreakerRouter;
  private readonly rateLimits: RateLimits;
  private readonly slots: Map<string, Semaphore>;
  private readonly executor: InvocationExecutor;

  constructor(private readonly options: OrchestratorOptions) {
    this.invocations = options.directory.readInvocations();
    this.runs = new AbortController();
    this.now = options.now ?? Date.now;
    this.clock = options.clock ?? systemClock;
    this.executor = options.executor ?? localInvocations(options.runner);
    const agents = options.record.definition.agents;
    this.slots = new Map(agents.map((agent) => [agent.name, new Semaphore(agent.policies.max_concurrency)]));
    this.breakers = new BreakerRouter(agents, this.clock, async (fields) => {
      const event = this.event({ kind: "orchestrator" }, fields);
      await options.bus.publish(event);
      return event;
    });
    this.rateLimits = new RateLimits(join(options.directory.path, "rate-limits.json"), this.clock, async (wait) => {
      const cause = this.invocationEvents.get(wait.invocation_id);
      await options.bus.publish(
        this.event(
          { kind: "orchestrator" },
          { type: "agency.rate_limited", subject: wait.agent, data: wait, time: new Date(this.clock.now()), cause: cause ?? null },
        ),
      );
    });
    const ended = () => [...this.invocations.values()].filter((invocation) => invocation.status !== "running").map((invocation) => invocation.cost_usd);
    this.budget = new AgencyBudget(options.record.definition.budget?.max_cost_usd ?? null, ended);
    this.approvals = new AgencyApprovals(options.approvals ?? null, options.record.agency_id, async (type, invocation, id, data) => {
      await options.bus.publish(this.event({ kind: "orchestrator" }, { type, subject: invocation.agent, id, cause: invocation.event, data }));
    });
  }

  async run(): Promise<AgencyReport> {
    const started = this.now();
    const { bus, record, signal } = this.options;
    const agents = record.definition.agents;
    const onAbort = () => this.end("cancelled", "cancelled", true);
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
    try {
      for (const agent of agents) writeAgentPolicy(agent, this.options.directory.policyFile(agent.name), record.definition);
      for (const start of this.options.startEvents) {
        await bus.publish(this.event({ kind: "orchestrator" }, { ...start, cause: null }));
      }
      // The breakers' state is the fold of the log so far (a resume's too).
      if (this.breakers.active) for await (const stored of bus.read({ from: 0, follow: false })) await this.breakers.observe(stored.event);
      for (const agent of agents) {
        this.states.set(agent.name, "spawn");
        await this.publishState(agent.name, "spawn", null);
        await this.change(agent.name, { kind: "started" });
      }
      const loops = [this.watchGoal(), ...agents.map((agent) => this.consume(agent))];
      void this.settle();
      await Promise.race([this.endedPromise, Promise.all(loops)]);
      await Promise.allSettled(loops);
      await Promise.allSettled([...this.work]);
    } catch (error) {
      this.end("error", errorMessage(error), true);
      await Promise.allSettled([...this.work]);
    } finally {
      signal.removeEventListener("abort", onAbort);
    }
    for (const agent of agents) await this.change(agent.name, { kind: "stopped" }).catch(() => undefined);
    this.rateLimits.flush();
    return this.report(this.outcome ?? { status: "error", reason: "the orchestrator stopped without an outcome" }, this.now() - started);
  }

  /** Ends the agency once: stops taking events; `cancelRuns` also cancels the invocations still running. */
  private end(status: AgencyStatus, reason: string, cancelRuns: boolean): void {
    if (this.outcome === null) this.outcome = { status, reason };
    this.consuming.abort();
    if (cancelRuns) this.runs.abort();
    this.ended();
  }

  /** Reads the whole log from 0 for the goal: an agency resumed after its goal ends at once. */
  private async watchGoal(): Promise<void> {
    for await (const stored of this.options.bus.read({ from: 0, follow: true, signal: this.consuming.signal })) {
      this.watched = stored.sequence + 1;
      this.stops.observe(stored.event);
      if (stored.event.type === this.options.record.definition.goal) {
        this.end("succeeded", "goal_reached", false);
        return;
      }
      void this.settle();
    }
  }

  private async consume(agent: AgentDefinition): Promise<void> {
    const { bus } = this.options;
    const name = consumerName(agent.name);
    this.consuming.signal.addEventListener("abort", () => this.slots.get(agent.name)!.cancel(), { once: true });
    for await (const delivery of bus.consume(name, { signal: this.consuming.signal })) {
      // A fallback's copy of its primary's event: the primary's breaker routes it.
      if (!triggeredBy(agent, delivery.event) || this.breakers.standsBy(agent.name, delivery.event.type)) {
        await bus.ack(name, delivery.sequence);
        void this.settle();
        continue;
      }
      const admitted = await this.admit(agent, delivery);
      if (admitted === null) return;
      const { route, release } = admitted;
      const work = this.invoke(route.agent, delivery, agent.name, route.fallbackFor)
        .catch((error: unknown) => this.end("error", `invocation of ${route.agent.name} for ${delivery.event.id}: ${errorMessage(error)}`, true))
        .finally(() => {
          release();
          this.work.delete(work);
          void this.settle();
        });
      this.work.add(work);
    }
  }

  /**
   * Where a delivery of `agent`'s runs (its breaker's route) and a slot of that agent's `max_concurrency`,
   * taken first from `agent` itself so that, with one slot, its breaker has seen the previous outcome.
   * Null once the agency stops taking events.
   */
  private async admit(agent: AgentDefinition, delivery: Delivery): Promise<{ route: BreakerRoute; release: () => void } | null> {
    let release: (() => void) | null = null;
    try {
      [, release] = await this.slots.get(agent.name)!.acquire();
      const route = await this.breakers.route(agent, delivery.event, (id) => this.invocations.has(id), this.consuming.signal);
      if (route.agent !== agent) {
        release();
        release = null;
        [, release] = await this.slots.get(route.agent.name)!.acquire();
      }
      if (this.consuming.signal.aborted) {
        release();
        return null;
      }
      return { route, release };
    } catch (error) {
      release?.();
      if (error === E_CANCELED || this.consuming.signal.aborted) return null;
      throw error;
    }
  }

  /**
   * One invocation of `agent` for a delivery of `consumer`'s (the agent itself, or the primary it is the
   * fallback of, `fallbackFor`): start (or resume, or only acknowledge) its run, then publish, record, ack.
   */
  private async invoke(agent: AgentDefinition, delivery: Delivery, consumer: string, fallbackFor: string | null): Promise<void> {
    const { bus, directory, record } = this.options;
    const agents = record.definition.agents;
    const event = delivery.event;
    const id = invocationId(agent.name, event.id);
    const known = this.invocations.get(id);
    if (known && known.status !== "running") {
      await bus.ack(consumerName(consumer), delivery.sequence);
      return;
    }
    // A redelivery of an invocation this process runs: its first delivery acks.
    if (this.inFlight.has(id)) return;
    // The budget is spent: nothing new starts (the event stays unacked); running invocations finish.
    if (!known && this.budget.exhausted()) {
      await this.stopChain(this.budget.stop(agent.name, id, event), event, `${id}-budget`);
      this.end("failed", "budget_exhausted", false);
      return;
    }
    this.inFlight.add(id);
    this.running.set(agent.name, (this.running.get(agent.name) ?? 0) + 1);
    try {
      await this.change(agent.name, { kind: "invocation_started" });
      const report = await this.runInvocation(agent, delivery, id, known);
      this.running.set(agent.name, this.running.get(agent.name)! - 1);
      // Cancelled: neither recorded nor acked, so a resume of the agency resumes the run.
      if (report === null || report.status === "cancelled") return;
      const conflicts = report.merge?.conflicts;
      if (conflicts?.length) {
        await bus.publish(
          this.event(
            { kind: "orchestrator" },
            {
              type: "agency.merge.conflict",
              subject: agent.name,
              id: `${id}-conflict`,
              cause: event,
              spanId: invocationSpanId(id),
              data: { invocation_id: id, agent: agent.name, run_id: report.run_id, branch: report.branch, files: conflicts, detail: report.merge!.detail },
            },
          ),
        );
      }
      const merged = report.merge ? report.merge.merged : null;
      // The final answer as the run's redaction left it, judged as the run judged it.
      const verdict = this.structuredOutput(agent)?.check(report.final_message) ?? null;
      const output = verdict?.valid ? verdict.output : null;
      if (report.status === "failed" && report.reason === "output_invalid") {
        await bus.publish(
          this.event(
            { kind: "orchestrator" },
            {
              type: "agency.needs_human",
              subject: agent.name,
              id: `${id}-needs-human`,
              cause: event,
              data: {
                invocation_id: id,
                agent: agent.name,
                run_id: report.run_id,
                reason: "output_invalid",
                problems: verdict?.valid === false ? verdict.errors : [],
              },
            },
          ),
        );
      }
      // Safe outputs: what the agent emitted goes out only once its work has landed (succeeded, and merged when it wrote).
      const emitted = directory.outbox(id);
      const landed = report.status === "succeeded" && merged !== false;
      const { deliver, refused } = landed ? withinHops(emitted, record.definition.max_hops) : { deliver: [], refused: emitted };
      for (const queued of deliver) await bus.publish(queued);
      await this.publishFinished(
        this.event(
          { kind: "orchestrator" },
          {
            type: "agency.invocation.finished",
            subject: agent.name,
            id: `${id}-finished`,
            cause: event,
            spanId: invocationSpanId(id),
            time: new Date(this.clock.now()),
            data: {
              invocation_id: id,
              agent: agent.name,
              event_id: event.id,
              status: report.status,
              reason: report.reason,
              run_id: report.run_id,
              commit: report.head_commit,
              branch: report.branch,
              merged,
              emitted: deliver.map((queued) => queued.type),
              discarded: refused.map((queued) => queued.type),
              output,
              ...(fallbackFor === null ? {} : { fallback_for: fallbackFor }),
            },
          },
        ),
      );
      const finished = {
        // A remote invocation redelivered to another worker ends in another run than the one it started with.
        run_id: report.run_id,
        worker: this.invocations.get(id)?.worker ?? null,
        status: report.status,
        reason: report.reason ?? null,
        cost_usd: report.cost_usd,
        duration_ms: report.duration_ms,
        commit: report.head_commit,
        merged,
        output,
      };
      // An invocation serving a stopped chain's event (an agent that tells a person) stops nothing more: a
      // stop of its own would wake it again, without end.
      const stop =
        event.type === CHAIN_STOPPED
          ? null
          : landed && refused.length
            ? hopsExhausted({ agent: agent.name, invocationId: id, runId: report.run_id, served: event, refused, maxHops: record.definition.max_hops })
            : invocationStop({
                agent: agent.name,
                invocationId: id,
                served: event,
                outcome: { ...report, merged },
                unapprovedCalls: this.approvals.unapprovedCalls(id),
                continues: agents.some((other) => other.triggers.some((pattern) => triggerMatches(pattern, "agency.invocation.finished"))),
              });
      if (stop) await this.stopChain(stop, event, `${id}-stopped`);
      directory.appendInvocation({ kind: "finished", invocation_id: id, ...finished, time: new Date().toISOString() });
      Object.assign(this.invocations.get(id)!, finished);
      this.budget.finished(id);
      await bus.ack(consumerName(consumer), delivery.sequence);
      await this.change(agent.name, { kind: "invocation_ended", crashed: report.status === "error", running: this.running.get(agent.name)! });
    } finally {
      this.inFlight.delete(id);
      this.invocationEvents.delete(id);
    }
  }

  /** Publishes an `agency.invocation.finished` event and folds it into the breakers (which may publish a transition). */
  private async publishFinished(event: AgencyEvent): Promise<void> {
    await this.options.bus.publish(event);
    await this.breakers.observe(event);
  }

  private async runInvocation(agent: AgentDefinition, delivery: Delivery, id: string, known: InvocationRecord | undefined): Promise<RunReport | null> {
    const { record, directory } = this.options;
    const event = delivery.event;
    const writes = writesWorkspace(agent, record.definition.mode);
    this.invocationEvents.set(id, event);
    // One trace: the run's events hang under the invocation's span, an emitted event under its tool call's.
    const trace = { traceId: record.trace_id, parentSpanId: invocationSpanId(id) };
    const emit = (emitted: AgencyEvent) => directory.addToOutbox(id, emitted);
    const hostTools = invocationTools({
      agencyId: record.agency_id,
      traceId: record.trace_id,
      invocationId: id,
      agent,
      context: record.definition.context,
      cause: event,
      emit,
      ...(agent.policies.rate_limit?.events_per_minute === undefined
        ? {}
        : { beforeEmit: (signal: AbortSignal) => this.rateLimits.beforeEmit(agent, id, signal) }),
    });
    const gate = this.rateLimits.gateFor(agent, id);
    const checkFinalAnswer = this.structuredOutput(agent)?.checkFinalAnswer;
    const embedding = {
      hostTools,
      readOnlyWorkspace: !writes,
      trace,
      baseBranch: record.branch,
      ...(writes ? { mergeInto: record.branch } : {}),
      ...(checkFinalAnswer ? { checkFinalAnswer } : {}),
      ...(gate ? { gate } : {}),
    };
    const approvals = this.approvals.brokerFor({ invocationId: id, agent: agent.name, event });
    const request = (task: Record<string, unknown>): InvocationRequest => ({
      agencyId: record.agency_id,
      traceId: record.trace_id,
      invocationId: id,
      agent,
      event,
      context: record.definition.context,
      task,
      embedding,
      emit,
      signal: this.runs.signal,
      ...(approvals ? { approvals } : {}),
    });
    const earlier = [...this.invocations.values()].filter((invocation) => invocation.agent === agent.name && invocation.invocation_id !== id).length;
    const task = () => invocationTask(record.definition, agent, event, directory.policyFile(agent.name), earlier, this.budget.capFor(agent.model.max_cost_usd));
    if (known) {
      try {
        return await this.guarded(id, agent, event, await this.executor.resume(known.run_id, request(task())));
      } catch (error) {
        // The run ended before the process died, but its end was not recorded: take its report.
        const ended = error instanceof ConfigError ? endedReport(this.options.runner.home, known.run_id) : null;
        if (ended) return ended;
        // A run that cannot be resumed (killed before its agent started, its branch gone) is started anew below.
        if (!(error instanceof ConfigError)) throw error;
      }
    }
    const run = await this.executor.start(request(task()));
    // Recorded before the agent's first model call (the run has only made its directory): a crash from here resumes this run.
    directory.appendInvocation({
      kind: "started",
      invocation_id: id,
      agent: agent.name,
      event_id: event.id,
      event_type: event.type,
      sequence: delivery.sequence,
      run_id: run.id,
      ...(run.worker === null ? {} : { worker: run.worker }),
      time: new Date().toISOString(),
    });
    this.invocations.set(id, {
      invocation_id: id,
      agent: agent.name,
      event_id: event.id,
      event_type: event.type,
      sequence: delivery.sequence,
      run_id: run.id,
      worker: run.worker,
      status: "running",
      reason: null,
      cost_usd: null,
      duration_ms: null,
      commit: null,
      merged: null,
      output: null,
    });
    this.linkRun(run.directory, agent, id, event);
    return this.guarded(id, agent, event, run);
  }

  /** The run's side of the link (`<run>/agency.json`): which agency, agent and event it served. */
  private linkRun(runDirectory: string, agent: AgentDefinition, id: string, event: AgencyEvent): void {
    mkdirSync(runDirectory, { recursive: true, mode: 0o700 });
    writeFileSync(
      join(runDirectory, "agency.json"),
      `${JSON.stringify({ agency_id: this.options.record.agency_id, agent: agent.name, invocation_id: id, event_id: event.id, event_type: event.type }, null, 2)}\n`,
    );
  }

  /**
   * The run's report, its cost counted against the budget while it runs and its refused `confirm` calls
   * recorded (a local run's; an agency on workers has neither, remoteInvocationProblems). Null: cancelled.
   */
  private async guarded(id: string, agent: AgentDefinition, event: AgencyEvent, run: InvocationRun): Promise<RunReport | null> {
    const handle = run.handle;
    if (handle) this.budget.follow(id, handle);
    const gated = this.options.record.definition.confirm.length > 0 || agent.confirm.length > 0;
    const approvals = gated && handle ? this.approvals.follow({ invocationId: id, agent: agent.name, event }, handle) : Promise.resolve();
    void approvals.catch(() => undefined);
    const report = await run.result;
    await approvals;
    const known = this.invocations.get(id);
    if (known && report && report.run_id && report.run_id !== known.run_id)
      this.linkRun(join(this.options.runner.home, "runs", report.run_id), agent, id, event);
    if (known) known.worker = run.worker;
    return report;
  }

  /** Publishes `agency.chain.stopped` for `stop` (id `id`, caused by `cause`): the chain it ends says why (guards/stop-reasons.ts). */
  private async stopChain(stop: ChainStop, cause: AgencyEvent, id: string): Promise<void> {
    const stopped = this.event({ kind: "orchestrator" }, { type: CHAIN_STOPPED, ...(stop.agent ? { subject: stop.agent } : {}), id, cause, data: stop });
    await this.options.bus.publish(stopped);
    this.stops.observe(stopped);
  }

  /** The output check of `agent` (its `output_schema` compiled once), or null when it has none. */
  private structuredOutput(agent: AgentDefinition): StructuredOutput | null {
    if (!agent.output_schema) return null;
    let structured = this.structuredOutputs.get(agent.name);
    if (!structured) this.structuredOutputs.set(agent.name, (structured = new StructuredOutput(agent.output_schema)));
    return structured;
  }

  /** Moves `agent` through its lifecycle, one `agency.agent.state` event per new state. */
  private async change(agent: string, change: LifecycleChange): Promise<void> {
    for (const next of lifecycleTransitions(this.states.get(agent) ?? "spawn", change)) {
      const previous = this.states.get(agent) ?? null;
      this.states.set(agent, next);
      await this.publishState(agent, next, previous);
    }
  }

  private async publishState(agent: string, state: AgentState, previous: AgentState | null): Promise<void> {
    await this.options.bus.publish(
      this.event(
        { kind: "orchestrator" },
        { type: "agency.agent.state", subject: agent, data: { agent, state, previous, running: this.running.get(agent) ?? 0 } },
      ),
    );
  }

  /** Ends the agency as quiescent when nothing is left: every event read and acked by every agent, no invocation running. */
  private async settle(): Promise<void> {
    if (this.checking) {
      this.checkAgain = true;
      return;
    }
    this.checking = true;
    try {
      do {
        this.checkAgain = false;
        if (this.outcome !== null) {
          if (this.inFlight.size === 0 && this.work.size === 0) this.ended();
          return;
        }
        if (await this.quiescent()) {
          const quiet = this.stops.quiescentOutcome();
          this.end(quiet.status, quiet.reason, false);
        }
      } while (this.checkAgain);
    } catch (error) {
      this.end("error", `the bus: ${errorMessage(error)}`, true);
    } finally {
      this.checking = false;
    }
  }

  private async quiescent(): Promise<boolean> {
    if (this.inFlight.size > 0 || this.work.size > 0) return false;
    const { bus, record } = this.options;
    const next = await bus.nextSequence();
    if (this.watched < next) return false;
    for (const agent of record.definition.agents) if ((await bus.ackFloor(consumerName(agent.name))) < next) return false;
    return this.inFlight.size === 0 && this.work.size === 0 && (await bus.nextSequence()) === next;
  }

  private event(publisher: Publisher, fields: Parameters<typeof agencyEvent>[2]): AgencyEvent {
    return agencyEvent({ agencyId: this.options.record.agency_id, traceId: this.options.record.trace_id }, publisher, fields);
  }

  private async report(outcome: { status: AgencyStatus; reason: string }, durationMs: number): Promise<AgencyReport> {
    const { record, bus, directory } = this.options;
    const head = await branchHead(record.definition.workspacePath, record.branch).catch(() => null);
    // Stops of earlier attempts the log reader had not reached when the agency ended.
    try {
      for await (const stored of bus.read({ from: 0, follow: false })) this.stops.observe(stored.event);
    } catch {
      // A bus that failed ended the agency `error`: the stops seen so far are reported.
    }
    const { definition } = record;
    const report: AgencyReport = {
      agency_id: record.agency_id,
      name: record.definition.name,
      status: outcome.status,
      reason: outcome.reason,
      goal: record.definition.goal,
      branch: record.branch,
      head_commit: head,
      events: await bus.nextSequence().catch(() => 0),
      duration_ms: durationMs,
      mode: definition.mode,
      max_hops: definition.max_hops,
      budget: definition.budget ? { max_cost_usd: definition.budget.max_cost_usd, spent_usd: roundUsd(this.budget.spent()) } : null,
      stop: this.stops.outcome(outcome.status, outcome.reason),
      stops: this.stops.all,
      invocations: [...this.invocations.values()].map((invocation) => ({
        invocation_id: invocation.invocation_id,
        agent: invocation.agent,
        event_id: invocation.event_id,
        event_type: invocation.event_type,
        run_id: invocation.run_id,
        worker: invocation.worker,
        status: invocation.status,
        reason: invocation.reason,
        cost_usd: invocation.cost_usd,
        duration_ms: invocation.duration_ms,
        commit: invocation.commit,
        merged: invocation.merged,
        output: invocation.output,
      })),
    };
    directory.writeJson("agency-report.json", report);
    return report;
  }
}

/** The report of run `runId` when it has ended (succeeded, failed, error), else null. */
function endedReport(home: string, runId: string): RunReport | null {
  const file = join(home, "runs", runId, "report.json");
  if (!existsSync(file)) return null;
  const report = JSON.parse(readFileSync(file, "utf8")) as RunReport;
  return report.status === "cancelled" ? null : report;
}
