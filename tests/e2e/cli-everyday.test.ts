// The everyday CLI as a user meets it (the built dist/cli/main.js, no Docker,
// no model): --version / -V, --help with examples, what the quick commands load,
// shell completion (the bash script sourced in a real bash).
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { CLI, ROOT, runCli } from "../helpers/runner-cli.js";

const VERSION = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;

describe("runner --version and --help", () => {
  it("--version and -V print the package version and exit 0", async () => {
    await using home = temporaryDirectory();
    for (const flag of ["--version", "-V"]) {
      const result = await runCli([flag], { RUNNER_HOME: home.path });
      expect(result, flag).toMatchObject({ code: 0, stdout: `${VERSION}\n`, stderr: "" });
    }
  });

  it("--help lists the commands and shows examples; each command's --help has its own", async () => {
    await using home = temporaryDirectory();
    const top = await runCli(["--help"], { RUNNER_HOME: home.path });
    expect(top.code).toBe(0);
    expect(top.stdout).toMatch(/-V, --version +output the version number/);
    for (const command of ["exec", "resume", "runs", "show", "policy", "image", "init", "completion"])
      expect(top.stdout).toMatch(new RegExp(`\\n  ${command}\\b`));
    expect(top.stdout).toContain("Examples:\n  runner exec task.yaml");
    expect(top.stdout).toContain('runner exec --instruction "Make the tests pass" -C ~/src/project --verify "npm test"');
    expect(top.stdout).toContain("runner init ");
    expect(top.stdout).toContain(
      "Exit codes: 0 success, 1 verification failed, the model refused, or a limit reached (max_steps, --max-cost, --timeout), 2 bad task or arguments, 3 infrastructure or model error, 4 succeeded but the merge asked for did not happen, 130 interrupted.",
    );
    const exec = await runCli(["exec", "--help"], { RUNNER_HOME: home.path });
    expect(exec.code).toBe(0);
    expect(exec.stdout).toContain("Examples:\n  runner exec task.yaml --json > events.jsonl");
    const resume = await runCli(["help", "resume"], { RUNNER_HOME: home.path });
    expect(resume.stdout).toContain("Examples:\n  runner resume 20");
  });
});

/** Heavy packages a command that touches no sandbox or model must not load (docs/command-line.md "Command line"). */
const HEAVY = ["dockerode", "openai", "@modelcontextprotocol/sdk", "web-tree-sitter", "tree-sitter-bash", "pino", "cloudevents", "tar-fs"];

/** Runs the CLI with a module-resolution hook; returns the packages under node_modules it loaded. */
async function loadedPackages(args: string[], home: string, scratch: string): Promise<{ code: number | null; packages: string[] }> {
  const hooks = join(scratch, "hooks.mjs");
  writeFileSync(
    hooks,
    "export async function resolve(specifier, context, next) { const r = await next(specifier, context); if (r.url.includes('/node_modules/')) process.stderr.write(`LOADED ${r.url}\\n`); return r; }\n",
  );
  writeFileSync(join(scratch, "register.mjs"), `import { register } from "node:module";\nregister(${JSON.stringify(pathToFileURL(hooks).href)});\n`);
  const result = await runCli(args, { RUNNER_HOME: home, NODE_OPTIONS: `--import=${pathToFileURL(join(scratch, "register.mjs")).href}` });
  const packages = [...result.stderr.matchAll(/^LOADED .*\/node_modules\/((?:@[^/]+\/)?[^/]+)\//gm)].map((match) => match[1]!);
  return { code: result.code, packages: [...new Set(packages)].sort() };
}

describe("a quick CLI: commands that touch no sandbox or model load none of the run machinery", () => {
  it("--version, --help, runs, show, logs, policy check, completion load commander (and zod/yaml to check a policy) only", async () => {
    await using home = temporaryDirectory();
    await using scratch = temporaryDirectory();
    const id = "20260101-000000-quick0";
    mkdirSync(join(home.path, "runs", id), { recursive: true });
    writeFileSync(
      join(home.path, "runs", id, "report.json"),
      JSON.stringify({
        run_id: id,
        task: "quick",
        status: "succeeded",
        reason: "finished_unverified",
        steps: 1,
        tool_calls: 0,
        branch: null,
        duration_ms: 1,
        usage: { prompt_tokens: 1, completion_tokens: 1 },
        agents: [],
        denials: {},
      }),
    );
    writeFileSync(join(home.path, "runs", id, "events.jsonl"), "");
    for (const args of [
      ["--version"],
      ["--help"],
      ["runs"],
      ["show", id],
      ["show", id, "--full"],
      ["logs", id],
      ["policy", "check", "worker"],
      ["completion", "bash"],
    ]) {
      const { code, packages } = await loadedPackages(args, home.path, scratch.path);
      expect(code, args.join(" ")).toBe(0);
      expect(
        packages.filter((name) => HEAVY.includes(name)),
        args.join(" "),
      ).toEqual([]);
    }
    // The hook sees what a run loads: the check is not vacuous.
    const run = await loadedPackages(["exec", "--instruction", "x"], home.path, scratch.path);
    expect(run.code).toBe(2);
    expect(run.packages).toEqual(expect.arrayContaining(["dockerode", "openai"]));
  });
});

describe("runner completion", () => {
  /** Sources `runner completion bash` in a real bash and asks `_runner` for the completions of each command line (the last word is the one being completed). */
  function bashCompletions(lines: string[][], cwd: string, home: string): string[][] {
    const script = execFileSync(process.execPath, [CLI, "completion", "bash"], { encoding: "utf8" });
    const calls = lines.map((words) => `complete_line ${words.map((word) => `'${word}'`).join(" ")}`).join("\n");
    const output = execFileSync(
      "bash",
      [
        "--norc",
        "--noprofile",
        "-c",
        `${script}\ncomplete_line() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _runner; printf '%s\\n' "\${COMPREPLY[@]}" | sort; echo '--'; }\n${calls}`,
      ],
      { cwd, encoding: "utf8", env: { ...process.env, RUNNER_HOME: home } },
    );
    return output
      .split("--\n")
      .slice(0, lines.length)
      .map((block) => block.split("\n").filter(Boolean));
  }

  it("bash: subcommands, options per command, option values, task files, run ids and shells, from the commander definitions", async () => {
    await using home = temporaryDirectory();
    await using cwd = temporaryDirectory();
    for (const id of ["20260101-000000-aaaa", "20260102-000000-bbbb"]) mkdirSync(join(home.path, "runs", id), { recursive: true });
    writeFileSync(join(cwd.path, "task.yaml"), "name: x\n");
    mkdirSync(join(cwd.path, "repo"));
    const [top, ex, execOptions, workspace, shortWorkspace, taskFile, afterValue, show, policy, check, shells, version] = bashCompletions(
      [
        ["runner", ""],
        ["runner", "ex"],
        ["runner", "exec", "--m"],
        ["runner", "exec", "--workspace", ""],
        ["runner", "exec", "-C", ""],
        ["runner", "exec", "ta"],
        ["runner", "exec", "--name", "exec", "--js"],
        ["runner", "show", "20260102"],
        ["runner", "policy", ""],
        ["runner", "policy", "check", "--"],
        ["runner", "completion", ""],
        ["runner", "-"],
      ],
      cwd.path,
      home.path,
    );
    expect(top).toEqual([
      "agency",
      "batch",
      "completion",
      "config",
      "continue",
      "exec",
      "image",
      "import",
      "init",
      "logs",
      "mcp",
      "policy",
      "prune",
      "resume",
      "runs",
      "serve",
      "show",
      "worker",
    ]);
    expect(ex).toEqual(["exec"]);
    expect(execOptions).toEqual(["--max-cost", "--max-steps", "--merge", "--model"]);
    expect(workspace).toEqual(["repo"]);
    expect(shortWorkspace).toEqual(["repo"]);
    expect(taskFile).toEqual(["task.yaml"]);
    // `exec` after --name is the option's value, not a command.
    expect(afterValue).toEqual(["--json"]);
    expect(show).toEqual(["20260102-000000-bbbb"]);
    expect(policy).toEqual(["check"]);
    expect(check).toEqual(["--help"]);
    expect(shells).toEqual(["bash", "fish", "zsh"]);
    expect(version).toEqual(["--help", "--version", "-V", "-h"]);
  });

  it("zsh wraps the bash function with bashcompinit; fish gets one complete line per command, option and argument", async () => {
    await using home = temporaryDirectory();
    const bash = await runCli(["completion", "bash"], { RUNNER_HOME: home.path });
    const zsh = await runCli(["completion", "zsh"], { RUNNER_HOME: home.path });
    expect(zsh.code).toBe(0);
    expect(zsh.stdout).toBe(`# zsh: load with  source <(runner completion zsh)  after compinit\nautoload -U +X bashcompinit && bashcompinit\n${bash.stdout}`);
    const fish = await runCli(["completion", "fish"], { RUNNER_HOME: home.path });
    expect(fish.stdout).toContain(
      "complete -c runner -n '__fish_use_subcommand' -a exec -d 'run a task (task.yaml), or an ad-hoc one with --instruction and --workspace'",
    );
    expect(fish.stdout).toContain("complete -c runner -n '__fish_seen_subcommand_from exec' -s C -l workspace -r -f -a '(__fish_complete_directories)'");
    expect(fish.stdout).toContain("complete -c runner -n '__fish_seen_subcommand_from policy; and not __fish_seen_subcommand_from check' -a check");
    const refused = await runCli(["completion", "tcsh"], { RUNNER_HOME: home.path });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain("Allowed choices are bash, zsh, fish.");
  });
});
