/**
 * Secrets in records, end to end: the built CLI, a scripted model over HTTP,
 * real Docker. The agent prints and writes secrets (a `sandbox.secret_env`
 * variable and token-shaped values nobody declared); what the run writes down
 * must not contain them, while the agent itself saw the real values and its
 * work (the run branch, patch.diff) keeps them.
 */
import { randomInt } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { requireDocker } from "../helpers/docker.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { onlyRunDirectory, readJson, runCli, toolCall, writeScriptedTask } from "../helpers/runner-cli.js";
import { runPaths } from "../../src/workspace/run-disk.js";

const ALPHANUMERIC = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

function randomText(length: number): string {
  return Array.from({ length }, () => ALPHANUMERIC[randomInt(ALPHANUMERIC.length)]).join("");
}

/** Every file under `directory` (recursively) but the ones `skip` names (relative paths), with its text. */
function recordFiles(directory: string, skip: (path: string) => boolean): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (current: string) => {
    for (const name of readdirSync(current)) {
      const path = join(current, name);
      const relativePath = relative(directory, path);
      if (skip(relativePath)) continue;
      if (statSync(path).isDirectory()) walk(path);
      else files.set(relativePath, readFileSync(path, "utf8"));
    }
  };
  walk(directory);
  return files;
}

/** Names of the records containing `needle`. */
function containing(files: Map<string, string>, needle: string): string[] {
  return [...files].filter(([, text]) => text.includes(needle)).map(([path]) => path);
}

describe("secrets in a run's records (real CLI, scripted model over HTTP, real Docker)", () => {
  it("secret_env values and token shapes a tool printed or the agent wrote are redacted in every record, yet the agent saw and wrote the real values", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const secret = randomText(24);
    // A second declared secret with characters JSON escapes, so its escaped forms (tool-call arguments, JSON lines) are exercised.
    const quotedCore = randomText(16);
    const quotedSecret = `${quotedCore}"q\\end`;
    const openaiToken = `sk-proj-${randomText(32)}`;
    const githubToken = `ghp_${randomText(36)}`;
    const printed = [
      'echo "secret=$MY_SECRET"',
      `echo "openai=${openaiToken}"`,
      `echo "github=${githubToken}"`,
      'echo "quoted=$MY_QUOTED_SECRET"',
      'echo "on stderr: $MY_SECRET" >&2',
      // A long output: more than the per-result cap, so the whole of it goes to tool-results/ (whole lines, no secret cut at the cap).
      'for i in $(seq 1 40); do echo "line $i $MY_SECRET"; done',
    ].join("; ");
    const fileContent = `token=${secret}\nquoted=${quotedSecret}\nopenai=${openaiToken}\n`;
    const script = {
      turns: [
        {
          content: `I will look at ${secret}.`,
          tool_calls: [toolCall("run_shell", { command: printed }), toolCall("write_file", { path: "secret.txt", content: fileContent })],
        },
        {
          // The model got the real values (regex-escaped: the quoted secret holds a backslash).
          expect: {
            tool_result_matches: `^exit_code: 0\\nstdout:\\nsecret=${secret}\\nopenai=${openaiToken}\\ngithub=${githubToken}\\nquoted=${quotedCore}"q\\\\end\\n`,
          },
          tool_calls: [toolCall("run_shell", { command: "cat secret.txt" })],
        },
        { expect: { tool_result_matches: `token=${secret}\\n` }, content: `Done; the token was ${secret} and ${githubToken}.` },
      ],
    };
    const { task, git } = writeScriptedTask(directory.path, {
      script,
      task: {
        name: "secrets",
        sandbox: { secret_env: ["MY_SECRET", "MY_QUOTED_SECRET"] },
        // A small per-result cap (400 characters) so the long output is kept whole under tool-results/.
        context: { tool_result_max_tokens: 100 },
        verify: { command: `grep -q '^token=' secret.txt`, timeout_sec: 60 },
      },
    });
    const result = await runCli(["exec", task, "--json"], { RUNNER_HOME: home.path, MY_SECRET: secret, MY_QUOTED_SECRET: quotedSecret });
    expect(result.code, result.stderr).toBe(0);
    const runDirectory = onlyRunDirectory(home.path)!;
    const report = readJson(join(runDirectory, "report.json"));
    expect(report).toMatchObject({ status: "succeeded", tool_calls: 3 });

    // Everything the run wrote down, except the agent's own work (patch.diff); the worktree is gone by now.
    expect(existsSync(runPaths(runDirectory).worktree)).toBe(false);
    const records = recordFiles(runDirectory, (path) => path === "patch.diff");
    for (const name of ["events.jsonl", "session.jsonl", "session.json", "report.json"]) expect([...records.keys()]).toContain(name);
    const kept = [...records.keys()].filter((path) => path.startsWith("tool-results/"));
    expect(kept.length).toBeGreaterThan(0);
    records.set("(--json stdout)", result.stdout);
    records.set("(stderr)", result.stderr);

    const leaks = Object.fromEntries(
      Object.entries({ secret, quotedCore, openaiToken, githubToken, "openai token body": openaiToken.slice(8), "github token body": githubToken.slice(4) })
        .map(([what, value]) => [what, containing(records, value)] as const)
        .filter(([, where]) => where.length > 0),
    );
    expect(leaks).toEqual({});

    // Redacted, not dropped: the markers are where the values were.
    for (const name of ["events.jsonl", "session.jsonl", "session.json", "(--json stdout)", ...kept]) expect(records.get(name), name).toContain("[REDACTED]");
    for (const name of ["events.jsonl", "session.jsonl", "session.json"]) {
      expect(records.get(name), name).toContain("[REDACTED:openai-key]");
      expect(records.get(name), name).toContain("[REDACTED:github-token]");
    }
    expect(report.final_message).toBe("Done; the token was [REDACTED] and [REDACTED:github-token].");

    // `runner show` prints the recorded transcript, redacted too, and the diff, redacted as the run's records are
    // (in the shell that ran it: the secret_env values are the ones it holds).
    const shown = await runCli(["show", String(report.run_id)], { RUNNER_HOME: home.path, MY_SECRET: secret, MY_QUOTED_SECRET: quotedSecret });
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain("secret=[REDACTED]");
    for (const value of [secret, quotedCore, openaiToken, githubToken]) expect(shown.stdout).not.toContain(value);

    // The agent's work keeps the real values: the run branch and patch.diff (the diff of that branch) hold them.
    const written = git("show", `${report.branch}:secret.txt`);
    expect(written).toBe(fileContent);
    const patch = readFileSync(join(runDirectory, "patch.diff"), "utf8");
    expect(patch).toContain(`+token=${secret}`);
  });

  // The runner cuts text in three places (result preview, per-result cap, call
  // arguments in events); each cut is made on already-redacted text.
  it("a secret straddling the runner's own cut points (result preview, per-result cap) leaves no fragment in the records", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const secret = randomText(24);
    // run_shell results start "exit_code: 0\nstdout:\n" (21 characters): the secret starts at 477, one character short of the
    // 500-character preview; in the second call it starts at 377 and the 800-character cap keeps the first 400 characters.
    const previewCut = `head -c 456 /dev/zero | tr '\\0' x; echo "$MY_SECRET"`;
    const capCut = `head -c 356 /dev/zero | tr '\\0' x; echo "$MY_SECRET"; head -c 900 /dev/zero | tr '\\0' y; echo`;
    const { task } = writeScriptedTask(directory.path, {
      script: {
        turns: [
          { tool_calls: [toolCall("run_shell", { command: previewCut })] },
          { expect: { tool_result_matches: `x${secret}` }, tool_calls: [toolCall("run_shell", { command: capCut })] },
          { content: "done" },
        ],
      },
      task: { name: "secrets-cut", sandbox: { secret_env: ["MY_SECRET"] }, context: { tool_result_max_tokens: 200 } },
    });
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path, MY_SECRET: secret });
    expect(result.code, result.stderr).toBe(0);
    const records = recordFiles(onlyRunDirectory(home.path)!, (path) => path === "patch.diff");
    // No run of 12 or more of the secret's characters (half of it) in any record: name the longest one found per record.
    const leaks = [...records].flatMap(([where, text]) => {
      for (let length = secret.length; length >= 12; length -= 1) {
        for (let start = 0; start + length <= secret.length; start += 1) {
          if (text.includes(secret.slice(start, start + length))) return [`${where}: ${length} of the secret's ${secret.length} characters`];
        }
      }
      return [];
    });
    expect(leaks).toEqual([]);
  });

  it("commit messages the runner writes for a worker (its commit, its merge) carry no secret from the subagent's description", async () => {
    await requireDocker();
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const secret = randomText(24);
    const npmToken = `npm_${randomText(36)}`;
    // The model chose this description: it holds the declared secret and a token nobody declared.
    const description = `use ${secret} and ${npmToken} to publish`;
    const { task, git } = writeScriptedTask(directory.path, {
      script: {
        turns: [
          { tool_calls: [toolCall("agent", { mode: "worker", description, prompt: "Write notes.txt." })] },
          { expect: { tool_result_matches: "^Worker w1's work passed verification" }, content: `Merged; published with ${npmToken}.` },
        ],
        subagents: {
          [description]: {
            turns: [{ tool_calls: [toolCall("write_file", { path: "notes.txt", content: "notes\n" })] }, { content: `Wrote notes.txt with ${secret}.` }],
          },
        },
      },
      task: { name: "secret-descriptions", sandbox: { secret_env: ["MY_SECRET"] }, verify: { command: "test -f notes.txt", timeout_sec: 60 } },
    });
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path, MY_SECRET: secret });
    expect(result.code, result.stderr).toBe(0);
    const report = readJson(join(onlyRunDirectory(home.path)!, "report.json"));
    expect(report).toMatchObject({ status: "succeeded" });
    const runBranch = `${report.branch}`;
    const messages = git("log", "--format=%B%x00", runBranch, `${runBranch}-w1`, "--not", "main");
    // The worker's commit and the merge (the run has nothing left to commit after it).
    expect(messages).toContain("agent-runner: worker w1: use [REDACTED] and [REDACTED:npm-token] to publish");
    expect(messages).toContain("agent-runner: merge worker w1 (use [REDACTED] and [REDACTED:npm-token] to publish)");
    expect(messages).not.toContain(secret);
    expect(messages).not.toContain(npmToken.slice(4));
  });
});
