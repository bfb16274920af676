import { checkAgencyEvent, newTraceId } from "../bus/agency-event.js";
import type { AgencyEvent } from "../bus/event-bus.js";
import { ConfigError } from "../errors.js";
import { newRunId } from "../run/run-id.js";
import { createRunner as createPlainRunner, type ApprovalBroker, type Runner, type RunnerOptions } from "../runner/runner.js";
import { createBranch, resolveRepository } from "../workspace/run-worktree.js";
import { AgencyBus } from "./agency-bus.js";
import { AgencyDirectory, type AgencyRecord, type AgencyReport } from "./agency-directory.js";
import { agencyEvent } from "./agency-event.js";
import { EVENT_TYPE } from "./agency-schema.js";
import type { AgencyClock } from "./guards/clock.js";
import { remoteInvocationProblems, type InvocationExecutor } from "./invocation-executor.js";
import { AgencyFileError, loadAgency, type AgencyDefinition } from "./load-agency.js";
import { Orchestrator } from "./orchestrator.js";
import { otlpTracesEnabled } from "./trace/otlp-enabled.js";
import { createLogger } from "../logging/logger.js";

/** An event from outside the agency (the CLI's `--event` and `publish`, the library's `publish`). */
export interface OutsideEvent {
  type: string;
  subject?: string;
  data?: unknown;
  dataref?: string;
  /** Your own id makes a retried publish dedupe; default a random UUID. */
  id?: string;
}

export interface AgencyOptions {
  /** Aborting it cancels the agency as Ctrl-C does (status `cancelled`, resumable). */
  signal?: AbortSignal;
  /** An event published when the agency starts, after its `start` ones (`--event TYPE --data JSON`). */
  event?: OutsideEvent;
  /** Where relative paths of an agency object resolve (default the current directory). */
  baseDirectory?: string;
  /**
   * Who approves the calls of the agency's `confirm` tools (docs/agency.md "Human gates: confirm"): one
   * question at a time, each also an `agency.approval.requested` / `resolved` event. Absent: nobody is asked
   * and the policy refuses those calls, saying so. Not recorded: give it to `resumeAgency` again.
   */
  approvals?: ApprovalBroker;
  /** The clock the guards decide by (breaker cooldowns, token buckets; src/agency/guards/clock.ts): default the wall clock; a test's moves by hand. */
  clock?: AgencyClock;
  /**
   * Where the invocations run (src/agency/invocation-executor.ts). Default: this Runner's process for `bus: file`;
   * the `runner worker`s of `pool` for `bus: nats://…` (through {@link AgencyRunnerOptions.invocationsOnWorkers}).
   * An executor whose `where` is `workers` refuses the guards that cannot follow a run to a worker (exit 2).
   * Not recorded: give it to `resumeAgency` again.
   */
  executor?: InvocationExecutor;
}

/** {@link RunnerOptions} and how an agency with `bus: nats://…` reaches its workers. */
export interface AgencyRunnerOptions extends RunnerOptions {
  /**
   * Opens the executor of an agency whose `bus` is `nats://…` (the pool's `runner worker`s): the package entry's
   * createRunner gives src/worker/nats-invocations.ts. Absent: such an agency is refused (exit 2). `close` is
   * called when the agency ends.
   */
  invocationsOnWorkers?: (agency: { servers: string; pool: string; home: string }) => Promise<InvocationExecutor & { close(): Promise<void> }>;
}

/** One agency started or resumed (docs/agency.md "Library"). */
export interface AgencyHandle {
  /** The agency id (`<date>-<time>-<random>`); work lands on `agency/<id>`. */
  readonly id: string;
  /** `$RUNNER_HOME/agencies/<id>/`. */
  readonly directory: string;
  /** The agency's CloudEvents from sequence `from` (default 0): what is in the log, then live ones; ends when the agency ends. */
  events(options?: { from?: number }): AsyncIterable<AgencyEvent>;
  /**
   * Publishes an outside event (source `…/outside`, hops 0); resolves with its sequence. Throws
   * EventRejectedError for a refused one. After the agency ended the event waits in the log for a resume.
   */
  publish(event: OutsideEvent): Promise<number>;
  /** agency-report.json's object, for every outcome (succeeded, failed, error, cancelled). */
  readonly result: Promise<AgencyReport>;
  /** Cancels as Ctrl-C does: running invocations are cancelled (their work committed); `runner agency resume` goes on. Resolves when it has ended. */
  cancel(): Promise<void>;
}

/** A Runner that also runs agencies: `runner.agency(pathOrObject, options)`. */
export type AgencyRunner = Runner & {
  /**
   * Starts the agency of `agency.yaml`'s path or object. Rejects with
   * AgencyFileError (a ConfigError, exit 2) naming every bad file and field
   * before anything is created.
   */
  agency(source: string | Record<string, unknown>, options?: AgencyOptions): Promise<AgencyHandle>;
  /** Resumes agency `id` (after Ctrl-C, a crash, or to process events published while it was idle). */
  resumeAgency(id: string, options?: Omit<AgencyOptions, "event" | "baseDirectory">): Promise<AgencyHandle>;
};

/**
 * {@link createPlainRunner createRunner} whose Runner also runs agencies; the package entry's `createRunner`
 * (src/worker/agency-runner.ts) is this one with `invocationsOnWorkers` given.
 */
export async function createRunner(options: AgencyRunnerOptions = {}): Promise<AgencyRunner> {
  const { invocationsOnWorkers, ...runnerOptions } = options;
  const runner = await createPlainRunner(runnerOptions);
  const workers = invocationsOnWorkers ?? null;
  return Object.assign(runner, {
    agency: (source: string | Record<string, unknown>, agencyOptions: AgencyOptions = {}) => startAgency(runner, workers, source, agencyOptions),
    resumeAgency: (id: string, agencyOptions: Omit<AgencyOptions, "event" | "baseDirectory"> = {}) => resumeAgency(runner, workers, id, agencyOptions),
  });
}

type WorkersOpener = NonNullable<AgencyRunnerOptions["invocationsOnWorkers"]>;

/** Starts an agency on `runner` (see {@link AgencyRunner.agency}). */
async function startAgency(
  runner: Runner,
  workers: WorkersOpener | null,
  source: string | Record<string, unknown>,
  options: AgencyOptions = {},
): Promise<AgencyHandle> {
  checkApprovals(options.approvals);
  const definition = await loadAgency(source, options.baseDirectory);
  checkExecutor(definition, options.executor);
  if (options.event) checkOutsideEvent(options.event, "event");
  const agencyId = newRunId();
  const repository = await resolveRepository(definition.workspacePath);
  const record: AgencyRecord = {
    agency_id: agencyId,
    trace_id: newTraceId(),
    branch: `agency/${agencyId}`,
    created_at: new Date().toISOString(),
    definition,
  };
  await createBranch(repository.root, record.branch, repository.head);
  const directory = AgencyDirectory.of(runner.home, agencyId);
  directory.create(record);
  const startEvents = [
    ...definition.start.map((event, index) => ({ ...event, id: event.id ?? `${agencyId}-start-${index}` })),
    ...(options.event ? [{ ...options.event, id: options.event.id ?? `${agencyId}-event` }] : []),
  ];
  return launch(runner, workers, directory, record, startEvents, options);
}

/** Resumes agency `id` on `runner` (see {@link AgencyRunner.resumeAgency}). ConfigError for an unknown agency or one another process runs. */
async function resumeAgency(
  runner: Runner,
  workers: WorkersOpener | null,
  id: string,
  options: Omit<AgencyOptions, "event" | "baseDirectory"> = {},
): Promise<AgencyHandle> {
  checkApprovals(options.approvals);
  const directory = AgencyDirectory.existing(runner.home, id);
  const record = directory.readRecord();
  checkExecutor(record.definition, options.executor);
  return launch(runner, workers, directory, record, [], options);
}

/** An executor on workers takes no guard it cannot carry there: AgencyFileError (exit 2) naming each (remoteInvocationProblems). */
function checkExecutor(definition: AgencyDefinition, executor: InvocationExecutor | undefined): void {
  if (executor !== undefined && typeof (executor as { start?: unknown } | null)?.start !== "function")
    throw new ConfigError("executor: expected an InvocationExecutor, an object with start(request) and resume(runId, request)");
  if (executor?.where !== "workers") return;
  const problems = remoteInvocationProblems(definition, definition.file ?? "agency");
  if (problems.length) throw new AgencyFileError(problems);
}

async function launch(
  runner: Runner,
  workers: WorkersOpener | null,
  directory: AgencyDirectory,
  record: AgencyRecord,
  startEvents: { type: string; subject?: string; data?: unknown; id: string }[],
  { signal, approvals, clock, executor: given }: Pick<AgencyOptions, "signal" | "approvals" | "clock" | "executor">,
): Promise<AgencyHandle> {
  const access = AgencyBus.of(directory, record);
  const logger = createLogger({ component: "agency", agency_id: record.agency_id });
  const bus = await access.openAsOwner({ onWait: (reason) => logger.warn(`the bus: ${reason}`) });
  let opened: (InvocationExecutor & { close(): Promise<void> }) | null = null;
  try {
    opened = given ? null : await invocationsOf(record, workers, runner.home);
  } catch (error) {
    await bus.close();
    throw error;
  }
  const executor = given ?? opened ?? undefined;
  const controller = new AbortController();
  const stop = signal ? AbortSignal.any([signal, controller.signal]) : controller.signal;
  const orchestrator = new Orchestrator({
    runner,
    bus,
    record,
    directory,
    signal: stop,
    startEvents,
    ...(approvals ? { approvals } : {}),
    ...(clock ? { clock } : {}),
    ...(executor ? { executor } : {}),
  });
  let ended = false;
  const result = orchestrator
    .run()
    .finally(async () => {
      await bus.close();
      await opened?.close();
      ended = true;
    })
    .then(async (report) => {
      // OpenTelemetry (opt-in): the trace as the records hold it, sent before the result resolves, so a CLI exits with it sent.
      if (!otlpTracesEnabled(process.env)) return report;
      const problem = await (await import("./trace/otlp-export.js")).exportAgencyTrace(directory, runner.home);
      if (problem) logger.warn(problem);
      return report;
    });
  const context = { agencyId: record.agency_id, traceId: record.trace_id };
  return {
    id: record.agency_id,
    directory: directory.path,
    result,
    async *events(options = {}) {
      // The bus, followed until the agency has ended: then what is left in it, and the end.
      const over = new AbortController();
      void result.finally(() => over.abort()).catch(() => undefined);
      let next = options.from ?? 0;
      for await (const stored of access.read({ from: next, follow: true, signal: over.signal })) {
        next = stored.sequence + 1;
        yield stored.event;
      }
      for await (const stored of access.read({ from: next, follow: false })) yield stored.event;
    },
    async publish(event) {
      checkOutsideEvent(event, "event");
      const outside = agencyEvent(context, { kind: "outside" }, event);
      checkAgencyEvent(outside);
      // After the end the event waits in the log for `resumeAgency`.
      return ended ? access.publish(outside) : bus.publish(outside);
    },
    async cancel() {
      controller.abort();
      await result.catch(() => undefined);
    },
  };
}

/**
 * The executor of an agency with `bus: nats://…`: the pool's workers, opened by `workers`. Null (this Runner's
 * process) for `bus: file`, and for a Runner made without `invocationsOnWorkers`: this layer's own createRunner,
 * which tests and embedders use to keep invocations in-process on a NATS bus. The package entry's and the CLI's
 * createRunner (src/worker/agency-runner.ts) always has it, so there `bus: nats://…` means workers.
 */
async function invocationsOf(
  record: AgencyRecord,
  workers: WorkersOpener | null,
  home: string,
): Promise<(InvocationExecutor & { close(): Promise<void> }) | null> {
  const { bus, pool } = record.definition;
  if (bus === "file" || !workers) return null;
  return workers({ servers: bus, pool, home });
}

/** Checks an outside event's fields; ConfigError naming the field. */
export function checkOutsideEvent(event: OutsideEvent, field: string): void {
  if (typeof event?.type !== "string" || !EVENT_TYPE.test(event.type)) {
    throw new ConfigError(
      `${field}.type: expected an event type of dot-separated lower-case words, like coding.task.received, got ${JSON.stringify(event?.type)}`,
    );
  }
  if (event.type.startsWith("agency.")) throw new ConfigError(`${field}.type: agency.* events are the orchestrator's own; use another prefix`);
}

/** ConfigError (exit 2) for an `approvals` that is not an ApprovalBroker, before anything of the agency is created. */
function checkApprovals(approvals: unknown): void {
  if (approvals !== undefined && typeof (approvals as { request?: unknown } | null)?.request !== "function") {
    throw new ConfigError("approvals: expected an ApprovalBroker, an object with a request(approval, signal) method");
  }
}
