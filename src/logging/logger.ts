import pino from "pino";

/**
 * The runner's diagnostic log: JSON lines on stderr (fd 2), so stdout stays
 * for the human view or `--json` events. Level from RUNNER_LOG_LEVEL
 * (default `warn`). Secrets are redacted by key wherever they appear.
 */
export function createLogger(bindings: Record<string, string> = {}) {
  return pino(
    {
      level: process.env.RUNNER_LOG_LEVEL ?? "warn",
      base: bindings,
      redact: { paths: ["apiKey", "*.apiKey", "authorization", "*.authorization", "OPENAI_API_KEY", "*.OPENAI_API_KEY"], censor: "[redacted]" },
    },
    pino.destination(2),
  );
}

