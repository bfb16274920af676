import { abortableSleep } from "./abortable-sleep.js";

/** One minute, ms: the window of a policy's per-minute limits. */
const MINUTE_MS = 60_000;

/**
 * A sliding one-minute window of amounts (tool calls, tokens): `waitBelow`
 * waits until what the last minute holds is under a limit; `add` records an
 * amount now. Shared by `limits.tool_calls_per_minute` and `tokens_per_minute`.
 */
export class MinuteWindow {
  private readonly entries: { at: number; amount: number }[] = [];

  /** Resolves once the last minute's total is below `limit`; CancelledError when `signal` aborts. */
  async waitBelow(limit: number, signal?: AbortSignal): Promise<void> {
    for (;;) {
      const now = Date.now();
      while (this.entries.length && this.entries[0]!.at <= now - MINUTE_MS) this.entries.shift();
      if (this.entries.reduce((sum, entry) => sum + entry.amount, 0) < limit) return;
      await abortableSleep(this.entries[0]!.at + MINUTE_MS - now, signal);
    }
  }

  add(amount: number): void {
    this.entries.push({ at: Date.now(), amount });
  }
}
