import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { createSandboxWorkspace, createTestSandbox, requireDocker } from "../helpers/docker.js";

describe("DockerSandbox", () => {
  it("runs commands and file operations inside the container as the given user", async () => {
    await requireDocker();
    await using workspace = createSandboxWorkspace({ "hello.txt": "hi\n" });
    await using sandbox = await createTestSandbox(workspace.path);
    const result = await sandbox.exec({ command: "id -u; cat hello.txt; pwd" });
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toBe("1000\nhi\n/workspace\n");
    const file = await sandbox.readFile("hello.txt");
    expect(file?.content.toString()).toBe("hi\n");
    await sandbox.writeFile("sub/dir/new.txt", Buffer.from("new"));
    expect((await sandbox.exec({ command: "cat sub/dir/new.txt" })).stdout).toBe("new");
    expect(await sandbox.readFile("missing.txt")).toBeNull();
  });

  it("freezes processes during an operation, back to back many times, and always thaws them", async () => {
    await requireDocker();
    await using workspace = createSandboxWorkspace({});
    await using sandbox = await createTestSandbox(workspace.path);
    // A counter that only advances while the container runs.
    await sandbox.exec({ command: "(i=0; while :; do i=$((i+1)); echo $i > /tmp/ticks; sleep 0.01; done) >/dev/null 2>&1 &" });
    const ticks = async () => Number((await sandbox.exec({ command: "cat /tmp/ticks" })).stdout);
    await expect.poll(ticks).toBeGreaterThan(0);
    const before = await ticks();
    // Docker answers a pause right after an unpause with 409/500 at times; freeze must ride over it.
    for (let round = 0; round < 60; round += 1) await sandbox.freeze(async () => undefined);
    const pausedDuring = await sandbox.freeze(async () =>
      execFileSync("docker", ["inspect", "-f", "{{.State.Paused}}", sandbox.id], { encoding: "utf8" }).trim(),
    );
    expect(pausedDuring).toBe("true");
    await expect.poll(ticks).toBeGreaterThan(before);
    expect((await sandbox.exec({ command: "echo alive" })).stdout).toBe("alive\n");
  });
});
