/**
 * A sandbox without network that cannot resolve a name says why (issue 26
 * item 7): a failed `sandbox.setup` command's error, and a failed tool
 * call's line in the view, say that sandbox.network.allow is empty and name
 * the package index hosts of the user's own configuration (here the runner's
 * environment: npm_config_registry and PIP_INDEX_URL, example.com hosts).
 * The model gets a short note without the hosts. A run of the Docker-free tier.
 */
import { describe, expect, it } from "vitest";
import { ProgressView } from "../../../src/cli/progress-view.js";
import { readEvent } from "../../../src/events/event-catalogue.js";
import { createRunner } from "../../../src/runner/runner.js";
import { HostDirectorySandboxProvider, type HostDirectoryExecHandler } from "../../../src/sandbox/fake/host-directory-sandbox.js";
import { temporaryDirectory } from "../../helpers/git-repository.js";
import { eventData, eventsFile, fakeShell, fakeTierEnvironment, toolCall, writeScriptedTask } from "../../helpers/fake-runner.js";

const OFFLINE =
  "WARNING: Retrying after connection broken by 'NewConnectionError': Failed to establish a new connection: [Errno -3] Temporary failure in name resolution\n";

/** `pip install ...` fails as pip does offline; anything else as the fake tier's shell answers it. */
function offlineShell(): HostDirectoryExecHandler {
  const shell = fakeShell();
  return (exec) => (exec.request.command.startsWith("pip install") ? Promise.resolve({ exitCode: 1, stderr: OFFLINE }) : shell(exec));
}

async function offlineRunner() {
  const home = temporaryDirectory("agent-runner-fake-home-");
  const environment = { ...fakeTierEnvironment(home.path), npm_config_registry: "https://npm.example.com/", PIP_INDEX_URL: "https://pip.example.com/simple" };
  const runner = await createRunner({ home: home.path, sandboxProvider: new HostDirectorySandboxProvider({ exec: offlineShell() }), environment });
  return {
    runner,
    async [Symbol.asyncDispose]() {
      await runner.close();
      await home[Symbol.asyncDispose]();
    },
  };
}

describe("the offline hint", () => {
  it("a setup command that cannot resolve a name: the run's error says the allow-list is empty and names the configured hosts", async () => {
    await using directory = temporaryDirectory();
    await using fake = await offlineRunner();
    const { task } = writeScriptedTask(directory.path, { task: { sandbox: { setup: ["pip install -e ."] } }, script: { turns: [] } });
    const run = await fake.runner.start(task);
    const report = await run.result;
    expect(report).toMatchObject({ status: "error", reason: "setup_failed" });
    expect(report.error).toContain("Temporary failure in name resolution");
    expect(report.error).toMatch(/\nnote: the sandbox has no network: sandbox\.network\.allow is empty, so no name resolves\./);
    expect(report.error).toContain("npm.example.com (npm: npm config get registry); pip.example.com (pip: PIP_INDEX_URL)");
  });

  it("a tool call that cannot resolve a name: the model gets a note without hosts, the view shows the whole hint under the call", async () => {
    await using directory = temporaryDirectory();
    await using fake = await offlineRunner();
    const { task } = writeScriptedTask(directory.path, {
      script: {
        turns: [
          { tool_calls: [toolCall("run_shell", { command: "pip install requests" })] },
          {
            expect: {
              tool_result_matches:
                "Temporary failure in name resolution\\n\\[note\\] the sandbox has no network \\(the task's sandbox\\.network\\.allow is empty\\)",
            },
            content: "No network.",
          },
        ],
      },
    });
    const run = await fake.runner.start(task);
    const report = await run.result;
    expect(report.status, report.error ?? "").toBe("succeeded");
    const finished = eventData(eventsFile(run.directory), "tool_call.finished");
    expect(String(finished[0]!.result_preview)).not.toContain("example.com");
    expect(String((finished[0]!.details as Record<string, unknown>).network_hint)).toContain("pip.example.com (pip: PIP_INDEX_URL)");
    let shown = "";
    const view = new ProgressView({ isTTY: false, write: (chunk: string) => ((shown += chunk), true) } as unknown as NodeJS.WriteStream);
    for (const envelope of eventsFile(run.directory)) {
      const read = readEvent(envelope);
      if (read.kind === "event") view.emit(read.event);
    }
    expect(shown).toMatch(
      /step 1 run_shell pip install requests → exit 1 · WARNING: Retrying [^\n]*\n {14}note: the sandbox has no network: sandbox\.network\.allow is empty[^\n]*pip\.example\.com/,
    );
  });
});
