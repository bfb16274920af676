import { describe, expect, it } from "vitest";
import { modelFlag } from "../../src/config/model-flag.js";
import { checkModelSettings } from "../../src/runner/open-model.js";
import { validateTask } from "../../src/config/load-task.js";

describe("--model PROVIDER:NAME", () => {
  it("picks the provider named before the colon; any other name is an openai model, colons and all", () => {
    expect(modelFlag("anthropic:claude-sonnet-4-5")).toEqual({ provider: "anthropic", name: "claude-sonnet-4-5" });
    expect(modelFlag("anthropic:")).toEqual({ provider: "anthropic" });
    expect(modelFlag("openai-responses:gpt-5-codex")).toEqual({ provider: "openai-responses", name: "gpt-5-codex" });
    expect(modelFlag("ANTHROPIC:claude-sonnet-4-5")).toEqual({ provider: "anthropic", name: "claude-sonnet-4-5" });
    expect(modelFlag("gpt-4.1")).toEqual({ name: "gpt-4.1" });
    expect(modelFlag("llama3:8b")).toEqual({ name: "llama3:8b" });
    expect(() => modelFlag(":x")).toThrow(/--model: expected NAME or PROVIDER:NAME/);
    // A provider one typo away is refused with the fix, not sent to openai as a model name (five retries later: an error).
    expect(() => modelFlag("antropic:claude-sonnet-4-5")).toThrow(
      /--model antropic:claude-sonnet-4-5: no provider "antropic"; did you mean anthropic:claude-sonnet-4-5\?/,
    );
    expect(() => modelFlag("opnai-responses:gpt-5")).toThrow(/did you mean openai-responses:gpt-5\?/);
    expect(modelFlag("openai:antropic:x")).toEqual({ provider: "openai", name: "antropic:x" });
    expect(() => modelFlag("")).toThrow(/--model: expected NAME or PROVIDER:NAME/);
  });

  it("an anthropic task reads ANTHROPIC_API_KEY, ANTHROPIC_MODEL and ANTHROPIC_BASE_URL; model.name wins", () => {
    const task = validateTask({ name: "t", instruction: "x", model: modelFlag("anthropic:") }, null, process.cwd());
    expect(checkModelSettings(task, { ANTHROPIC_API_KEY: "k", ANTHROPIC_MODEL: "claude-m", ANTHROPIC_BASE_URL: "http://127.0.0.1:9" })).toEqual({
      apiKey: "k",
      model: "claude-m",
      baseURL: "http://127.0.0.1:9",
    });
    const named = validateTask({ name: "t", instruction: "x", model: modelFlag("anthropic:claude-x") }, null, process.cwd());
    expect(checkModelSettings(named, { ANTHROPIC_API_KEY: "k", ANTHROPIC_MODEL: "other" }).model).toBe("claude-x");
    expect(() => checkModelSettings(task, { OPENAI_API_KEY: "k" })).toThrow(/ANTHROPIC_API_KEY is not set/);
  });
});

describe("model.provider misspelt", () => {
  it("the task file's problem says which provider was meant", () => {
    expect(() => validateTask({ name: "t", instruction: "x", model: { provider: "antropic" } }, null, process.cwd())).toThrow(
      /model\.provider: expected one of "openai", "anthropic", "openai-responses", "scripted", got string "antropic" \(did you mean anthropic\?\)/,
    );
  });
});

describe("model.max_output_tokens and model.thinking_budget_tokens", () => {
  const problems = (model: Record<string, unknown>) => {
    try {
      validateTask({ name: "t", instruction: "x", model }, null, process.cwd());
      return "(valid)";
    } catch (error) {
      return String(error);
    }
  };

  it("takes a thinking budget below max_output_tokens (default 8192) for anthropic only, naming the field otherwise", () => {
    expect(problems({ provider: "anthropic", thinking_budget_tokens: 4096 })).toBe("(valid)");
    expect(problems({ provider: "anthropic", max_output_tokens: 32000, thinking_budget_tokens: 16000 })).toBe("(valid)");
    expect(problems({ provider: "anthropic", thinking_budget_tokens: 8192 })).toMatch(
      /model\.thinking_budget_tokens: must be below max_output_tokens \(8192, the default\); raise model\.max_output_tokens or lower the budget/,
    );
    expect(problems({ provider: "anthropic", thinking_budget_tokens: 512 })).toMatch(/model\.thinking_budget_tokens/);
    expect(problems({ provider: "openai", thinking_budget_tokens: 2048 })).toMatch(/model\.thinking_budget_tokens: extended thinking is Anthropic's/);
    expect(problems({ provider: "scripted", wire: "anthropic", script: "s.yaml", thinking_budget_tokens: 2048 })).not.toMatch(/thinking_budget_tokens/);
  });
});
