/**
 * What of the user's checkout a run's worktree does not get (issue 13, "rough
 * edges"): the worktree is a checkout of HEAD, so uncommitted changes,
 * untracked and git-ignored files are not in it; the run says so once.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { eventData, eventsFile, fakeRunner, fakeShell, writeScriptedTask } from "../../helpers/fake-runner.js";

describe("files the worktree does not get", () => {
  it("names how many uncommitted, untracked and ignored files were left out, and the first few, once", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell() });
    const { task, repo } = writeScriptedTask(directory.path, {
      script: { turns: [{ content: "Done." }] },
      files: { "README.md": "hello\n", ".gitignore": "build/\n*.log\n" },
    });
    writeFileSync(join(repo, "README.md"), "changed, not committed\n");
    writeFileSync(join(repo, "notes.txt"), "untracked\n");
    mkdirSync(join(repo, "build"));
    writeFileSync(join(repo, "build", "out.o"), "ignored\n");
    writeFileSync(join(repo, "debug.log"), "ignored\n");
    const run = await fake.runner.start(task);
    await run.result;
    const notes = eventData(eventsFile(run.directory), "workspace.uncommitted");
    expect(notes).toHaveLength(1);
    expect(notes[0]).toMatchObject({ changed_count: 2, ignored_count: 2 });
    expect(notes[0]!.changed).toEqual(expect.arrayContaining(["README.md", "notes.txt"]));
    expect(notes[0]!.ignored).toEqual(expect.arrayContaining(["build/", "debug.log"]));
  });

  it("ignored caches and installed environments (.pytest_cache/, __pycache__/, node_modules/, .venv/) are not worth a note", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell() });
    const { task, repo } = writeScriptedTask(directory.path, {
      script: { turns: [{ content: "Done." }] },
      files: { "README.md": "hello\n", ".gitignore": ".pytest_cache/\n__pycache__/\nnode_modules/\n.venv/\n*.pyc\nlocal.cfg\n" },
    });
    for (const cache of [".pytest_cache", "src/__pycache__", "node_modules/left-pad", ".venv/bin"]) {
      mkdirSync(join(repo, cache), { recursive: true });
      writeFileSync(join(repo, cache, "x"), "cached\n");
    }
    writeFileSync(join(repo, "old.pyc"), "bytecode\n");
    const clean = await fake.runner.start(task);
    await clean.result;
    expect(eventData(eventsFile(clean.directory), "workspace.uncommitted")).toEqual([]);
    // A file the user keeps out of git on purpose is still named.
    writeFileSync(join(repo, "local.cfg"), "mine\n");
    const run = await fake.runner.start(task);
    await run.result;
    expect(eventData(eventsFile(run.directory), "workspace.uncommitted")).toEqual([expect.objectContaining({ ignored_count: 1, ignored: ["local.cfg"] })]);
  });

  it("says nothing for a clean checkout", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell() });
    const { task } = writeScriptedTask(directory.path, { script: { turns: [{ content: "Done." }] } });
    const run = await fake.runner.start(task);
    await run.result;
    expect(eventData(eventsFile(run.directory), "workspace.uncommitted")).toEqual([]);
  });
});
