/**
 * Notes that train people to skip the yellow line (issue 26 item 14): an
 * unpriced model's cost is said once (the summary's cost line), and a run
 * that changed nothing prints no `patch:` line pointing at an empty file.
 * (Ignored caches in the checkout: tests/unit/run/fake-tier-workspace.test.ts.)
 * A real run of the Docker-free tier, shown through the terminal view and
 * `runner exec`'s summary.
 */
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { outcomeText } from "../../../src/cli/run-summary.js";
import { ProgressView } from "../../../src/cli/progress-view.js";
import { loadTaskFile } from "../../../src/config/load-task.js";
import { readEvent } from "../../../src/events/event-catalogue.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { eventsFile, fakeRunner, fakeShell, toolCall, writeScriptedTask } from "../../helpers/fake-runner.js";

/** What the terminal view and the summary show of a finished run. */
function screen(taskFile: string, run: { directory: string }, report: Parameters<typeof outcomeText>[1]["report"]): string {
  let shown = "";
  const view = new ProgressView({ isTTY: false, write: (chunk: string) => ((shown += chunk), true) } as unknown as NodeJS.WriteStream);
  for (const envelope of eventsFile(run.directory)) {
    const read = readEvent(envelope);
    if (read.kind === "event") view.emit(read.event);
  }
  return shown + outcomeText(loadTaskFile(taskFile), { report, runDirectory: run.directory });
}

describe("notes said once, or not at all", () => {
  it("an unpriced model: the cost is unknown once, in the summary; a run with no change has no patch: line", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell() });
    const { task } = writeScriptedTask(directory.path, { script: { turns: [{ content: "Nothing to do." }] }, task: { name: "unpriced" } });
    const run = await fake.runner.start(task);
    const report = await run.result;
    expect(report.cost_usd).toBeNull();
    expect(statSync(join(run.directory, "patch.diff")).size).toBe(0);
    const text = screen(task, run, report);
    expect(text.match(/not priced|cost: unknown/g)).toEqual(["cost: unknown"]);
    expect(text).not.toMatch(/^patch:/m);
    expect(text).toMatch(/^run directory: /m);
  });

  it("a run that changed something still names its patch", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell() });
    const { task } = writeScriptedTask(directory.path, {
      script: { turns: [{ tool_calls: [toolCall("write_file", { path: "x.txt", content: "x\n" })] }, { content: "Done." }] },
    });
    const run = await fake.runner.start(task);
    const report = await run.result;
    expect(readFileSync(join(run.directory, "patch.diff"), "utf8")).toContain("+x");
    expect(screen(task, run, report)).toMatch(new RegExp(`^patch: ${join(run.directory, "patch.diff")}$`, "m"));
  });
});
