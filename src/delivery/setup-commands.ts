import { ConfigError, RunnerError } from "../errors.js";
import type { EventSink } from "../events/run-events.js";
import type { ExecResult, Sandbox } from "../sandbox/sandbox.js";

/** Wall-clock limit of one `sandbox.setup` command, ms (30 min: a dependency install on a slow mirror). */
const SETUP_COMMAND_TIMEOUT_MS = 30 * 60 * 1000;
/** Characters of a command's output kept in its event, in report.json and in a verification's output. */
const OUTPUT_TAIL_CHARACTERS = 4000;

/** Which sandbox ran the setup: the main agent's before its first step, or a verification's clean checkout. */
export type SetupPhase = "agent" | "verify";

/** How one setup command ended; `output_tail` is stdout then stderr, cut to the last 4000 characters. */
export interface SetupCommandResult {
  command: string;
  exit_code: number | null;
  timed_out: boolean;
  duration_ms: number;
  output_tail: string;
}

/**
 * A `sandbox.setup` command failed in the agent's sandbox, before the agent
 * started: the task's environment is unusable, so the run ends `error` with
 * reason `setup_failed` (exit 3). The message names the command, its exit
 * and the tail of its output.
 */
export class SetupFailedError extends RunnerError {
  /** `note`: a line after the output, e.g. the offline hint. */
  constructor(
    readonly result: SetupCommandResult,
    note: string | null = null,
  ) {
    super(
      `sandbox.setup command ${JSON.stringify(result.command)} ${result.timed_out ? `timed out after ${SETUP_COMMAND_TIMEOUT_MS / 1000} s` : `exited ${result.exit_code ?? "without a code (killed)"}`}; ${note ? "see the note after its output" : "fix the command or the image"}. Its output:\n${result.output_tail}${note ? `\nnote: ${note}` : ""}`,
      3,
      { reason: "setup_failed" },
    );
  }
}

/** Exit codes bash gives a command it cannot run: 126 found but not executable, 127 not found (bash(1), "EXIT STATUS"). */
export const UNRUNNABLE_EXIT_CODES: ReadonlySet<number> = new Set([126, 127]);

/**
 * Why the task cannot start when its setup failed (`results` as
 * {@link runSetupCommands} returned them, the last one failed): a command
 * bash could not run (exit 126 or 127: a program that is not in the image)
 * is the task's mistake, a ConfigError (reason `task_invalid`, exit 2)
 * naming `sandbox.setup[i]`; any other failure is the environment's,
 * {@link SetupFailedError}, with the note `networkHint` gives for its output
 * (a sandbox without network that could not resolve a name: `offlineHintFor`).
 */
export function setupFailure(results: readonly SetupCommandResult[], networkHint: (output: string) => string | null = () => null): RunnerError {
  const failed = results.at(-1)!;
  const index = results.length - 1;
  if (!failed.timed_out && failed.exit_code !== null && UNRUNNABLE_EXIT_CODES.has(failed.exit_code)) {
    return new ConfigError(
      `sandbox.setup[${index}]: ${JSON.stringify(failed.command)} exited ${failed.exit_code} (${failed.exit_code === 127 ? "command not found" : "not executable"}) in the task's image: ` +
        `fix the command in the task file, or use an image that has its program. Nothing was sent to the model. Its output:\n${failed.output_tail}`,
      { reason: "task_invalid" },
    );
  }
  return new SetupFailedError(failed, networkHint(failed.output_tail));
}

/**
 * Runs the task's `sandbox.setup` commands in order, each by bash in the
 * workspace root of `sandbox` as the sandbox user, under its limits, and
 * stops at the first that does not exit 0. Each is recorded by a
 * `setup.started` and a `setup.finished` event. Returns every result and the
 * failed one (null when all passed). Throws SandboxError only when the
 * sandbox itself fails; an aborted `signal` kills the running command, which
 * then counts as failed (the caller checks the signal). `env` is added to
 * each command's environment (the verification's Python settings).
 */
export async function runSetupCommands(
  sandbox: Sandbox,
  commands: readonly string[],
  options: { phase: SetupPhase; agentId: string; events: EventSink; signal: AbortSignal; env?: Record<string, string> },
): Promise<{ results: SetupCommandResult[]; failed: SetupCommandResult | null }> {
  const results: SetupCommandResult[] = [];
  for (const [index, command] of commands.entries()) {
    options.events.emit({ type: "setup.started", data: { agent_id: options.agentId, phase: options.phase, index, command } });
    const executed = await sandbox.exec({ command, timeoutMs: SETUP_COMMAND_TIMEOUT_MS, signal: options.signal, ...(options.env ? { env: options.env } : {}) });
    const result = resultOf(command, executed);
    results.push(result);
    options.events.emit({
      type: "setup.finished",
      data: { agent_id: options.agentId, phase: options.phase, index, ...result, output_tail: result.output_tail.slice(-1000) },
    });
    if (executed.exitCode !== 0 || executed.timedOut) return { results, failed: result };
  }
  return { results, failed: null };
}

function resultOf(command: string, executed: ExecResult): SetupCommandResult {
  const output = `${executed.stdout}${executed.stderr ? `${executed.stdout && !executed.stdout.endsWith("\n") ? "\n" : ""}${executed.stderr}` : ""}`;
  return {
    command,
    exit_code: executed.exitCode,
    timed_out: executed.timedOut,
    duration_ms: executed.durationMs,
    output_tail: output.slice(-OUTPUT_TAIL_CHARACTERS),
  };
}
