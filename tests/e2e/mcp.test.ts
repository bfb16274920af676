/**
 * MCP servers end to end (issue 6): the built CLI, the scripted model over
 * HTTP, real Docker, and the real `@modelcontextprotocol/server-filesystem`
 * preinstalled in the sandbox image, with the task's network `allow: []`.
 * What the model sees is asserted with the script's `expect` (an unmet
 * expect ends the run with exit 3) and from session.json afterwards; where
 * the server runs, with `ps` in the container, `docker top` and the host's
 * /proc while the agent waits on a release file.
 */
import { execFileSync } from "node:child_process";
import { readFileSync, readlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { requireDocker } from "../helpers/docker.js";
import { temporaryDirectory } from "../helpers/git-repository.js";
import { containersOfRun, eventsOfType, readEvents, readJson, runCli, startCli, toolCall, waitForRunEvent, writeScriptedTask } from "../helpers/runner-cli.js";
import { callsAndResults } from "../helpers/run-records.js";
import {
  containersOfAgent,
  hostProcesses,
  inspectGit,
  mainWorktree,
  readReport,
  release,
  removeRunContainers,
  runDirectoryOf,
  waitForRelease,
} from "../helpers/subagent-e2e.js";

/** The server as task.yaml names it; the image's launcher execs node on the package's dist/index.js. */
const FILES_SERVER = { files: { command: "mcp-server-filesystem", args: ["/workspace"] } };
/** What the server's process looks like in `ps` (the launcher execs `node ... server-filesystem/dist/index.js /workspace`). */
const SERVER_PROCESS = "server-filesystem/dist/index.js /workspace";
/** A `pkill -f` pattern for the server that does not match the shell running pkill. */
const KILL_SERVER = "pkill -f '[s]erver-filesystem/dist/index.js'";

const FILES = { "notes.txt": "hello from the workspace\n", "src/app.md": "# App\n" };

/** The pids above `pid` in the host's process tree (parent first), from /proc. */
function ancestors(pid: number): number[] {
  const found: number[] = [];
  let current = pid;
  while (current > 1) {
    // Fields after the command name (which may hold spaces) follow the last ")": state, then ppid.
    let stat: string;
    try {
      stat = readFileSync(`/proc/${current}/stat`, "utf8");
    } catch {
      // That process ended while we walked (a short-lived shim): the chain above it is gone, and the live runner is not in it.
      break;
    }
    current = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    found.push(current);
  }
  return found;
}

describe("MCP servers in the sandbox (real CLI, scripted model, real Docker, server-filesystem from npm)", () => {
  beforeAll(async () => {
    await requireDocker();
  });

  it("the agent lists and reads workspace files through mcp__files__*, is refused /etc/passwd, the server runs in the container, and a killed server turns into a clear Error while the run finishes 0", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    // pkill sends SIGTERM: node dies of it, exit 143.
    const notRunning = "^Error: MCP server files is not running \\(exit 143, SIGTERM; last stderr: ";
    const { task, repo } = writeScriptedTask(directory.path, {
      files: FILES,
      task: { name: "mcp-files", mcp_servers: FILES_SERVER, sandbox: { network: { allow: [] } }, verify: { command: "test -f notes.txt", timeout_sec: 60 } },
      script: {
        turns: [
          {
            tool_calls: [
              toolCall("mcp__files__list_directory", { path: "/workspace" }),
              toolCall("mcp__files__read_text_file", { path: "/workspace/notes.txt" }),
            ],
          },
          {
            expect: { tool_result_matches: "\\[FILE\\] notes\\.txt[\\s\\S]*\\[DIR\\] src[\\s\\S]*\\nhello from the workspace\\n" },
            tool_calls: [
              toolCall("mcp__files__read_text_file", { path: "/etc/passwd" }),
              toolCall("mcp__files__read_text_file", { path: "/workspace/../etc/passwd" }),
            ],
          },
          {
            // The policy's hard rule refuses paths outside /workspace before the server sees them (the
            // server's own refusal, symlinks included, is covered by tests/integration/mcp-servers).
            expect: { tool_result_matches: "^\\[denied\\] [^\\n]*outside[\\s\\S]*\\n\\[denied\\] ", tool_result_not_matches: "root:x:0:0" },
            // The server is a process of the sandbox (as the sandbox user); the agent waits while the test looks from the host.
            tool_calls: [
              toolCall("run_shell", {
                command: `ps -eo user,args | grep -F '${SERVER_PROCESS}' | grep -v grep; ls /sys/class/net; ${waitForRelease("inspected")}`,
              }),
            ],
          },
          {
            expect: { tool_result_matches: `^exit_code: 0\\nstdout:\\n\\S+ +node [^\\n]*${SERVER_PROCESS.replace(/\./g, "\\.")}\\nlo\\nreleased-inspected` },
            tool_calls: [toolCall("run_shell", { command: `${KILL_SERVER}; echo killed` })],
          },
          { expect: { tool_result_matches: "killed" }, tool_calls: [toolCall("mcp__files__read_text_file", { path: "/workspace/notes.txt" })] },
          { expect: { tool_result_matches: notRunning }, tool_calls: [toolCall("mcp__files__list_directory", { path: "/workspace" })] },
          { expect: { tool_result_matches: notRunning }, content: "Read notes.txt through MCP; the server was killed afterwards." },
        ],
      },
    });
    const running = startCli(["exec", task], { RUNNER_HOME: home.path });
    let runId = "";
    try {
      const { runDirectory } = await waitForRunEvent(home.path, "tool_call.started", (data) => String(data.arguments).includes(".release-inspected"), {
        process: running,
        timeoutMs: 60_000,
      });
      runId = readJson<{ run_id: string }>(join(runDirectory, "run.json")).run_id;
      // The agent's container runs the server: docker top lists it there.
      const [container] = containersOfAgent(runId, "main");
      expect(container).toBeDefined();
      const top = execFileSync("docker", ["top", container!, "-eo", "pid,args"], { encoding: "utf8" });
      const serverLine = top.split("\n").find((line) => line.includes(SERVER_PROCESS));
      expect(serverLine, top).toBeDefined();
      const serverPid = Number(serverLine!.trim().split(/\s+/)[0]);
      // Seen from the host, that process lives in another pid namespace than the runner (the container's) and is no child of the runner.
      expect(readlinkSync(`/proc/${serverPid}/ns/pid`)).not.toBe(readlinkSync(`/proc/${running.pid}/ns/pid`));
      expect(hostProcesses(`^node .*${SERVER_PROCESS}`).map((line) => Number(line.split(" ")[0]))).toContain(serverPid);
      expect(ancestors(serverPid)).not.toContain(running.pid);
      release(mainWorktree(runDirectory), "inspected");
      const result = await running.result;
      expect(result.code, result.stderr + result.stdout).toBe(0);
      const report = readReport(runDirectory);
      expect(report).toMatchObject({ status: "succeeded", reason: "verified_with_denials", error: null, denials: { "hard.workspace-confinement": 2 } });

      const calls = callsAndResults(runDirectory, "main");
      expect(calls.map((call) => call.name)).toEqual([
        "mcp__files__list_directory",
        "mcp__files__read_text_file",
        "mcp__files__read_text_file",
        "mcp__files__read_text_file",
        "run_shell",
        "run_shell",
        "mcp__files__read_text_file",
        "mcp__files__list_directory",
      ]);
      // .git is the worktree's pointer file.
      expect(calls[0]!.result.split("\n").sort()).toEqual(["[DIR] src", "[FILE] .git", "[FILE] notes.txt"]);
      expect(calls[1]!.result).toBe("hello from the workspace\n");
      for (const refused of [calls[2]!, calls[3]!]) {
        expect(refused.result).toMatch(/^\[denied\] .*outside/);
        expect(refused.result).not.toContain("root:");
      }
      // After the kill: a clear error naming the server, its exit and that its tools are gone for the run.
      for (const after of [calls[6]!, calls[7]!]) {
        expect(after.result).toMatch(
          /^Error: MCP server files is not running \(exit 143, SIGTERM; last stderr: .*Secure MCP Filesystem Server running on stdio.*\); its tools cannot be used for the rest of this run$/,
        );
      }
      const events = readEvents(runDirectory);
      expect(eventsOfType(events, "mcp_server.connected").map((event) => [event.data.server, event.data.transport])).toEqual([["files", "sandbox"]]);
      expect(eventsOfType(events, "mcp_server.connected")[0]!.data.tools).toEqual(
        expect.arrayContaining(["mcp__files__list_directory", "mcp__files__read_text_file"]),
      );
      expect(eventsOfType(events, "mcp_server.exited").map((event) => event.data.server)).toEqual(["files"]);
      // The two reads outside /workspace were refused by the runner's hard rule, counted as such.
      expect(report.denials).toEqual({ "hard.workspace-confinement": 2 });
      // The agent only read: the run changed nothing and leaves no branch (issue 26); its head is the base commit.
      expect(report.branch).toBeNull();
      expect(inspectGit(repo, ["ls-tree", "--name-only", "-r", report.head_commit!]).split("\n").filter(Boolean).sort()).toEqual(["notes.txt", "src/app.md"]);
      expect(containersOfRun(runId)).toEqual([]);
    } finally {
      if (!running.exited) {
        running.child.kill("SIGKILL");
        await running.result;
      }
      if (runId) await removeRunContainers(runId);
    }
  });

  it("MCP tools are subject to the policy's tool list: a denied one is not offered, and a call of it changes nothing", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const policy = join(directory.path, "no-mcp-writes.yaml");
    writeFileSync(
      policy,
      "name: no-mcp-writes\ndescription: every tool but the MCP server's writers\ntools: { allow: ['*'], deny: ['mcp__files__write_*', 'mcp__files__move_file'] }\ndefault_command_risk: allow\n",
    );
    const { task, repo } = writeScriptedTask(directory.path, {
      files: FILES,
      task: { name: "mcp-policy", mcp_servers: FILES_SERVER, policy },
      script: {
        turns: [
          {
            tool_calls: [
              toolCall("mcp__files__write_file", { path: "/workspace/written.txt", content: "x\n" }),
              toolCall("mcp__files__move_file", { source: "/workspace/notes.txt", destination: "/workspace/moved.txt" }),
            ],
          },
          {
            expect: { tool_result_matches: '^Error: unknown tool "mcp__files__write_file"[\\s\\S]*\\nError: unknown tool "mcp__files__move_file"' },
            tool_calls: [toolCall("mcp__files__read_text_file", { path: "notes.txt" })],
          },
          { expect: { tool_result_matches: "^hello from the workspace" }, content: "Could only read." },
        ],
      },
    });
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr + result.stdout).toBe(0);
    const runDirectory = runDirectoryOf(result);
    const calls = callsAndResults(runDirectory, "main");
    // The error lists what the model is offered: the server's readers, none of its denied writers.
    const offered = /Available tools: (.*)$/.exec(calls[0]!.result)![1]!.split(", ");
    expect(offered).toEqual(expect.arrayContaining(["mcp__files__read_text_file", "mcp__files__list_directory", "mcp__files__edit_file"]));
    expect(offered.filter((name) => /^mcp__files__(write_|move_file)/.test(name))).toEqual([]);
    // The server itself listed them (they exist; the policy hid them).
    expect(eventsOfType(readEvents(runDirectory), "mcp_server.connected")[0]!.data.tools).toEqual(
      expect.arrayContaining(["mcp__files__write_file", "mcp__files__move_file"]),
    );
    const report = readReport(runDirectory);
    expect(inspectGit(repo, ["ls-tree", "--name-only", "-r", report.head_commit]).split("\n").filter(Boolean).sort()).toEqual(["notes.txt", "src/app.md"]);
  });

  // MCP tools that take paths are held to the policy's path rules like the built-in file tools.
  it("the worker policy's .env* write rule also holds for an MCP server's file-writing tool", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task, repo } = writeScriptedTask(directory.path, {
      files: FILES,
      task: { name: "mcp-env-write", mcp_servers: FILES_SERVER, policy: "worker" },
      script: { turns: [{ tool_calls: [toolCall("mcp__files__write_file", { path: "/workspace/.env", content: "TOKEN=planted\n" })] }, { content: "Done." }] },
    });
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr + result.stdout).toBe(0);
    const runDirectory = runDirectoryOf(result);
    expect(callsAndResults(runDirectory, "main")[0]!.result).toMatch(/^\[denied\] .*\.env.* policy worker\b/);
    expect(inspectGit(repo, ["ls-tree", "--name-only", "-r", readReport(runDirectory).head_commit])).not.toContain(".env");
  });

  it("a server command that does not exist in the sandbox: exit 3 before the agent starts, with a message naming the server", async () => {
    await using directory = temporaryDirectory();
    await using home = temporaryDirectory();
    const { task } = writeScriptedTask(directory.path, {
      task: { name: "mcp-bad-command", mcp_servers: { ...FILES_SERVER, broken: { command: "no-such-mcp-server", args: ["--flag"], timeout_ms: 20_000 } } },
      script: { turns: [{ content: "never asked" }] },
    });
    const result = await runCli(["exec", task], { RUNNER_HOME: home.path });
    expect(result.code, result.stderr + result.stdout).toBe(3);
    const runDirectory = runDirectoryOf(result);
    const report = readReport(runDirectory);
    expect(report.status).toBe("error");
    expect(report.steps).toBe(0);
    // Only the broken server is named as failing; the good one is not blamed.
    expect(report.error).toMatch(
      /^MCP server did not start:\n- broken \(in the sandbox: no-such-mcp-server --flag\): "no-such-mcp-server" is not in the sandbox image \S+ \(looked on its PATH\)/,
    );
    expect(report.error).not.toMatch(/- files/);
    expect(result.stdout).toContain("error: MCP server did not start:");
    expect(result.stdout).toContain("- broken (in the sandbox: no-such-mcp-server --flag)");
    const events = readEvents(runDirectory);
    expect(eventsOfType(events, "mcp_server.failed").map((event) => event.data.server)).toEqual(["broken"]);
    expect(eventsOfType(events, "model_call.started")).toEqual([]);
    expect(containersOfRun(report.run_id)).toEqual([]);
  });
});
