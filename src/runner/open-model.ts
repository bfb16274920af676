import type { Task } from "../config/load-task.js";
import { ConfigError } from "../errors.js";
import type { ModelClient } from "../model/model-client.js";
import { OpenAIModelClient } from "../model/openai-model-client.js";
import { loadScript, ScriptedModelServer } from "../model/scripted-model-server.js";

/**
 * Opens the task's model. `scripted` starts the scripted server on
 * 127.0.0.1 and points the real openai client at it; `openai` uses
 * OPENAI_API_KEY / OPENAI_BASE_URL (or model.base_url) and model.name
 * (or OPENAI_MODEL). Throws ConfigError when something required is missing.
 */
export async function openModel(task: Task, environment: NodeJS.ProcessEnv = process.env): Promise<{ client: ModelClient; close(): Promise<void> }> {
  if (task.model.provider === "scripted") {
    const server = new ScriptedModelServer(loadScript(task.scriptPath!));
    const baseURL = await server.start();
    return {
      client: new OpenAIModelClient({
        baseURL,
        apiKey: "scripted",
        model: "scripted",
        maxRetries: task.model.max_retries,
        timeoutMs: task.model.request_timeout_sec * 1000,
      }),
      close: () => server.close(),
    };
  }
  return { client: openAIClient(task, environment), close: async () => undefined };
}

/** Checks the settings of a real-model task up front, so a missing key is exit 2 before anything starts. */
export function openAIClient(task: Task, environment: NodeJS.ProcessEnv): OpenAIModelClient {
  const apiKey = environment.OPENAI_API_KEY;
  const model = task.model.name ?? environment.OPENAI_MODEL;
  const problems: string[] = [];
  if (!apiKey) problems.push(task.file ? "OPENAI_API_KEY is not set (export it, or use model.provider: scripted)" : "OPENAI_API_KEY is not set (export it)");
  if (!model)
    problems.push(task.file ? "model.name is not set in the task (or set OPENAI_MODEL)" : "OPENAI_MODEL is not set (ad-hoc runs take the model name from it)");
  if (problems.length) throw new ConfigError(`model.provider openai: ${problems.join("; ")}`);
  return new OpenAIModelClient({
    apiKey: apiKey!,
    model: model!,
    baseURL: task.model.base_url ?? environment.OPENAI_BASE_URL,
    temperature: task.model.temperature,
    maxRetries: task.model.max_retries,
    timeoutMs: task.model.request_timeout_sec * 1000,
  });
}
