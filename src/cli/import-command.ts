import { Command } from "commander";

// Definitions only: each action imports ./import-actions.js when it runs (src/cli/main.ts keeps quick commands quick).

/** `runner import swe-bench | harbor | tb1` (docs/importers.md); `exit` receives the exit code. */
export function importCommand(exit: (code: number) => void): Command {
  const command = new Command("import")
    .description("convert benchmark tasks (SWE-bench, Harbor, Terminal-Bench 1) into task dirs for `runner batch run` (docs/importers.md)")
    .exitOverride();
  const exitCodes = "\nPrints one line per task: converted, or why it cannot be. Exit codes: 0 every task converted, 1 some could not be, 2 bad input.";
  command
    .command("swe-bench")
    .exitOverride()
    .description("SWE-bench instances (JSONL) and local clones → one task dir per instance")
    .argument("<instances>", "instances JSONL (instance_id, repo, base_commit, problem_statement, test_patch, FAIL_TO_PASS, PASS_TO_PASS, version)")
    .requiredOption("--repos <dir>", "local clones, as <dir>/<owner>__<name> or <dir>/<owner>/<name>")
    .requiredOption("--out <dir>", "where the task dirs go (<out>/<instance_id>/)")
    .option("--image <ref>", "sandbox.image of every task, {instance_id} replaced (e.g. your build of the harness's per-instance image)")
    .option("--shallow", "copy only the base commit, not its history")
    .addHelpText("after", exitCodes)
    .action(async (instances: string, flags: { repos: string; out: string; image?: string; shallow?: boolean }) => {
      exit(await (await import("./import-actions.js")).importSweBenchAction(instances, flags));
    });
  command
    .command("harbor")
    .exitOverride()
    .description("Harbor task dirs (task.toml, instruction.md, environment/Dockerfile, tests/test.sh) → task dirs")
    .argument("<dir>", "a Harbor task dir, or a directory of them")
    .requiredOption("--out <dir>", "where the task dirs go")
    .addHelpText("after", exitCodes)
    .action(async (input: string, flags: { out: string }) => {
      exit(await (await import("./import-actions.js")).importDirectoriesAction("harbor", input, flags));
    });
  command
    .command("tb1")
    .exitOverride()
    .description("Terminal-Bench 1 task dirs (task.yaml, Dockerfile, run-tests.sh, tests/) → task dirs")
    .argument("<dir>", "a Terminal-Bench 1 task dir, or a directory of them")
    .requiredOption("--out <dir>", "where the task dirs go")
    .addHelpText("after", exitCodes)
    .action(async (input: string, flags: { out: string }) => {
      exit(await (await import("./import-actions.js")).importDirectoriesAction("tb1", input, flags));
    });
  return command;
}
