#!/usr/bin/env node
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Argument, Command, CommanderError } from "commander";
import { COMPLETION_SHELLS, completionScript, type CompletionShell } from "./completion.js";
import { RunnerError } from "../errors.js";
import { terminalSafe } from "../terminal-text.js";
import { agencyCommand } from "./agency-command.js";
import { batchCommand } from "./batch-command.js";
import { workerCommand } from "./worker-command.js";
import { importCommand } from "./import-command.js";
import { serveCommand } from "./serve-command.js";
import { runnerHome } from "../runner/runner-home.js";

// Only what every command needs is imported here. Each command imports its own modules when it runs
// (dockerode, the model SDKs, the shell parser, zod schemas), so `--version`, `--help`, `runs`, `show`,
// `policy check` and `completion` answer without loading the run machinery (bench/cli.bench.ts).

const BUILD_SCRIPT = fileURLToPath(new URL("../../sandbox-images/build.sh", import.meta.url));

const EXIT_CODES =
  "Exit codes: 0 success, 1 verification failed, the model refused, or a limit reached (max_steps, --max-cost, --timeout), 2 bad task or arguments, 3 infrastructure or model error, 4 succeeded but the merge asked for did not happen, 130 interrupted.";

function packageVersion(): string {
  return (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;
}

async function main(argv: string[]): Promise<number> {
  const controller = new AbortController();
  let interrupts = 0;
  // What the first Ctrl-C does, as the command that runs says it.
  let onInterrupt = "stopping the run and cleaning up (press Ctrl-C again to quit at once)";
  const onSignal = (name: NodeJS.Signals) => {
    interrupts += 1;
    if (interrupts === 1) {
      process.stderr.write(`\n${name}: ${onInterrupt}\n`);
      controller.abort();
    } else {
      // The container stops by itself when our attach connection drops, and the next start sweeps it.
      process.exit(130);
    }
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);
  process.on("SIGHUP", onSignal);
  // A reader that went away (`runner exec ... | head`) must not kill the run
  // half-way: stop writing to it and let the run finish and clean up.
  for (const stream of [process.stdout, process.stderr]) {
    stream.on("error", (error: NodeJS.ErrnoException) => {
      if (error.code !== "EPIPE") throw error;
      stream.write = (() => true) as typeof stream.write;
    });
  }

  let exitCode = 0;
  const program = new Command()
    .name("runner")
    .description("Run an LLM coding agent on a task, every tool inside a per-task Docker container.")
    .version(packageVersion(), "-V, --version")
    .exitOverride()
    .configureOutput({ writeErr: (text) => process.stderr.write(text) })
    .addHelpText(
      "after",
      [
        "",
        "Examples:",
        '  runner exec task.yaml                      run a task file (docs/task-yaml.md "task.yaml")',
        '  runner exec --instruction "Make the tests pass" -C ~/src/project --verify "npm test"',
        "                                             an ad-hoc task on a repository (OPENAI_API_KEY, OPENAI_MODEL)",
        "  runner init                                a commented task.yaml (and script.yaml) for this repository",
        "  runner runs                                the runs so far, newest first",
        "  runner show <run-id>                       a run's summary, transcript and diff",
        "  runner resume <run-id>                     continue an interrupted run",
        '  runner continue <run-id> "feedback"        talk back to an ended run',
        "  runner policy check worker                 what a policy allows",
        "  runner agency run agency.yaml              a team of agents reacting to events (docs/agency.md)",
        "",
        EXIT_CODES,
      ].join("\n"),
    );

  program
    .command("exec")
    .description("run a task (task.yaml), or an ad-hoc one with --instruction and --workspace")
    .argument("[task]", "path to task.yaml")
    .option("--json", "stream the run's events (CloudEvents JSON lines) on stdout")
    .option("--instruction <text>", "ad-hoc task: what the agent must do")
    .option("-C, --workspace <dir>", "ad-hoc task: the git repository to work on", undefined)
    .option("--name <name>", "ad-hoc task: its name ([a-z0-9-]; default adhoc), which names the run's branch runner/<name>-<short-id>")
    .option("--verify <command>", "ad-hoc task: verification command run in the sandbox")
    .option(
      "--model <name>",
      "ad-hoc task: the model, NAME (OpenAI-compatible; default OPENAI_MODEL) or PROVIDER:NAME (anthropic:claude-..., openai-responses:...)",
    )
    .option("--policy <policy>", "ad-hoc task: a shipped policy (explore, worker, reviewer, ci) or a policy file (default: worker)")
    .option("--image <image>", "ad-hoc task: sandbox image")
    .option(
      "--allow-host <host>",
      "ad-hoc task: a host the sandbox may reach (name, *.domain, name:port); repeat for more",
      (host: string, hosts: string[] = []) => [...hosts, host],
    )
    .option("--max-steps <n>", "override max_steps")
    .option(
      "--timeout <duration>",
      "timeout_sec: stop the run after this long (90s, 10m, 1.5h): failed/timed_out, its work committed, exit 1; runner resume continues it",
    )
    .option("--max-cost <usd>", "model.max_cost_usd: stop once the model calls cost this much (USD): failed/budget_exceeded, its work committed, exit 1")
    .option("--merge", "after a verified success, fast-forward your checked-out branch to the run branch (if it has not moved and is clean)")
    .option("-o, --output-last-message <file>", "write the agent's final answer (only it) to this file when the run ends")
    .addHelpText(
      "after",
      [
        "",
        "Examples:",
        "  runner exec task.yaml --json > events.jsonl      the run's events as CloudEvents JSON lines",
        "  runner exec task.yaml --max-steps 20 --merge     fewer steps; on a verified success, fast-forward your branch",
        '  runner exec --instruction "Fix the failing test" -C . --verify "python3 -m pytest -q" --policy ci --timeout 20m',
        '  runner exec --instruction "Upgrade requests" -C . --allow-host packages.example.com --allow-host files.example.com',
        "",
        "The work lands on a new branch runner/<task-name>-<short-id> (e.g. runner/fix-add-3f9c; printed as `branch:` at the end),",
        "never on your checkout: take it with git merge <branch>, or --merge.",
        "",
        "Environment: OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_MODEL (real model); RUNNER_HOME (run records, default ~/.runner);",
        "RUNNER_EGRESS_NETWORK (Docker network the egress proxies use, default bridge).",
        EXIT_CODES,
      ].join("\n"),
    )
    .action(async (task: string | undefined, options) => {
      const { execCommand } = await import("./exec-command.js");
      exitCode = await execCommand(task, options, controller.signal);
    });

  program
    .command("resume")
    .description("continue an interrupted, crashed or errored run: same branch, a new container, the persisted conversation")
    .argument("<run-id>", "run id, or a unique prefix of it")
    .option("--json", "stream the run's events (CloudEvents JSON lines) on stdout")
    .option("--max-steps <n>", "allow N more model calls from where the run stopped (needed for a run stopped at max_steps)")
    .option("--max-cost <usd>", "allow USD more from what the run has spent (needed for a run stopped at its budget)")
    .option("--timeout <duration>", "this attempt's wall-clock limit (90s, 10m, 1.5h; default: the run's timeout_sec)")
    .option("-o, --output-last-message <file>", "write the agent's final answer (only it) to this file when the run ends")
    .addHelpText(
      "after",
      [
        "",
        "Examples:",
        "  runner resume 20260101-120000-ab12cd           by id (runner runs lists them)",
        "  runner resume 2026 --max-steps 20              a unique prefix is enough; 20 more model calls",
        "  runner resume 2026 --max-cost 2 --timeout 30m  $2 more than the run has spent; 30 minutes for this attempt",
      ].join("\n"),
    )
    .action(async (id: string, options: { json?: boolean; maxSteps?: string; maxCost?: string; timeout?: string; outputLastMessage?: string }) => {
      const { resumeCommand } = await import("./exec-command.js");
      exitCode = await resumeCommand(id, options, controller.signal);
    });

  program
    .command("continue")
    .description("talk back to an ended run: a new attempt on its branch with the conversation so far plus your message, verified and delivered as usual")
    .argument("<run-id>", "run id, or a unique prefix of it")
    .argument("<message>", "your feedback, the agent's next user message")
    .option("--json", "stream the run's events (CloudEvents JSON lines) on stdout")
    .option("--max-steps <n>", "allow N more model calls (default: the run's max_steps)")
    .option("--max-cost <usd>", "allow USD more than the run has spent (default: its model.max_cost_usd)")
    .option("--timeout <duration>", "this attempt's wall-clock limit (90s, 10m, 1.5h; default: the run's timeout_sec)")
    .option("--merge", "after a verified success, fast-forward your checked-out branch to the run's branch")
    .option("-o, --output-last-message <file>", "write the agent's final answer (only it) to this file when the run ends")
    .addHelpText(
      "after",
      [
        "",
        "Examples:",
        '  runner continue 20260101-120000-ab12cd "also handle negative numbers"',
        '  runner continue 2026 "the tests pass but add a docstring" --merge',
      ].join("\n"),
    )
    .action(
      async (
        id: string,
        message: string,
        options: { json?: boolean; maxSteps?: string; maxCost?: string; timeout?: string; merge?: boolean; outputLastMessage?: string },
      ) => {
        const { continueCommand } = await import("./exec-command.js");
        exitCode = await continueCommand(id, message, options, controller.signal);
      },
    );

  program
    .command("runs")
    .description("list the runs in RUNNER_HOME, newest first")
    .option("--json", "one JSON object per run")
    .action(async (options: { json?: boolean }) => {
      const { runsCommand } = await import("./runs-command.js");
      exitCode = runsCommand(runnerHome(), options);
    });

  program
    .command("prune")
    .description("remove ended runs' branches and run directories; never a branch with commits no other branch holds (without --force), never a running run's")
    .option("--merged", "only runs whose branches are merged into the repository's checked-out branch")
    .option("--older-than <age>", "only runs that ended at least this long ago (7d, 12h, 2w)")
    .option("--dry-run", "say what would be removed, remove nothing")
    .option("--force", "also remove runs whose branches hold commits no other branch, tag or remote branch holds")
    .option("--referenced", "also remove runs a batch's or an agency's records name (their reports link them)")
    .option("--json", "one JSON object per run")
    .addHelpText(
      "after",
      [
        "",
        "Examples:",
        "  runner prune --dry-run                    what would go",
        "  runner prune --merged --older-than 7d     merged runs older than a week",
      ].join("\n"),
    )
    .action(async (options: { merged?: boolean; olderThan?: string; dryRun?: boolean; force?: boolean; referenced?: boolean; json?: boolean }) => {
      const { pruneCommand } = await import("./prune-command.js");
      exitCode = await pruneCommand(runnerHome(), options);
    });

  program
    .command("show")
    .description("print a run's summary (as runner exec ends), its transcript and its diff")
    .argument("<run-id>", "run id, or a unique prefix of it")
    .option("--full", "tool results whole (the transcript cuts each to its first 12 lines)")
    .option("--json", "one JSON object: {run_id, directory, report, agents: {<id>: {messages}}}")
    .action(async (id: string, options: { full?: boolean; json?: boolean }) => {
      const { showCommand } = await import("./runs-command.js");
      exitCode = showCommand(runnerHome(), id, options);
    });

  program
    .command("logs")
    .description("print a run's events as runner exec shows them; with -f follow a running run until it ends")
    .argument("<run-id>", "run id, or a unique prefix of it")
    .option("-f, --follow", "keep printing events as the run writes them; exit with the run's exit code when it ends")
    .option("--json", "the events.jsonl lines (CloudEvents JSON) as they are")
    .option("--nats <url>", "a run on a worker that no batch of this machine submitted: the cluster (nats://host:port[,…]; RUNNER_NATS_* credentials)")
    .option("--pool <name>", "with --nats: the worker pool (default: default)")
    .addHelpText(
      "after",
      [
        "",
        "Examples:",
        "  runner logs -f 20260101-120000-ab12cd        follow a run started in another terminal",
        "  runner logs --json 2026 | jq .type           a finished run's events, by unique id prefix",
        "  runner logs -f <run-id>                      a run of `runner batch run --nats` on a worker (docs/scale-out.md)",
      ].join("\n"),
    )
    .action(async (id: string, options: { follow?: boolean; json?: boolean; nats?: string; pool?: string }) => {
      onInterrupt = "stopped following; the run goes on";
      const { logsCommand } = await import("./logs-command.js");
      exitCode = await logsCommand(runnerHome(), id, options, controller.signal);
    });

  program
    .command("mcp")
    .description("serve MCP tools (stdio, or --http) so IDE agents start, follow and read sandboxed, verified runs (docs/mcp-server.md)")
    .option(
      "--workspace-root <dir>",
      "a directory callers' paths (task_file, workspace) must lie in; repeat for more (default: the current directory)",
      (root: string, roots: string[] = []) => [...roots, root],
    )
    .option("--http", "serve streamable HTTP on 127.0.0.1 instead of stdio; prints the URL and the bearer token (RUNNER_MCP_TOKEN, else a random one)")
    .option("--port <n>", "with --http: the port (default 0: a free one)")
    .option(
      "--ceiling <field=value>",
      'the most a caller\'s run may ask for, e.g. sandbox.limits.memory=8g, timeout_sec=7200, model.max_cost_usd=20; repeat for more (docs/security.md "Ceilings")',
      (value: string, values: string[] = []) => [...values, value],
    )
    .addHelpText(
      "after",
      [
        "",
        "Examples:",
        "  claude mcp add agent-runner -- runner mcp --workspace-root ~/src",
        "  runner mcp --workspace-root ~/src/app --workspace-root ~/src/lib",
        "  RUNNER_MCP_TOKEN=... runner mcp --http --port 8765 --workspace-root ~/src",
      ].join("\n"),
    )
    .action(async (options: { workspaceRoot?: string[]; http?: boolean; port?: string; ceiling?: string[] }) => {
      onInterrupt = "stopping: cancelling the runs this server started";
      const { mcpCommand } = await import("./mcp-command.js");
      exitCode = await mcpCommand(options, packageVersion(), controller.signal);
    });

  program.addCommand(batchCommand(controller.signal, (code) => (exitCode = code)));
  program.addCommand(agencyCommand(controller.signal, (code) => (exitCode = code)));
  program.addCommand(importCommand((code) => (exitCode = code)));
  program.addCommand(serveCommand(controller.signal, (code) => (exitCode = code)));
  program.addCommand(
    workerCommand(
      controller.signal,
      (code) => (exitCode = code),
      (text) => (onInterrupt = text),
    ),
  );

  const policy = program.command("policy").description('validate and explain permission policies (docs/policies.md "Policies")');
  policy
    .command("check")
    .description("validate a policy and print what it allows; exit 2 with every problem when it is invalid")
    .argument("<file>", "policy file, or the name of a shipped policy (explore, worker, reviewer, ci)")
    .action(async (file: string) => {
      const { policyCheckCommand } = await import("./policy-command.js");
      exitCode = policyCheckCommand(file);
    });

  const config = program
    .command("config")
    .description('the defaults runs start from: $RUNNER_HOME/config.yaml, ./.runner.yaml (docs/command-line.md "Defaults file")');
  config
    .command("show", { isDefault: true })
    .description("print each default, its value and the file and line it came from")
    .option("-C, --workspace <dir>", "the repository the runs are on (decides whether ./.runner.yaml is read; default: the current directory)")
    .action(async (options: { workspace?: string }) => {
      const { configShowCommand } = await import("./config-command.js");
      exitCode = configShowCommand(runnerHome(), options);
    });

  const image = program.command("image").description("manage the sandbox image");
  image
    .command("build")
    .description("build agent-runner/sandbox:bookworm (offline fallback: debootstrap + docker import)")
    .option("--force", "rebuild even when the image is up to date")
    .option("--tag <tag>", "image tag", "agent-runner/sandbox:bookworm")
    .action((options: { force?: boolean; tag: string }) => {
      const args = [BUILD_SCRIPT, "--tag", options.tag, ...(options.force ? ["--force"] : [])];
      const result = spawnSync("bash", args, { stdio: "inherit" });
      exitCode = result.status ?? 3;
    });

  program
    .command("init")
    .description("write a commented task.yaml and a scripted trajectory example (script.yaml) for the repository in dir")
    .argument("[dir]", "where to write them (default: the current directory); outside a repository, for the one you are in")
    .addHelpText(
      "after",
      [
        "",
        "The test command becomes verify.command where it is obvious (a Makefile test target, package.json",
        "scripts.test, pytest, go.mod, Cargo.toml). Existing files are never overwritten (exit 2).",
        "",
        "Examples:",
        "  runner init                  in your repository's top level",
        "  runner init tasks/fix-login  a directory of its own in the repository (workspace: ../..)",
        "  runner init ../tasks/fix-login  outside the repository, for the one you are in (created; workspace points back)",
      ].join("\n"),
    )
    .action(async (dir: string | undefined) => {
      const { initCommand } = await import("./init-command.js");
      exitCode = initCommand(dir);
    });

  program
    .command("completion")
    .description("print a shell completion script (bash, zsh, fish)")
    .addArgument(new Argument("<shell>", "the shell").choices(COMPLETION_SHELLS))
    .addHelpText(
      "after",
      [
        "",
        "Examples:",
        "  source <(runner completion bash)                    in ~/.bashrc",
        "  source <(runner completion zsh)                     in ~/.zshrc, after compinit",
        "  runner completion fish > ~/.config/fish/completions/runner.fish",
      ].join("\n"),
    )
    .action((shell: CompletionShell) => {
      process.stdout.write(completionScript(program, shell));
    });

  try {
    await program.parseAsync(argv);
  } catch (error) {
    if (error instanceof CommanderError) {
      return error.exitCode === 0 ? 0 : 2;
    }
    throw error;
  }
  return exitCode;
}

main(process.argv).then(
  (code) => {
    process.exitCode = code;
    // Keep-alive sockets (Docker, HTTP) must not hold the process open.
    setImmediate(() => process.exit(code));
  },
  (error: unknown) => {
    if (error instanceof RunnerError) {
      process.stderr.write(`runner: ${terminalSafe(error.message)}\n`);
      process.exit(error.exitCode);
    }
    process.stderr.write(`runner: internal error: ${terminalSafe((error as Error)?.stack ?? String(error))}\n`);
    process.exit(3);
  },
);
