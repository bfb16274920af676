import type { ChatMessage } from "../../src/model/messages.js";
import type { ModelClient, ModelRequest, ModelResponse } from "../../src/model/model-client.js";

type Answer = Partial<ModelResponse> | ((request: ModelRequest) => Partial<ModelResponse> | Promise<Partial<ModelResponse>>);

/**
 * A strict in-process {@link ModelClient}: answers are consumed in order, an
 * unexpected call fails the test, and `assertDone()` fails on leftovers.
 * Records a snapshot of every request's messages.
 */
export class StrictScriptedModel implements ModelClient {
  readonly requests: { messages: ChatMessage[]; callIndex: number; agentId: string }[] = [];
  private next = 0;

  constructor(private readonly answers: Answer[]) {}

  async complete(request: ModelRequest): Promise<ModelResponse> {
    this.requests.push({ messages: structuredClone(request.messages), callIndex: request.callIndex, agentId: request.agentId });
    const answer = this.answers[this.next];
    if (answer === undefined) throw new Error(`StrictScriptedModel: unexpected model call #${this.next + 1}`);
    this.next += 1;
    const partial = typeof answer === "function" ? await answer(request) : answer;
    return {
      content: null,
      toolCalls: [],
      finishReason: partial.toolCalls?.length ? "tool_calls" : "stop",
      usage: { prompt_tokens: 10, completion_tokens: 5, cached_tokens: 0, cache_write_tokens: 0 },
      ...partial,
    };
  }

  assertDone(): void {
    if (this.next !== this.answers.length) throw new Error(`StrictScriptedModel: ${this.answers.length - this.next} answers left unused`);
  }
}

export function call(id: string, name: string, args: unknown): { id: string; type: "function"; function: { name: string; arguments: string } } {
  return { id, type: "function", function: { name, arguments: typeof args === "string" ? args : JSON.stringify(args) } };
}
