/**
 * What naming a run's branch for its task costs at the start of a run (issue
 * 26 item 10): the check that a name is free (`runBranchNameTaken`, one `git
 * for-each-ref`) against the whole of `createRunWorktree` it is part of
 * (resolve the repository, name the branch, `git worktree add`), in a
 * repository already holding `--branches` run branches, and one safe git
 * spawn (`rev-parse HEAD`) for what any git call costs, same run.
 *
 *   npx tsx bench/run-branch-name.bench.ts [--rounds=15] [--branches=2000] [--files=200]
 *
 * Samples are ms per call; each round's worktree is removed untimed.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { runBranchNameTaken } from "../src/workspace/run-branch-name.js";
import { rawSafeGit } from "../src/workspace/safe-git.js";
import { createRunWorktree, removeRunWorktree } from "../src/workspace/run-worktree.js";
import { positiveOption } from "./lib/options.js";
import { fmt, median, printTable, type Row } from "./lib/stats.js";

const rounds = positiveOption("rounds", 15);
const branches = positiveOption("branches", 2000);
const files = positiveOption("files", 200);

const scratch = mkdtempSync(join(tmpdir(), "agent-runner-bench-branch-"));
try {
  const repository = join(scratch, "repo");
  mkdirSync(join(repository, "src"), { recursive: true });
  for (let index = 0; index < files; index += 1) writeFileSync(join(repository, "src", `file-${index}.txt`), `${index}\n`);
  const git = (...args: string[]) =>
    execFileSync("git", ["-c", "user.name=bench", "-c", "user.email=bench@example.com", ...args], { cwd: repository, input: "" });
  git("init", "-q", "-b", "main");
  git("add", "-A");
  git("commit", "-q", "-m", "initial");
  const head = execFileSync("git", ["rev-parse", "HEAD"], { cwd: repository, encoding: "utf8" }).trim();
  // Earlier runs' branches, as `git update-ref --stdin` makes them in one go.
  const refs = Array.from({ length: branches }, (_, index) => `create refs/heads/runner/fix-add-${index.toString(16).padStart(4, "0")} ${head}\n`).join("");
  execFileSync("git", ["update-ref", "--stdin"], { cwd: repository, input: refs });

  const whole: number[] = [];
  const check: number[] = [];
  const spawn: number[] = [];
  for (let round = -2; round < rounds; round += 1) {
    const runId = `20261201-093000-${(0xf000 + round + 2).toString(16)}`;
    let started = performance.now();
    const worktree = await createRunWorktree(repository, { runId, taskSlug: "fix-add" }, join(scratch, `run-${round + 2}`));
    const wholeMs = performance.now() - started;
    started = performance.now();
    await runBranchNameTaken(repository, `runner/fix-add-${runId.slice(-4)}`);
    const checkMs = performance.now() - started;
    started = performance.now();
    await rawSafeGit({ baseDirectory: repository }, ["rev-parse", "--verify", "HEAD"]);
    const spawnMs = performance.now() - started;
    const failure = await removeRunWorktree(worktree);
    if (failure) throw failure;
    if (round >= 0) {
      whole.push(wholeMs);
      check.push(checkMs);
      spawn.push(spawnMs);
    }
  }
  const baseline = "createRunWorktree (whole)";
  const rows: Row[] = [
    { name: baseline, samples: whole },
    { name: "runBranchNameTaken (the name check in it)", samples: check, baseline },
    { name: "one safe git spawn (rev-parse HEAD)", samples: spawn, baseline },
  ];
  printTable(`run branch naming: ms per call (${branches} run branches, ${files} files, ${rounds} rounds)`, rows);
  console.log(`  the name check: median ${fmt(median(check))} ms of ${fmt(median(whole))} ms`);
} finally {
  rmSync(scratch, { recursive: true, force: true });
}
