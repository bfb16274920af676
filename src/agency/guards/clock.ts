/**
 * The time the agency's guards decide by (circuit breakers, token buckets):
 * injectable, so a test moves time by hand and needs no sleeps, as the
 * policy's command judge takes its inputs rather than reading the world.
 */
export interface AgencyClock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
  /**
   * Resolves once `now()` has reached `time` (ms since the epoch), at once when it has.
   * Rejects with `signal.reason` when `signal` aborts first.
   */
  sleepUntil(time: number, signal?: AbortSignal): Promise<void>;
}

/** The wall clock: `Date.now` and a timer. */
export const systemClock: AgencyClock = {
  now: () => Date.now(),
  sleepUntil(time, signal) {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason as Error);
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal!.reason as Error);
      };
      const timer = setTimeout(
        () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
        Math.max(0, time - Date.now()),
      );
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  },
};
