/**
 * Git in the sandbox works like git in any clone (issue 27 items 1 and 2):
 * `stash`, `checkout FILE`, `restore`, `add`, `commit`, branches — the
 * commands with which real agents revert and try things — through the
 * container's own git directory (containerGitView), in the default image and
 * in one whose git (Debian 11's 2.30) predates GIT_CONFIG_COUNT. The
 * delivered change is still the worktree's files, committed by the runner;
 * what the agent wrote to git stays in its container (security-mounts-env).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createGitRepository } from "../helpers/git-repository.js";
import { requireDocker } from "../helpers/docker.js";
import { ensureTestImage, OLD_GIT_IMAGE } from "../helpers/test-images.js";
import { describeRun, parseShellResult, runScriptedTask, shellTurn, type ScriptedRun } from "./security-harness.js";

/** Each git command's exit status on its own line (`<command> -> <status>`), the file between steps, the final status. */
const AGENT_GIT_SESSION = [
  'r() { "$@" >/dev/null 2>>/tmp/git-errors; echo "$* -> $?"; }',
  "git --version",
  "echo changed > app.txt",
  "r git stash",
  'echo "after stash: $(cat app.txt)"',
  "r git stash pop",
  'echo "after pop: $(cat app.txt)"',
  "r git checkout app.txt",
  'echo "after checkout: $(cat app.txt)"',
  "echo again > app.txt",
  "r git restore app.txt",
  'echo "after restore: $(cat app.txt)"',
  "echo final > app.txt; echo new > new.txt",
  "r git add -A",
  "r git commit -q -m agent-local",
  "r git branch agent-branch",
  "r git switch -q -c agent-other",
  "r git switch -q -",
  "r git reset -q --soft HEAD~1",
  "r git restore --staged .",
  "echo --- status; git status --porcelain; echo --- errors; cat /tmp/git-errors",
].join("\n");

const EXPECTED_STEPS = [
  "git stash -> 0",
  "after stash: hello",
  "git stash pop -> 0",
  "after pop: changed",
  "git checkout app.txt -> 0",
  "after checkout: hello",
  "git restore app.txt -> 0",
  "after restore: hello",
  "git add -A -> 0",
  "git commit -q -m agent-local -> 0",
  "git branch agent-branch -> 0",
  "git switch -q -c agent-other -> 0",
  "git switch -q - -> 0",
  "git reset -q --soft HEAD~1 -> 0",
  "git restore --staged . -> 0",
];

describe.each([
  { label: "the default image", image: async () => undefined, version: /^git version 2\.(3[1-9]|[4-9]\d)/ },
  { label: "an image with git 2.30 (before GIT_CONFIG_COUNT)", image: () => ensureTestImage(OLD_GIT_IMAGE), version: /^git version 2\.30\./ },
])("git in the sandbox: $label", ({ image, version }) => {
  let repository: ReturnType<typeof createGitRepository>;
  let run: ScriptedRun;

  beforeAll(async () => {
    await requireDocker();
    const tag = await image();
    repository = createGitRepository({ "app.txt": "hello\n" }, { prefix: "agent-runner-sandbox-git-" });
    run = await runScriptedTask({ repository: repository.root, turns: [shellTurn(AGENT_GIT_SESSION)], ...(tag ? { sandbox: { image: tag } } : {}) });
  });

  afterAll(async () => {
    run?.dispose();
    await repository?.[Symbol.asyncDispose]();
  });

  it("stash, checkout, restore, add, commit, branch and switch all work", () => {
    const { stdout, exitCode } = parseShellResult(run.toolResults[0]);
    expect(exitCode, describeRun(run)).toBe("0");
    const lines = stdout.split("\n");
    expect(lines[0]).toMatch(version);
    expect(lines.slice(1, 1 + EXPECTED_STEPS.length), stdout).toEqual(EXPECTED_STEPS);
    const status = stdout.slice(stdout.indexOf("--- status\n") + 11, stdout.indexOf("--- errors"));
    expect(status).toBe(" M app.txt\n?? new.txt\n");
  });

  it("delivers the worktree's files, committed by the runner on the run branch", () => {
    expect(run.report.status, describeRun(run)).toBe("succeeded");
    expect(repository.git("show", `${run.report.branch}:app.txt`)).toBe("final\n");
    expect(repository.git("show", `${run.report.branch}:new.txt`)).toBe("new\n");
    // The agent's own commit and branches stayed in its container.
    expect(repository.git("log", "--format=%s", run.report.branch!)).not.toContain("agent-local");
    expect(repository.git("for-each-ref", "--format=%(refname)")).not.toMatch(/agent-(branch|other)/);
  });
});
