/**
 * The event catalogue against a real run (issue 11 item 4): the built CLI,
 * the scripted model over HTTP, real Docker and git. A run that touches many
 * emit sites (every built-in tool and its `details`, a denial, hooks that
 * allow, note and fail, a background task, a commit that leaves a path out,
 * protected verify paths, a merge) must write only lines that read strictly
 * against the catalogue: no unknown type, no field off its schema, no field
 * the catalogue does not list. `--json` prints exactly those lines.
 */
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readEvent, type RunEventName } from "../../src/events/event-catalogue.js";
import { requireDocker } from "../helpers/docker.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { readEvents, runCli, toolCall, writeScriptedTask } from "../helpers/runner-cli.js";

describe("event catalogue (real CLI, scripted model, real Docker)", () => {
  it("every line of a run's events.jsonl reads strictly against the catalogue, and --json prints exactly those lines, then the outcome line", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const hooks = join(directory.path, "hooks");
    mkdirSync(hooks);
    for (const [name, body] of Object.entries({ "allow.sh": "exit 0", "note.sh": "echo looks fine", "broken.sh": "echo broken >&2; exit 1" })) {
      writeFileSync(join(hooks, name), `#!/bin/sh\ncat > /dev/null\n${body}\n`);
      chmodSync(join(hooks, name), 0o755);
    }
    const { task } = writeScriptedTask(directory.path, {
      files: { "README.md": "catalogue test\n", "tests/check.sh": "test -f notes.txt\n" },
      task: {
        name: "event-catalogue",
        verify: { command: "sh tests/check.sh", protect: ["tests/**"], timeout_sec: 60 },
        hooks: {
          pre_tool_use: [
            { command: "./hooks/allow.sh", tools: ["write_file"] },
            { command: "./hooks/broken.sh", tools: ["read_file"] },
          ],
          post_tool_use: [{ command: "./hooks/note.sh", tools: ["write_file"] }],
        },
      },
      script: {
        turns: [
          { tool_calls: [toolCall("write_file", { path: "notes.txt", content: "one\ntwo\n" }), toolCall("read_file", { path: "notes.txt" })] },
          { tool_calls: [toolCall("edit_file", { path: "notes.txt", old_string: "two", new_string: "three" }), toolCall("list_dir", { path: "." })] },
          { tool_calls: [toolCall("grep", { pattern: "three" }), toolCall("glob", { pattern: "**/*.txt" })] },
          { tool_calls: [toolCall("run_shell", { command: "sudo -n true" }), toolCall("run_shell", { command: "echo quick", background: true })] },
          // A weakened check under verify.protect, and a `.GIT` directory the host commit leaves out.
          { tool_calls: [toolCall("run_shell", { command: "echo true > tests/check.sh; D=$(printf '.GI%s' T); mkdir $D && echo x > $D/config" })] },
          { content: "Done." },
        ],
      },
    });
    const result = await runCli(["exec", "--json", "--merge", task], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr + result.stdout).toBe(0);
    const printed = result.stdout.trimEnd().split("\n");
    const runDirectory = join(home.path, "runs", String((JSON.parse(printed[0]!) as { runid: string }).runid));
    const written = readFileSync(join(runDirectory, "events.jsonl"), "utf8").trimEnd().split("\n");
    // Every line but the last is events.jsonl's; the last is the outcome line, not an event.
    expect(printed.slice(0, -1)).toEqual(written);
    expect(JSON.parse(printed.at(-1)!)).toMatchObject({ type: "runner.result", status: "succeeded", report: join(runDirectory, "report.json") });

    const reads = written.map((line) => readEvent(JSON.parse(line), { strict: true }));
    expect(reads.filter((read) => read.kind !== "event")).toEqual([]);
    // readEvents (every e2e test's reader) applies the same strict check.
    expect(readEvents(runDirectory)).toHaveLength(written.length);

    const seen = new Set(reads.flatMap((read) => (read.kind === "event" ? [read.event.type] : [])));
    const expected: RunEventName[] = [
      "run.started",
      "disk.prepared",
      "sandbox.created",
      "skills.loaded",
      "model_call.started",
      "model_call.finished",
      "tool_call.started",
      "tool_call.finished",
      "tool_call.denied",
      "hook.finished",
      "hook.failed",
      "task.started",
      "agent.finished",
      "workspace.committed",
      "verify.started",
      "verify.protected",
      "verify.finished",
      "workspace.merged",
      "run.finished",
    ];
    expect(expected.filter((type) => !seen.has(type))).toEqual([]);
    const finishedTools = reads.flatMap((read) =>
      read.kind === "event" && read.event.type === "tool_call.finished" && read.event.data.details ? [read.event.data.name] : [],
    );
    expect(new Set(finishedTools)).toEqual(new Set(["write_file", "read_file", "edit_file", "list_dir", "grep", "glob", "run_shell"]));
    const committed = reads.find((read) => read.kind === "event" && read.event.type === "workspace.committed");
    expect(committed).toMatchObject({ event: { data: { left_out: [{ path: ".GIT", reason: "dotgit_name" }], left_out_count: 1 } } });
  });
});
