/**
 * A token bucket's state: `tokens` at `updated_at` (ms since the epoch).
 * Tokens may be below 0: takes reserved ahead of the refill (the callers
 * waiting for their turn), as in Go's `rate.Limiter.Reserve`.
 */
export interface BucketState {
  tokens: number;
  updated_at: number;
}

/**
 * The bucket at `now`: refilled continuously at `perMinute` / 60 000 tokens
 * a millisecond, up to its capacity, which is `perMinute` (docs/agency.md
 * "Rate limits": a full minute's worth may be spent at once, then the rate).
 * A missing state is a full bucket. A clock that went back refills nothing.
 */
function refilled(state: BucketState | undefined, perMinute: number, now: number): BucketState {
  if (state === undefined) return { tokens: perMinute, updated_at: now };
  const elapsed = Math.max(0, now - state.updated_at);
  return { tokens: Math.min(perMinute, state.tokens + (elapsed * perMinute) / 60_000), updated_at: Math.max(now, state.updated_at) };
}

/**
 * Takes `amount` tokens at `now` (0 asks only whether the balance is back
 * at 0). Returns the new state (its balance may go below 0: the take is
 * reserved) and `wait_ms`, how long the taker waits for its turn: 0 when the
 * bucket held enough, else until the refill covers the balance. Pure; the
 * hand-written arithmetic is five lines (the token-bucket libraries on npm
 * keep their state in memory, where it would not survive a resume).
 */
export function take(state: BucketState | undefined, perMinute: number, amount: number, now: number): { state: BucketState; wait_ms: number } {
  const current = refilled(state, perMinute, now);
  const tokens = current.tokens - amount;
  return { state: { tokens, updated_at: current.updated_at }, wait_ms: tokens >= 0 ? 0 : Math.ceil((-tokens * 60_000) / perMinute) };
}
