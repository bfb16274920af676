/**
 * No capability is left in the bounding set of the agent's processes (issue
 * 20 item 12; docs/security.md "Security model"): the helper drops SETUID, SETGID and
 * SETPCAP (the container's only ones) from the bounding set its commands
 * inherit, for tool commands and for processes spawned with piped stdio (an
 * MCP server in the sandbox), while keeping SETUID and SETGID permitted for
 * itself. Read from /proc/<pid>/status (proc(5)) inside a real container.
 */
import { text } from "node:stream/consumers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DockerSandboxProvider } from "../../src/sandbox/docker/docker-sandbox-provider.js";
import type { Sandbox } from "../../src/sandbox/sandbox.js";
import { createSandboxWorkspace, requireDocker, testSandboxSpec } from "../helpers/docker.js";

const CAPABILITIES = "grep -E '^(Uid|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs):' /proc/self/status | tr -s '\\t ' ' '";

/** The status lines as a map. */
function statusOf(output: string): Record<string, string> {
  return Object.fromEntries(
    output
      .trim()
      .split("\n")
      .map((line) => line.split(": ") as [string, string]),
  );
}

describe("the bounding set of the agent's processes", () => {
  let workspace: ReturnType<typeof createSandboxWorkspace>;
  let sandbox: Sandbox;

  beforeAll(async () => {
    await requireDocker();
    workspace = createSandboxWorkspace({ "README.md": "x\n" });
    sandbox = await new DockerSandboxProvider().create(testSandboxSpec(workspace.path));
  });

  afterAll(async () => {
    await sandbox?.close();
    await workspace?.[Symbol.asyncDispose]();
  });

  it("a tool command has none: CapBnd 0 as well as CapPrm, CapEff and CapAmb", async () => {
    const result = await sandbox.exec({ command: CAPABILITIES });
    expect(statusOf(result.stdout)).toEqual({
      Uid: "1000 1000 1000 1000",
      CapPrm: "0000000000000000",
      CapEff: "0000000000000000",
      CapBnd: "0000000000000000",
      CapAmb: "0000000000000000",
      NoNewPrivs: "1",
    });
  });

  it("a spawned process (stdio piped, as an MCP server) has none either, runs as the sandbox user in the workdir", async () => {
    const child = await sandbox.spawn({ command: "sh", args: ["-c", `${CAPABILITIES}; pwd`] });
    child.stdin.end();
    const [stdout, exit] = await Promise.all([text(child.stdout), child.exited]);
    expect(exit.exitCode).toBe(0);
    const lines = stdout.trim().split("\n");
    expect(lines.at(-1)).toBe("/workspace");
    expect(statusOf(lines.slice(0, -1).join("\n"))).toMatchObject({ Uid: "1000 1000 1000 1000", CapPrm: "0000000000000000", CapBnd: "0000000000000000" });
  });

  it("the helper keeps SETUID and SETGID permitted for itself, SETPCAP nowhere, and nothing in its bounding set", async () => {
    const helper =
      "for p in /proc/[0-9]*; do case \"$(tr '\\0' ' ' < $p/cmdline 2>/dev/null)\" in /run/agent-runner/agent-runner-sandboxd*) h=${p#/proc/};; esac; done; " +
      "for t in /proc/$h/task/*; do grep -E '^(CapPrm|CapBnd):' $t/status | tr -s '\\t ' ' '; done";
    const lines = (await sandbox.exec({ command: helper })).stdout.trim().split("\n");
    expect(lines.length).toBeGreaterThan(2);
    expect(new Set(lines)).toEqual(new Set(["CapPrm: 00000000000000c0", "CapBnd: 0000000000000000"]));
  });
});
