/**
 * Runner.merge (the seam behind `POST /v1/runs/{id}/merge`): the verified
 * fast-forward of an ended run, refusing with the reasons `--merge` gives,
 * and what only a later merge can meet: a run branch moved since it was
 * verified. The Docker-free tier (HostDirectorySandboxProvider, scripted model, real git).
 */
import { describe, expect, it } from "vitest";
import { ConfigError } from "../../../src/errors.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { fakeRunner, fakeShell, toolCall, writeScriptedTask } from "../../helpers/fake-runner.js";

const SCRIPT = { turns: [{ tool_calls: [toolCall("run_shell", { command: "echo fixed >> notes.txt" })] }, { content: "Done." }] };

describe("Runner.merge", () => {
  it("refuses a moved run branch and a moved user branch, then merges the verified commit once both are back", async () => {
    await using directory = temporaryDirectory();
    await using fake = await fakeRunner({ exec: fakeShell() });
    const { task, git } = writeScriptedTask(directory.path, {
      script: SCRIPT,
      files: { "notes.txt": "" },
      task: { verify: { command: "grep -q fixed notes.txt", timeout_sec: 30 } },
    });
    const run = await fake.runner.start(task);
    const report = await run.result;
    expect(report.status).toBe("succeeded");
    const base = git("rev-parse", "main").trim();

    git("branch", "-f", report.branch!, "main");
    expect(await fake.runner.merge(run.id)).toMatchObject({ merged: false, detail: expect.stringContaining("moved since it was verified") });
    git("branch", "-f", report.branch!, report.head_commit!);

    git("commit", "-q", "--allow-empty", "-m", "meanwhile");
    expect(await fake.runner.merge(run.id)).toMatchObject({ merged: false, detail: expect.stringContaining("moved since the run started") });
    git("reset", "-q", "--hard", base);

    expect(await fake.runner.merge(run.id)).toMatchObject({ merged: true, branch: "refs/heads/main" });
    expect(git("rev-parse", "main").trim()).toBe(report.head_commit);
    await expect(fake.runner.merge("no-such-run")).rejects.toThrow(ConfigError);
  });
});
