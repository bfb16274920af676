/**
 * Subagent bench, part 2: worker ready time (snapshot + worktree + container)
 * on a repository of N generated files (default 2000, nested directories,
 * committed), compared in the same run with its building blocks:
 *
 * - `git worktree add -b` alone (plain git CLI) and `--no-checkout` (what a
 *   lazy checkout would cost up front);
 * - the runner's own `createBranchWorktree` (safe git, `rev-parse`, and the
 *   lchown walk that hands every file to the sandbox uid when the runner is
 *   root), `removeRunWorktree`, a replica of the lchown walk alone;
 * - the snapshot: `commitRunWorktree` of a clean worktree, `sandbox.freeze`
 *   of an idle sandbox (docker pause + unpause), and both together (what a
 *   worker's snapshot does);
 * - a container start alone: `docker run --rm <image> true` (CLI) and
 *   `DockerSandboxProvider.create` + the first exec (the sandbox bench's ready row);
 * - a real `runner exec` with one worker, on the N-file repository and on
 *   the same repository without the generated files: agent call → first
 *   model call of the worker, split by events.jsonl and container events.
 */
import { cpSync, existsSync, lchownSync, lstatSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type Docker from "dockerode";
import { DockerSandboxProvider } from "../../src/sandbox/docker/docker-sandbox-provider.js";
import type { Sandbox } from "../../src/sandbox/sandbox.js";
import { commitRunWorktree, createBranchWorktree, createRunWorktree, removeRunWorktree, type RunWorktree } from "../../src/workspace/run-worktree.js";
import { BENCH_IMAGE, benchSpec, execFileAsync, nextContainerName, SANDBOX_UID, sweepBenchContainers } from "../lib/docker-env.js";
import { fmt, median, printTable, time, type Row } from "../lib/stats.js";
import { cleanUpRuns, git, makeTemplate, runPhases, runPlan, workerPhases, type RunPhases, type WorkerPhases } from "./subagent-runs.js";

/** The same loop as run-worktree.ts's changeOwnerRecursively (not exported): lstat, readdir, lchown, no symlink followed. */
function lchownWalk(root: string, uid: number, gid: number): number {
  const pending = [root];
  let entries = 0;
  while (pending.length) {
    const current = pending.pop()!;
    lchownSync(current, uid, gid);
    entries += 1;
    if (!lstatSync(current).isDirectory()) continue;
    for (const name of readdirSync(current)) pending.push(join(current, name));
  }
  return entries;
}

interface CliSample {
  worker: WorkerPhases;
  run: RunPhases;
}

export async function benchWorkerReady(docker: Docker, options: { rounds: number; micro: number; files: number; sleepSeconds: number }): Promise<void> {
  const big = makeTemplate(1, options.files);
  const small = makeTemplate(1, 0);
  const scratch = mkdtempSync(join(tmpdir(), "agent-runner-bench-ready-"));
  const provider = new DockerSandboxProvider({ docker });
  let idle: Sandbox | null = null;
  let parent: RunWorktree | null = null;
  let shm: string | null = null;
  const samples: Record<string, number[]> = {};
  const add = (name: string, value: number) => (samples[name] ??= []).push(value);
  const cli: { big: CliSample[]; small: CliSample[] } = { big: [], small: [] };
  let counter = 0;
  const freezeFailures: string[] = [];
  try {
    // The micro rows work on their own copy, so the CLI runs' copies of the template stay pristine.
    const repo = join(scratch, "repo");
    cpSync(big.repo, repo, { recursive: true });
    git(repo, ["update-index", "-q", "--refresh"]);
    const head = git(repo, ["rev-parse", "HEAD"]).trim();
    // A second commit, one file changed: what a pooled worktree would have to check out to move to a new snapshot.
    git(repo, ["checkout", "-q", "-b", "bench/next"]);
    writeFileSync(join(repo, "mod1.py"), "def value1(x):\n    return x + 1\n");
    git(repo, ["commit", "-q", "-am", "next"]);
    const next = git(repo, ["rev-parse", "HEAD"]).trim();
    git(repo, ["checkout", "-q", "main"]);
    const pool = join(scratch, "pool");
    git(repo, ["worktree", "add", "-q", "--detach", pool, head]);
    let poolAt = head;
    shm = existsSync("/dev/shm") ? mkdtempSync("/dev/shm/agent-runner-bench-") : null;
    // The "parent": a run worktree of the big repository, as `runner exec` makes it, and an idle sandbox on it.
    parent = await createRunWorktree(repo, { runId: "bench-parent", taskSlug: "bench" }, join(scratch, "parent"));
    const entries = lchownWalk(parent.path, parent.sandboxUser.uid, parent.sandboxUser.gid);
    idle = await provider.create(benchSpec(parent.path));
    await idle.exec({ command: "true" });
    console.log(
      `   repository: ${big.trackedFiles} tracked files (${options.files} generated under lib/, 200 directories), ${entries} entries in a worktree; ` +
        `the sandbox uid is ${parent.sandboxUser.uid} (the runner is ${process.getuid?.() === 0 ? "root: every new worktree is lchown-walked" : "not root: no lchown walk"})`,
    );

    // DockerSandbox.freeze can fail to pause right after an unpause (and then leave the container frozen; see
    // bench/README.md, findings): such a sample is counted, the container is thawed, and the bench goes on.
    const timedFreeze = async (name: string, operation: () => Promise<unknown>) => {
      try {
        add(name, await time(() => idle!.freeze(operation)));
      } catch (error) {
        freezeFailures.push(`${name}: ${(error as Error).message.split("\n")[0]!.slice(0, 160)}`);
        const container = docker.getContainer(idle!.id);
        for (let attempt = 0; attempt < 20 && (await container.inspect()).State.Paused; attempt += 1) {
          await container.unpause().catch(() => undefined);
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      }
    };
    const micro: Record<string, () => Promise<void>> = {
      "git worktree add -b (plain git)": async () => {
        counter += 1;
        const path = join(scratch, `plain${counter}`);
        add(
          "git worktree add -b (plain git)",
          await time(() => execFileAsync("git", ["worktree", "add", "-q", "-b", `bench/plain${counter}`, path, head], { cwd: repo })),
        );
        await execFileAsync("git", ["worktree", "remove", "--force", path], { cwd: repo });
        git(repo, ["branch", "-q", "-D", `bench/plain${counter}`]);
      },
      "pooled worktree: git checkout -B (1 file differs)": async () => {
        counter += 1;
        poolAt = poolAt === head ? next : head;
        add(
          "pooled worktree: git checkout -B (1 file differs)",
          await time(() => execFileAsync("git", ["checkout", "-q", "-f", "-B", `bench/pool${counter}`, poolAt], { cwd: pool })),
        );
        await execFileAsync("git", ["checkout", "-q", "--detach"], { cwd: pool });
        git(repo, ["branch", "-q", "-D", `bench/pool${counter}`]);
      },
      ...(shm !== null
        ? {
            "git worktree add -b on tmpfs (/dev/shm)": async () => {
              counter += 1;
              const path = join(shm!, `t${counter}`);
              add(
                "git worktree add -b on tmpfs (/dev/shm)",
                await time(() => execFileAsync("git", ["worktree", "add", "-q", "-b", `bench/tmpfs${counter}`, path, head], { cwd: repo })),
              );
              await execFileAsync("git", ["worktree", "remove", "--force", path], { cwd: repo });
              git(repo, ["branch", "-q", "-D", `bench/tmpfs${counter}`]);
            },
          }
        : {}),
      "git worktree add --no-checkout -b": async () => {
        counter += 1;
        const path = join(scratch, `lazy${counter}`);
        add(
          "git worktree add --no-checkout -b",
          await time(() => execFileAsync("git", ["worktree", "add", "-q", "--no-checkout", "-b", `bench/lazy${counter}`, path, head], { cwd: repo })),
        );
        await execFileAsync("git", ["worktree", "remove", "--force", path], { cwd: repo });
        git(repo, ["branch", "-q", "-D", `bench/lazy${counter}`]);
      },
      "createBranchWorktree (runner)": async () => {
        counter += 1;
        let created: RunWorktree | null = null;
        add(
          "createBranchWorktree (runner)",
          await time(async () => (created = await createBranchWorktree(parent!, `runner/bench-w${counter}`, join(scratch, `w${counter}`), head))),
        );
        add("lchown walk alone (replica)", await time(async () => lchownWalk(created!.path, SANDBOX_UID, SANDBOX_UID)));
        add("removeRunWorktree (rm -r + prune)", await time(async () => removeRunWorktree(created!)));
        git(repo, ["branch", "-q", "-D", `runner/bench-w${counter}`]);
      },
      "commitRunWorktree, nothing changed": async () => {
        add("commitRunWorktree, nothing changed", await time(() => commitRunWorktree(parent!, "bench: snapshot")));
      },
      "sandbox.freeze(no-op) (pause + unpause)": async () => {
        await timedFreeze("sandbox.freeze(no-op) (pause + unpause)", async () => undefined);
      },
      "snapshot: freeze + commitRunWorktree": async () => {
        await timedFreeze("snapshot: freeze + commitRunWorktree", () => commitRunWorktree(parent!, "bench: snapshot"));
      },
      "docker run --rm image true (CLI)": async () => {
        add(
          "docker run --rm image true (CLI)",
          await time(() => execFileAsync("docker", ["run", "--rm", "--network", "none", "--name", nextContainerName("true"), BENCH_IMAGE, "true"])),
        );
      },
      "provider.create + first exec": async () => {
        let sandbox: Sandbox | null = null;
        add(
          "provider.create + first exec",
          await time(async () => {
            sandbox = await provider.create(benchSpec(parent!.path));
            await sandbox.exec({ command: "true" });
          }),
        );
        await (sandbox as Sandbox | null)?.close();
      },
    };
    const names = Object.keys(micro);
    // Warm-up: one of each, one CLI run of each repository.
    for (const name of names) await micro[name]!();
    for (const key of Object.keys(samples)) samples[key] = [];
    await runPlan(docker, big, "single", options.sleepSeconds);
    await runPlan(docker, small, "single", options.sleepSeconds);
    await cleanUpRuns(docker);
    for (let round = 0; round < options.rounds; round += 1) {
      for (let repeat = 0; repeat < options.micro; repeat += 1) {
        for (let k = 0; k < names.length; k += 1) await micro[names[(k + round + repeat) % names.length]!]!();
      }
      for (const which of round % 2 === 0 ? (["big", "small"] as const) : (["small", "big"] as const)) {
        const run = await runPlan(docker, which === "big" ? big : small, "single", options.sleepSeconds);
        const [worker] = workerPhases(run);
        cli[which].push({ worker: worker!, run: runPhases(run, [worker!]) });
      }
      const last = (which: "big" | "small") => cli[which].at(-1)!.worker;
      console.log(
        `   round ${round + 1}: worker ready ${fmt(last("big").ready)} ms (${options.files} files) / ${fmt(last("small").ready)} ms (small repo); git worktree add ${fmt(samples["git worktree add -b (plain git)"]!.at(-1)!)} ms`,
      );
      await cleanUpRuns(docker);
    }
  } finally {
    await idle?.close().catch(() => undefined);
    if (parent) await removeRunWorktree(parent);
    if (shm) rmSync(shm, { recursive: true, force: true });
    await cleanUpRuns(docker);
    await sweepBenchContainers(docker);
    rmSync(scratch, { recursive: true, force: true });
    big.dispose();
    small.dispose();
  }

  const rows: Row[] = [
    { name: "git worktree add -b (plain git)", samples: samples["git worktree add -b (plain git)"]!, note: `baseline: checkout of ${big.trackedFiles} files` },
    {
      name: "git worktree add -b on tmpfs (/dev/shm)",
      samples: samples["git worktree add -b on tmpfs (/dev/shm)"] ?? [],
      baseline: "git worktree add -b (plain git)",
      note: "the same checkout in RAM: how much of it is the disk",
    },
    {
      name: "pooled worktree: git checkout -B (1 file differs)",
      samples: samples["pooled worktree: git checkout -B (1 file differs)"]!,
      baseline: "git worktree add -b (plain git)",
      note: "an existing worktree moved to a new commit and branch: only changed files are written",
    },
    {
      name: "git worktree add --no-checkout -b",
      samples: samples["git worktree add --no-checkout -b"]!,
      baseline: "git worktree add -b (plain git)",
      note: "what a lazy / sparse checkout pays up front",
    },
    {
      name: "createBranchWorktree (runner)",
      samples: samples["createBranchWorktree (runner)"]!,
      baseline: "git worktree add -b (plain git)",
      note: "safe git worktree add + rev-parse + lchown walk",
    },
    { name: "lchown walk alone (replica)", samples: samples["lchown walk alone (replica)"]!, baseline: "createBranchWorktree (runner)" },
    {
      name: "removeRunWorktree (rm -r + prune)",
      samples: samples["removeRunWorktree (rm -r + prune)"]!,
      baseline: "git worktree add -b (plain git)",
      note: "a worker's cleanup phase",
    },
    {
      name: "commitRunWorktree, nothing changed",
      samples: samples["commitRunWorktree, nothing changed"]!,
      note: "git add --all + diff --cached + rev-parse over the worktree",
    },
    { name: "sandbox.freeze(no-op) (pause + unpause)", samples: samples["sandbox.freeze(no-op) (pause + unpause)"]! },
    {
      name: "snapshot: freeze + commitRunWorktree",
      samples: samples["snapshot: freeze + commitRunWorktree"]!,
      baseline: "sandbox.freeze(no-op) (pause + unpause)",
      note: "what each worker's snapshot does, under the parent's git lock",
    },
    { name: "docker run --rm image true (CLI)", samples: samples["docker run --rm image true (CLI)"]!, note: "a container start alone (network none)" },
    {
      name: "provider.create + first exec",
      samples: samples["provider.create + first exec"]!,
      baseline: "docker run --rm image true (CLI)",
      note: "the runner's sandbox ready (no git mounts)",
    },
  ];
  const worker = (which: "big" | "small", key: keyof WorkerPhases) => cli[which].map((sample) => Number(sample.worker[key])).filter(Number.isFinite);
  const run = (which: "big" | "small", key: keyof RunPhases) => cli[which].map((sample) => Number(sample.run[key]));
  const label = `${options.files} files`;
  rows.push(
    {
      name: `worker ready, ${label}`,
      samples: worker("big", "ready"),
      baseline: "git worktree add -b (plain git)",
      note: "runner exec, 1 worker: main's agent tool_call.started -> the worker's first model_call.started",
    },
    {
      name: "worker ready, small repo",
      samples: worker("small", "ready"),
      note: `the same repository without the ${options.files} generated files (${small.trackedFiles} files)`,
    },
    { name: `  prep (snapshot + worktree), ${label}`, samples: worker("big", "prep"), baseline: "  prep (snapshot + worktree), small repo" },
    { name: "  prep (snapshot + worktree), small repo", samples: worker("small", "prep") },
    { name: `    parent frozen: snapshot, ${label}`, samples: worker("big", "prepSnapshot"), baseline: "snapshot: freeze + commitRunWorktree" },
    { name: `    unfrozen -> task.started (worktree), ${label}`, samples: worker("big", "prepWorktree"), baseline: "createBranchWorktree (runner)" },
    { name: `  container (subagent.started -> 1st call), ${label}`, samples: worker("big", "container"), baseline: "provider.create + first exec" },
    { name: "  container, small repo", samples: worker("small", "container") },
    { name: `    spec + create, ${label}`, samples: worker("big", "containerCreate") },
    { name: `    start, ${label}`, samples: worker("big", "containerStart") },
    { name: `    hello + loop start, ${label}`, samples: worker("big", "containerHello") },
    { name: `cleanup: worker worktree removed, ${label}`, samples: worker("big", "cleanup"), baseline: "removeRunWorktree (rm -r + prune)" },
    { name: `verify: checkout + container, ${label}`, samples: worker("big", "verifySetup"), baseline: "verify: checkout + container, small repo" },
    { name: "verify: checkout + container, small repo", samples: worker("small", "verifySetup") },
    {
      name: `spawn -> run.started, ${label}`,
      samples: run("big", "start"),
      baseline: "spawn -> run.started, small repo",
      note: "CLI start + checks + the main's worktree (createRunWorktree)",
    },
    { name: "spawn -> run.started, small repo", samples: run("small", "start") },
  );
  printTable(
    `2. worker ready on a ${big.trackedFiles}-file repository (ms; micro rows ${options.rounds}x${options.micro}, runs ${options.rounds} each)`,
    rows.filter((row) => row.samples.length > 0),
  );
  if (freezeFailures.length)
    console.log(`   FREEZE FAILURES (sample dropped, container thawed): ${freezeFailures.length}\n${freezeFailures.map((line) => `   - ${line}`).join("\n")}`);
  const ready = median(worker("big", "ready"));
  const plain = median(samples["git worktree add -b (plain git)"]!);
  console.log(`   worker ready ${fmt(ready)} ms = ${(ready / plain).toFixed(1)}x a plain git worktree add (${fmt(plain)} ms) on ${big.trackedFiles} files`);
}
