import { posix } from "node:path";
import { z } from "zod";
import { defineTool, toolError } from "../define-tool.js";
import { searchCommand } from "./ripgrep.js";

const MAX_MATCHES = 500;

export const globTool = defineTool({
  name: "glob",
  readOnly: true,
  description:
    "Find files by glob pattern (e.g. '**/*.py', 'src/**/test_*.ts'), newest first; paths are relative to the workspace root. Files ignored by .gitignore and the .git directory are skipped.",
  input: z.strictObject({
    pattern: z.string().min(1).describe("Glob pattern, matched against paths relative to the search directory"),
    path: z.string().min(1).optional().describe("Directory to search in (default: the workspace root)"),
  }),
  async execute(input, { sandbox, signal }) {
    const directory = input.path ?? ".";
    const info = await sandbox.stat(directory);
    if (!info) return toolError(`directory not found: ${directory}`);
    if (info.type !== "directory") return toolError(`${directory} is not a directory`);
    // Arguments travel in environment variables: nothing the model sends is parsed by the shell.
    const result = await sandbox.exec({
      command: searchCommand(
        "glob",
        `cd -- "$RUNNER_GLOB_DIR" && rg --files --hidden --glob '!.git' --glob "$RUNNER_GLOB_PATTERN" -0 . ` +
          "| xargs -0 -r stat --format '%Y %n' -- | sort -rn -k1,1 | cut -d' ' -f2- | sed 's|^\\./||'",
      ),
      env: { RUNNER_GLOB_DIR: info.path, RUNNER_GLOB_PATTERN: input.pattern },
      timeoutMs: 60_000,
      maxOutputBytes: 1024 * 1024,
      signal,
    });
    if (result.exitCode !== 0 && result.stderr.trim()) return toolError(`glob failed: ${result.stderr.trim()}`);
    // Paths are given relative to the workspace root, like every tool's paths.
    const prefix = info.path === sandbox.workdir ? "" : `${posix.relative(sandbox.workdir, info.path)}/`;
    const paths = result.stdout
      .split("\n")
      .filter(Boolean)
      .map((path) => `${prefix}${path}`);
    if (paths.length === 0) return { content: `No files match ${input.pattern} in ${directory}` };
    const shown = paths.slice(0, MAX_MATCHES);
    if (paths.length > MAX_MATCHES) shown.push(`[... ${paths.length - MAX_MATCHES} more matches; narrow the pattern]`);
    return { content: shown.join("\n"), details: { matches: paths.length } };
  },
});
