#!/usr/bin/env node
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Command, CommanderError } from "commander";
import { RunnerError } from "../errors.js";
import { terminalSafe } from "../terminal-text.js";
import { batchCommand } from "./batch-command.js";
import { execCommand, resumeCommand } from "./exec-command.js";
import { runnerHome } from "../runner/runner-home.js";
import { policyCheckCommand } from "./policy-command.js";
import { runsCommand, showCommand } from "./runs-command.js";

const BUILD_SCRIPT = fileURLToPath(new URL("../../sandbox-images/build.sh", import.meta.url));

function packageVersion(): string {
  return (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;
}

async function main(argv: string[]): Promise<number> {
  const controller = new AbortController();
  let interrupts = 0;
  const onSignal = (name: NodeJS.Signals) => {
    interrupts += 1;
    if (interrupts === 1) {
      process.stderr.write(`\n${name}: stopping the run and cleaning up (press Ctrl-C again to quit at once)\n`);
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
    .version(packageVersion(), "--version")
    .exitOverride()
    .configureOutput({ writeErr: (text) => process.stderr.write(text) });

  program
    .command("exec")
    .description("run a task (task.yaml), or an ad-hoc one with --instruction and --workspace")
    .argument("[task]", "path to task.yaml")
    .option("--json", "stream the run's events (CloudEvents JSON lines) on stdout")
    .option("--instruction <text>", "ad-hoc task: what the agent must do")
    .option("--workspace <dir>", "ad-hoc task: the git repository to work on", undefined)
    .option("--name <name>", "ad-hoc task: its name ([a-z0-9-])")
    .option("--verify <command>", "ad-hoc task: verification command run in the sandbox")
    .option("--image <image>", "ad-hoc task: sandbox image")
    .option("--max-steps <n>", "override max_steps")
    .option("--merge", "after a verified success, fast-forward your checked-out branch to the run branch (if it has not moved and is clean)")
    .addHelpText(
      "after",
      "\nEnvironment: OPENAI_API_KEY, OPENAI_BASE_URL, OPENAI_MODEL (real model); RUNNER_HOME (run records, default ~/.runner);\n" +
        "RUNNER_EGRESS_NETWORK (Docker network the egress proxies use, default bridge).\n" +
        "Exit codes: 0 success, 1 verification failed or max_steps, 2 bad task or arguments, 3 infrastructure or model error, 130 interrupted.",
    )
    .action(async (task: string | undefined, options) => {
      exitCode = await execCommand(task, options, controller.signal);
    });

  program
    .command("resume")
    .description("continue an interrupted, crashed or errored run: same branch, a new container, the persisted conversation")
    .argument("<run-id>", "run id, or a unique prefix of it")
    .option("--json", "stream the run's events (CloudEvents JSON lines) on stdout")
    .option("--max-steps <n>", "raise max_steps (model calls, counted from the start of the run)")
    .action(async (id: string, options: { json?: boolean; maxSteps?: string }) => {
      exitCode = await resumeCommand(id, options, controller.signal);
    });

  program
    .command("runs")
    .description("list the runs in RUNNER_HOME, newest first")
    .option("--json", "one JSON object per run")
    .action((options: { json?: boolean }) => {
      exitCode = runsCommand(runnerHome(), options);
    });

  program
    .command("show")
    .description("print a run's report and a readable transcript")
    .argument("<run-id>", "run id, or a unique prefix of it")
    .action((id: string) => {
      exitCode = showCommand(runnerHome(), id);
    });

  program.addCommand(batchCommand(controller.signal, (code) => (exitCode = code)));

  const policy = program.command("policy").description("validate and explain permission policies (README \"Policies\")");
  policy
    .command("check")
    .description("validate a policy and print what it allows; exit 2 with every problem when it is invalid")
    .argument("<file>", "policy file, or the name of a shipped policy (explore, worker, reviewer, ci)")
    .action((file: string) => {
      exitCode = policyCheckCommand(file);
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
