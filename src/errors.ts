/**
 * Fatal errors of a run. Each carries the process exit code of `runner exec`
 * (DESIGN.md "Outcomes") and the `reason` report.json gives for it: they are
 * caught only in `cli/`. Anything the model can fix (bad arguments, denial,
 * timeout) is a tool result, never one of these.
 */
export class RunnerError extends Error {
  /** Exit code `runner` ends with when this error reaches the CLI. */
  readonly exitCode: number;
  /**
   * What failed, as report.json `reason` and a batch's outcome name it: a
   * snake_case word such as `image_missing` or `docker_unreachable`, never
   * a class name (the message says the rest: what, and the fix).
   */
  readonly reason: string;
  constructor(message: string, exitCode: number, options: { cause?: unknown; reason: string }) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.exitCode = exitCode;
    this.reason = options.reason;
  }
}

/** Bad task file, bad arguments, bad workspace: exit 2, nothing was started. Reason `invalid_task` unless given. */
export class ConfigError extends RunnerError {
  constructor(message: string, options?: { cause?: unknown; reason?: string }) {
    super(message, 2, { ...options, reason: options?.reason ?? "invalid_task" });
  }
}

/**
 * Docker, git or another piece of infrastructure failed: exit 3. `reason`
 * names what (`image_missing`, `docker_unreachable`, `sandbox_start_failed`,
 * `git_failed`, ...); `sandbox_failed` when nothing more precise applies.
 */
export class SandboxError extends RunnerError {
  constructor(message: string, options?: { cause?: unknown; reason?: string }) {
    super(message, 3, { ...options, reason: options?.reason ?? "sandbox_failed" });
  }
}

/** The model endpoint failed after retries, or the scripted model refused: exit 3; `reason` e.g. `rate_limited`, `script_expectation_failed`. */
export class ModelError extends RunnerError {
  constructor(message: string, reason: string, options?: { cause?: unknown }) {
    super(message, 3, { ...options, reason });
  }
}

/** The user interrupted the run (SIGINT/SIGTERM): exit 130. */
export class CancelledError extends RunnerError {
  constructor(message = "interrupted") {
    super(message, 130, { reason: "interrupted" });
  }
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
