/**
 * The run embedding (StartOptions.embedding, src/run/run-embedding.ts): a
 * front end's placement of a run. The worktree starts at a named branch, the
 * success is merged into a named branch without a checkout (fast-forward,
 * merge commit, or a conflict that merges nothing), host tools are offered
 * and the policy's allow-list still holds, a read-only workspace refuses writes.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { createRunner } from "../../../src/runner/runner.js";
import { HostDirectorySandboxProvider } from "../../../src/sandbox/fake/host-directory-sandbox.js";
import { defineTool } from "../../../src/tools/define-tool.js";
import { ConfigError } from "../../../src/errors.js";
import type { ModelClient, ModelRequest } from "../../../src/model/model-client.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { call, StrictScriptedModel } from "../../helpers/strict-scripted-model.js";
import { fakeTierEnvironment, writeScriptedTask } from "../../helpers/fake-runner.js";

/** A runner over the host-directory sandbox whose model is `model`; records the tool names each request offered. */
async function embeddedRunner(home: string, model: StrictScriptedModel) {
  const offered: string[][] = [];
  const client: ModelClient = {
    complete: (request: ModelRequest) => {
      offered.push(request.tools.map((tool) => tool.function.name));
      return model.complete(request);
    },
  };
  const runner = await createRunner({
    home,
    sandboxProvider: new HostDirectorySandboxProvider(),
    environment: fakeTierEnvironment(home),
    openModel: async () => ({ client, close: async () => undefined }),
  });
  return { runner, offered };
}

/** The task file with a policy allowing exactly `tools` (a file outside the repository). */
function restrictTools(directory: string, task: string, tools: string[]): void {
  const policy = join(directory, "only.yaml");
  writeFileSync(policy, JSON.stringify({ name: "only", description: "Only the listed tools.", tools: { allow: tools }, confirmations: "deny" }));
  writeFileSync(task, JSON.stringify({ ...JSON.parse(readFileSync(task, "utf8")), policy }));
}

describe("a run placed by a front end (embedding)", () => {
  it("starts at baseBranch, merges its success into mergeInto without a checkout, offers exactly the host tools and workspace tools the policy allows", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task, git } = writeScriptedTask(directory.path, { script: { turns: [] }, files: { "a.txt": "a\n", "b.txt": "b\n" } });
    git("checkout", "-q", "-b", "team");
    writeFileSync(join(directory.path, "repo", "c.txt"), "only on team\n");
    git("add", "c.txt");
    git("commit", "-qm", "team start");
    git("checkout", "-q", "main");
    const published: string[] = [];
    // The host tool moves the team branch while the run works: its merge becomes a two-parent commit.
    const shout = defineTool({
      name: "shout",
      description: "Publishes a word.",
      input: z.object({ word: z.string() }),
      readOnly: true,
      async execute(input) {
        published.push(input.word);
        git("checkout", "-q", "team");
        writeFileSync(join(directory.path, "repo", "b.txt"), "b from the team\n");
        git("commit", "-qam", "team change");
        git("checkout", "-q", "main");
        return { content: "published" };
      },
    });
    const model = new StrictScriptedModel([
      { toolCalls: [call("1", "shout", { word: "hello" })] },
      {
        toolCalls: [
          call("2", "write_file", { path: "a.txt", content: "a from the run\n" }),
          call("3", "agent", { description: "x", prompt: "y", mode: "explore" }),
        ],
      },
      { content: "done" },
    ]);
    restrictTools(directory.path, task, ["read_file", "write_file", "shout"]);
    const { runner, offered } = await embeddedRunner(home.path, model);
    await using _runner = runner;
    const run = await runner.start(task, { embedding: { baseBranch: "team", mergeInto: "team", hostTools: [shout] } });
    const report = await run.result;

    expect(report).toMatchObject({ status: "succeeded", merge: { merged: true, branch: "refs/heads/team" } });
    expect(published).toEqual(["hello"]);
    expect(offered[0]!.sort()).toEqual(["read_file", "shout", "write_file"]);
    // The worktree started at team (c.txt), the merge kept the team's later change and added the run's.
    expect(git("show", `${report.branch}:c.txt`)).toBe("only on team\n");
    expect(git("show", "team:a.txt")).toBe("a from the run\n");
    expect(git("show", "team:b.txt")).toBe("b from the team\n");
    expect(git("rev-list", "--parents", "-n1", "team").trim().split(" ")).toHaveLength(3);
    expect(git("show", "main:a.txt")).toBe("a\n");
    // A tool outside the allow-list is not run: the model is told so.
    const second = model.requests[2]!.messages.filter((message) => message.role === "tool").map((message) => String(message.content));
    expect(second.some((content) => /agent/.test(content) && /(denied|unknown|not available)/i.test(content))).toBe(true);
    model.assertDone();
  });

  it("a conflict with the target merges nothing and keeps the run branch; a read-only workspace refuses writes", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task, git } = writeScriptedTask(directory.path, { script: { turns: [] }, files: { "a.txt": "a\n" } });
    git("branch", "team");
    const moveTeam = defineTool({
      name: "move_team",
      description: "Changes a.txt on team.",
      input: z.object({}),
      readOnly: true,
      async execute() {
        git("checkout", "-q", "team");
        writeFileSync(join(directory.path, "repo", "a.txt"), "a from the team\n");
        git("commit", "-qam", "team change");
        git("checkout", "-q", "main");
        return { content: "moved" };
      },
    });
    const model = new StrictScriptedModel([
      { toolCalls: [call("1", "move_team", {}), call("2", "write_file", { path: "a.txt", content: "a from the run\n" })] },
      { content: "done" },
      { toolCalls: [call("3", "write_file", { path: "a.txt", content: "read-only?\n" })] },
      { content: "could not write" },
    ]);
    restrictTools(directory.path, task, ["read_file", "write_file", "move_team"]);
    const { runner } = await embeddedRunner(home.path, model);
    await using _runner = runner;
    const run = await runner.start(task, { embedding: { baseBranch: "team", mergeInto: "team", hostTools: [moveTeam] } });
    const report = await run.result;
    expect(report.merge).toMatchObject({ merged: false, branch: "refs/heads/team", conflicts: ["a.txt"] });
    expect(git("show", "team:a.txt")).toBe("a from the team\n");
    expect(git("show", `${report.branch}:a.txt`)).toBe("a from the run\n");

    const reader = await runner.start(task, { embedding: { baseBranch: "team", readOnlyWorkspace: true } });
    const read = await reader.result;
    const results = model.requests[3]!.messages.filter((message) => message.role === "tool").map((message) => String(message.content));
    expect(results.join("\n")).toMatch(/EROFS|read-only/i);
    expect(read.head_commit).toBe(git("rev-parse", "team").trim());
    model.assertDone();
  });

  it("a base or merge branch that does not exist is refused before a run exists", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task } = writeScriptedTask(directory.path, { script: { turns: [] } });
    const { runner } = await embeddedRunner(home.path, new StrictScriptedModel([]));
    await using _runner = runner;
    await expect(runner.start(task, { embedding: { baseBranch: "nope" } })).rejects.toThrow(ConfigError);
    await expect(runner.start(task, { embedding: { mergeInto: "nope" } })).rejects.toThrow(/no branch nope/);
    await expect(runner.start(task, { embedding: { mergeInto: "main" }, merge: true })).rejects.toThrow(/give one/);
  });
});
