/**
 * The container's own git directory (/run/agent-runner/git, containerGitView)
 * counts against `sandbox.limits.disk` like /tmp does (found by the fourth
 * security review: with `monitor` enforcement, what the agent committed or
 * stashed there was never measured). Real run: Docker, host git, the scripted model.
 */
import { describe, expect, it } from "vitest";
import { createGitRepository } from "../helpers/git-repository.js";
import { requireDocker } from "../helpers/docker.js";
import { describeRun, runScriptedTask, shellTurn } from "./security-harness.js";

describe("sandbox.limits.disk covers the container's own git directory", () => {
  it("monitor: a writer filling /run/agent-runner/git under disk: 64m is stopped and the run fails disk_limit_exceeded", async () => {
    await requireDocker();
    await using repository = createGitRepository({ "app.txt": "hello\n" }, { prefix: "agent-runner-git-disk-" });
    const run = await runScriptedTask({
      repository: repository.root,
      diskEnforcement: "monitor",
      sandbox: { limits: { disk: "64m" } },
      turns: [
        // Bounded (400 MiB) so that, unmeasured, it ends by itself instead of filling the host's disk.
        shellTurn(
          "mkdir -p /run/agent-runner/git/fill; i=0; while [ $i -lt 400 ]; do head -c 1M /dev/zero > /run/agent-runner/git/fill/$i; i=$((i+1)); sleep 0.02; done; echo writer-ended",
          120_000,
        ),
        shellTurn("echo the-run-went-on"),
      ],
    });
    try {
      expect(run.report.status, describeRun(run)).toBe("failed");
      expect(run.report.reason).toBe("disk_limit_exceeded");
      expect(run.toolResults.join("\n")).not.toContain("writer-ended");
      expect(run.toolResults.join("\n")).not.toContain("the-run-went-on");
    } finally {
      run.dispose();
    }
  });
});
