import { execFileSync } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import type { RunEvent } from "../../src/events/run-events.js";
import { WorkDelivery } from "../../src/delivery/deliver.js";
import { CleanupStack } from "../../src/run/run-scope.js";
import { DEFAULT_COMMIT_LIMITS } from "../../src/workspace/commit-selection.js";
import { createRunWorktree } from "../../src/workspace/run-worktree.js";
import { createGitRepository, temporaryDirectory } from "../helpers/git-repository.js";

/** The shared stop → commit → verify → merge lifecycle, on real git, with a provider behind the interface. */
describe("WorkDelivery (one lifecycle for the main agent and workers)", () => {
  async function setUp(idle: () => Promise<void>) {
    const repository = createGitRepository({ "a.txt": "one\n" });
    const directory = temporaryDirectory();
    const worktree = await createRunWorktree(repository.root, { runId: "delivery-test", taskSlug: "test" }, join(directory.path, "worktree"));
    const events: RunEvent[] = [];
    const closed: string[] = [];
    const delivery = new WorkDelivery({
      agentId: "w1",
      worktree,
      provider: { ensureWorkspaceIdle: (path) => (closed.push(`idle? ${path === worktree.path}`), idle()) },
      commitLimits: DEFAULT_COMMIT_LIMITS,
      events: { emit: (event) => events.push(event) },
      sandbox: () => ({ close: async () => void closed.push("sandbox closed") }),
    });
    const branchFile = (path: string) => execFileSync("git", ["show", `${worktree.branch}:${path}`], { cwd: repository.root, encoding: "utf8" });
    return { repository, directory, worktree, events, closed, delivery, branchFile };
  }

  it("closes the sandbox and confirms the worktree idle before host git reads it; skipped verification is said why", async () => {
    const { repository, directory, worktree, closed, delivery, branchFile } = await setUp(async () => {});
    await using _repository = repository;
    await using _directory = directory;
    writeFileSync(join(worktree.path, "a.txt"), "two\n");
    const delivered = await delivery.deliver({
      message: "work",
      onCommitted: async () => void closed.push("committed"),
      skipVerify: (committed) => (committed.changed ? "no_verify_command" : "no_changes"),
      verify: { command: "true", timeout_sec: 1 },
      verifyContext: null as never,
      merge: async () => "merged",
    });
    expect(closed).toEqual(["sandbox closed", "idle? true", "committed"]);
    expect(delivered).toMatchObject({ skipped: "no_verify_command", verify: null, merged: null, committed: { changed: true, timedOut: false } });
    expect(branchFile("a.txt")).toBe("two\n");
    // close() after a delivery commits nothing more and removes the directory.
    expect(await delivery.close({ partialMessage: "partial", removeWorktree: true })).toBe(true);
    expect(existsSync(worktree.path)).toBe(false);
  });

  it("a worktree that cannot be confirmed idle is neither committed nor removed", async () => {
    const { repository, directory, worktree, events, delivery, branchFile } = await setUp(async () => {
      throw new Error("a container still mounts it");
    });
    await using _repository = repository;
    await using _directory = directory;
    writeFileSync(join(worktree.path, "a.txt"), "planted\n");
    await expect(delivery.deliver({ message: "work", verify: null, verifyContext: null as never })).rejects.toThrow("still mounts");
    expect(await delivery.close({ partialMessage: "partial", removeWorktree: true })).toBe(false);
    expect(existsSync(join(worktree.path, "a.txt"))).toBe(true);
    expect(branchFile("a.txt")).toBe("one\n");
    expect(events.map((event) => event.type)).toEqual(["cleanup.failed"]);
  });

  it("close() of work that was never delivered commits it as partial work", async () => {
    const { repository, directory, worktree, delivery, branchFile } = await setUp(async () => {});
    await using _repository = repository;
    await using _directory = directory;
    writeFileSync(join(worktree.path, "b.txt"), "half done\n");
    let recorded = "";
    expect(
      await delivery.close({ partialMessage: "partial work", removeWorktree: true, onPartialCommit: async (committed) => void (recorded = committed.head) }),
    ).toBe(true);
    expect(branchFile("b.txt")).toBe("half done\n");
    expect(recorded).toMatch(/^[0-9a-f]{40}$/);
  });
});

describe("CleanupStack", () => {
  it("undoes in reverse order, and a failing step becomes a cleanup.failed event without stopping the others", async () => {
    const stack = new CleanupStack();
    const done: string[] = [];
    const events: RunEvent[] = [];
    stack.defer("disk", () => void done.push("disk"));
    stack.defer("model", () => {
      throw new Error("server gone");
    });
    stack.defer("tasks", async () => void done.push("tasks"));
    await stack.run({ emit: (event) => events.push(event) });
    expect(done).toEqual(["tasks", "disk"]);
    expect(events).toEqual([{ type: "cleanup.failed", data: { what: "model", error: "server gone" } }]);
    await stack.run({ emit: (event) => events.push(event) });
    expect(done).toHaveLength(2);
  });
});
