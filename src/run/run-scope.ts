import type { RunEmbedding } from "./run-embedding.js";
import { errorMessage } from "../errors.js";
import { SessionJournal } from "../agent/session-journal.js";
import type { Task } from "../config/load-task.js";
import { CloudEventLog } from "../events/cloud-event-log.js";
import { EventFanout, type EventSink } from "../events/run-events.js";
import { addLogRedactor, createLogger, type LogSettings, type Logger } from "../logging/logger.js";
import { emptyUsage } from "../model/messages.js";
import { configuredModelId, pricingOf, type Pricing } from "../model/pricing.js";
import { parseAllowEntry, type AllowRule } from "../sandbox/network-allow-list.js";
import { loadPolicy } from "../policy/load-policy.js";
import type { Policy } from "../policy/policy-schema.js";
import { redactorFor, type Redactor } from "../redaction/redactor.js";
import { commitLimitsOf, type CommitLimits } from "../workspace/commit-selection.js";
import { runPaths } from "../workspace/run-disk.js";
import { reportCounter } from "./report-counter.js";
import type { RunReport } from "./run-report.js";
import { RunStore } from "./run-store.js";
import type { ResumableRun } from "./resumable-run.js";
import { readRunEvents } from "../events/event-log-reader.js";
import { RunBudget, startTimeLimit } from "./run-limits.js";

/**
 * Everything one run owns, and nothing another run can see: its task (with
 * the policy's defaults), policies, redactor, event fan-out (redacted on the
 * way to every record), CloudEvents log, session journal, report, clean-up
 * stack and signal. The phases of a run (src/run/phases/) take it instead of
 * reaching for process-global state, so runs share a process safely.
 */
export interface RunScope {
  readonly runId: string;
  /** Where a front end places the run ({} for a plain run). */
  readonly embedding: RunEmbedding;
  readonly traceId: string;
  /** The span the run's events hang under (RunEmbedding.trace.parentSpanId), or null for a span of the run's own. */
  readonly parentSpanId: string | null;
  readonly store: RunStore;
  /** Where the run's worktree, workers, verify checkouts and sandbox scratch go (on the run's disk). */
  readonly paths: ReturnType<typeof runPaths>;
  /** The earlier attempt this run continues (`runner resume`), or null for a new run. */
  readonly resume: ResumableRun | null;
  /** The validated task with its policy's defaults filled in. */
  readonly task: Task;
  readonly policies: { readonly main: Policy; readonly explore: Policy; readonly worker: Policy };
  readonly commitLimits: CommitLimits;
  /** Host variables the task may pass in (`sandbox.pass_env`, `secret_env`). */
  readonly hostEnvironment: NodeJS.ProcessEnv;
  readonly redactor: Redactor;
  /** Every event of the run: redacted on the way to events.jsonl and the subscribers; the report's counters read it as is. */
  readonly events: EventFanout;
  readonly log: CloudEventLog;
  /** The run's diagnostic log (pino JSON lines, bound to its run id), redacted with its own redactor. */
  readonly logger: Logger;
  readonly journal: SessionJournal;
  /** The report as it is being filled; written by the finalize phase. */
  readonly report: RunReport;
  /** The caller's cancellation (Ctrl-C, `RunHandle.cancel`). */
  readonly callerSignal: AbortSignal;
  /** Aborted when a monitored disk limit stops the run (the agent's doing: `failed`, not cancelled). */
  readonly diskStop: AbortController;
  /** Aborted when the attempt has run `timeout_sec` (`failed` / `timed_out`, not cancelled). */
  readonly timeStop: AbortController;
  /** Stops the `timeout_sec` timer (before clean-up, which must not be cut short). */
  cancelTimeLimit(): void;
  /** How the run's model calls are priced (report.json `pricing`). */
  readonly pricing: Pricing;
  /** `model.max_cost_usd`, asked by every agent before each model call. */
  readonly budget: RunBudget;
  /** The caller's signal, the disk stop or the time limit: what every phase waits on. */
  readonly signal: AbortSignal;
  readonly cleanup: CleanupStack;
  /** Date.now() when the run (this attempt) began, ms. */
  readonly started: number;
  /** Takes the run's redactor off the process's loggers: the last thing a run does. */
  releaseLogRedactor(): void;
  /** Redacts a value's strings with the run's redactor. */
  redactDeep<T>(value: T): T;
}

export interface RunScopeOptions {
  embedding: RunEmbedding;
  task: Task;
  runId: string;
  traceId: string;
  parentSpanId: string | null;
  runDirectory: string;
  resume: ResumableRun | null;
  signal: AbortSignal;
  hostEnvironment: NodeJS.ProcessEnv;
  /** Extra live consumer of run events (the terminal view). */
  events?: EventSink;
  /** Receives every CloudEvents line as written. */
  onEnvelope?: (line: string) => void;
  /** Where the run's diagnostic log goes. */
  logSettings?: LogSettings;
}

/**
 * Opens a run's scope: loads its policies (ConfigError for a bad policy),
 * adds its redactor to the process's loggers (until `releaseLogRedactor`),
 * opens events.jsonl and the session journal, and builds the report with the
 * earlier attempts' counters when resuming.
 */
export function openRunScope(options: RunScopeOptions): RunScope {
  const { runId, traceId, resume } = options;
  // The task's policy (a shipped name or a file outside the repository) and the ones subagents get.
  const main = loadPolicy(options.task.policy).policy;
  const explore = loadPolicy(options.task.subagents.explore_policy).policy;
  const worker = options.task.subagents.worker_policy ? loadPolicy(options.task.subagents.worker_policy).policy : main;
  const task = withPolicyDefaults(options.task, main);
  const store = new RunStore(options.runDirectory);
  const redactor = redactorFor(task, options.hostEnvironment);
  const redactDeep = <T>(value: T): T => redactor.redactDeep(value);
  const releaseLogRedactor = addLogRedactor(redactor);
  const log = new CloudEventLog(store.path("events"), runId, traceId, { parentSpanId: options.parentSpanId });
  log.onEnvelope = options.onEnvelope ?? null;
  // Every record of an event (events.jsonl, --json, the terminal view that ends up in CI logs)
  // gets it redacted, once; the report's counters read the event as it is.
  const records = new EventFanout().add(log);
  if (options.events) records.add(options.events);
  const events = new EventFanout().add({ emit: (event) => records.emit(redactor.isEmpty ? event : redactDeep(event)) });
  const pricing = pricingOf(task.model, configuredModelId(task.model, options.hostEnvironment));
  const report = emptyReport(task, runId, traceId, main, resume, pricing);
  const counter = reportCounter(report);
  // A resumed run reports the whole run: the earlier attempts' events count too.
  if (resume) for (const event of readRunEvents(store.path("events"))) counter.emit(event);
  events.add(counter);
  const diskStop = new AbortController();
  const timeStop = new AbortController();
  const started = Date.now();
  const cancelTimeLimit = startTimeLimit(task.timeout_sec, timeStop, report, events, started);
  return {
    runId,
    embedding: options.embedding,
    traceId,
    parentSpanId: options.parentSpanId,
    store,
    paths: runPaths(options.runDirectory),
    resume,
    task,
    policies: { main, explore, worker },
    commitLimits: commitLimitsOf(task.commit),
    hostEnvironment: options.hostEnvironment,
    redactor,
    events,
    log,
    logger: createLogger({ component: "run", run_id: runId, trace_id: traceId }, { redactor, ...options.logSettings }),
    journal: new SessionJournal(store.path("journal"), redactDeep),
    report,
    callerSignal: options.signal,
    diskStop,
    timeStop,
    cancelTimeLimit,
    pricing,
    budget: new RunBudget(report, task.model.max_cost_usd, events, started),
    signal: AbortSignal.any([options.signal, diskStop.signal, timeStop.signal]),
    cleanup: new CleanupStack(),
    releaseLogRedactor,
    started,
    redactDeep,
  };
}

function emptyReport(task: Task, runId: string, traceId: string, policy: Policy, resume: ResumableRun | null, pricing: Pricing): RunReport {
  return {
    run_id: runId,
    trace_id: traceId,
    task: task.name,
    status: "error",
    reason: "not_started",
    error: null,
    verify: null,
    commit: null,
    branch: null,
    base_commit: null,
    head_commit: null,
    patch: null,
    final_message: null,
    steps: 0,
    tool_calls: 0,
    usage: emptyUsage(),
    cost_usd: pricing.prices ? 0 : null,
    pricing,
    prefix_stable_ratio: null,
    context: { context_window: task.model.context_window, requests: 0, max_request_tokens: 0, cleared: 0, compactions: 0, compaction_failures: 0, repairs: 0 },
    resumes: (resume?.lock.resumes ?? 0) + (resume ? 1 : 0),
    // The earlier attempts' events are counted again into these (createRunScope replays them): start them at zero.
    agents: (resume?.previousAgents ?? []).map((agent) => ({ ...agent, steps: 0, tool_calls: 0, usage: emptyUsage(), cost_usd: pricing.prices ? 0 : null })),
    merge: null,
    policy: policy.name,
    denials: {},
    network: {},
    disk: null,
    instructions_files: null,
    duration_ms: 0,
  };
}

/** The task with the policy's defaults filled in: its network allow-list when the task names no host. */
function withPolicyDefaults(task: Task, policy: Policy): Task {
  if (task.sandbox.network.allow.length > 0 || policy.network.allow.length === 0) return task;
  const rules = policy.network.allow.map((entry) => parseAllowEntry(entry)).filter((rule): rule is AllowRule => typeof rule !== "string");
  return { ...task, sandbox: { ...task.sandbox, network: { ...task.sandbox.network, allow: rules } } };
}

/**
 * A run's clean-up: what each phase opened, undone in reverse order when the
 * run ends (like testcontainers' and TC39's AsyncDisposableStack, which
 * Node 20 lacks). A step that throws becomes a `cleanup.failed` event and the
 * others still run.
 */
export class CleanupStack {
  private readonly steps: { what: string; action: () => unknown }[] = [];

  /** Adds a step, run before every step deferred earlier. `what` names it in a `cleanup.failed` event. */
  defer(what: string, action: () => unknown): void {
    this.steps.push({ what, action });
  }

  /** Runs the steps, last deferred first, each once; failures also go to `logger` at warn. */
  async run(events: EventSink, logger?: Logger): Promise<void> {
    for (let step = this.steps.pop(); step; step = this.steps.pop()) {
      try {
        await step.action();
      } catch (error) {
        events.emit({ type: "cleanup.failed", data: { what: step.what, error: errorMessage(error) } });
        logger?.warn({ err: error, what: step.what }, "clean-up failed");
      }
    }
  }
}
