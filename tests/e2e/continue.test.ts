/**
 * `runner continue` end to end (issue 26 items 9 and 11): the built CLI, a
 * scripted model over HTTP, real Docker and git. A run whose verification
 * failed gets the user's feedback and goes on in a new sandbox, on the same
 * branch, verified again; its commits are the repository user's, co-authored
 * by agent-runner and the model.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { requireDocker } from "../helpers/docker.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { eventsOfType, readEvents, readJson, removeContainersOfRun, runCli, toolCall, writeScriptedTask } from "../helpers/runner-cli.js";

describe("runner continue (real CLI, scripted model over HTTP, real Docker)", () => {
  it("a failed run goes on with the feedback: new sandbox, same branch, verified; commits by the repository's user", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const environment = { RUNNER_HOME: home.path };
    const { task, git } = writeScriptedTask(directory.path, {
      script: {
        turns: [
          { tool_calls: [toolCall("write_file", { path: "median.txt", content: "4\n" })] },
          { content: "Set the median." },
          // After the feedback: the model sees it as the user's turn and fixes the file.
          { tool_calls: [toolCall("run_shell", { command: "cat median.txt" })] },
          { expect: { tool_result_matches: "^exit_code: 0\\nstdout:\\n4\\n" }, tool_calls: [toolCall("write_file", { path: "median.txt", content: "3\n" })] },
          { content: "Now it is 3." },
        ],
      },
      files: { "median.txt": "2\n" },
      task: { name: "continue-median", max_steps: 3, verify: { command: 'test "$(cat median.txt)" = 3', timeout_sec: 60 } },
    });
    git("config", "user.name", "Ada Lovelace");
    git("config", "user.email", "ada@example.com");

    const first = await runCli(["exec", task], environment);
    expect(first.code, first.stderr + first.stdout).toBe(1);
    const runId = /run directory: \S+\/runs\/(\S+)/.exec(first.stdout)![1]!;
    const runDirectory = join(home.path, "runs", runId);
    const { branch } = readJson<{ branch: string }>(join(runDirectory, "run.json"));
    try {
      const again = await runCli(["continue", runId, "The median of 1..5 is 3, not 4."], environment);
      expect(again.code, again.stderr + again.stdout).toBe(0);
      expect(again.stdout).toContain(`continuing run ${runId} at model call 3`);
      expect(again.stdout).toMatch(/status: succeeded \(verified\)/);
      expect(readJson(join(runDirectory, "report.json"))).toMatchObject({ status: "succeeded", resumes: 1, steps: 5, branch });
      expect(git("show", `${branch}:median.txt`)).toBe("3\n");
      expect(git("log", "--format=%an <%ae>%n%(trailers:key=Co-authored-by,valueonly)", `main..${branch}`).trim().split("\n").filter(Boolean)).toEqual([
        "Ada Lovelace <ada@example.com>",
        "agent-runner (scripted) <agent-runner@localhost>",
        "Ada Lovelace <ada@example.com>",
        "agent-runner (scripted) <agent-runner@localhost>",
      ]);
      const events = readEvents(runDirectory);
      expect(eventsOfType(events, "run.resumed")).toEqual([
        expect.objectContaining({ data: expect.objectContaining({ follow_up: "The median of 1..5 is 3, not 4." }) }),
      ]);
      expect(eventsOfType(events, "verify.finished").map((event) => (event.data as { passed: boolean }).passed)).toEqual([false, true]);
    } finally {
      removeContainersOfRun(runId);
    }
  });
});
