import type { AgencyClock } from "../../src/agency/guards/clock.js";

/** A clock the test moves by hand (`advance`): sleepers wake when it passes their time, never on their own. */
export class FakeClock implements AgencyClock {
  private readonly sleepers = new Set<{ time: number; wake: () => void }>();

  constructor(private time = Date.parse("2026-12-02T00:00:00.000Z")) {}

  now(): number {
    return this.time;
  }

  sleepUntil(time: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason as Error);
    if (time <= this.time) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const sleeper = {
        time,
        wake: () => {
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
      };
      const onAbort = () => {
        this.sleepers.delete(sleeper);
        reject(signal!.reason as Error);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.sleepers.add(sleeper);
    });
  }

  /** Moves the clock `ms` ahead and wakes every sleeper whose time has come. */
  advance(ms: number): void {
    this.time += ms;
    for (const sleeper of [...this.sleepers]) {
      if (sleeper.time > this.time) continue;
      this.sleepers.delete(sleeper);
      sleeper.wake();
    }
  }
}
