/**
 * Task discovery and selection of `runner batch run` (src/batch/discover-tasks.ts):
 * each input kind, stable ids, every problem reported before anything runs,
 * and `--shard i/n` as an exact, stable partition. Real files and git; no Docker.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../src/errors.js";
import { discoverTasks, parseShard, selectTasks, shardOf } from "../../src/batch/discover-tasks.js";
import { temporaryDirectory } from "../helpers/git-repository.js";

/** `<root>/<path>/`: task.yaml (scripted), script.yaml and repo/ (a git repository with one commit). */
function writeTask(root: string, path: string, fields: Record<string, unknown> = {}): string {
  const directory = join(root, path);
  mkdirSync(join(directory, "repo"), { recursive: true });
  writeFileSync(join(directory, "repo", "README.md"), "x\n");
  const git = (...args: string[]) => execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@localhost", ...args], { cwd: join(directory, "repo") });
  git("init", "-q", "-b", "main");
  git("add", "-A");
  git("commit", "-q", "-m", "init");
  writeFileSync(join(directory, "script.yaml"), JSON.stringify({ turns: [{ content: "done" }] }));
  writeFileSync(
    join(directory, "task.yaml"),
    JSON.stringify({ name: "t", instruction: "x", workspace: "./repo", model: { provider: "scripted", script: "./script.yaml" }, ...fields }),
  );
  return join(directory, "task.yaml");
}

describe("batch task discovery", () => {
  it("a directory: every task.yaml below it, ids its directory relative to it (no /task.yaml), not below a task's own directory, .git or node_modules", async () => {
    await using root = temporaryDirectory();
    writeTask(root.path, "b");
    writeTask(root.path, "group/a");
    // A task.yaml inside a task's repository belongs to that task's project, not to the batch.
    writeTask(join(root.path, "b", "repo"), "inner");
    writeTask(root.path, "node_modules/pkg");
    const found = await discoverTasks(root.path);
    expect(found.kind).toBe("directory");
    expect(found.tasks.map((task) => task.id)).toEqual(["b", "group/a"]);
    expect(found.tasks[0]!.task_file).toBe(join(root.path, "b", "task.yaml"));
    expect(found.tasks[0]!.task!.workspacePath).toBe(join(root.path, "b", "repo"));
  });

  it("a glob: matching task files or task directories, ids relative to the glob's base", async () => {
    await using root = temporaryDirectory();
    writeTask(root.path, "suite/one");
    writeTask(root.path, "suite/two");
    writeTask(root.path, "other/three");
    expect((await discoverTasks("suite/*", root.path)).tasks.map((task) => task.id)).toEqual(["one", "two"]);
    const files = await discoverTasks(join(root.path, "*/t*/task.yaml"));
    expect(files.kind).toBe("glob");
    expect(files.tasks.map((task) => task.id)).toEqual(["other/three", "suite/two"]);
  });

  it("a list file: one task file or directory per line, relative to the list; comments and blank lines skipped", async () => {
    await using root = temporaryDirectory();
    writeTask(root.path, "tasks/one");
    writeTask(root.path, "tasks/two");
    writeFileSync(join(root.path, "list.txt"), "# the smoke set\ntasks/one\n\n  tasks/two/task.yaml  \n");
    const found = await discoverTasks(join(root.path, "list.txt"));
    expect(found.tasks.map((task) => task.id)).toEqual(["tasks/one", "tasks/two"]);
  });

  it("a JSONL file: one task object per line, id from `id` (else `name`), paths relative to the file", async () => {
    await using root = temporaryDirectory();
    writeTask(root.path, "w");
    const line = (fields: Record<string, unknown>) =>
      JSON.stringify({ instruction: "x", workspace: "./w/repo", model: { provider: "scripted", script: "./w/script.yaml" }, ...fields });
    writeFileSync(join(root.path, "tasks.jsonl"), `${line({ id: "case-1", name: "same" })}\n${line({ name: "case-2" })}\n`);
    const found = await discoverTasks(join(root.path, "tasks.jsonl"));
    expect(found.tasks.map((task) => [task.id, task.task!.name, task.task_file])).toEqual([
      ["case-1", "same", `${join(root.path, "tasks.jsonl")}:1`],
      ["case-2", "case-2", `${join(root.path, "tasks.jsonl")}:2`],
    ]);
    expect(found.tasks[0]!.task!.workspacePath).toBe(join(root.path, "w", "repo"));
  });

  it("a directory that is itself a task: the id is the directory's name; a task file of another name keeps its path", async () => {
    await using root = temporaryDirectory();
    writeTask(root.path, "fix-add");
    expect((await discoverTasks(join(root.path, "fix-add"))).tasks.map((task) => task.id)).toEqual(["fix-add"]);
    writeTask(root.path, "other");
    renameSync(join(root.path, "other", "task.yaml"), join(root.path, "other", "smoke.yaml"));
    writeFileSync(join(root.path, "list.txt"), "fix-add\nother/smoke.yaml\n");
    expect((await discoverTasks(join(root.path, "list.txt"))).tasks.map((task) => task.id)).toEqual(["fix-add", "other/smoke.yaml"]);
  });

  it("a task the loader refuses is returned with the loader's message (the batch runs the others); ids in order", async () => {
    await using root = temporaryDirectory();
    for (const name of ["a", "b", "d", "e"]) writeTask(root.path, name);
    const typo = writeTask(root.path, "c-typo");
    writeFileSync(typo, readFileSync(typo, "utf8").replace('"instruction"', '"verfy":{"command":"true"},"instruction"'));
    const noRepo = writeTask(root.path, "f-no-repo");
    writeFileSync(noRepo, JSON.stringify({ name: "t", instruction: "x", workspace: ".", model: { provider: "scripted", script: "./script.yaml" } }));
    const found = await discoverTasks(root.path);
    expect(found.tasks.map((task) => [task.id, task.task === null])).toEqual([
      ["a", false],
      ["b", false],
      ["c-typo", true],
      ["d", false],
      ["e", false],
      ["f-no-repo", true],
    ]);
    expect(found.tasks[2]!.invalid).toMatch(/c-typo\/task\.yaml: .*\n.*verfy/);
    expect(found.tasks[5]!.invalid).toMatch(/f-no-repo\/task\.yaml: workspace: .* is not a git repository/);
  });

  it("bad input as a whole is one ConfigError (exit 2): repeated ids, no entry that is a task (naming every problem), nothing found", async () => {
    await using root = temporaryDirectory();
    writeTask(root.path, "good");
    const line = JSON.stringify({
      id: "dup",
      name: "dup",
      instruction: "x",
      workspace: "./good/repo",
      model: { provider: "scripted", script: "./good/script.yaml" },
    });
    writeFileSync(join(root.path, "tasks.jsonl"), `${line}\nnot json\n${line}\n`);
    const jsonlError = (await discoverTasks(join(root.path, "tasks.jsonl")).catch((error: unknown) => error)) as Error;
    expect(jsonlError).toBeInstanceOf(ConfigError);
    expect(jsonlError.message).toMatch(/task id "dup" is used by both .*tasks\.jsonl:1 and .*tasks\.jsonl:3/);
    writeFileSync(join(root.path, "broken.jsonl"), `not json\n{"id": \n`);
    const allBroken = (await discoverTasks(join(root.path, "broken.jsonl")).catch((error: unknown) => error)) as Error;
    expect(allBroken).toBeInstanceOf(ConfigError);
    expect(allBroken.message).toMatch(/2 problems/);
    expect(allBroken.message).toMatch(/broken\.jsonl:1: not JSON/);
    // Tasks that are there but all refused are no bad input as a whole: each is its task's error, and the batch
    // writes its reports (pytest writes its JUnit file for collection errors too).
    writeFileSync(join(root.path, "refused.jsonl"), `${JSON.stringify({ id: "x", instruction: "x" })}\n`);
    const refused = await discoverTasks(join(root.path, "refused.jsonl"));
    expect(refused.tasks).toEqual([expect.objectContaining({ id: "x", task: null, invalid: expect.stringContaining("refused.jsonl:1") })]);
    await expect(discoverTasks(join(root.path, "nothing-*"))).rejects.toThrow(/no tasks found/);
    await expect(discoverTasks(join(root.path, "missing"))).rejects.toThrow(/no such file or directory/);
  });
});

describe("--shard i/n", () => {
  const ids = Array.from({ length: 400 }, (_, index) => `suite-${index % 7}/task-${index}`);

  it("the n shards partition the tasks exactly (every task in one shard), for every n", () => {
    for (const count of [1, 2, 3, 5, 8, 13]) {
      const shards = Array.from({ length: count }, (_, index) =>
        selectTasks(
          ids.map((id) => ({ id })),
          { shard: { index: index + 1, count } },
        ).map((task) => task.id),
      );
      expect(shards.flat().sort()).toEqual([...ids].sort());
      expect(new Set(shards.flat()).size).toBe(ids.length);
      // A hash spreads them: no shard of 5 is empty or holds more than twice its share.
      if (count === 5) {
        for (const shard of shards) {
          expect(shard.length).toBeGreaterThan(40);
          expect(shard.length).toBeLessThan(160);
        }
      }
    }
  });

  it("a task's shard depends on its id alone: adding tasks elsewhere moves none", () => {
    const before = new Map(ids.map((id) => [id, shardOf(id, 5)]));
    const more = [...ids, ...Array.from({ length: 100 }, (_, index) => `new/task-${index}`)];
    const selected = selectTasks(
      more.map((id) => ({ id })),
      { shard: { index: 3, count: 5 } },
    ).map((task) => task.id);
    expect(selected.filter((id) => before.has(id))).toEqual(ids.filter((id) => before.get(id) === 3));
  });

  it("--filter, then --shard, then --limit (the first ids)", () => {
    const tasks = ids.map((id) => ({ id }));
    const shard = { index: 2, count: 3 };
    const filtered = tasks.filter((task) => /suite-1\//.test(task.id) && shardOf(task.id, 3) === 2);
    expect(selectTasks(tasks, { filter: /suite-1\//, shard, limit: 4 })).toEqual(filtered.slice(0, 4));
  });

  it("parses i/n and names the flag when it is wrong", () => {
    expect(parseShard("2/5")).toEqual({ index: 2, count: 5 });
    for (const bad of ["0/5", "6/5", "2", "a/b", "1/0"]) expect(() => parseShard(bad)).toThrow(/--shard: expected i\/n/);
  });
});
