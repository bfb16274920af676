import { closestName } from "../describe-issue.js";
import { ConfigError } from "../errors.js";

/** Providers `--model` can name before a colon. */
const MODEL_FLAG_PROVIDERS = ["openai", "anthropic", "openai-responses"] as const;

/**
 * `--model` (or another caller's `field`, such as the MCP tool `run_start`'s `model`) as the ad-hoc task's `model`: `PROVIDER:NAME` (e.g.
 * `anthropic:claude-sonnet-4-5`; `anthropic:` alone takes the name from
 * ANTHROPIC_MODEL; the provider in any case) for a provider of
 * {@link MODEL_FLAG_PROVIDERS}, else NAME alone (the provider is the task's
 * default, `openai`, or the defaults file's), so a name with a colon of its
 * own (Ollama's `llama3:8b`) stays whole. ConfigError for an empty name or
 * one that starts with a colon.
 */
export function modelFlag(value: string, field = "--model"): { provider?: string; name?: string } {
  const colon = value.indexOf(":");
  const prefix = colon === -1 ? "" : value.slice(0, colon).toLowerCase();
  const provider = MODEL_FLAG_PROVIDERS.find((known) => known === prefix);
  if (value.trim() === "" || colon === 0) {
    throw new ConfigError(`${field}: expected NAME or PROVIDER:NAME (${MODEL_FLAG_PROVIDERS.join(", ")}), such as anthropic:claude-sonnet-4-5; got "${value}"`);
  }
  if (provider === undefined) {
    // `antropic:claude-x` would go to the openai provider as a model name and fail there after its retries.
    const near = colon > 0 ? closestName(prefix, MODEL_FLAG_PROVIDERS) : null;
    if (near)
      throw new ConfigError(
        `${field} ${value}: no provider "${prefix}"; did you mean ${near}:${value.slice(colon + 1)}? (The providers: ${MODEL_FLAG_PROVIDERS.join(", ")}; a model of the default provider whose name has a colon: openai:${value}.)`,
      );
    // No provider named: the task's default (openai), unless the defaults file names another.
    return { name: value };
  }
  const name = value.slice(colon + 1);
  return name ? { provider, name } : { provider };
}
