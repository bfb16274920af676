import type { ModelClient, ModelRequest, ModelResponse } from "./model-client.js";
import { abortableSleep } from "./openai-model-client.js";

/** One minute, the window of a policy's `limits.tokens_per_minute`. */
const MINUTE_MS = 60_000;

/**
 * A {@link ModelClient} that keeps the run under `tokensPerMinute` (prompt +
 * completion tokens the provider reported, every agent of the run together):
 * a call waits until the tokens of the last minute are below the limit. A
 * single call larger than the limit still runs (after the window empties).
 */
export class TokenRateLimitedModelClient implements ModelClient {
  private readonly spent: { at: number; tokens: number }[] = [];

  constructor(
    private readonly inner: ModelClient,
    private readonly tokensPerMinute: number,
  ) {}

  async complete(request: ModelRequest): Promise<ModelResponse> {
    for (;;) {
      const now = Date.now();
      while (this.spent.length && this.spent[0]!.at <= now - MINUTE_MS) this.spent.shift();
      const used = this.spent.reduce((sum, entry) => sum + entry.tokens, 0);
      if (used < this.tokensPerMinute) break;
      await abortableSleep(this.spent[0]!.at + MINUTE_MS - now, request.signal);
    }
    const response = await this.inner.complete(request);
    this.spent.push({ at: Date.now(), tokens: response.usage.prompt_tokens + response.usage.completion_tokens });
    return response;
  }
}
