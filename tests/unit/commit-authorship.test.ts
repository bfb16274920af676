/**
 * Commits are the user's, co-authored by agent-runner and the model (issue 26
 * item 11): the identity comes from the repository's config, else the user's
 * global git config, read without includes; without one the commits are
 * agent-runner's. A whole run in the Docker-free tier shows it on the branch.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { commitAuthorship, recordedAuthorship } from "../../src/workspace/commit-authorship.js";
import { createGitRepository, temporaryDirectory } from "../helpers/git-repository.js";
import { fakeRunner, toolCall, writeScriptedTask } from "../helpers/fake-runner.js";

/** Git in `cwd`, which must be given: a git config write must never reach the repository the tests run from. */
const git = (cwd: string, ...args: string[]) => {
  if (!cwd) throw new Error("git: no directory");
  return execFileSync("git", args, { cwd, encoding: "utf8" });
};

describe("commitAuthorship", () => {
  it("takes user.name and user.email from the repository's config first, then ~/.gitconfig over the XDG file, each key on its own", async () => {
    await using repository = createGitRepository({ "a.txt": "a\n" });
    await using home = temporaryDirectory();
    mkdirSync(join(home.path, "xdg", "git"), { recursive: true });
    writeFileSync(join(home.path, "xdg", "git", "config"), "[user]\n\tname = Xdg Name\n\temail = xdg@example.com\n");
    // The system file is the test's own (this machine's /etc/gitconfig may hold anything), and the lowest.
    writeFileSync(join(home.path, "system-gitconfig"), "[user]\n\tname = System Name\n\temail = system@example.com\n");
    const environment = { HOME: home.path, XDG_CONFIG_HOME: join(home.path, "xdg"), GIT_CONFIG_SYSTEM: join(home.path, "system-gitconfig") };
    expect(await commitAuthorship(repository.root, { ...environment, XDG_CONFIG_HOME: join(home.path, "none") }, "gpt-4.1")).toMatchObject({
      name: "System Name",
      email: "system@example.com",
      source: "user",
    });
    expect(
      await commitAuthorship(repository.root, { ...environment, XDG_CONFIG_HOME: join(home.path, "none"), GIT_CONFIG_NOSYSTEM: "1" }, "gpt-4.1"),
    ).toMatchObject({
      source: "runner",
    });

    expect(await commitAuthorship(repository.root, environment, "gpt-4.1")).toEqual({
      name: "Xdg Name",
      email: "xdg@example.com",
      source: "user",
      coAuthoredBy: "Co-authored-by: agent-runner (gpt-4.1) <agent-runner@localhost>",
    });
    writeFileSync(join(home.path, ".gitconfig"), "[user]\n\tname = Home Name\n");
    expect(await commitAuthorship(repository.root, environment, "gpt-4.1")).toMatchObject({ name: "Home Name", email: "xdg@example.com", source: "user" });
    git(repository.root, "config", "user.email", "ada@example.com");
    git(repository.root, "config", "user.name", "Ada Lovelace");
    expect(await commitAuthorship(repository.root, environment, "claude-sonnet-4-5")).toEqual({
      name: "Ada Lovelace",
      email: "ada@example.com",
      source: "repository",
      coAuthoredBy: "Co-authored-by: agent-runner (claude-sonnet-4-5) <agent-runner@localhost>",
    });
  });

  it("follows no include, and takes a value git would refuse as absent: then the commits are agent-runner's", async () => {
    await using repository = createGitRepository({ "a.txt": "a\n" });
    await using home = temporaryDirectory();
    writeFileSync(join(home.path, "included"), "[user]\n\tname = Included\n\temail = included@example.com\n");
    writeFileSync(
      join(home.path, ".gitconfig"),
      `[include]\n\tpath = ${join(home.path, "included")}\n[includeIf "gitdir:/"]\n\tpath = ${join(home.path, "included")}\n`,
    );
    const fallback = {
      name: "agent-runner",
      email: "agent-runner@localhost",
      source: "runner",
      coAuthoredBy: "Co-authored-by: agent-runner (scripted) <agent-runner@localhost>",
    };
    const noSystem = { GIT_CONFIG_NOSYSTEM: "1" };
    expect(await commitAuthorship(repository.root, { HOME: home.path, ...noSystem }, "scripted")).toEqual(fallback);
    git(repository.root, "config", "user.name", "Mallory <evil@example.com>");
    git(repository.root, "config", "user.email", "mallory@example.com");
    expect(await commitAuthorship(repository.root, { HOME: home.path, ...noSystem }, "scripted")).toEqual(fallback);
    expect(await commitAuthorship(repository.root, noSystem, "scripted")).toEqual(fallback);
  });

  it("a run.json's authorship is used only in the shape the runner writes", () => {
    const written = {
      name: "Ada",
      email: "ada@example.com",
      source: "repository",
      coAuthoredBy: "Co-authored-by: agent-runner (gpt-4.1) <agent-runner@localhost>",
    };
    expect(recordedAuthorship(written)).toEqual(written);
    expect(recordedAuthorship({ ...written, name: "Ada\n[core]" })).toBeNull();
    expect(recordedAuthorship({ ...written, coAuthoredBy: "Signed-off-by: someone <x@example.com>" })).toBeNull();
    expect(recordedAuthorship("Ada")).toBeNull();
  });
});

describe("a run's commits", () => {
  it("are authored and committed as the repository's user, with agent-runner and the model as co-author; run.json records it", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner();
    const {
      task,
      repo,
      git: inRepository,
    } = writeScriptedTask(directory.path, {
      script: { turns: [{ tool_calls: [toolCall("write_file", { path: "a.txt", content: "a\n" })] }, { content: "Wrote a.txt." }] },
      task: { name: "authored" },
    });
    git(repo, "config", "user.name", "Ada Lovelace");
    git(repo, "config", "user.email", "ada@example.com");
    const run = await fake.runner.start(task);
    const report = await run.result;
    expect(report).toMatchObject({ status: "succeeded" });
    const branch = report.branch!;
    expect(inRepository("log", "-1", "--format=%an <%ae>|%cn <%ce>", branch).trim()).toBe("Ada Lovelace <ada@example.com>|Ada Lovelace <ada@example.com>");
    expect(inRepository("log", "-1", "--format=%B", branch).trim()).toBe(
      `agent-runner: authored (run ${run.id})\n\nWrote a.txt.\n\nCo-authored-by: agent-runner (scripted) <agent-runner@localhost>`,
    );
    // git reads it as a trailer (GitHub shows the co-author from it).
    expect(inRepository("log", "-1", "--format=%(trailers:key=Co-authored-by,valueonly)", branch).trim()).toBe(
      "agent-runner (scripted) <agent-runner@localhost>",
    );
    expect(JSON.parse(readFileSync(join(run.directory, "run.json"), "utf8")).authorship).toMatchObject({ name: "Ada Lovelace", source: "repository" });
  });

  it("are agent-runner's when neither the repository nor the user has an identity", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner();
    const { task, git: inRepository } = writeScriptedTask(directory.path, {
      script: { turns: [{ tool_calls: [toolCall("write_file", { path: "a.txt", content: "a\n" })] }, { content: "Wrote a.txt." }] },
      task: { name: "unauthored" },
    });
    const run = await fake.runner.start(task);
    const { branch } = await run.result;
    expect(inRepository("log", "-1", "--format=%an <%ae>", branch!).trim()).toBe("agent-runner <agent-runner@localhost>");
  });
});
