/**
 * Issue 20 item 8: a monitored disk limit counts inodes too. Empty files hold
 * no block, so 60 000 of them under `disk: 64m` never reached a limit that
 * counted blocks only, while each took an inode of the host's filesystem. The
 * limit allows one file per 8 KiB, as the `filesystem` disk's ext4 has
 * (`mkfs.ext4 -i 8192`). Real run: Docker, host git, the scripted model.
 */
import { describe, expect, it } from "vitest";
import type { RunEvent } from "../../src/events/run-events.js";
import { BYTES_PER_INODE } from "../../src/sandbox/sandbox.js";
import { createGitRepository } from "../helpers/git-repository.js";
import { requireDocker } from "../helpers/docker.js";
import { describeRun, runScriptedTask, shellTurn } from "./security-harness.js";

const LIMIT_BYTES = 64 * 1024 * 1024;

describe("sandbox.limits.disk, monitor enforcement: inodes", () => {
  it("60 000 empty files under disk: 64m reach the limit: the processes are stopped and the run fails", async () => {
    await requireDocker();
    await using repository = createGitRepository({ "app.txt": "hello\n" }, { prefix: "agent-runner-sec-disk-inodes-" });
    const events: RunEvent[] = [];
    const run = await runScriptedTask({
      repository: repository.root,
      diskEnforcement: "monitor",
      sandbox: { limits: { disk: "64m" } },
      events: { emit: (event) => events.push(event) },
      // The files go to /tmp (the container's scratch space, on the run's disk), then the command waits to be stopped.
      turns: [
        shellTurn("mkdir /tmp/many && cd /tmp/many && seq 1 60000 | xargs touch && echo made; while :; do sleep 1; done", 120_000),
        shellTurn("echo the-run-went-on"),
      ],
    });
    try {
      expect(run.report.status, describeRun(run)).toBe("failed");
      expect(run.report.reason).toBe("disk_limit_exceeded");
      expect(run.toolResults.join("\n")).not.toContain("the-run-went-on");
      expect(run.report.disk!.used_bytes).toBeLessThan(LIMIT_BYTES);
      const reached = events.flatMap((event) => (event.type === "disk.limit_reached" ? [event.data] : []));
      expect(reached).toHaveLength(1);
      expect(reached[0]).toMatchObject({ enforcement: "monitor", action: "stopped", limit_inodes: LIMIT_BYTES / BYTES_PER_INODE });
      expect(reached[0]!.used_inodes).toBeGreaterThan(LIMIT_BYTES / BYTES_PER_INODE);
    } finally {
      run.dispose();
    }
  });
});
