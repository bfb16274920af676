/**
 * Policies, approvals and hooks end to end (issue 6): the built CLI, the
 * scripted model over HTTP, real Docker and git. What the model sees is
 * asserted with the script's `expect` (an unmet expect ends the run with
 * exit 3) and from session.json afterwards; approvals are answered on a real
 * pseudo-terminal (util-linux `script`), each answer typed only once its
 * question is on the screen; hooks are shell scripts in the task's directory
 * (outside the repository) that record what they were given.
 */
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { requireDocker } from "../helpers/docker.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { eventsOfType, readEvents, runCli, toolCall, writeScriptedTask } from "../helpers/runner-cli.js";
import { callsAndResults, processAlive } from "../helpers/run-records.js";
import { escapeRegExp, inspectGit, readReport, runDirectoryOf } from "../helpers/subagent-e2e.js";
import { startCliOnTerminal } from "../helpers/terminal-cli.js";

/** The reason the shipped worker and ci policies give for `git push` (policies/worker.yaml, commands.git-push). */
const PUSH_REASON =
  "publishes commits to a remote outside the sandbox; the runner already delivers the work as a branch runner/<task-name>-<short-id> for you to review and push";
/** What `git push` prints in the sandbox: it ran, and found nowhere to push to. */
const PUSH_RAN = "^exit_code: 128\\nstdout:\\n\\(empty\\)\\nstderr:\\nfatal: ";

/** Files on a commit of the repository. */
function filesAt(repo: string, commit: string): string[] {
  return inspectGit(repo, ["ls-tree", "-r", "--name-only", commit]).split("\n").filter(Boolean).sort();
}

describe("policies, approvals and hooks (real CLI, scripted model, real Docker and git)", () => {
  beforeAll(async () => {
    await requireDocker();
  });

  it("policy ci: git push and sudo are refused with [denied] and the reason; report.denials counts the rules; a verified run says succeeded (verified_with_denials) and the summary prints denied:", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task, repo } = writeScriptedTask(directory.path, {
      task: { name: "ci-denials", policy: "ci", verify: { command: "test -f README.md", timeout_sec: 60 } },
      script: {
        turns: [
          // The most severe part of a line decides for all of it: nothing of it runs.
          { tool_calls: [toolCall("run_shell", { command: "touch pushed.txt && git push origin main" })] },
          {
            expect: {
              tool_result_matches: `^\\[denied\\] \`git push origin main\`: ${escapeRegExp(PUSH_REASON)} — this needs confirmation, and policy ci refuses everything that does \\(confirmations: deny\\)$`,
            },
            tool_calls: [toolCall("run_shell", { command: "sudo -n true" })],
          },
          {
            expect: { tool_result_matches: "^\\[denied\\] `sudo -n true`: the sandbox runs as an unprivileged user" },
            tool_calls: [toolCall("run_shell", { command: "echo still-working" })],
          },
          { expect: { tool_result_matches: "^exit_code: 0\\nstdout:\\nstill-working" }, content: "Could not push: the policy refuses it." },
        ],
      },
    });
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr + result.stdout).toBe(0);
    const runDirectory = runDirectoryOf(result);
    const report = readReport(runDirectory);
    expect(report).toMatchObject({
      status: "succeeded",
      reason: "verified_with_denials",
      policy: "ci",
      denials: { "commands.git-push": 1, "commands.privileges": 1 },
    });
    expect(Object.keys(report.denials as object)).toHaveLength(2);
    expect(result.stdout).toContain("status: succeeded (verified_with_denials)");
    expect(result.stdout).toMatch(
      /^denied: commands\.git-push ×1, commands\.privileges ×1 \(rules of the agents. policies; see events\.jsonl tool_call\.denied\)$/m,
    );
    const denied = eventsOfType(readEvents(runDirectory), "tool_call.denied").map((event) => event.data);
    expect(denied).toEqual([
      expect.objectContaining({ agent_id: "main", name: "run_shell", rule: "commands.git-push", reason: expect.stringContaining(PUSH_REASON) }),
      expect.objectContaining({ agent_id: "main", name: "run_shell", rule: "commands.privileges" }),
    ]);
    // Nothing of the refused line ran.
    expect(filesAt(repo, report.head_commit)).toEqual(["README.md"]);
  });

  it("a policy file of the user's (outside the repository) denying writes to secrets/**: write_file and a shell redirection are refused with its reason, nothing is created there, other writes work", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const policy = join(directory.path, "policies", "no-secrets.yaml");
    mkdirSync(join(directory.path, "policies"));
    writeFileSync(
      policy,
      [
        "name: no-secrets",
        "description: Writes anywhere but secrets/.",
        "tools: { allow: [read_file, list_dir, write_file, edit_file, run_shell] }",
        "paths:",
        "  write:",
        '    allow: ["**"]',
        '    deny: [{ glob: "secrets/**", reason: "secrets are provisioned by the ops team, never written by an agent" }]',
        "default_command_risk: allow",
        "confirmations: deny",
        "",
      ].join("\n"),
    );
    const { task, repo } = writeScriptedTask(directory.path, {
      files: { "README.md": "test repository\n", "secrets/.keep": "" },
      task: { name: "custom-policy", policy: "./policies/no-secrets.yaml" },
      script: {
        turns: [
          {
            tool_calls: [
              toolCall("write_file", { path: "secrets/api-key.txt", content: "sk-planted\n" }),
              toolCall("write_file", { path: "docs/../secrets/other.txt", content: "x\n" }),
              toolCall("run_shell", { command: "echo leaked > secrets/shell.txt" }),
              toolCall("write_file", { path: "notes/ok.txt", content: "fine\n" }),
            ],
          },
          {
            expect: {
              tool_result_matches:
                "^\\[denied\\] writing secrets/api-key\\.txt is denied by policy no-secrets: secrets are provisioned by the ops team, never written by an agent\\n" +
                "\\[denied\\] writing secrets/other\\.txt is denied by policy no-secrets: secrets are provisioned[^\\n]*\\n" +
                "\\[denied\\] [^\\n]*secrets/shell\\.txt[^\\n]*secrets are provisioned[^\\n]*\\n" +
                "Wrote ",
            },
            content: "Wrote notes only.",
          },
        ],
      },
    });
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr + result.stdout).toBe(0);
    const report = readReport(runDirectoryOf(result));
    expect(report).toMatchObject({
      status: "succeeded",
      reason: "finished_unverified_with_denials",
      policy: "no-secrets",
      denials: { "paths.write.deny[0]": 3 },
    });
    expect(filesAt(repo, report.head_commit)).toEqual(["README.md", "notes/ok.txt", "secrets/.keep"]);
  });

  it("runner policy check: a shipped policy is explained (exit 0); a bad file lists every problem with its field path (exit 2)", async () => {
    await using directory = temporaryDirectory();
    const worker = await runCli(["policy", "check", "worker"], {});
    expect(worker.code, worker.stderr).toBe(0);
    expect(worker.stdout).toMatch(/^policy worker \(shipped, .*policies\/worker\.yaml\)\n/);
    expect(worker.stdout).toMatch(/^ {2}confirm +git push +\[commands\.git-push\]$/m);
    expect(worker.stdout).toContain(PUSH_REASON);
    expect(worker.stdout).toMatch(/^ {2}deny +sudo\|su\|doas\|runuser\|pkexec +\[commands\.privileges\]$/m);
    expect(worker.stdout).toContain("confirmations: prompt: asked on a terminal (y / n [reason] / a); refused when there is no terminal");
    expect(worker.stdout).toMatch(/\nvalid\n$/);

    const bad = join(directory.path, "bad.yaml");
    writeFileSync(
      bad,
      [
        "name: Bad Name",
        "description: broken on purpose",
        "tools: { allow: read_file }",
        "commands:",
        "  - match: rm",
        "    risk: maybe",
        "confirmations: sometimes",
        "colour: red",
        "",
      ].join("\n"),
    );
    const checked = await runCli(["policy", "check", bad], {});
    expect(checked.code, checked.stdout + checked.stderr).toBe(2);
    expect(checked.stdout).toBe("");
    const problems = checked.stderr.split("\n").filter((line) => line.startsWith("  - "));
    expect(checked.stderr).toMatch(new RegExp(`^runner: ${escapeRegExp(bad)}: ${problems.length} problems:\\n`));
    const fields = problems.map((line) => /^ {2}- ([^:]+):/.exec(line)?.[1]);
    expect(fields).toEqual(expect.arrayContaining(["name", "tools.allow", "commands.0.risk", "commands.0.reason", "confirmations", "(file)"]));
    expect(checked.stderr).toMatch(/- \(file\): unknown field colour/);
    expect(checked.stderr).toMatch(/- confirmations: expected one of "prompt", "deny", "allow", got string "sometimes"/);
  });

  it("approval on a terminal (worker policy): `n too risky` refuses with the reason, `y` runs it once, `a` runs it and covers the next git push, which is not asked", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task } = writeScriptedTask(directory.path, {
      task: { name: "approvals", policy: "worker" },
      script: {
        turns: [
          { tool_calls: [toolCall("run_shell", { command: "git push origin main" })] },
          {
            expect: { tool_result_matches: `^\\[denied\\] the user refused: too risky \\(\`git push origin main\`: ${escapeRegExp(PUSH_REASON)}\\)$` },
            tool_calls: [toolCall("run_shell", { command: "git push origin HEAD" })],
          },
          { expect: { tool_result_matches: PUSH_RAN }, tool_calls: [toolCall("run_shell", { command: "git push --all" })] },
          { expect: { tool_result_matches: PUSH_RAN }, tool_calls: [toolCall("run_shell", { command: "git push --tags" })] },
          { expect: { tool_result_matches: PUSH_RAN }, content: "Tried to push." },
        ],
      },
    });
    const terminal = startCliOnTerminal(["exec", task], { RUNNER_HOME: home.path });
    try {
      const question = /Allow\? \[y\]es \/ \[n\]o \[reason\] \/ \[a\]lways for this run: /;
      await terminal.waitForOutput(question, 1);
      expect(terminal.output()).toContain('policy worker: run_shell "git push origin main" needs confirmation.');
      terminal.type("n too risky");
      await terminal.waitForOutput(question, 2);
      expect(terminal.output()).toContain('run_shell "git push origin HEAD" needs confirmation.');
      terminal.type("y");
      await terminal.waitForOutput(question, 3);
      expect(terminal.output()).toContain('run_shell "git push --all" needs confirmation.');
      terminal.type("a");
      const result = await terminal.result;
      expect(result.code, result.stdout).toBe(0);
      // Three questions: the fourth push was covered by "a".
      expect(result.stdout.match(/Allow\? /g)).toHaveLength(3);
      expect(result.stdout).not.toContain('run_shell "git push --tags" needs confirmation');
      const runDirectory = runDirectoryOf({ ...result, stdout: result.stdout.replace(/\r/g, "") });
      const calls = callsAndResults(runDirectory, "main");
      expect(calls.map((call) => call.result.slice(0, 40))).toEqual([
        "[denied] the user refused: too risky (`git push origin main`".slice(0, 40),
        ...Array(3).fill("exit_code: 128\nstdout:\n(empty)\nstderr:\nfatal: ".slice(0, 40)),
      ]);
      const report = readReport(runDirectory);
      expect(report.denials).toEqual({ "commands.git-push": 1 });
      expect(report.reason).toBe("finished_unverified_with_denials");
    } finally {
      terminal.kill();
      await terminal.result;
    }
  });

  it("without a terminal the worker policy refuses what needs confirmation, without asking", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task } = writeScriptedTask(directory.path, {
      task: { name: "no-terminal", policy: "worker" },
      script: {
        turns: [
          { tool_calls: [toolCall("run_shell", { command: "git push origin main" })] },
          {
            expect: {
              tool_result_matches: `^\\[denied\\] \`git push origin main\`: ${escapeRegExp(PUSH_REASON)} — this needs confirmation and there is no terminal to ask \\(policy worker: confirmations: prompt\\)$`,
            },
            content: "Could not push.",
          },
        ],
      },
    });
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr + result.stdout).toBe(0);
    expect(result.stdout + result.stderr).not.toContain("Allow?");
    expect(readReport(runDirectoryOf(result)).denials).toEqual({ "commands.git-push": 1 });
  });

  it("hooks: a pre hook blocks write_file of *.lock with its stderr as the reason, and gets the call as JSON on stdin; a post hook's stdout is a [hook note]; a hanging hook is killed at its timeout, reported, and the call goes on; calls the policy refuses never reach a hook", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const hooks = join(directory.path, "hooks");
    mkdirSync(hooks);
    const script = (name: string, body: string) => {
      writeFileSync(join(hooks, name), `#!/bin/sh\n${body}\n`);
      chmodSync(join(hooks, name), 0o755);
    };
    // Hooks run in the task file's directory: relative paths below are the test's directory.
    script(
      "no-lockfiles.sh",
      [
        "input=$(cat)",
        'printf "%s\\n" "$input" >> pre-calls.jsonl',
        "pwd > hook-cwd.txt",
        'case "$input" in',
        `  *'.lock"'*) echo "lock files are generated: run the package manager instead" >&2; exit 2 ;;`,
        "esac",
        "exit 0",
      ].join("\n"),
    );
    script("lint-note.sh", 'input=$(cat)\nprintf "%s\\n" "$input" >> post-calls.jsonl\necho "remember to run the linter"');
    script("hang.sh", "sleep 300 &\necho $! > hang.pid\nwait");
    const { task, repo } = writeScriptedTask(directory.path, {
      task: {
        name: "hooks",
        policy: "worker",
        hooks: {
          pre_tool_use: [
            { command: "./hooks/no-lockfiles.sh", tools: ["write_file", "edit_file"] },
            { command: "./hooks/hang.sh", tools: ["run_shell"], timeout_ms: 1000 },
          ],
          post_tool_use: [{ command: "./hooks/lint-note.sh", tools: ["write_file"] }],
        },
      },
      script: {
        turns: [
          {
            tool_calls: [
              toolCall("write_file", { path: "yarn.lock", content: "# planted\n" }),
              toolCall("write_file", { path: "notes.txt", content: "hello\n" }),
            ],
          },
          {
            expect: {
              tool_result_matches:
                "^\\[denied\\] blocked by hook `\\./hooks/no-lockfiles\\.sh`: lock files are generated: run the package manager instead\\n" +
                "Wrote [^\\n]*notes\\.txt[^\\n]*\\n\\[hook note\\] remember to run the linter$",
            },
            tool_calls: [toolCall("write_file", { path: ".env", content: "X=1\n" }), toolCall("run_shell", { command: "echo ran-after-hook-timeout" })],
          },
          {
            expect: { tool_result_matches: "^\\[denied\\] writing \\.env is denied by policy worker[^\\n]*\\nexit_code: 0\\nstdout:\\nran-after-hook-timeout" },
            content: "Done.",
          },
        ],
      },
    });
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr + result.stdout).toBe(0);
    const runDirectory = runDirectoryOf(result);
    const report = readReport(runDirectory);
    expect(report).toMatchObject({
      status: "succeeded",
      reason: "finished_unverified_with_denials",
      denials: { "hooks.pre_tool_use": 1, "paths.write.deny[0]": 1 },
    });
    expect(filesAt(repo, report.head_commit)).toEqual(["README.md", "notes.txt"]);

    // The pre hook got both write_file calls the policy allowed (not the .env one), each as one JSON document.
    expect(readFileSync(join(directory.path, "hook-cwd.txt"), "utf8").trim()).toBe(directory.path);
    const pre = readFileSync(join(directory.path, "pre-calls.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(callsAndResults(runDirectory, "main")).toHaveLength(4);
    expect(pre).toEqual([
      {
        phase: "pre_tool_use",
        run_id: report.run_id,
        agent_id: "main",
        tool_name: "write_file",
        tool_call_id: expect.any(String),
        arguments: { path: "yarn.lock", content: "# planted\n" },
      },
      {
        phase: "pre_tool_use",
        run_id: report.run_id,
        agent_id: "main",
        tool_name: "write_file",
        tool_call_id: expect.any(String),
        arguments: { path: "notes.txt", content: "hello\n" },
      },
    ]);
    expect(new Set(pre.map((entry) => entry.tool_call_id)).size).toBe(2);
    const post = readFileSync(join(directory.path, "post-calls.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(post).toEqual([
      {
        phase: "post_tool_use",
        run_id: report.run_id,
        agent_id: "main",
        tool_name: "write_file",
        tool_call_id: pre[1]!.tool_call_id,
        arguments: { path: "notes.txt", content: "hello\n" },
        result: expect.stringMatching(/^Wrote .*notes\.txt/),
        is_error: false,
      },
    ]);

    // The hanging hook: reported, its whole process group killed, the command ran anyway.
    const events = readEvents(runDirectory);
    expect(eventsOfType(events, "hook.failed").map((event) => event.data)).toEqual([
      expect.objectContaining({
        phase: "pre_tool_use",
        command: "./hooks/hang.sh",
        tool_name: "run_shell",
        timed_out: true,
        outcome: "failed",
        error: "timed out after 1000 ms",
      }),
    ]);
    // The terminal view (stderr) says so too.
    expect(result.stderr).toContain("hook `./hooks/hang.sh` failed: timed out after 1000 ms");
    const sleeper = Number(readFileSync(join(directory.path, "hang.pid"), "utf8"));
    expect(sleeper).toBeGreaterThan(1);
    expect(processAlive(sleeper)).toBe(false);
    expect(eventsOfType(events, "hook.finished").map((event) => [event.data.command, event.data.outcome])).toEqual([
      ["./hooks/no-lockfiles.sh", "blocked"],
      ["./hooks/no-lockfiles.sh", "allowed"],
      ["./hooks/lint-note.sh", "noted"],
    ]);
  });

  // A hook's exit decides; children it leaves behind are killed and cannot delay or undo a block.
  it("a pre hook that exits 2 but leaves a background process behind still blocks the call (its exit decides, not its children)", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    mkdirSync(join(directory.path, "hooks"));
    const hook = join(directory.path, "hooks", "block-and-log.sh");
    writeFileSync(hook, '#!/bin/sh\nsleep 30 &\necho $! > background.pid\necho "lock files are generated" >&2\nexit 2\n');
    chmodSync(hook, 0o755);
    const { task, repo } = writeScriptedTask(directory.path, {
      task: { name: "hook-background", hooks: { pre_tool_use: [{ command: "./hooks/block-and-log.sh", tools: ["write_file"], timeout_ms: 1500 }] } },
      script: { turns: [{ tool_calls: [toolCall("write_file", { path: "yarn.lock", content: "# planted\n" })] }, { content: "Done." }] },
    });
    try {
      const result = await runCli(["exec", task], { RUNNER_HOME: home.path });
      expect(result.code, result.stderr + result.stdout).toBe(0);
      const runDirectory = runDirectoryOf(result);
      expect(callsAndResults(runDirectory, "main")[0]!.result).toBe("[denied] blocked by hook `./hooks/block-and-log.sh`: lock files are generated");
      expect(filesAt(repo, readReport(runDirectory).head_commit)).toEqual(["README.md"]);
    } finally {
      const pid = Number(readFileSync(join(directory.path, "background.pid"), "utf8"));
      if (pid > 1 && processAlive(pid)) process.kill(pid, "SIGKILL");
    }
  });
});
