import pino from "pino";
import type { Redactor } from "../redaction/redactor.js";
import { terminalSafeJson } from "../terminal-text.js";

/** Where a Runner's diagnostic log goes (RunnerOptions `log`): a pino destination and level. */
export interface LogSettings {
  /** Default: fd 2. */
  destination?: pino.DestinationStream;
  /** Default: RUNNER_LOG_LEVEL, else `warn`. */
  level?: string;
}

/** A diagnostic logger made by {@link createLogger}. */
export type Logger = pino.Logger;

export interface LoggerOptions {
  /** Redacts this logger's lines (in addition to the runs' ones added with {@link addLogRedactor}). */
  redactor?: Redactor | null;
  /** Where lines go (default: fd 2). */
  destination?: pino.DestinationStream;
  /** Default: RUNNER_LOG_LEVEL, else `warn`. */
  level?: string;
}

/** The redactors of the runs active in this process; every log line gets all of them. */
const active = new Set<Redactor>();

/**
 * Adds a run's redactor to every logger made by {@link createLogger}, loggers
 * created earlier included, until the returned function removes it. Runs that
 * share the process each add their own, and a line is redacted with all of
 * them: one run's secrets never reach the shared log in clear because another
 * run started or ended.
 */
export function addLogRedactor(redactor: Redactor): () => void {
  active.add(redactor);
  return () => {
    active.delete(redactor);
  };
}

/**
 * Redacts one serialized pino line. The line is parsed and every string in it
 * redacted (message, merged objects, serialized errors, bindings), so tokens
 * after JSON escapes such as `\n` are found too; keys are kept.
 */
function redactLine(line: string, redactors: Redactor[]): string {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    // not a JSON line (cannot happen with pino's serializer): redact it as text
    return redactors.reduce((text, redactor) => redactor.redact(text), line);
  }
  for (const redactor of redactors) value = redactor.redactDeep(value);
  return `${JSON.stringify(value)}\n`;
}

/**
 * The runner's diagnostic log: JSON lines on stderr (fd 2), so stdout stays
 * for the human view or `--json` events. Level from RUNNER_LOG_LEVEL
 * (default `warn`). Secrets are redacted by key wherever they appear, and by
 * value (every string of every line) through the redactors of the active
 * runs ({@link addLogRedactor}) and `options.redactor`.
 */
export function createLogger(bindings: Record<string, string> = {}, options: LoggerOptions = {}): Logger {
  const own = options.redactor ?? null;
  return pino(
    {
      level: options.level ?? process.env.RUNNER_LOG_LEVEL ?? "warn",
      base: bindings,
      redact: { paths: ["apiKey", "*.apiKey", "authorization", "*.authorization", "OPENAI_API_KEY", "*.OPENAI_API_KEY"], censor: "[redacted]" },
      hooks: {
        streamWrite(line: string): string {
          const redactors: Redactor[] = [];
          if (own && !own.isEmpty) redactors.push(own);
          for (const redactor of active) if (!redactor.isEmpty && redactor !== own) redactors.push(redactor);
          // stderr is a terminal: characters JSON leaves raw (C1, DEL, bidi overrides) are written as \u escapes.
          return terminalSafeJson(redactors.length === 0 ? line : redactLine(line, redactors));
        },
      },
    },
    options.destination ?? pino.destination(2),
  );
}
