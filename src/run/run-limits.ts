import type { EventSink } from "../events/run-events.js";
import type { RunReport } from "./run-report.js";

/**
 * `model.max_cost_usd`: the run's budget, read against report.json
 * `cost_usd` (every model call of the run, earlier attempts', subagents' and
 * compactions' included, as the report counter sums them). The agents ask
 * {@link spent} before each model call; the first time it is true the run
 * says so (`run.limit_reached`). Without a limit, or for an unpriced run
 * (which cannot have one: the runner refuses to start it), never spent.
 */
export class RunBudget {
  private said = false;

  constructor(
    private readonly report: RunReport,
    private readonly maxCostUsd: number | undefined,
    private readonly events: EventSink,
    private readonly started: number,
  ) {}

  spent(): boolean {
    const spent = this.report.cost_usd;
    if (this.maxCostUsd === undefined || spent === null || spent < this.maxCostUsd) return false;
    if (!this.said) {
      this.said = true;
      this.events.emit({
        type: "run.limit_reached",
        data: { limit: "max_cost_usd", value: this.maxCostUsd, cost_usd: spent, elapsed_ms: Date.now() - this.started },
      });
    }
    return true;
  }
}

/**
 * A run's wall-clock limit when neither the task (`timeout_sec`), `--timeout`
 * nor the defaults file sets one, seconds: 4 hours, so that a run stuck on a
 * model or a tool ends by itself, committing its work, before a CI job's own
 * limit kills it without a report (GitHub Actions stops a job at 6 hours).
 */
export const DEFAULT_RUN_TIMEOUT_SEC = 4 * 3600;

/**
 * `timeout_sec` (default {@link DEFAULT_RUN_TIMEOUT_SEC}): aborts `stop`
 * (after a `run.limit_reached` event) once the attempt has run that long;
 * everything the run does waits on a signal that includes it. Returns the
 * timer's cancel (the finalize phase calls it, so clean-up is never cut short).
 */
export function startTimeLimit(
  timeoutSec: number = DEFAULT_RUN_TIMEOUT_SEC,
  stop: AbortController,
  report: RunReport,
  events: EventSink,
  started: number,
): () => void {
  const timer = setTimeout(() => {
    events.emit({ type: "run.limit_reached", data: { limit: "timeout_sec", value: timeoutSec, cost_usd: report.cost_usd, elapsed_ms: Date.now() - started } });
    stop.abort();
  }, timeoutSec * 1000);
  return () => clearTimeout(timer);
}
