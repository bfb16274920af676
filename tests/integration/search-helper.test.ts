/**
 * The sandbox helper's grep and glob (for images without ripgrep) give what
 * the tools' ripgrep pipelines give: both run here, in the default image that
 * has rg, on one tree of the cases that differ between walkers (ignore files
 * at several depths and above the search root, negation, anchored and
 * directory-only lines, hidden files, .git, symbolic links, binary files,
 * long lines, CRLF, invalid UTF-8, an override glob), and must agree.
 * grep's order across files is rg's thread scheduling, so rows are compared
 * sorted; glob's order (newest first) is compared as is.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Sandbox } from "../../src/sandbox/sandbox.js";
import { createSandboxWorkspace, createTestSandbox, requireDocker } from "../helpers/docker.js";

const TREE: Record<string, string | Buffer> = {
  ".gitignore": "/root-only.txt\nbuild/\n*.tmp\n",
  ".ignore": "ignored-by-dot-ignore.txt\n",
  "root-only.txt": "needle\n",
  "ignored-by-dot-ignore.txt": "needle\n",
  "a.txt": "a needle\nno\nneedle again\n",
  "x.tmp": "needle\n",
  "build/out.txt": "needle\n",
  "src/build.txt": "needle in a file named build\n",
  "src/root-only.txt": "needle: only the root's is ignored\n",
  "src/.gitignore": "*.gen.py\n!keep.gen.py\ndocs/\n",
  "src/a.gen.py": "needle\n",
  "src/keep.gen.py": "needle\n",
  "src/docs": "needle: a file, not a directory\n",
  "src/deep/docs/d.txt": "needle\n",
  "src/deep/e.py": "def needle():\n    return 'needle'\n",
  ".hidden/h.txt": "needle in hidden\n",
  "bin.dat": Buffer.from("needle\0binary\n"),
  "long.txt": `${"é".repeat(300)}needle${"x".repeat(300)}\n${"y".repeat(494)}needle\n`,
  "crlf.txt": "needle\r\nline\r\n",
  "latin.txt": Buffer.from([0x6e, 0x65, 0x65, 0x64, 0x6c, 0x65, 0x20, 0xe9, 0x0a]),
  "nested/.gitignore": "*.txt\n",
  "nested/inner/n.txt": "needle\n",
  "nested/inner/n.md": "needle\n",
};

let workspace: ReturnType<typeof createSandboxWorkspace>;
let sandbox: Sandbox;

beforeAll(async () => {
  await requireDocker();
  workspace = createSandboxWorkspace(TREE);
  sandbox = await createTestSandbox(workspace.path);
  // A repository marker (rg reads .gitignore only inside one), a link rg does not follow, and distinct mtimes.
  const setup = await sandbox.exec({
    command:
      "mkdir -p .git && echo 'needle' > .git/config && ln -s a.txt link.txt && ln -s src linked-dir && " +
      'i=0; for f in $(find . -type f -not -path \'./.git/*\' | sort); do i=$((i+1)); touch -d "2020-01-01 00:00:$((i % 3))" "$f"; done',
  });
  expect(setup.exitCode, setup.stderr).toBe(0);
});

afterAll(async () => {
  await sandbox?.close();
  await workspace?.[Symbol.asyncDispose]();
});

const RIPGREP_GREP =
  "rg --with-filename --line-number --no-heading --color=never --hidden --glob '!.git' --max-columns=500 --max-columns-preview " +
  '${RUNNER_GREP_GLOB:+--glob "$RUNNER_GREP_GLOB"} -e "$RUNNER_GREP_PATTERN" -- "$RUNNER_GREP_PATH" | head -n "$RUNNER_GREP_MAX_ROWS" | sed \'s|^\\./||\'';
const RIPGREP_GLOB =
  'cd -- "$RUNNER_GLOB_DIR" && rg --files --hidden --glob \'!.git\' --glob "$RUNNER_GLOB_PATTERN" -0 . ' +
  "| xargs -0 -r stat --format '%Y %n' -- | sort -rn -k1,1 | cut -d' ' -f2- | sed 's|^\\./||'";

async function both(env: Record<string, string>, pipeline: string, tool: "grep" | "glob"): Promise<[string, string]> {
  const ripgrep = await sandbox.exec({ command: pipeline, env });
  const helper = await sandbox.exec({ command: `"$RUNNER_SANDBOX_HELPER" ${tool}`, env });
  expect(helper.exitCode, helper.stderr).toBe(0);
  return [ripgrep.stdout, helper.stdout];
}

const sorted = (rows: string) => rows.split("\n").filter(Boolean).sort();

describe("the helper's grep and glob agree with ripgrep's", () => {
  it("has rg in this image (the comparison needs it)", async () => {
    expect((await sandbox.exec({ command: "command -v rg" })).exitCode).toBe(0);
  });

  it.each([
    ["needle", ".", ""],
    ["needle", "src", ""],
    ["needle", "src/deep", ""],
    ["needle", "bin.dat", ""],
    ["needle", "long.txt", ""],
    ["needle", ".", "*.py"],
    ["needle", ".", "*.tmp"],
    ["needle", ".", "src/**/*.txt"],
    ["^def \\w+\\(\\)", ".", ""],
    ["^    return", ".", ""],
    ["again$", ".", ""],
    ["(?i)NEEDLE\\s+again", ".", ""],
  ])("grep /%s/ in %s (glob %j)", async (pattern, path, glob) => {
    const env = { RUNNER_GREP_PATTERN: pattern, RUNNER_GREP_PATH: path, RUNNER_GREP_GLOB: glob, RUNNER_GREP_MAX_ROWS: "301" };
    const [ripgrep, helper] = await both(env, RIPGREP_GREP, "grep");
    expect(sorted(ripgrep).length).toBeGreaterThan(0);
    expect(sorted(helper)).toEqual(sorted(ripgrep));
  });

  it.each([
    ["*", "."],
    ["*.txt", "."],
    ["**/*.py", "."],
    ["src/*", "."],
    ["*", "src"],
    ["deep/**", "src"],
  ])("glob %s in %s", async (pattern, directory) => {
    const [ripgrep, helper] = await both({ RUNNER_GLOB_PATTERN: pattern, RUNNER_GLOB_DIR: `/workspace/${directory}` }, RIPGREP_GLOB, "glob");
    expect(ripgrep.length).toBeGreaterThan(0);
    expect(helper).toBe(ripgrep);
  });
});
