/**
 * Security invariant 5 (DESIGN.md): no container outlives its run. Ctrl-C, a
 * crash or `kill -9` of the runner leaves nothing behind that the next start
 * does not clean up; containers and networks carry the run id label.
 *
 * The CLI cases spawn the real runner (`node --import tsx src/cli/main.ts`,
 * one process, so a signal reaches the runner itself and its pid is the one in
 * the owner label) on a scripted task whose first tool call blocks, and wait
 * for that call to be running by polling for a file it creates.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type Docker from "dockerode";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LABEL_OWNER, LABEL_RUN_ID } from "../../src/sandbox/docker/labels.js";
import { DockerSandboxProvider } from "../../src/sandbox/docker/docker-sandbox-provider.js";
import { sweepLeftovers } from "../../src/sandbox/docker/sweep-leftovers.js";
import { createGitRepository } from "../helpers/git-repository.js";
import { requireDocker, SANDBOX_IMAGE } from "../helpers/docker.js";
import { containersOfRun, describeRun, networksOfRun, runScriptedTask, shellTurn, waitFor, writeTurn } from "./security-harness.js";
import { runPaths } from "../../src/workspace/run-disk.js";
import { sweepDeadRuns } from "../../src/run/run-lock.js";

const PROJECT_ROOT = fileURLToPath(new URL("../../", import.meta.url));

/** Field 22 of /proc/<pid>/stat: the process start time in clock ticks (see labels.ts, LABEL_OWNER). */
function processStartTicks(pid: number): string {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]!;
}

/** The owner label a runner in this process writes: `<hostname>:<pid>:<start ticks>`. */
function ownerLabelOf(pid: number): string {
  return `${hostname()}:${pid}:${processStartTicks(pid)}`;
}

interface CliRun {
  child: ChildProcess;
  runnerHome: string;
  exit: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output: () => string;
  /** Resolves with the run id once the blocking tool call runs inside the container. */
  started: Promise<{ runId: string; runDirectory: string }>;
  dispose(): void;
}

/** Starts `runner exec task.yaml` on `repository`; its first tool call creates `.started` and then sleeps. */
function startCli(repository: string): CliRun {
  const directory = mkdtempSync(join(tmpdir(), "agent-runner-sec-cli-"));
  const runnerHome = join(directory, "home");
  writeFileSync(
    join(directory, "script.yaml"),
    JSON.stringify({
      turns: [
        { tool_calls: [{ name: "run_shell", arguments: { command: "touch .started && exec sleep 600", timeout_ms: 900_000 } }] },
        { content: "not reached" },
      ],
    }),
  );
  writeFileSync(
    join(directory, "task.yaml"),
    JSON.stringify({
      name: "cleanup-probe",
      instruction: "Block in a tool call (scripted).",
      workspace: repository,
      model: { provider: "scripted", script: "./script.yaml" },
      sandbox: { image: SANDBOX_IMAGE },
    }),
  );
  const child = spawn(process.execPath, ["--import", "tsx", join(PROJECT_ROOT, "src/cli/main.ts"), "exec", join(directory, "task.yaml")], {
    cwd: PROJECT_ROOT,
    env: { ...process.env, RUNNER_HOME: runnerHome },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exit = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  let exited = false;
  void exit.then(() => (exited = true));
  const started = waitFor("the blocking tool call to start in the container", 45_000, () => {
    if (exited) throw new Error(`the runner exited before its tool call started:\n${output}`);
    const runs = join(runnerHome, "runs");
    if (!existsSync(runs)) return null;
    for (const runId of readdirSync(runs)) {
      const runDirectory = join(runs, runId);
      if (existsSync(join(runPaths(runDirectory).worktree, ".started"))) return { runId, runDirectory };
    }
    return null;
  });
  return {
    child,
    runnerHome,
    exit,
    output: () => output,
    started,
    dispose() {
      if (!exited) child.kill("SIGKILL");
      rmSync(directory, { recursive: true, force: true });
    },
  };
}

describe("security invariant 5: no container outlives its run", () => {
  let docker: Docker;
  let repository: ReturnType<typeof createGitRepository>;

  beforeAll(async () => {
    docker = await requireDocker();
    repository = createGitRepository({ "app.txt": "broken\n" }, { prefix: "agent-runner-sec-cleanup-" });
  });
  afterAll(async () => {
    await repository?.[Symbol.asyncDispose]();
  });

  it("leaves no container or network labelled with the run id once runTask returns", async () => {
    const seenWhileRunning: Docker.ContainerInfo[][] = [];
    const run = await runScriptedTask({
      repository: repository.root,
      turns: [writeTurn("app.txt", "fixed\n"), shellTurn("cat app.txt")],
      verify: { command: "grep -q fixed app.txt" },
      onSandboxCreated: async (spec) => {
        seenWhileRunning.push(await containersOfRun(docker, spec.runId));
      },
    });
    try {
      expect(run.report.status, describeRun(run)).toBe("succeeded");
      // The agent's container, then (after it was removed) the verification
      // container, each existed alone and carried the labels the sweeper looks for...
      expect(seenWhileRunning).toHaveLength(2);
      for (const seen of seenWhileRunning) {
        expect(seen).toHaveLength(1);
        expect(seen[0]!.Labels[LABEL_RUN_ID]).toBe(run.runId);
        expect(seen[0]!.Labels[LABEL_OWNER]).toBe(ownerLabelOf(process.pid));
      }
      // ...and is gone, not merely stopped, the moment runTask has returned.
      expect(await containersOfRun(docker, run.runId)).toEqual([]);
      expect(await networksOfRun(docker, run.runId)).toEqual([]);
    } finally {
      run.dispose();
    }
  });

  it("after kill -9 of the runner, the run's container is gone or swept by sweepLeftovers", async () => {
    const cli = startCli(repository.root);
    try {
      const { runId } = await cli.started;
      const running = await containersOfRun(docker, runId);
      expect(running.map((container) => container.State)).toEqual(["running"]);
      const owner = running[0]!.Labels[LABEL_OWNER]!;
      expect(owner).toBe(ownerLabelOf(cli.child.pid!));

      cli.child.kill("SIGKILL");
      expect(await cli.exit).toEqual({ code: null, signal: "SIGKILL" });
      // What the next start does: sweep resources whose owning runner is dead.
      await sweepLeftovers(docker);
      await waitFor(`no container of run ${runId} (after the sweep)`, 15_000, async () => (await containersOfRun(docker, runId)).length === 0);
      expect(await containersOfRun(docker, runId)).toEqual([]);
      expect(await networksOfRun(docker, runId)).toEqual([]);
      // The rest of the next start's sweep: the dead run's work is committed and its disk released (unmounted, removed).
      expect(await sweepDeadRuns(cli.runnerHome, new DockerSandboxProvider({ docker }))).toEqual([runId]);
      expect(readFileSync("/proc/self/mounts", "utf8")).not.toContain(cli.runnerHome);
      expect(existsSync(runPaths(join(cli.runnerHome, "runs", runId)).disk)).toBe(false);
    } finally {
      cli.dispose();
    }
  });

  it("on SIGINT mid-run: exit code 130, report.json status cancelled, no container left", async () => {
    const cli = startCli(repository.root);
    try {
      const { runId, runDirectory } = await cli.started;
      expect(await containersOfRun(docker, runId)).toHaveLength(1);
      cli.child.kill("SIGINT");
      const exit = await cli.exit;
      expect(exit, cli.output()).toEqual({ code: 130, signal: null });
      const report = JSON.parse(readFileSync(join(runDirectory, "report.json"), "utf8")) as { status: string; run_id: string };
      expect(report.run_id).toBe(runId);
      expect(report.status).toBe("cancelled");
      // The runner removed its container before exiting: no sweep, no waiting.
      expect(await containersOfRun(docker, runId)).toEqual([]);
      expect(await networksOfRun(docker, runId)).toEqual([]);
    } finally {
      cli.dispose();
    }
  });

  it("sweepLeftovers removes containers and networks of dead runners (even on pid reuse) and keeps a live runner's", async () => {
    const stamp = `${process.pid}-${Date.now().toString(36)}`;
    // A dead owner: a process that ran and exited.
    const exited = spawn("sleep", ["30"]);
    const deadOwner = ownerLabelOf(exited.pid!);
    const exitedPromise = new Promise((resolve) => exited.on("exit", resolve));
    exited.kill("SIGKILL");
    await exitedPromise;
    const owners = {
      dead: deadOwner,
      reused: `${hostname()}:${process.pid}:1`, // our pid, but another process start time
      live: ownerLabelOf(process.pid),
    };
    const created: Docker.Container[] = [];
    const networks: Docker.Network[] = [];
    try {
      for (const [kind, owner] of Object.entries(owners)) {
        const labels = { [LABEL_RUN_ID]: `sweep-${kind}-${stamp}`, [LABEL_OWNER]: owner };
        // A container that would never end by itself.
        const container = await docker.createContainer({
          Image: SANDBOX_IMAGE,
          Cmd: ["sleep", "infinity"],
          Entrypoint: [],
          Labels: labels,
          HostConfig: { NetworkMode: "none", AutoRemove: false, Init: true },
        });
        await container.start();
        created.push(container);
        networks.push(await docker.createNetwork({ Name: `agent-runner-sweep-${kind}-${stamp}`, Internal: true, Labels: labels }));
      }
      // (Not asserting on the returned lists: a concurrent CLI start may sweep the same leftovers first.)
      await sweepLeftovers(docker);
      for (const kind of ["dead", "reused"]) {
        expect(await containersOfRun(docker, `sweep-${kind}-${stamp}`), kind).toEqual([]);
        expect(await networksOfRun(docker, `sweep-${kind}-${stamp}`), kind).toEqual([]);
      }
      expect((await containersOfRun(docker, `sweep-live-${stamp}`)).map((container) => container.State)).toEqual(["running"]);
      expect(await networksOfRun(docker, `sweep-live-${stamp}`)).toHaveLength(1);
    } finally {
      for (const container of created) await container.remove({ force: true }).catch(() => undefined);
      for (const network of networks) await network.remove().catch(() => undefined);
    }
  });
});
