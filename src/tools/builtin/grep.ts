import { posix } from "node:path";
import { z } from "zod";
import { defineTool, toolError } from "../define-tool.js";
import { searchCommand } from "./ripgrep.js";

const MAX_ROWS = 300;

export const grepTool = defineTool({
  name: "grep",
  readOnly: true,
  description:
    "Search file contents with a regular expression (Rust regex syntax, like ripgrep). Returns file:line:text rows. " +
    "Optionally limit to a directory or file (path) and to files matching a glob (glob, e.g. '*.py').",
  input: z.strictObject({
    pattern: z.string().min(1).describe("Regular expression"),
    path: z.string().min(1).optional().describe("File or directory to search (default: the workspace root)"),
    glob: z.string().min(1).optional().describe("Only search files whose path matches this glob"),
  }),
  async execute(input, { sandbox, signal }) {
    const target = input.path ?? ".";
    const info = await sandbox.stat(target);
    if (!info) return toolError(`path not found: ${target}`);
    const result = await sandbox.exec({
      command: searchCommand(
        "grep",
        "rg --with-filename --line-number --no-heading --color=never --hidden --glob '!.git' --max-columns=500 --max-columns-preview " +
          '${RUNNER_GREP_GLOB:+--glob "$RUNNER_GREP_GLOB"} -e "$RUNNER_GREP_PATTERN" -- "$RUNNER_GREP_PATH" | head -n "$RUNNER_GREP_MAX_ROWS"' +
          " | sed 's|^\\./||'",
      ),
      env: {
        RUNNER_GREP_PATTERN: input.pattern,
        RUNNER_GREP_PATH: posix.relative(sandbox.workdir, info.path) || ".",
        RUNNER_GREP_GLOB: input.glob ?? "",
        RUNNER_GREP_MAX_ROWS: String(MAX_ROWS + 1),
      },
      timeoutMs: 60_000,
      maxOutputBytes: 1024 * 1024,
      signal,
    });
    if (result.stdout.trim() === "") {
      if (result.stderr.trim()) return toolError(`grep failed: ${result.stderr.trim()}`);
      return { content: `No matches for /${input.pattern}/ in ${target}` };
    }
    const rows = result.stdout.split("\n").filter(Boolean);
    const shown = rows.slice(0, MAX_ROWS);
    if (rows.length > MAX_ROWS) shown.push(`[... more matches; narrow the pattern, path or glob]`);
    return { content: shown.join("\n"), details: { rows: Math.min(rows.length, MAX_ROWS) } };
  },
});
