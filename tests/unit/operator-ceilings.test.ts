/**
 * The operator's ceilings (src/runner/operator-ceilings.ts): `--ceiling
 * FIELD=VALUE` parsing, and what an untrusted task gets when the server's
 * trusted defaults or the model's prices are in play.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { TaskDefaults } from "../../src/config/defaults-file.js";
import { TaskValidationError } from "../../src/config/load-task.js";
import { ConfigError } from "../../src/errors.js";
import {
  builtInCeilings,
  capAgent,
  CeilingExceededError,
  parseCeilingFlags,
  recordedAgencyCeilingProblems,
  recordedTaskCeilingProblems,
} from "../../src/runner/operator-ceilings.js";
import { validateUntrustedTask } from "../../src/runner/untrusted-task.js";
import { temporaryDirectory } from "../helpers/git-repository.js";

function configError(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error("expected a ConfigError");
}

function ceilingProblems(run: () => unknown): { path: string; message: string }[] {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(CeilingExceededError);
    return (error as CeilingExceededError).problems;
  }
  throw new Error("expected a CeilingExceededError");
}

describe("--ceiling FIELD=VALUE", () => {
  it("sets a ceiling over the built-in ones, sizes as task.yaml writes them", () => {
    const ceilings = parseCeilingFlags(["sandbox.limits.memory=8g", "timeout_sec=7200", "model.max_cost_usd=2.5"]);
    expect(ceilings).toEqual({ ...builtInCeilings(), "sandbox.limits.memory": 8 * 1024 ** 3, timeout_sec: 7200, "model.max_cost_usd": 2.5 });
  });

  it("refuses an unknown field (listing the known ones) and a value that is not a positive amount, naming the flag", () => {
    expect(configError(() => parseCeilingFlags(["sandbox.limits.gpus=2"]))).toMatch(
      /^--ceiling sandbox\.limits\.gpus=2: expected FIELD=VALUE with FIELD one of sandbox\.limits\.cpus, .*agent\.policies\.timeout_seconds/,
    );
    expect(configError(() => parseCeilingFlags(["max_steps=-3"]))).toBe("--ceiling max_steps=-3: expected a number above 0 (model calls)");
    expect(configError(() => parseCeilingFlags(["sandbox.limits.disk=lots"]))).toBe(
      '--ceiling sandbox.limits.disk=lots: expected a size such as "4g" or "512m"',
    );
    expect(configError(() => parseCeilingFlags(["timeout_sec"]))).toMatch(/^--ceiling timeout_sec: expected FIELD=VALUE/);
  });
});

describe("an untrusted task within the ceilings", () => {
  it("a trusted default above a ceiling is lowered to it; the caller's own ask above it is refused", async () => {
    await using root = temporaryDirectory();
    mkdirSync(join(root.path, "repo"));
    const defaults = (): TaskDefaults => ({ values: { limits: { memory: "16g" }, max_steps: 400 }, sources: new Map(), files: [], notes: [] });
    const trust = { roots: [root.path], baseDirectory: root.path };
    const model = { provider: "openai", name: "gpt-4.1" };
    const task = validateUntrustedTask({ name: "t", instruction: "x", workspace: "repo", model }, trust, {
      label: "test",
      defaults,
      ceilings: builtInCeilings(),
    });
    expect(task.sandbox.limits.memory).toBe(4 * 1024 ** 3);
    expect(task.max_steps).toBe(100);
    expect(task.timeout_sec).toBe(3600);
    expect(() =>
      validateUntrustedTask({ name: "t", instruction: "x", workspace: "repo", model, max_steps: 101 }, trust, {
        label: "test",
        defaults,
        ceilings: builtInCeilings(),
      }),
    ).toThrow(CeilingExceededError);
  });

  it("an unset model.max_cost_usd gets its ceiling when the model's prices are known; an unpriced real model is refused at model.name, the scripted one passes", async () => {
    await using root = temporaryDirectory();
    mkdirSync(join(root.path, "repo"));
    writeFileSync(join(root.path, "script.yaml"), "turns: []\n");
    const trust = { roots: [root.path], baseDirectory: root.path };
    const priced = validateUntrustedTask({ name: "t", instruction: "x", workspace: "repo", model: { provider: "openai", name: "gpt-4.1" } }, trust, {
      label: "test",
      ceilings: builtInCeilings(),
    });
    expect(priced.model.max_cost_usd).toBe(10);
    const unpriced = ceilingProblems(() =>
      validateUntrustedTask({ name: "t", instruction: "x", workspace: "repo", model: { provider: "openai", name: "a-model-without-a-price" } }, trust, {
        label: "test",
        ceilings: builtInCeilings(),
      }),
    );
    expect(unpriced).toEqual([{ path: "model.name", message: expect.stringContaining("the price table has no model a-model-without-a-price") }]);
    expect(unpriced[0]!.message).toContain("model.max_cost_usd, at most 10 USD");
    const scripted = validateUntrustedTask(
      { name: "t", instruction: "x", workspace: "repo", model: { provider: "scripted", script: "./script.yaml" } },
      trust,
      { label: "test", ceilings: builtInCeilings() },
    );
    expect(scripted.model.max_cost_usd).toBeUndefined();
    // Without ceilings (the command line's trusted paths) nothing is filled or refused.
    expect(validateUntrustedTask({ name: "t", instruction: "x", workspace: "repo" }, trust, { label: "test" }).timeout_sec).toBeUndefined();
    expect(
      validateUntrustedTask({ name: "t", instruction: "x", workspace: "repo", model: { provider: "openai", name: "a-model-without-a-price" } }, trust, {
        label: "test",
      }).model.max_cost_usd,
    ).toBeUndefined();
  });

  it("model.prices is refused from an untrusted caller (prices of 0 would make the budget unreachable); the trusted defaults may price a model", async () => {
    await using root = temporaryDirectory();
    mkdirSync(join(root.path, "repo"));
    const trust = { roots: [root.path], baseDirectory: root.path };
    const free = { name: "t", instruction: "x", workspace: "repo", model: { provider: "openai", name: "gpt-4.1", prices: { input: 0, output: 0 } } };
    let refused: unknown;
    try {
      validateUntrustedTask(free, trust, { label: "test", ceilings: builtInCeilings() });
    } catch (error) {
      refused = error;
    }
    expect(refused).toBeInstanceOf(TaskValidationError);
    expect((refused as TaskValidationError).problems).toEqual([{ path: "model.prices", message: expect.stringMatching(/^not allowed here: prices decide/) }]);
    const defaults = (): TaskDefaults => ({
      values: { model: { provider: "openai", prices: { input: 1, output: 2 } } },
      sources: new Map(),
      files: [],
      notes: [],
    });
    const operatorPriced = validateUntrustedTask({ name: "t", instruction: "x", workspace: "repo", model: { name: "in-house-model" } }, trust, {
      label: "test",
      defaults,
      ceilings: builtInCeilings(),
    });
    expect(operatorPriced.model.max_cost_usd).toBe(10);
  });

  it("a defaults file's model.max_cost_usd above the ceiling is lowered to it; under it, it stays", async () => {
    await using root = temporaryDirectory();
    mkdirSync(join(root.path, "repo"));
    const trust = { roots: [root.path], baseDirectory: root.path };
    const withBudget = (max_cost_usd: number) => (): TaskDefaults => ({
      values: { model: { provider: "openai", name: "gpt-4.1", max_cost_usd } },
      sources: new Map(),
      files: [],
      notes: [],
    });
    const task = { name: "t", instruction: "x", workspace: "repo" };
    expect(validateUntrustedTask(task, trust, { label: "test", defaults: withBudget(500), ceilings: builtInCeilings() }).model.max_cost_usd).toBe(10);
    expect(validateUntrustedTask(task, trust, { label: "test", defaults: withBudget(3), ceilings: builtInCeilings() }).model.max_cost_usd).toBe(3);
  });
});

describe("an untrusted agency's agents within the ceilings", () => {
  const agent = (model: Record<string, unknown>) => ({ agent: { name: "coder", model } });
  const modelOf = (file: unknown) => (file as { agent: { model: Record<string, unknown> } }).agent.model;

  it("a priced agent's unset model.max_cost_usd gets the ceiling; one asked under it stays; an unpriced real model is refused at agent.model.name", () => {
    const ceilings = { ...builtInCeilings(), "model.max_cost_usd": 2 };
    expect(modelOf(capAgent(agent({ provider: "anthropic", name: "claude-sonnet-4-5" }), ceilings).file).max_cost_usd).toBe(2);
    expect(modelOf(capAgent(agent({ provider: "anthropic", name: "claude-sonnet-4-5", max_cost_usd: 1 }), ceilings).file).max_cost_usd).toBe(1);
    expect(capAgent(agent({ provider: "anthropic", name: "claude-sonnet-4-5", max_cost_usd: 3 }), ceilings).problems.map((problem) => problem.path)).toEqual([
      "agent.model.max_cost_usd",
    ]);
    const unpriced = capAgent(agent({ name: "a-model-without-a-price" }), ceilings);
    expect(unpriced.problems).toEqual([{ path: "agent.model.name", message: expect.stringContaining("the price table has no model a-model-without-a-price") }]);
    const scripted = capAgent(agent({ provider: "scripted", script: "/x.yaml" }), ceilings);
    expect(scripted.problems).toEqual([]);
    expect(modelOf(scripted.file).max_cost_usd).toBeUndefined();
  });
});

describe("a recorded run within the ceilings on resume", () => {
  it("a priced real model recorded without a budget is refused unless the resume gives max_cost_usd; the scripted one and a recorded budget under the ceiling pass", () => {
    const ceilings = builtInCeilings();
    const recorded = (model: Record<string, unknown>) => ({ timeout_sec: 600, max_steps: 50, sandbox: { limits: { cpus: 1, memory: 1024 ** 3 } }, model });
    expect(recordedTaskCeilingProblems(recorded({ provider: "openai", name: "gpt-4.1" }), {}, ceilings, {})).toEqual([
      { path: "task.model.max_cost_usd", message: expect.stringMatching(/^the run was recorded with no budget/) },
    ]);
    expect(recordedTaskCeilingProblems(recorded({ provider: "openai", name: "gpt-4.1" }), { max_cost_usd: 1 }, ceilings, {})).toEqual([]);
    expect(recordedTaskCeilingProblems(recorded({ provider: "openai", name: "gpt-4.1", max_cost_usd: 5 }), {}, ceilings, {})).toEqual([]);
    expect(recordedTaskCeilingProblems(recorded({ provider: "scripted", script: "/s.yaml" }), {}, ceilings, {})).toEqual([]);
    expect(recordedTaskCeilingProblems({ ...recorded({ provider: "scripted" }), sandbox: { limits: { memory: 16 * 1024 ** 3 } } }, {}, ceilings, {})).toEqual([
      {
        path: "task.sandbox.limits.memory",
        message: expect.stringMatching(/^the run was recorded with 16g, above this server's ceiling of 4g \(4294967296 bytes\)/),
      },
    ]);
  });
});

describe("a recorded agency within the ceilings on resume", () => {
  it("an agent of a priced model recorded without a budget is refused, naming it; one with a budget under the ceiling passes", () => {
    const agent = (model: Record<string, unknown>) => ({ name: "coder", model, max_steps: 50, policies: { max_concurrency: 1, timeout_seconds: 600 } });
    expect(recordedAgencyCeilingProblems({ agents: [agent({ provider: "openai", name: "gpt-4.1" })] }, builtInCeilings())).toEqual([
      { path: "agents.coder.model.max_cost_usd", message: expect.stringMatching(/^recorded with no budget/) },
    ]);
    expect(recordedAgencyCeilingProblems({ agents: [agent({ provider: "openai", name: "gpt-4.1", max_cost_usd: 2 })] }, builtInCeilings())).toEqual([]);
    expect(recordedAgencyCeilingProblems({ agents: [agent({ provider: "scripted" })] }, builtInCeilings())).toEqual([]);
  });
});
