/**
 * The operator's ceilings (src/runner/operator-ceilings.ts): `--ceiling
 * FIELD=VALUE` parsing, and what an untrusted task gets when the server's
 * trusted defaults or the model's prices are in play.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { TaskDefaults } from "../../src/config/defaults-file.js";
import { ConfigError } from "../../src/errors.js";
import { builtInCeilings, CeilingExceededError, parseCeilingFlags } from "../../src/runner/operator-ceilings.js";
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
    const task = validateUntrustedTask({ name: "t", instruction: "x", workspace: "repo" }, trust, { label: "test", defaults, ceilings: builtInCeilings() });
    expect(task.sandbox.limits.memory).toBe(4 * 1024 ** 3);
    expect(task.max_steps).toBe(100);
    expect(task.timeout_sec).toBe(3600);
    expect(() =>
      validateUntrustedTask({ name: "t", instruction: "x", workspace: "repo", max_steps: 101 }, trust, {
        label: "test",
        defaults,
        ceilings: builtInCeilings(),
      }),
    ).toThrow(CeilingExceededError);
  });

  it("an unset model.max_cost_usd gets its ceiling when the model's prices are known, and stays unset when they are not (a budget needs them)", async () => {
    await using root = temporaryDirectory();
    mkdirSync(join(root.path, "repo"));
    const trust = { roots: [root.path], baseDirectory: root.path };
    const priced = validateUntrustedTask({ name: "t", instruction: "x", workspace: "repo", model: { provider: "openai", name: "gpt-4.1" } }, trust, {
      label: "test",
      ceilings: builtInCeilings(),
    });
    expect(priced.model.max_cost_usd).toBe(10);
    const unpriced = validateUntrustedTask(
      { name: "t", instruction: "x", workspace: "repo", model: { provider: "openai", name: "a-model-without-a-price" } },
      trust,
      { label: "test", ceilings: builtInCeilings() },
    );
    expect(unpriced.model.max_cost_usd).toBeUndefined();
    // Without ceilings (the command line's trusted paths) nothing is filled.
    expect(validateUntrustedTask({ name: "t", instruction: "x", workspace: "repo" }, trust, { label: "test" }).timeout_sec).toBeUndefined();
  });
});
