/**
 * One step numbering for people (issue 13): the terminal's `step N`, a
 * script's problems and an unmet `expect` count from 1 and name the script's
 * `turns[N-1]`; the events' `step` stays the 0-based index (docs/events.md).
 */
import { describe, expect, it } from "vitest";
import { ProgressView } from "../../../src/cli/progress-view.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { eventData, eventsFile, fakeRunner, toolCall, writeScriptedTask } from "../../helpers/fake-runner.js";

describe("step numbering", () => {
  it("the terminal's step 2 is event step 1, and an unmet expect at step 3 names turns[2]", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner();
    const { task } = writeScriptedTask(directory.path, {
      script: {
        turns: [
          { tool_calls: [toolCall("list_dir", { path: "." })] },
          { tool_calls: [toolCall("read_file", { path: "README.md" })] },
          { expect: { tool_result_matches: "never printed" }, content: "Done." },
        ],
      },
    });
    const run = await fake.runner.start(task);
    const report = await run.result;
    expect(report).toMatchObject({ status: "error", reason: "script_expectation_failed" });
    expect(report.error).toMatch(/: scripted model: step 3 \(turns\[2\]\) expect\.tool_result_matches \/never printed\/ not met/);

    const events = eventsFile(run.directory);
    expect(eventData(events, "tool_call.started").map((data) => [data.step, data.name])).toEqual([
      [0, "list_dir"],
      [1, "read_file"],
    ]);
    let shown = "";
    const view = new ProgressView({ isTTY: false, write: (chunk: string) => ((shown += chunk), true) } as unknown as NodeJS.WriteStream);
    for (const envelope of events) view.show(envelope);
    expect(shown).toMatch(/\] step 1 list_dir /);
    expect(shown).toMatch(/\] step 2 read_file /);
  });
});
