/**
 * With RUNNER_HOME inside the task's repository, nothing read from it is
 * configuration (issue 20 item 10): a merge of agent work writes into that
 * tree, so `$RUNNER_HOME/skills` is skipped like `config.yaml`, and a skill
 * directory the user linked into the repository is skipped too.
 */
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createRunner } from "../../../src/runner/runner.js";
import { HostDirectorySandboxProvider } from "../../../src/sandbox/fake/host-directory-sandbox.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { eventData, eventsFile, fakeShell, fakeTierEnvironment, toolCall, writeScriptedTask } from "../../helpers/fake-runner.js";

function skill(directory: string, name: string): void {
  mkdirSync(join(directory, name), { recursive: true });
  writeFileSync(join(directory, name, "SKILL.md"), `---\nname: ${name}\ndescription: PLANTED ${name}\n---\n\nPLANTED BODY of ${name}\n`);
}

describe("RUNNER_HOME inside the task's repository", () => {
  it("its skills are not read (a problem says why); a skill linked into the repository from a home outside is not either", async () => {
    await using directory = temporaryDirectory();
    const { task, repo } = writeScriptedTask(directory.path, {
      script: { turns: [{ tool_calls: [toolCall("read_file", { path: "README.md" })] }, { content: "Done." }] },
    });
    writeFileSync(join(repo, ".gitignore"), ".runner/\n");
    const home = join(repo, ".runner");
    skill(join(home, "skills"), "planted");
    const runner = await createRunner({
      home,
      sandboxProvider: new HostDirectorySandboxProvider({ exec: fakeShell() }),
      environment: fakeTierEnvironment(home),
    });
    try {
      const handle = await runner.start(task);
      expect((await handle.result).status).toBe("succeeded");
      const [loaded] = eventData(eventsFile(handle.directory), "skills.loaded");
      expect(loaded!.skills).not.toContain("user:planted");
      // (The fake shell runs no git, so the base commit's skills are a problem of their own.)
      expect(loaded!.problems).toContainEqual(
        expect.stringMatching(new RegExp(`^${join(home, "skills")}: not read: it is inside .*, which the agent's work can change`)),
      );
    } finally {
      await runner.close();
    }

    // A home outside the repository whose skills/ links one skill into it: that one is skipped, the others load.
    await using outsideHome = temporaryDirectory();
    skill(join(outsideHome.path, "skills"), "mine");
    skill(join(repo, "tools", "skills"), "linked");
    symlinkSync(join(repo, "tools", "skills", "linked"), join(outsideHome.path, "skills", "linked"));
    const second = await createRunner({
      home: outsideHome.path,
      sandboxProvider: new HostDirectorySandboxProvider({ exec: fakeShell() }),
      environment: fakeTierEnvironment(outsideHome.path),
    });
    try {
      const handle = await second.start(task);
      expect((await handle.result).status).toBe("succeeded");
      const [loaded] = eventData(eventsFile(handle.directory), "skills.loaded");
      expect(loaded!.skills).toContain("user:mine");
      expect(loaded!.skills).not.toContain("user:linked");
      expect(loaded!.problems).toContainEqual(expect.stringContaining(`${join(outsideHome.path, "skills", "linked")}: not read: it is inside`));
    } finally {
      await second.close();
    }
  });
});
