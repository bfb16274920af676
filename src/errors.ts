/**
 * Fatal errors of a run. Each carries the process exit code of `runner exec`
 * (DESIGN.md "Outcomes"): they are caught only in `cli/`. Anything the model
 * can fix (bad arguments, denial, timeout) is a tool result, never one of these.
 */
export class RunnerError extends Error {
  /** Exit code `runner` ends with when this error reaches the CLI. */
  readonly exitCode: number;
  constructor(message: string, exitCode: number, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.exitCode = exitCode;
  }
}

/** Bad task file, bad arguments, bad workspace: exit 2, nothing was started. */
export class ConfigError extends RunnerError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, 2, options);
  }
}

/** Docker, git or another piece of infrastructure failed: exit 3. */
export class SandboxError extends RunnerError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, 3, options);
  }
}

/** The model endpoint failed after retries, or the scripted model refused: exit 3. */
export class ModelError extends RunnerError {
  /** Short machine-readable reason for report.json, e.g. `rate_limited`, `script_expectation_failed`. */
  readonly reason: string;
  constructor(message: string, reason: string, options?: { cause?: unknown }) {
    super(message, 3, options);
    this.reason = reason;
  }
}

/** The user interrupted the run (SIGINT/SIGTERM): exit 130. */
export class CancelledError extends RunnerError {
  constructor(message = "interrupted") {
    super(message, 130);
  }
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
