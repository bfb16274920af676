import { CancelledError } from "../errors.js";
import { abortableSleep } from "../process/abortable-sleep.js";

/**
 * Longest a request waits, in total, on rate limits (429) and overload (529)
 * when its client shares a {@link RateLimitGate}, ms (10 min): past it the
 * call fails `rate_limited` as an infrastructure error. A shared gate trades
 * the per-call retry count for this budget, so a 429 storm slows a batch
 * instead of failing its tasks.
 */
export const RATE_LIMIT_WAIT_BUDGET_MS = 600_000;

/**
 * One endpoint's rate limit as every run of a process sees it (a batch's
 * tasks share one per endpoint and API key). When any request is told to
 * back off (429 with retry-after, or 529), every request to that endpoint
 * waits until then, not only the one that was told; once the pause ends,
 * one request goes first as a probe and the others follow when it got
 * through (a circuit breaker's half-open state), so the storm does not
 * restart at once. Hand-written: the libraries that do this (bottleneck,
 * p-queue) schedule by a fixed rate, not by the server's own retry-after.
 */
export class RateLimitGate {
  private pausedUntil = 0;
  /** While set, a probe is in flight after a pause: the others wait for its outcome. */
  private probe: { done: Promise<void>; finish: () => void } | null = null;

  constructor(private readonly now: () => number = Date.now) {}

  /**
   * Resolves when a request may be sent: the pause is over and no probe is
   * out. Returns a callback to call with the request's outcome (`true` when
   * it got through, `false` when it was rate-limited again). Rejects with
   * CancelledError when `signal` aborts.
   */
  async ready(signal?: AbortSignal): Promise<(passed: boolean) => void> {
    const abortion = new AbortController();
    try {
      return await this.admit(signal, abortion.signal);
    } finally {
      abortion.abort();
    }
  }

  private async admit(signal: AbortSignal | undefined, settled: AbortSignal): Promise<(passed: boolean) => void> {
    const cancelled = signal ? rejectOnAbort(signal, settled) : new Promise<never>(() => undefined);
    for (;;) {
      if (signal?.aborted) throw new CancelledError();
      const wait = this.pausedUntil - this.now();
      if (wait > 0) {
        await abortableSleep(wait, signal);
        continue;
      }
      if (this.probe) {
        await Promise.race([this.probe.done, cancelled]);
        continue;
      }
      if (this.pausedUntil === 0) return () => undefined;
      // First request after a pause: the probe.
      let finish!: () => void;
      const done = new Promise<void>((resolve) => (finish = resolve));
      const probe = { done, finish };
      this.probe = probe;
      return (passed) => {
        if (this.probe !== probe) return;
        if (passed) this.pausedUntil = 0;
        this.probe = null;
        probe.finish();
      };
    }
  }

  /** Every request waits at least `ms` from now (the longer of this and a pause already set). */
  pause(ms: number): void {
    this.pausedUntil = Math.max(this.pausedUntil, this.now() + ms);
  }
}

/** Gates by endpoint key (`provider base-url key-id`), one per process or per {@link Runner}. */
export class RateLimitGates {
  private readonly gates = new Map<string, RateLimitGate>();

  for(key: string): RateLimitGate {
    let gate = this.gates.get(key);
    if (!gate) {
      gate = new RateLimitGate();
      this.gates.set(key, gate);
    }
    return gate;
  }
}

/** Rejects with CancelledError when `signal` aborts; forgets it once `settled` aborts. */
function rejectOnAbort(signal: AbortSignal, settled: AbortSignal): Promise<never> {
  const promise = new Promise<never>((_resolve, reject) => {
    if (signal.aborted) return reject(new CancelledError());
    const onAbort = () => reject(new CancelledError());
    signal.addEventListener("abort", onAbort, { once: true });
    settled.addEventListener("abort", () => signal.removeEventListener("abort", onAbort), { once: true });
  });
  // Unobserved once the caller stopped waiting; never an unhandled rejection.
  promise.catch(() => undefined);
  return promise;
}
