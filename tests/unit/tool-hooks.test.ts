import { mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { RunEvent } from "../../src/events/run-events.js";
import { hooksSchema, ToolHooks } from "../../src/hooks/tool-hooks.js";
import { FakeSandbox } from "../../src/sandbox/fake/fake-sandbox.js";
import { workspaceTools } from "../../src/tools/builtin/index.js";
import { ToolRegistry } from "../../src/tools/tool-registry.js";

const directories: string[] = [];
afterEach(() => {
  for (const directory of directories.splice(0)) rmSync(directory, { recursive: true, force: true });
});

/** Hooks run with `scripts` (name → shell body) written as executables into their working directory first. */
function setup(hooks: unknown, scripts: Record<string, string> = {}) {
  const directory = realpathSync(mkdtempSync(join(tmpdir(), "hooks-test-")));
  directories.push(directory);
  for (const [name, body] of Object.entries(scripts)) writeFileSync(join(directory, name), `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  const events: RunEvent[] = [];
  const toolHooks = new ToolHooks(hooksSchema.parse(hooks), {
    cwd: directory,
    env: { PATH: process.env.PATH },
    agentTrees: [],
    events: { emit: (event) => events.push(event) },
    runId: "run-1",
  });
  const sandbox = new FakeSandbox({ "a.txt": "hello\n" });
  const registry = new ToolRegistry(workspaceTools());
  const call = (name: string, args: unknown) =>
    registry.execute(name, JSON.stringify(args), {
      sandbox,
      signal: new AbortController().signal,
      toolCallId: "c1",
      agentId: "main",
      defaultTimeoutMs: 1000,
      guard: { check: (guarded) => toolHooks.before(guarded), after: (guarded, result) => toolHooks.after(guarded, result) },
    });
  return { directory, events, sandbox, call };
}

describe("tool hooks", () => {
  it("a pre hook gets the call as JSON on stdin and exit 2 blocks it with stderr as the reason; the tool does not run", async () => {
    const { directory, call, sandbox, events } = setup(
      { pre_tool_use: [{ command: "./no-env.sh", args: ["--strict"], tools: ["write_*"] }] },
      { "no-env.sh": 'cat > "$PWD/seen.json"; echo "no writes to .env" >&2; exit 2' },
    );
    const result = await call("write_file", { path: ".env", content: "X=1" });
    expect(result).toMatchObject({ isError: true, content: "[denied] blocked by hook `./no-env.sh --strict`: no writes to .env" });
    expect(sandbox.files.has("/workspace/.env")).toBe(false);
    expect(JSON.parse(readFileSync(join(directory, "seen.json"), "utf8"))).toEqual({
      phase: "pre_tool_use",
      run_id: "run-1",
      agent_id: "main",
      tool_name: "write_file",
      tool_call_id: "c1",
      arguments: { path: ".env", content: "X=1" },
    });
    expect(events.map((event) => event.type === "hook.finished" && event.data.outcome)).toEqual(["blocked"]);
    // Hooks for other tools do not run.
    expect((await call("read_file", { path: "a.txt" })).content).toContain("hello");
    expect(events).toHaveLength(1);
  });

  it("a post hook's stdout is appended to the result as a note", async () => {
    const { call } = setup(
      { post_tool_use: [{ command: "python3", args: ["note.py"] }] },
      { "note.py": "import json,sys; d=json.load(sys.stdin); print('saw', d['tool_name'], len(d['result']))" },
    );
    const result = await call("read_file", { path: "a.txt" });
    expect(result.content).toMatch(/hello\n\[hook note\] saw read_file \d+$/);
  });

  it("a failing or hanging hook is reported and the call goes on", async () => {
    const { call, events } = setup(
      { pre_tool_use: [{ command: "./seven.sh" }, { command: "sleep", args: ["30"], timeout_ms: 200 }] },
      { "seven.sh": "exit 7" },
    );
    const result = await call("read_file", { path: "a.txt" });
    expect(result.isError).toBeFalsy();
    expect(result.content).toContain("hello");
    const failures = events.filter((event) => event.type === "hook.failed").map((event) => event.data);
    expect(failures).toEqual([
      expect.objectContaining({ exit_code: 7, outcome: "failed", error: expect.stringContaining("exit 7") }),
      expect.objectContaining({ timed_out: true, outcome: "failed", error: "timed out after 200 ms" }),
    ]);
  });
});
