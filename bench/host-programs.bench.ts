/**
 * What the host-program rule (issue 20 item 1; docs/host-programs.md) costs a
 * hook: `npx tsx bench/host-programs.bench.ts [--rounds=200]`
 *
 * Host only, no Docker, no network. One sample of "hook call" is a whole
 * pre-tool hook through ToolHooks.before (spawn, the call as JSON on stdin,
 * exit 0) of a script in a temporary directory: as argv (now) against the
 * same script through `/bin/sh -c` (before; the baseline, a plain spawn
 * measured here in the same run and interleaved). "check" is
 * checkHostProgram alone for one hook (PATH lookup, every link on the way,
 * the arguments), the price paid once per hook when a task loads and when a
 * run starts. Cleanup: the temporary directory, in `finally`.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { hooksSchema, ToolHooks } from "../src/hooks/tool-hooks.js";
import { checkHostProgram } from "../src/process/host-program.js";
import { positiveOption } from "./lib/options.js";
import { interleave, printTable } from "./lib/stats.js";

const ROUNDS = positiveOption("rounds", 200);

const directory = realpathSync(mkdtempSync(join(tmpdir(), "bench-host-programs-")));
try {
  const script = join(directory, "hook.sh");
  writeFileSync(script, "#!/bin/sh\ncat > /dev/null\nexit 0\n", { mode: 0o755 });
  const hooks = new ToolHooks(hooksSchema.parse({ pre_tool_use: [{ command: "./hook.sh", args: ["--strict"] }] }), {
    cwd: directory,
    env: { PATH: process.env.PATH },
    agentTrees: [join(directory, "repo")],
    events: { emit: () => undefined },
    runId: "bench",
  });
  const call = { name: "read_file", arguments: { path: "a.txt" }, toolCallId: "c1", agentId: "main", readOnly: true };
  const viaShell = () =>
    new Promise<void>((resolve, reject) => {
      const child = spawn("/bin/sh", ["-c", "./hook.sh --strict"], {
        cwd: directory,
        env: { PATH: process.env.PATH },
        stdio: ["pipe", "pipe", "pipe"],
        detached: true,
      });
      child.on("error", reject);
      child.on("exit", () => resolve());
      child.stdin.end(JSON.stringify({ phase: "pre_tool_use", ...call }));
    });
  const samples = await interleave({ argv: () => hooks.before(call), "sh -c": viaShell }, ROUNDS);
  const check = await interleave(
    {
      check: async () =>
        checkHostProgram(
          { field: "hooks.pre_tool_use.0", command: "python3", args: ["./hook.sh", "--config=x.toml", "https://example.com/x"] },
          { cwd: directory, searchPath: process.env.PATH, agentTrees: [join(directory, "repo")] },
        ),
    },
    ROUNDS,
  );
  printTable("one pre-tool hook, spawn to exit (ToolHooks.before)", [
    { name: "sh -c", samples: samples["sh -c"]! },
    { name: "argv", samples: samples.argv!, baseline: "sh -c" },
  ]);
  printTable("checkHostProgram, one hook", [{ name: "check", samples: check.check! }]);
} finally {
  rmSync(directory, { recursive: true, force: true });
}
