import { setMaxListeners } from "node:events";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { loadTaskFile, validateTask, type Task } from "../config/load-task.js";
import { CancelledError, ConfigError, RunnerError } from "../errors.js";
import type { ModelCallPurpose, ModelClient } from "../model/model-client.js";
import { openModel as openTaskModel } from "./open-model.js";
import { RateLimitGates } from "../model/rate-limit-gate.js";
import type { ApprovalAnswer } from "../policy/approval.js";
import type { ApprovalQuestion } from "../run/permission-guard.js";
import type { RunReport } from "../run/run-report.js";
import type { RunEmbedding } from "../run/run-embedding.js";
import type { Tool } from "../tools/define-tool.js";
import {
  finalAnswerOf,
  findContinuableRun,
  findResumableRun,
  resumeRun,
  runTask,
  type RunDependencies,
  type RunOptions,
  type RunResult,
} from "../run/run-task.js";
import { DockerSandboxProvider } from "../sandbox/docker/docker-sandbox-provider.js";
import type { SandboxProvider } from "../sandbox/sandbox.js";
import { RunStore } from "../run/run-store.js";
import { reverifyRun, type Reverified } from "../run/reverify-run.js";
import { mergeRun } from "../run/merge-run.js";
import type { UserMergeOutcome } from "../workspace/merge.js";
import type { LogSettings } from "../logging/logger.js";
import { branchHead, resolveRepository } from "../workspace/run-worktree.js";
import type { RunEnvelope } from "../events/event-catalogue.js";
import { readEnvelopes } from "../events/event-log-reader.js";
import { EventReplay } from "./event-replay.js";
import { checkTaskModel } from "./check-script.js";
import { prepareImage, prepareRun, sweepDeadRunLeftovers } from "./prepare-run.js";
import { diskEnforcementChoice, runnerHome } from "./runner-home.js";
import { configuredModelId, formatUsd, pricingOf, roundUsd } from "../model/pricing.js";
import { redactorFor, type Redactor } from "../redaction/redactor.js";
import { StreamedTextRedactor } from "../redaction/streamed-text.js";

/**
 * A question the policy asks before a call it rates `confirm` (README
 * "Policies"): the run, the call (agent, tool call id, tool, the command or
 * path the rule matched), the rule and its reason, the question in words as
 * the terminal prompt shows it, and whether "always" is allowed.
 */
export interface ApprovalRequest extends ApprovalQuestion {
  runId: string;
  /**
   * Set when the run is an agency's invocation (src/agency/guards/agency-approvals.ts
   * fills it): which agency, agent and invocation ask, so an inbox can show
   * it next to the run. Absent for a run started on its own.
   */
  agency?: ApprovalAgency;
}

/** The agency invocation a question comes from (docs/agency.md "Human gates: confirm"). */
export interface ApprovalAgency {
  /** The agency id (`<date>-<time>-<random>`). */
  agencyId: string;
  /** The agent's name. */
  agent: string;
  /** The invocation id (`<agent>-<12 hex>`). */
  invocationId: string;
}

/**
 * Decides approval questions of a run: the terminal prompt, a programmatic
 * answerer (tests, a server), or nobody (absent: the policy's `confirmations`
 * decides). `signal` aborts when the run stops waiting (cancelled, or the
 * call's deadline); an answer after that is ignored.
 */
export interface ApprovalBroker {
  request(approval: ApprovalRequest, signal: AbortSignal): Promise<ApprovalAnswer>;
  /**
   * True when the broker holds several open questions at once and each is
   * answered on its own (an inbox: `runner serve`, `runner mcp`). Absent or
   * false (a terminal prompt): a caller that asks for many runs at once (an
   * agency) puts its questions to it one at a time.
   */
  readonly concurrent?: boolean;
}

export interface RunnerOptions {
  /** RUNNER_HOME: runs go to `<home>/runs/<run-id>/`. Default `$RUNNER_HOME`, else `~/.runner`. */
  home?: string;
  /**
   * Where sandboxes come from. Default: Docker (checked at each start). With
   * any provider, the first start or resume sweeps runs whose runner died:
   * their worktrees committed and removed once `ensureWorkspaceIdle` allows.
   */
  sandboxProvider?: SandboxProvider;
  /**
   * Opens a task's model. Default: the task's provider (a scripted server, or
   * the provider's client).
   */
  openModel?: (task: Task) => Promise<{ client: ModelClient; close(): Promise<void> }>;
  /**
   * With the default `openModel`: the runs of this Runner that reach the same
   * endpoint with the same key share its rate limit (docs/batch.md "Model rate
   * limits"): a 429's retry-after pauses them all, and waits on 429/529 are
   * bounded by 10 minutes in total instead of `model.max_retries`. `runner
   * batch` turns it on. Default false: each call backs off alone.
   */
  sharedRateLimits?: boolean;
  /** Host environment for `sandbox.pass_env`/`secret_env` and the model's keys. Default `process.env`. */
  environment?: NodeJS.ProcessEnv;
  /**
   * Where the runner's diagnostic log goes: pino JSON lines (default fd 2, level RUNNER_LOG_LEVEL else `warn`).
   * Each run logs through a logger of its own, bound to its run id and redacted with its own redactor.
   */
  log?: LogSettings;
}

export interface StartOptions {
  /** Aborting it cancels the run (as Ctrl-C does). */
  signal?: AbortSignal;
  /** Who answers approval questions; absent: the policy's `confirmations` decides. */
  approvals?: ApprovalBroker;
  /** Fast-forward the user's branch after a verified success (`on_success: merge`). */
  merge?: boolean;
  /**
   * Called with each piece of model text as it streams in (task.yaml
   * `model.stream`), for a live display: it is not an event, is never
   * written to events.jsonl (pieces would bloat the log; the whole reply is
   * in `model_call.finished`), and does not replay. Pieces of an attempt that
   * then fails belong to that attempt: a piece with a higher `attempt` starts
   * the reply over. Called synchronously from the model client, so keep it
   * quick; what it throws is ignored (a display must not fail the model call).
   */
  onModelText?: (text: ModelText) => void;
  /**
   * Where a front end places the run (src/run/run-embedding.ts): the branch
   * its worktree starts from, the branch its success is merged into, tools the
   * host runs for it, a read-only workspace. Give the same to `resume`: it is
   * not recorded with the run. `mergeInto` and `merge` exclude each other.
   */
  embedding?: RunEmbedding;
}

export type { RunEmbedding } from "../run/run-embedding.js";

/** One piece of streamed model text ({@link StartOptions.onModelText}). */
export interface ModelText {
  /** `main` or a subagent's id. */
  agentId: string;
  /** The 0-based model call (`step` in the events); for a summary, the 0-based compaction. */
  step: number;
  /** `turn`, or `compaction` for a summary of the conversation. */
  purpose: ModelCallPurpose;
  /** 0-based attempt of that call (retries count up). */
  attempt: number;
  /**
   * The new text, to append to what this attempt already sent: redacted with
   * the run's secrets (as its records are), and held back until no secret
   * can start in it (`StreamedTextRedactor` in src/redaction/streamed-text.ts:
   * the last characters of a reply arrive only in its `model_call.finished`).
   */
  delta: string;
}

/** One run started or resumed by a {@link Runner}. */
export interface RunHandle {
  /** The run id (`<date>-<time>-<random>`), known once `start` resolves. */
  readonly id: string;
  /** `<home>/runs/<id>/`: report.json, events.jsonl, patch.diff, ... */
  readonly directory: string;
  /** The validated task the run carries out (as task.json holds it; for a resumed run, the recorded task). */
  readonly task: Task;
  /**
   * The run's CloudEvents, exactly the lines of events.jsonl, from sequence
   * number `from` (the line index, default 0): what happened, then live;
   * ends when the run ends. Any number of subscribers, each at any time.
   */
  events(options?: { from?: number }): AsyncIterable<RunEnvelope>;
  /** The report.json object; resolves for every outcome the run reports (failed and error included). */
  readonly result: Promise<RunReport>;
  /** Cancels the run the way Ctrl-C does (status `cancelled`, partial work committed); resolves when it has ended. */
  cancel(reason?: string): Promise<void>;
  /** For a resumed run: the model call it goes on from (1-based) and how many events earlier attempts wrote (this attempt's start from there); null for a new run. */
  readonly resumed: { atModelCall: number; earlierEvents: number } | null;
}

/**
 * The run core as a library (docs/library.md "Library"): start tasks, follow their
 * events, cancel and resume them, from one process, concurrently. Each run
 * has its own event stream, redaction (its secrets never reach another
 * run's records or the shared log in clear) and clean-up.
 *
 * `runner exec` and `runner resume` drive one. A run is five phases over a
 * run scope (src/run/run-task.ts).
 */
export class Runner {
  /** Every run this runner launched that has not ended, from before it has an id. */
  private readonly active = new Set<{ controller: AbortController; finished: Promise<unknown> }>();
  private sweep: Promise<void> | null = null;
  private closed = false;

  private constructor(
    readonly home: string,
    private readonly provider: SandboxProvider,
    private readonly openModel: (task: Task) => Promise<{ client: ModelClient; close(): Promise<void> }>,
    private readonly environment: NodeJS.ProcessEnv,
    private readonly log: LogSettings,
  ) {}

  /** See {@link createRunner}. */
  static create(options: RunnerOptions = {}): Runner {
    const environment = options.environment ?? process.env;
    const home = runnerHome(options.home ? { ...environment, RUNNER_HOME: options.home } : environment);
    // The runs see this runner's home (e.g. the user skills under <home>/skills), whatever RUNNER_HOME says.
    const runEnvironment = { ...environment, RUNNER_HOME: home };
    const provider = options.sandboxProvider ?? new DockerSandboxProvider({ egressNetwork: environment.RUNNER_EGRESS_NETWORK });
    // One rate limit per endpoint and key for all of this runner's runs (a batch's tasks).
    const gates = options.sharedRateLimits ? new RateLimitGates() : undefined;
    return new Runner(home, provider, options.openModel ?? ((task) => openTaskModel(task, environment, gates)), runEnvironment, options.log ?? {});
  }

  /**
   * Starts a task: a task.yaml path, or a task object of the same schema
   * (relative paths against the current directory). Resolves once the run
   * exists (its id and directory). Rejects with ConfigError (bad task, exit 2)
   * or SandboxError (Docker or the image unusable, exit 3) before anything of
   * a run is created.
   */
  async start(task: string | Record<string, unknown>, options: StartOptions = {}): Promise<RunHandle> {
    return this.startTask(typeof task === "string" ? loadTaskFile(task) : validateTask(task, null, process.cwd()), options);
  }

  /** {@link start} for a task already validated (`loadTaskFile`, `validateTask`): the CLI's ad-hoc tasks. */
  async startTask(task: Task, options: StartOptions = {}): Promise<RunHandle> {
    // A workspace that is not a repository's top level with a commit is the task's problem: ConfigError, before any run exists.
    const repository = await resolveRepository(task.workspacePath);
    if (options.embedding?.baseBranch !== undefined) await branchHead(repository.root, options.embedding.baseBranch);
    if (options.embedding?.mergeInto !== undefined) await branchHead(repository.root, options.embedding.mergeInto);
    if (task.model.max_cost_usd !== undefined) this.checkBudgetPriced(task, "model.max_cost_usd");
    const validated: Task = options.merge ? { ...task, on_success: "merge" } : task;
    return this.launch(validated, options, null, null, (prepared, dependencies, runOptions) => runTask(prepared, dependencies, runOptions));
  }

  /**
   * Continues an interrupted, crashed or errored run, or one stopped at its
   * step limit, budget or time limit (as `runner resume`); its earlier events
   * replay from events.jsonl. `maxSteps`: that many more model calls from
   * where it stopped (required for a run stopped at max_steps). `maxCostUsd`:
   * that many more USD from what the run has spent (required for a run
   * stopped at its budget). `timeoutSec`: this attempt's wall-clock limit
   * (`timeout_sec`; without it the run's own applies again). Raised limits
   * are the run's from then on (task.json). Rejects with ConfigError when the
   * run cannot be resumed, saying why.
   */
  async resume(runId: string, options: StartOptions & { maxSteps?: number; maxCostUsd?: number; timeoutSec?: number } = {}): Promise<RunHandle> {
    checkResumeLimits(options);
    // Sweep first: a run whose runner died gets its worktree committed before it is looked at.
    await this.prepareOnce(null);
    const run = findResumableRun(this.home, runId);
    const made = run.restored.nextStep;
    if (run.stoppedAt === "budget_exceeded" && options.maxCostUsd === undefined) {
      throw new ConfigError(
        `run ${run.runId} stopped at its budget (spent ${run.spentUsd === null ? "?" : formatUsd(run.spentUsd)} of model.max_cost_usd ${formatUsd(run.task.model.max_cost_usd ?? 0)}); continue it with --max-cost USD (USD more)`,
      );
    }
    if (options.maxCostUsd !== undefined) this.checkBudgetPriced(run.task, "--max-cost");
    if (options.maxCostUsd !== undefined && run.spentUsd === null) {
      throw new ConfigError(`--max-cost: run ${run.runId} has model calls without a cost (a runner that did not price them): its spending is unknown`);
    }
    // `maxCostUsd` more from what the run has spent.
    const maxCostUsd = options.maxCostUsd === undefined ? undefined : roundUsd(run.spentUsd! + options.maxCostUsd);
    if (run.stoppedAt === "max_steps" && !options.maxSteps) {
      throw new ConfigError(
        `run ${run.runId} stopped at its step limit (${made} model calls, max_steps ${run.task.max_steps}); continue it with --max-steps N (N more model calls)`,
      );
    }
    // `maxSteps` more model calls from where the run stopped.
    const maxSteps = options.maxSteps ? made + options.maxSteps : undefined;
    // A run that already has its final answer needs no model call, only commit and verification.
    if (finalAnswerOf(run.restored) === undefined && (maxSteps ?? run.task.max_steps) <= made) {
      throw new ConfigError(
        `run ${run.runId} already made ${made} of its ${run.task.max_steps} model calls (max_steps); continue it with --max-steps N (N more model calls)`,
      );
    }
    await resolveRepository(run.task.workspacePath);
    const earlier = readEnvelopes(new RunStore(run.runDirectory).path("events"));
    const resumed = { atModelCall: run.restored.nextStep + 1, earlierEvents: earlier.length };
    const limits = {
      ...(maxSteps ? { maxSteps } : {}),
      ...(maxCostUsd === undefined ? {} : { maxCostUsd }),
      ...(options.timeoutSec ? { timeoutSec: options.timeoutSec } : {}),
    };
    return this.launch(run.task, options, earlier, resumed, (prepared, dependencies, runOptions) =>
      resumeRun({ ...run, task: prepared }, dependencies, { ...runOptions, ...limits }),
    );
  }

  /**
   * Talks back to an ended run (`runner continue <run-id> "message"`): a new
   * attempt of the same run, on its branch, in a new sandbox, with the
   * conversation so far plus `message` as the user's next turn; then commit,
   * verification and delivery as for any run, the report counting the whole
   * run (`resumes` + 1; the attempt's first event is `run.resumed` with
   * `follow_up`). Works on a run that ended succeeded, failed, error or
   * cancelled. The attempt gets the run's limits again from where it stands:
   * `maxSteps` more model calls (default the run's `max_steps`), `maxCostUsd`
   * more USD than the run has spent (default its `model.max_cost_usd`, when it
   * has one), `timeoutSec` for the attempt (default its `timeout_sec`); the
   * raised limits are the run's from then on (task.json). `merge`
   * fast-forwards the user's branch after a verified success, as for `start`.
   * Rejects with ConfigError for an empty message, an unknown run, one still
   * running, or one whose agent never started.
   */
  async continue(
    runId: string,
    message: string,
    options: StartOptions & { maxSteps?: number; maxCostUsd?: number; timeoutSec?: number } = {},
  ): Promise<RunHandle> {
    if (typeof message !== "string" || message.trim() === "") {
      throw new ConfigError('message: expected your feedback for the run as text, e.g. runner continue <run-id> "also handle negative numbers"');
    }
    checkResumeLimits(options);
    // Sweep first: a run whose runner died gets its report (and its worktree committed) before it is looked at.
    await this.prepareOnce(null);
    const run = findContinuableRun(this.home, runId, message);
    const made = run.restored.nextStep;
    const extraUsd = options.maxCostUsd ?? run.task.model.max_cost_usd;
    if (extraUsd !== undefined) {
      this.checkBudgetPriced(run.task, options.maxCostUsd === undefined ? "model.max_cost_usd" : "--max-cost");
      if (run.spentUsd === null) {
        throw new ConfigError(
          `run ${run.runId} has model calls without a cost (a runner that did not price them): its spending is unknown, so no budget can be set`,
        );
      }
    }
    await resolveRepository(run.task.workspacePath);
    const task: Task = {
      ...run.task,
      max_steps: made + (options.maxSteps ?? run.task.max_steps),
      ...(options.merge ? { on_success: "merge" as const } : {}),
    };
    const earlier = readEnvelopes(new RunStore(run.runDirectory).path("events"));
    const resumed = { atModelCall: made + 1, earlierEvents: earlier.length };
    const limits = {
      maxSteps: task.max_steps,
      ...(extraUsd === undefined ? {} : { maxCostUsd: roundUsd(run.spentUsd! + extraUsd) }),
      ...(options.timeoutSec ? { timeoutSec: options.timeoutSec } : {}),
    };
    return this.launch(task, options, earlier, resumed, (prepared, dependencies, runOptions) =>
      resumeRun({ ...run, task: prepared }, dependencies, { ...runOptions, ...limits }),
    );
  }

  /**
   * Verifies an ended run's commit again, with no model call (regrading; src/run/reverify-run.ts):
   * the task's image is made ready first (pulled, or built from `sandbox.build` as it is now). Rejects
   * with ConfigError for an unknown or unfinished run, SandboxError when Docker or the image is unusable.
   */
  async reverify(runId: string, options: { signal?: AbortSignal } = {}): Promise<Reverified> {
    if (!/^[\w.-]+$/.test(runId) || !existsSync(join(this.home, "runs", runId))) throw new ConfigError(`no run ${runId} in ${this.home}/runs`);
    await this.prepareOnce(null);
    const directory = join(this.home, "runs", runId);
    let task = new RunStore(directory).readJson("task") as Task | null;
    if (!task) throw new ConfigError(`run ${runId} has no task.json; it cannot be verified again`);
    if (this.provider instanceof DockerSandboxProvider) task = await prepareImage(task, this.provider);
    return reverifyRun(directory, this.provider, {
      task,
      environment: this.environment,
      enforcement: diskEnforcementChoice(this.environment),
      signal: options.signal ?? new AbortController().signal,
    });
  }

  /**
   * Fast-forwards the user's branch to an ended, verified run's commit, as
   * `--merge` would have at the end of the run (src/run/merge-run.ts): a
   * refusal (not verified, a branch that moved, uncommitted changes) is an
   * outcome with its reason, not an error. Rejects with ConfigError for an
   * unknown or unfinished run.
   */
  async merge(runId: string): Promise<UserMergeOutcome> {
    if (!/^[\w.-]+$/.test(runId) || !existsSync(join(this.home, "runs", runId))) throw new ConfigError(`no run ${runId} in ${this.home}/runs`);
    return mergeRun(join(this.home, "runs", runId));
  }

  /**
   * Sweeps what runs of this RUNNER_HOME left when their runner died (their
   * containers, networks and disks; their worktrees committed and removed once
   * `ensureWorkspaceIdle` allows): the sweep the first start or resume does,
   * done now. Once per Runner; later calls (and starts) wait for the same
   * sweep. `runner worker` calls it at startup, so a worker killed with
   * `kill -9` cleans up after itself when it comes back, before it takes a task.
   */
  async sweepLeftovers(): Promise<void> {
    await this.prepareOnce(null);
  }

  /** A budget needs prices: ConfigError naming `field` when the task's model has none (a cost the runner cannot know cannot stop it). */
  private checkBudgetPriced(task: Task, field: string): void {
    const pricing = pricingOf(task.model, configuredModelId(task.model, this.environment));
    if (!pricing.prices) throw new ConfigError(`${field}: a budget needs the model's prices, and ${pricing.unpriced}`);
  }

  /** Cancels every run this runner started that is still going and waits until each has ended. */
  async close(): Promise<void> {
    this.closed = true;
    // Runs still starting (no handle yet) are cancelled too: nothing this runner began outlives close().
    await Promise.all(
      [...this.active].map(async ({ controller, finished }) => {
        controller.abort(new CancelledError("the runner was closed"));
        await finished.catch(() => undefined);
      }),
    );
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /**
   * The pre-flight ({@link prepareRun} for Docker; the model and script check,
   * {@link checkTaskModel}, for any other provider) and, once per Runner, the
   * sweep; returns the task with the image its run uses.
   */
  private async prepareOnce<T extends Task | null>(task: T, hostTools: readonly Tool[] = []): Promise<T> {
    if (task && !(this.provider instanceof DockerSandboxProvider)) checkTaskModel(task, this.environment, hostTools);
    const prepared = (task && this.provider instanceof DockerSandboxProvider ? await prepareRun(task, this.provider, this.environment, hostTools) : task) as T;
    // One sweep per Runner, and every start and resume waits for it: a resume must not reopen a worktree the sweep is committing.
    this.sweep ??= sweepDeadRunLeftovers(this.provider, this.home, this.log);
    await this.sweep;
    return prepared;
  }

  private async launch(
    task: Task,
    options: StartOptions,
    earlier: RunEnvelope[] | null,
    resumed: RunHandle["resumed"],
    /** Runs the task as the pre-flight left it (its image pulled or built). */
    run: (task: Task, dependencies: RunDependencies, runOptions: RunOptions) => Promise<RunResult>,
  ): Promise<RunHandle> {
    checkStartOptions(options);
    if (this.closed) throw new RunnerError("this Runner is closed; create another one", 2, { reason: "runner_closed" });
    if (options.signal?.aborted) throw new CancelledError("the start signal was already aborted");
    const prepared = await this.prepareOnce(task, options.embedding?.hostTools);
    if (this.closed) throw new RunnerError("this Runner was closed while the run was starting; nothing of it was created", 2, { reason: "runner_closed" });
    if (options.signal?.aborted) throw new CancelledError("the start signal was aborted");
    const controller = new AbortController();
    const signal = options.signal ? AbortSignal.any([options.signal, controller.signal]) : controller.signal;
    setMaxListeners(0, signal); // one abort listener per concurrent tool call and model call
    const replay = new EventReplay();
    for (const envelope of earlier ?? []) replay.push(envelope);
    let created: (value: { id: string; directory: string }) => void;
    const identified = new Promise<{ id: string; directory: string }>((resolve) => (created = resolve));
    const broker = options.approvals;
    let runId = "";
    const finished = run(
      prepared,
      {
        sandboxProvider: this.provider,
        openModel: options.onModelText ? withModelText(this.openModel, options.onModelText, redactorFor(prepared, this.environment)) : this.openModel,
        runnerHome: this.home,
        diskEnforcement: diskEnforcementChoice(this.environment),
        log: this.log,
      },
      {
        signal,
        hostEnvironment: this.environment,
        onRunCreated: (id, directory) => {
          runId = id;
          created({ id, directory });
        },
        onEnvelope: (line) => replay.push(JSON.parse(line) as RunEnvelope),
        ...(broker ? { askApproval: (question: ApprovalQuestion, askSignal: AbortSignal) => broker.request({ runId, ...question }, askSignal) } : {}),
        ...(options.embedding ? { embedding: options.embedding } : {}),
      },
    ).finally(() => replay.end());
    const entry = { controller, finished };
    this.active.add(entry);
    finished.catch(() => undefined).finally(() => this.active.delete(entry));
    // A failure before the run exists (a bad workspace, a policy that will not load) rejects start().
    const { id, directory } = await Promise.race([identified, finished.then(() => identified)]);
    const result = finished.then((outcome) => outcome.report);
    return {
      id,
      directory,
      task,
      events: (subscription = {}) => replay.subscribe(subscription.from ?? 0),
      result,
      resumed,
      async cancel(reason = "cancelled") {
        controller.abort(new CancelledError(reason));
        await result.catch(() => undefined);
      },
    };
  }
}

/**
 * A {@link Runner}: `home` is RUNNER_HOME (created if missing; ConfigError
 * when it cannot be a writable directory); the sandbox provider, the model
 * opener and the host environment are injectable (tests, other backends).
 */
export async function createRunner(options: RunnerOptions = {}): Promise<Runner> {
  return Runner.create(options);
}

/**
 * `openModel` whose clients also hand each request's streamed text to
 * `listener`, after the request's own `onText`: redacted with the run's
 * secrets and held back as {@link StreamedTextRedactor} does, one stream per
 * agent and purpose (a new step or attempt starts it over).
 */
function withModelText(
  openModel: (task: Task) => Promise<{ client: ModelClient; close(): Promise<void> }>,
  listener: (text: ModelText) => void,
  redactor: Redactor,
): (task: Task) => Promise<{ client: ModelClient; close(): Promise<void> }> {
  return async (task) => {
    const opened = await openModel(task);
    const { client } = opened;
    const streams = new Map<string, { step: number; attempt: number; text: StreamedTextRedactor }>();
    return {
      close: () => opened.close(),
      client: {
        complete: (request) =>
          client.complete({
            ...request,
            onText: (delta, attempt) => {
              request.onText?.(delta, attempt);
              const purpose = request.purpose ?? "turn";
              const key = `${request.agentId} ${purpose}`;
              let stream = streams.get(key);
              if (!stream || stream.step !== request.callIndex || stream.attempt !== attempt) {
                stream = { step: request.callIndex, attempt, text: new StreamedTextRedactor(redactor) };
                streams.set(key, stream);
              }
              const shown = stream.text.append(delta);
              if (!shown) return;
              try {
                listener({ agentId: request.agentId, step: request.callIndex, purpose, attempt, delta: shown });
              } catch {
                // A display's failure is not the model call's.
              }
            },
          }),
      },
    };
  };
}

/** The limits `resume` raises, checked like start options. */
function checkResumeLimits(options: { maxSteps?: number; maxCostUsd?: number; timeoutSec?: number }): void {
  const { maxSteps, maxCostUsd, timeoutSec } = options;
  if (maxSteps !== undefined && !(Number.isInteger(maxSteps) && maxSteps > 0))
    throw new ConfigError(`maxSteps: expected a positive whole number, got ${maxSteps}`);
  if (maxCostUsd !== undefined && !(typeof maxCostUsd === "number" && maxCostUsd > 0 && Number.isFinite(maxCostUsd)))
    throw new ConfigError(`maxCostUsd: expected a positive number of USD, got ${maxCostUsd}`);
  if (timeoutSec !== undefined && !(typeof timeoutSec === "number" && timeoutSec > 0 && timeoutSec <= 7 * 24 * 3600))
    throw new ConfigError(`timeoutSec: expected seconds from 1 to 604800, got ${timeoutSec}`);
}

/** Start options as a caller may get them wrong: each checked, ConfigError naming it. */
function checkStartOptions(options: StartOptions): void {
  if (options.approvals !== undefined && typeof (options.approvals as { request?: unknown } | null)?.request !== "function") {
    throw new ConfigError("approvals: expected an ApprovalBroker, an object with a request(approval, signal) method");
  }
  if (options.merge !== undefined && typeof options.merge !== "boolean")
    throw new ConfigError(`merge: expected true or false, got ${JSON.stringify(options.merge)}`);
  if (options.signal !== undefined && !(options.signal instanceof AbortSignal)) throw new ConfigError("signal: expected an AbortSignal");
  if (options.onModelText !== undefined && typeof options.onModelText !== "function")
    throw new ConfigError("onModelText: expected a function (text: ModelText) => void");
  const embedding = options.embedding;
  if (embedding === undefined) return;
  for (const field of ["baseBranch", "mergeInto"] as const) {
    const value = embedding[field];
    if (value !== undefined && !(typeof value === "string" && /^[\w.-]+(\/[\w.-]+)*$/.test(value) && !value.includes("..")))
      throw new ConfigError(`embedding.${field}: expected a branch name like agency/20261201-221500-ab12, got ${JSON.stringify(value)}`);
  }
  if (embedding.mergeInto !== undefined && options.merge)
    throw new ConfigError("embedding.mergeInto and merge: give one (merge fast-forwards your checked-out branch)");
  if (embedding.hostTools !== undefined && !(Array.isArray(embedding.hostTools) && embedding.hostTools.every((tool) => typeof tool?.execute === "function")))
    throw new ConfigError("embedding.hostTools: expected an array of tools (defineTool)");
  if (embedding.checkFinalAnswer !== undefined && typeof embedding.checkFinalAnswer !== "function")
    throw new ConfigError("embedding.checkFinalAnswer: expected a function (answer: string) => string[] | null");
  const trace = embedding.trace as { traceId?: unknown; parentSpanId?: unknown } | undefined;
  if (trace !== undefined) {
    // W3C Trace Context: ids are lower-case hex, never all zero.
    if (typeof trace?.traceId !== "string" || !/^(?!0{32})[0-9a-f]{32}$/.test(trace.traceId))
      throw new ConfigError(`embedding.trace.traceId: expected 32 lower-case hex digits (a W3C trace id), got ${JSON.stringify(trace?.traceId)}`);
    if (typeof trace.parentSpanId !== "string" || !/^(?!0{16})[0-9a-f]{16}$/.test(trace.parentSpanId))
      throw new ConfigError(`embedding.trace.parentSpanId: expected 16 lower-case hex digits (a W3C span id), got ${JSON.stringify(trace.parentSpanId)}`);
  }
}
