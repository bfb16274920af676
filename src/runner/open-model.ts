import { createHash } from "node:crypto";
import type { Task } from "../config/load-task.js";
import { ConfigError } from "../errors.js";
import { AnthropicModelClient } from "../model/anthropic-model-client.js";
import type { ModelClient } from "../model/model-client.js";
import { OpenAIModelClient } from "../model/openai-model-client.js";
import { OpenAIResponsesModelClient } from "../model/openai-responses-model-client.js";
import type { RateLimitGates } from "../model/rate-limit-gate.js";
import type { RetryOptions } from "../model/retry.js";
import { loadScript, ScriptedModelServer } from "../model/scripted-model-server.js";
import { configuredModelId } from "../model/pricing.js";
import type { WireName } from "../model/scripted-wire.js";

/** A real provider (not `scripted`). */
type RealProvider = Exclude<Task["model"]["provider"], "scripted">;

/** The provider whose client speaks each scripted wire format. */
const PROVIDER_OF_WIRE: Record<WireName, RealProvider> = { "openai-chat": "openai", anthropic: "anthropic", "openai-responses": "openai-responses" };

/** Where a client connects and with what, once the task and the environment are read. */
interface Endpoint {
  apiKey: string;
  model: string;
  baseURL?: string;
}

/**
 * Opens the task's model. `scripted` starts the scripted server on
 * 127.0.0.1, speaking `model.wire`, and points that provider's real client at
 * it; the real providers read their key and base URL from the environment
 * ({@link checkModelSettings}). With `gates`, the client shares the rate
 * limit of its endpoint and key with every other client opened with the same
 * gates (a Runner's runs). Throws ConfigError when something required is missing.
 */
export async function openModel(
  task: Task,
  environment: NodeJS.ProcessEnv = process.env,
  gates?: RateLimitGates,
): Promise<{ client: ModelClient; close(): Promise<void> }> {
  if (task.model.provider === "scripted") {
    const server = new ScriptedModelServer(loadScript(task.scriptPath!));
    const url = await server.start();
    const provider = PROVIDER_OF_WIRE[task.model.wire];
    // Anthropic's SDK adds `/v1/messages` to the origin; the others take the `/v1` base.
    const baseURL = provider === "anthropic" ? url.replace(/\/v1$/, "") : url;
    return {
      client: createClient(provider, task, { baseURL, apiKey: "scripted", model: "scripted" }, gates),
      close: () => server.close(),
    };
  }
  return { client: createClient(task.model.provider, task, checkModelSettings(task, environment), gates), close: async () => undefined };
}

/**
 * Checks the settings of a real-model task up front, so a missing key is exit
 * 2 before anything starts: `openai` and `openai-responses` read
 * OPENAI_API_KEY, OPENAI_BASE_URL and OPENAI_MODEL; `anthropic` reads
 * ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL and ANTHROPIC_MODEL. `model.name` and
 * `model.base_url` win over the environment. Throws ConfigError naming what is missing.
 */
export function checkModelSettings(task: Task, environment: NodeJS.ProcessEnv): Endpoint {
  const provider = task.model.provider;
  const prefix = provider === "anthropic" ? "ANTHROPIC" : "OPENAI";
  const apiKey = environment[`${prefix}_API_KEY`];
  const model = configuredModelId(task.model, environment);
  const problems: string[] = [];
  if (!apiKey)
    problems.push(task.file ? `${prefix}_API_KEY is not set (export it, or use model.provider: scripted)` : `${prefix}_API_KEY is not set (export it)`);
  if (!model)
    problems.push(
      task.file
        ? `model.name is not set in the task (or set ${prefix}_MODEL)`
        : `${prefix}_MODEL is not set (ad-hoc runs take the model name from it, or from --model)`,
    );
  if (problems.length) throw new ConfigError(`model.provider ${provider}: ${problems.join("; ")}`);
  const baseURL = task.model.base_url ?? environment[`${prefix}_BASE_URL`];
  return { apiKey: apiKey!, model: model!, ...(baseURL ? { baseURL } : {}) };
}

/** The client of `provider`, with the task's retry, timeout and sampling settings. */
function createClient(provider: RealProvider, task: Task, endpoint: Endpoint, gates: RateLimitGates | undefined): ModelClient {
  const retry: RetryOptions = {
    maxRetries: task.model.max_retries,
    timeoutMs: task.model.request_timeout_sec * 1000,
    deadlineMs: task.model.request_deadline_sec * 1000,
    ...(gates ? { gate: gates.for(gateKey(provider, endpoint)) } : {}),
  };
  switch (provider) {
    case "openai":
      return new OpenAIModelClient({
        ...endpoint,
        ...retry,
        temperature: task.model.temperature,
        stream: task.model.stream,
        ...(task.model.max_output_tokens === undefined ? {} : { maxOutputTokens: task.model.max_output_tokens }),
      });
    case "anthropic":
      return new AnthropicModelClient({
        ...endpoint,
        ...retry,
        stream: task.model.stream,
        temperature: task.model.temperature,
        ...(task.model.max_output_tokens === undefined ? {} : { maxOutputTokens: task.model.max_output_tokens }),
        ...(task.model.thinking_budget_tokens === undefined ? {} : { thinkingBudgetTokens: task.model.thinking_budget_tokens }),
      });
    case "openai-responses":
      return new OpenAIResponsesModelClient({ ...endpoint, ...retry, temperature: task.model.temperature, stream: task.model.stream });
  }
}

/** Requests share a rate limit when they go to the same endpoint with the same key (the key itself is not kept, only a digest). */
function gateKey(provider: RealProvider, endpoint: Endpoint): string {
  const key = createHash("sha256").update(endpoint.apiKey).digest("hex").slice(0, 16);
  return `${provider} ${endpoint.baseURL ?? "(default)"} ${key}`;
}
