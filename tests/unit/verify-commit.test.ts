/**
 * Whose failure a lost verification sandbox is (issue 10, item 6): lost while
 * the command ran (the agent's committed code killed its helper) is a failed
 * verdict; a sandbox that cannot be made, or a Docker that cannot remove the
 * container afterwards, is the infrastructure's (SandboxError → status error).
 * Real git worktrees, a fake sandbox behind the Sandbox interface.
 */
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { SandboxError } from "../../src/errors.js";
import type { RunEvent } from "../../src/events/run-events.js";
import { verifyCommit, type VerifyContext } from "../../src/delivery/verify-commit.js";
import { FakeSandbox, type FakeExecHandler } from "../../src/sandbox/fake/fake-sandbox.js";
import { SandboxGoneError, type SandboxProvider } from "../../src/sandbox/sandbox.js";
import { createRunWorktree, removeRunWorktree, type RunWorktree } from "../../src/workspace/run-worktree.js";
import { createGitRepository, temporaryDirectory } from "../helpers/git-repository.js";

class ClosingSandbox extends FakeSandbox {
  constructor(
    onExec: FakeExecHandler,
    private readonly closeError: Error | null,
  ) {
    super({}, onExec);
  }
  override async close(): Promise<void> {
    await super.close();
    if (this.closeError) throw this.closeError;
  }
}

function providerOf(sandbox: () => Promise<FakeSandbox>): SandboxProvider {
  return { create: () => sandbox(), ensureWorkspaceIdle: async () => undefined };
}

describe("verifyCommit: a lost sandbox is the agent's verdict, a broken Docker the infrastructure's", () => {
  let repository: ReturnType<typeof createGitRepository>;
  let home: ReturnType<typeof temporaryDirectory>;
  let worktree: RunWorktree;
  let events: RunEvent[];
  const context = (provider: SandboxProvider): VerifyContext => ({
    agentId: "main",
    provider,
    specFor: async () => ({}) as never,
    directory: join(home.path, "verify"),
    baseCommit: worktree.baseCommit,
    events: { emit: (event) => events.push(event) },
    signal: new AbortController().signal,
  });
  const verify = { command: "python3 -m pytest", timeout_sec: 60 };

  beforeEach(async () => {
    repository = createGitRepository({ "app.txt": "fixed\n" }, { prefix: "agent-runner-verify-unit-" });
    home = temporaryDirectory("agent-runner-verify-home-");
    worktree = await createRunWorktree(repository.root, { runId: "unit", taskSlug: "test" }, join(home.path, "worktree"));
    events = [];
  });
  afterEach(async () => {
    await removeRunWorktree(worktree);
    await home[Symbol.asyncDispose]();
    await repository[Symbol.asyncDispose]();
  });

  it("the sandbox going away while the command runs is a failed verification with the reason", async () => {
    const gone = new SandboxGoneError("sandbox fake: the in-container daemon went away");
    const sandbox = new ClosingSandbox(() => Promise.reject(gone), null);
    const result = await verifyCommit(verify, worktree, worktree.baseCommit, context(providerOf(async () => sandbox)));
    expect(result).toMatchObject({ passed: false, exit_code: null, timed_out: false, sandbox_lost: gone.message, protected: null });
    expect(result.output_tail).toContain("the verification sandbox was lost");
    expect(sandbox.closed).toBe(true);
    expect(events.at(-1)).toMatchObject({ type: "verify.finished", data: { passed: false, sandbox_lost: gone.message } });
  });

  it("a daemon that stops answering (host backstop) is the agent's too", async () => {
    const silent = new SandboxError("sandbox fake: no answer 15000 ms after a 60000 ms command timeout");
    const result = await verifyCommit(
      verify,
      worktree,
      worktree.baseCommit,
      context(providerOf(async () => new ClosingSandbox(() => Promise.reject(silent), null))),
    );
    expect(result).toMatchObject({ passed: false, sandbox_lost: silent.message });
  });

  it("a container Docker cannot remove afterwards makes it an infrastructure error", async () => {
    const gone = new SandboxGoneError("sandbox fake: the in-container daemon went away");
    const unreachable = new SandboxError("could not remove container fake: connect ENOENT /var/run/docker.sock");
    await expect(
      verifyCommit(verify, worktree, worktree.baseCommit, context(providerOf(async () => new ClosingSandbox(() => Promise.reject(gone), unreachable)))),
    ).rejects.toBe(unreachable);
  });

  it("a sandbox that cannot be created is an infrastructure error", async () => {
    const noDaemon = new SandboxError("could not create the sandbox: connect ENOENT /var/run/docker.sock");
    await expect(verifyCommit(verify, worktree, worktree.baseCommit, context(providerOf(() => Promise.reject(noDaemon))))).rejects.toBe(noDaemon);
  });

  it("a command that ends by itself is judged by its exit code", async () => {
    const passing = await verifyCommit(
      verify,
      worktree,
      worktree.baseCommit,
      context(providerOf(async () => new ClosingSandbox(() => ({ exitCode: 0, stdout: "1 passed" }), null))),
    );
    expect(passing).toMatchObject({ passed: true, exit_code: 0, sandbox_lost: null });
    const failing = await verifyCommit(
      verify,
      worktree,
      worktree.baseCommit,
      context(providerOf(async () => new ClosingSandbox(() => ({ exitCode: 1, stdout: "1 failed" }), null))),
    );
    expect(failing).toMatchObject({ passed: false, exit_code: 1, sandbox_lost: null, output_tail: "1 failed" });
  });

  it("a long output keeps its head (the command, the import error) and its tail (the verdict), and says how much is left out", async () => {
    const middle = "tests/test_x.py::test_case FAILED\n".repeat(1000);
    const stdout = `$ python3 -m pytest\nImportError: cannot import name 'parse' from 'calc'\n${middle}1000 failed`;
    const result = await verifyCommit(
      verify,
      worktree,
      worktree.baseCommit,
      context(providerOf(async () => new ClosingSandbox(() => ({ exitCode: 1, stdout }), null))),
    );
    expect(result.output_head).toMatch(/^\$ python3 -m pytest\nImportError: cannot import name 'parse'/);
    expect(result.output_head).toHaveLength(4000);
    expect(result.output_tail).toHaveLength(4000);
    expect(result.output_tail.endsWith("1000 failed")).toBe(true);
    expect(result.output_omitted).toBe(stdout.length - 8000);
    const finished = events.at(-1);
    expect(finished?.type).toBe("verify.finished");
    if (finished?.type !== "verify.finished") return;
    expect(finished.data.output_head).toMatch(/^\$ python3 -m pytest\nImportError/);
    expect(finished.data.output_head).toHaveLength(1000);
    expect(finished.data.output_tail.endsWith("1000 failed")).toBe(true);
    expect(finished.data.output_omitted).toBe(stdout.length - 2000);
  });
});
