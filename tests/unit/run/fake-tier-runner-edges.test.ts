/**
 * The Runner's edges a library user hits (review of issue 11): a start whose
 * signal is already aborted or whose options are wrong creates nothing;
 * close() while a start is pending leaves no run behind; a provider whose
 * create() never returns does not hold a cancel.
 */
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { CancelledError, ConfigError } from "../../../src/errors.js";
import { createRunner } from "../../../src/runner/runner.js";
import type { SandboxProvider } from "../../../src/sandbox/sandbox.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { fakeRunner, fakeShell, fakeTierEnvironment, toolCall, writeScriptedTask } from "../../helpers/fake-runner.js";

const runsIn = (home: string) => (existsSync(join(home, "runs")) ? readdirSync(join(home, "runs")) : []);

describe("the Runner's edges", () => {
  it("an already-aborted signal or a wrong option rejects start() before anything exists", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell() });
    const { task, git } = writeScriptedTask(directory.path, { script: { turns: [{ content: "Done." }] } });
    await expect(fake.runner.start(task, { signal: AbortSignal.abort() })).rejects.toBeInstanceOf(CancelledError);
    await expect(fake.runner.start(task, { approvals: {} as never })).rejects.toThrow(ConfigError);
    await expect(fake.runner.start(task, { merge: "yes" as never })).rejects.toThrow(/merge: expected true or false/);
    expect(runsIn(fake.home)).toEqual([]);
    expect(git("branch", "--list", "runner/*").trim()).toBe("");
  });

  it("close() while a start is pending: the start rejects and no run is left", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell() });
    const { task } = writeScriptedTask(directory.path, { script: { turns: [{ content: "Done." }] } });
    const starting = fake.runner.start(task);
    await fake.runner.close();
    await expect(starting).rejects.toThrow(/closed/);
    expect(runsIn(fake.home)).toEqual([]);
  });

  it("a provider whose create() never returns does not hold cancel(): the run ends cancelled", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory("agent-runner-fake-home-");
    const hanging: SandboxProvider = { create: () => new Promise(() => {}), ensureWorkspaceIdle: async () => {} };
    await using runner = await createRunner({ home: home.path, sandboxProvider: hanging, environment: fakeTierEnvironment(home.path) });
    const { task } = writeScriptedTask(directory.path, { script: { turns: [{ tool_calls: [toolCall("list_dir", { path: "." })] }, { content: "Done." }] } });
    const run = await runner.start(task);
    await run.cancel("stop waiting");
    expect(await run.result).toMatchObject({ status: "cancelled", error: "cancelled: stop waiting" });
  });
});
