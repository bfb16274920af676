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
});
