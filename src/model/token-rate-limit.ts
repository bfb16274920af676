import type { ModelClient, ModelRequest, ModelResponse } from "./model-client.js";
import { MinuteWindow } from "../process/minute-window.js";

/**
 * A {@link ModelClient} that keeps the run under `tokensPerMinute` (prompt +
 * completion tokens the provider reported, every agent of the run together):
 * a call waits until the tokens of the last minute are below the limit. A
 * single call larger than the limit still runs (after the window empties).
 */
export class TokenRateLimitedModelClient implements ModelClient {
  private readonly spent = new MinuteWindow();

  constructor(
    private readonly inner: ModelClient,
    private readonly tokensPerMinute: number,
  ) {}

  async complete(request: ModelRequest): Promise<ModelResponse> {
    await this.spent.waitBelow(this.tokensPerMinute, request.signal);
    const response = await this.inner.complete(request);
    this.spent.add(response.usage.prompt_tokens + response.usage.completion_tokens);
    return response;
  }
}
