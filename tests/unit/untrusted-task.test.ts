import { execFileSync } from "node:child_process";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { TaskValidationError } from "../../src/config/load-task.js";
import { loadUntrustedTaskFile, recordedRunRefusal, untrustedTaskProblems, validateUntrustedTask } from "../../src/runner/untrusted-task.js";
import { createGitRepository, temporaryDirectory } from "../helpers/git-repository.js";

function problemsOf(run: () => unknown): { path: string; message: string }[] {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(TaskValidationError);
    expect((error as TaskValidationError).exitCode).toBe(2);
    return (error as TaskValidationError).problems;
  }
  throw new Error("expected the task to be refused");
}

describe("the trust check of an untrusted caller's task", () => {
  it("refuses hooks, MCP servers, policy files, model.base_url and host environment, each naming the field and the fix", async () => {
    await using root = temporaryDirectory();
    mkdirSync(join(root.path, "repo"));
    const problems = untrustedTaskProblems(
      {
        name: "t",
        instruction: "x",
        workspace: "repo",
        hooks: { pre_tool_use: [{ command: "/bin/true" }] },
        mcp_servers: { fs: { command: "npx", trusted: true } },
        policy: "/etc/policy.yaml",
        subagents: { explore_policy: "explore", worker_policy: "./mine.yaml" },
        model: { base_url: "https://api.example.com/v1" },
        sandbox: { pass_env: ["HOME"], secret_env: ["AWS_SECRET_ACCESS_KEY"] },
      },
      { roots: [root.path], baseDirectory: root.path },
    );
    expect(problems.map((problem) => problem.path).sort()).toEqual(
      ["hooks", "mcp_servers", "model.base_url", "policy", "sandbox.pass_env", "sandbox.secret_env", "subagents.worker_policy"].sort(),
    );
    const byPath = Object.fromEntries(problems.map((problem) => [problem.path, problem.message]));
    expect(byPath.hooks).toMatch(/on the host.*runner exec/);
    expect(byPath.policy).toMatch(/shipped policy's name.*worker/);
    expect(byPath["model.base_url"]).toMatch(/API key.*OPENAI_BASE_URL/);
  });

  it("accepts a task that stays in the sandbox: shipped policies, verify, image, allow-list, limits, a workspace inside a root", async () => {
    await using root = temporaryDirectory();
    mkdirSync(join(root.path, "repo"));
    const raw = {
      name: "ok",
      instruction: "x",
      workspace: join(root.path, "repo"),
      policy: "ci",
      verify: { command: "make test" },
      sandbox: { image: "python:3.12-slim", network: { allow: ["example.com"] }, setup: ["pip install -e ."] },
      max_steps: 5,
    };
    expect(untrustedTaskProblems(raw, { roots: [root.path], baseDirectory: "/" })).toEqual([]);
    const task = validateUntrustedTask(raw, { roots: [root.path], baseDirectory: "/" }, { label: "test" });
    expect(task).toMatchObject({ workspacePath: join(root.path, "repo"), policy: "ci", max_steps: 5 });
  });

  it("refuses paths outside the roots, relative ones resolved against the base directory and symlinks followed", async () => {
    await using root = temporaryDirectory();
    await using elsewhere = temporaryDirectory();
    mkdirSync(join(root.path, "repo"));
    symlinkSync(elsewhere.path, join(root.path, "escape"));
    const trust = { roots: [root.path], baseDirectory: join(root.path, "repo") };
    const problems = untrustedTaskProblems(
      {
        workspace: "../escape",
        model: { provider: "scripted", script: join(elsewhere.path, "script.yaml") },
        sandbox: { build: { context: ".", dockerfile: "../escape/Dockerfile" } },
      },
      trust,
    );
    expect(problems.map((problem) => problem.path)).toEqual(["workspace", "model.script", "sandbox.build.dockerfile"]);
    expect(problems[0]!.message).toMatch(/outside the allowed roots.*--workspace-root/);
    // No workspace: the base directory, which is inside.
    expect(untrustedTaskProblems({ name: "t" }, trust)).toEqual([]);
    // No roots at all: every path is outside, and the message says how to give one.
    expect(untrustedTaskProblems({ workspace: "/" }, { roots: [], baseDirectory: "/" })[0]!.message).toMatch(/none given.*--workspace-root/);
  });

  it("validateUntrustedTask refuses before validating, with every problem; a schema problem still names its field", async () => {
    await using root = temporaryDirectory();
    const trust = { roots: [root.path], baseDirectory: root.path };
    expect(problemsOf(() => validateUntrustedTask({ name: "t", instruction: "x", hooks: {}, policy: "my.yaml" }, trust, { label: "run_start" }))).toHaveLength(
      2,
    );
    expect(problemsOf(() => validateUntrustedTask({ name: "Bad Name", instruction: "x" }, trust, { label: "run_start" }))[0]!.path).toBe("name");
  });

  it("a task file must lie inside a root, and its fields pass the same check (its paths against its own directory)", async () => {
    await using root = temporaryDirectory();
    await using outside = temporaryDirectory();
    mkdirSync(join(root.path, "repo"));
    writeFileSync(join(outside.path, "task.yaml"), "name: t\ninstruction: x\n");
    expect(problemsOf(() => loadUntrustedTaskFile(join(outside.path, "task.yaml"), [root.path]))[0]!.message).toMatch(/outside the allowed roots/);
    writeFileSync(join(root.path, "hooked.yaml"), "name: t\ninstruction: x\nworkspace: repo\nhooks:\n  pre_tool_use: [{ command: ./check.sh }]\n");
    expect(problemsOf(() => loadUntrustedTaskFile(join(root.path, "hooked.yaml"), [root.path])).map((problem) => problem.path)).toEqual(["hooks"]);
    writeFileSync(join(root.path, "good.yaml"), "name: t\ninstruction: x\nworkspace: repo\npolicy: reviewer\n");
    expect(loadUntrustedTaskFile(join(root.path, "good.yaml"), [root.path])).toMatchObject({ workspacePath: join(root.path, "repo"), policy: "reviewer" });
    writeFileSync(join(root.path, "broken.yaml"), "name: [\n");
    expect(problemsOf(() => loadUntrustedTaskFile(join(root.path, "broken.yaml"), [root.path]))[0]!.message).toMatch(/\S/);
  });
});

describe("untrusted tasks: the security review's findings (round 3)", () => {
  it("refuses a build whose default Dockerfile is a link out of the roots, on_success, allow_cidrs, and a worktree whose git directory is outside", async () => {
    await using root = temporaryDirectory("untrusted-review-root-");
    await using outside = temporaryDirectory("untrusted-review-outside-");
    writeFileSync(join(outside.path, "host-credentials"), "AWS_SECRET_ACCESS_KEY=x\n");
    mkdirSync(join(root.path, "ctx"));
    symlinkSync(join(outside.path, "host-credentials"), join(root.path, "ctx", "Dockerfile"));
    const trust = { roots: [root.path], baseDirectory: root.path };
    const paths = (raw: unknown) => untrustedTaskProblems(raw, trust).map((problem) => `${problem.path}: ${problem.message}`);
    expect(paths({ instruction: "x", sandbox: { build: { context: "./ctx" } } })).toEqual([
      expect.stringMatching(/^sandbox\.build: its Dockerfile: .*ctx\/Dockerfile \(a link to .*host-credentials\) is outside/),
    ]);
    expect(paths({ instruction: "x", on_success: "merge" })).toEqual([expect.stringMatching(/^on_success: not allowed here: a merge changes your checkout/)]);
    expect(paths({ instruction: "x", sandbox: { network: { allow: ["a.example.com"], allow_cidrs: ["169.254.0.0/16"] } } })).toEqual([
      expect.stringMatching(/^sandbox\.network\.allow_cidrs: not allowed here/),
    ]);
    // A linked worktree inside the roots of a repository outside them.
    const repository = createGitRepository({ "a.txt": "a\n" });
    try {
      execFileSync("git", ["-C", repository.root, "worktree", "add", "-q", join(root.path, "wt")]);
      expect(paths({ instruction: "x", workspace: "./wt" })).toEqual([
        expect.stringMatching(/^workspace: its git directory: .* is outside/),
        expect.stringMatching(/^workspace: its git directory: .* is outside/),
      ]);
    } finally {
      await repository[Symbol.asyncDispose]();
    }
  });
});

describe("recordedRunRefusal: an untrusted caller uses only runs it could have started (security review round 3, second pass)", () => {
  it("refuses runs whose workspace or git directory lies outside the roots, or whose task has hooks or merges; allows the rest", async () => {
    await using root = temporaryDirectory("recorded-run-root-");
    await using outside = temporaryDirectory("recorded-run-outside-");
    await using runs = temporaryDirectory("recorded-run-runs-");
    const run = (name: string, task: Record<string, unknown>) => {
      mkdirSync(join(runs.path, name));
      writeFileSync(
        join(runs.path, name, "task.json"),
        JSON.stringify({ hooks: { pre_tool_use: [], post_tool_use: [] }, mcp_servers: {}, policy: "worker", ...task }),
      );
      return join(runs.path, name);
    };
    mkdirSync(join(root.path, "repo"));
    const trust = { roots: [root.path] };
    expect(recordedRunRefusal(run("fine", { workspacePath: join(root.path, "repo"), on_success: "none" }), trust)).toBeNull();
    expect(recordedRunRefusal(run("elsewhere", { workspacePath: outside.path }), trust)).toMatch(/workspace .* is outside the allowed roots/);
    expect(recordedRunRefusal(run("hooked", { workspacePath: join(root.path, "repo"), hooks: { pre_tool_use: [{ command: "/x" }] } }), trust)).toMatch(/hooks/);
    const merging = run("merging", { workspacePath: join(root.path, "repo"), on_success: "merge" });
    expect(recordedRunRefusal(merging, trust)).toMatch(/merges/);
    expect(recordedRunRefusal(merging, { ...trust, allowMerge: true })).toBeNull();
    expect(recordedRunRefusal(run("policy-file", { workspacePath: join(root.path, "repo"), policy: "/etc/p.yaml" }), trust)).toMatch(/policy file/);
    expect(recordedRunRefusal(join(runs.path, "missing"), trust)).toMatch(/task\.json/);
  });

  it("refuses a workspace whose real .git directory borrows an outside repository (commondir, or objects and refs as links)", async () => {
    await using root = temporaryDirectory("git-borrow-root-");
    const secret = createGitRepository({ "secret.txt": "TOPSECRET\n" });
    try {
      const commondir = join(root.path, "w", ".git");
      mkdirSync(commondir, { recursive: true });
      writeFileSync(join(commondir, "HEAD"), "ref: refs/heads/main\n");
      writeFileSync(join(commondir, "commondir"), `${join(secret.root, ".git")}\n`);
      const linked = join(root.path, "w2", ".git");
      mkdirSync(linked, { recursive: true });
      writeFileSync(join(linked, "HEAD"), "ref: refs/heads/main\n");
      symlinkSync(join(secret.root, ".git", "objects"), join(linked, "objects"));
      symlinkSync(join(secret.root, ".git", "refs"), join(linked, "refs"));
      const trust = { roots: [root.path], baseDirectory: root.path };
      for (const workspace of ["./w", "./w2"]) {
        const messages = untrustedTaskProblems({ instruction: "x", workspace }, trust).map((problem) => problem.message);
        expect(messages.length, workspace).toBeGreaterThan(0);
        for (const message of messages) expect(message).toMatch(/^its git directory: .* is outside/);
      }
    } finally {
      await secret[Symbol.asyncDispose]();
    }
  });
});
