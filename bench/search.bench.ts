/**
 * grep and glob without ripgrep (issue 27, item 4): the sandbox helper's own
 * walk and search (`agent-runner-sandboxd grep|glob`, what the tools run in an
 * image without rg) against the tools' ripgrep pipelines, in one container of
 * the default image (which has rg), on two trees:
 *   - repo: a copy of this repository's working tree (node_modules and build
 *     output included, as a user's checkout has them; .gitignore skips them);
 *   - 50k: 50 000 generated text files of ~1 KB in 500 directories.
 *
 *   npx tsx bench/search.bench.ts [--rounds=10] [--cpus=2] [--only=repo,50k]
 *
 * Goal: the helper within 1.5x rg's median time; where it is not, the tools
 * keep using rg when the image has it (they do: src/tools/builtin/ripgrep.ts).
 * Needs Docker and the default image; run as root (the trees are chowned to
 * the sandbox uid); network none; the container is removed.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { DockerSandboxProvider } from "../src/sandbox/docker/docker-sandbox-provider.js";
import type { Sandbox } from "../src/sandbox/sandbox.js";
import { benchSpec, requireDocker, sweepBenchContainers, sweepOnSignals } from "./lib/docker-env.js";
import { option, positiveOption } from "./lib/options.js";
import { interleave, printTable, type Row } from "./lib/stats.js";

const rounds = positiveOption("rounds", 10);
const cpuLimit = positiveOption("cpus", 2);
const parts = new Set((option("only") ?? "repo,50k").split(","));
const REPOSITORY = fileURLToPath(new URL("..", import.meta.url));

const RIPGREP_GREP =
  "rg --with-filename --line-number --no-heading --color=never --hidden --glob '!.git' --max-columns=500 --max-columns-preview " +
  '${RUNNER_GREP_GLOB:+--glob "$RUNNER_GREP_GLOB"} -e "$RUNNER_GREP_PATTERN" -- "$RUNNER_GREP_PATH" | head -n "$RUNNER_GREP_MAX_ROWS" | sed \'s|^\\./||\'';
const RIPGREP_GLOB =
  'cd -- "$RUNNER_GLOB_DIR" && rg --files --hidden --glob \'!.git\' --glob "$RUNNER_GLOB_PATTERN" -0 . ' +
  "| xargs -0 -r stat --format '%Y %n' -- | sort -rn -k1,1 | cut -d' ' -f2- | sed 's|^\\./||'";

/** The tree copies: the repository without its .git (a fresh .git marks it a repository for .gitignore), and the generated tree. */
function repositoryCopy(): string {
  const root = mkdtempSync(join(tmpdir(), "agent-runner-bench-search-repo-"));
  execFileSync("bash", [
    "-c",
    'tar -C "$1" --exclude=./.git -cf - . | tar -C "$2" -xf - && mkdir "$2/.git" && chown -R 1000:1000 "$2"',
    "bash",
    REPOSITORY,
    root,
  ]);
  return root;
}

function generatedTree(files: number): string {
  const root = mkdtempSync(join(tmpdir(), "agent-runner-bench-search-50k-"));
  mkdirSync(join(root, ".git"));
  writeFileSync(join(root, ".gitignore"), "*.log\n");
  const line = (index: number) => `def function_${index}(value):  # the quick brown fox jumps over the lazy dog\n`;
  for (let index = 0; index < files; index += 1) {
    const directory = join(root, `package_${Math.floor(index / 100)}`);
    if (index % 100 === 0) mkdirSync(directory);
    const body = Array.from({ length: 12 }, (_, row) => line(index * 12 + row)).join("") + (index === files - 7 ? "RARE_MARKER = 1\n" : "");
    writeFileSync(join(directory, `module_${index}.${index % 10 === 0 ? "log" : "py"}`), body);
  }
  execFileSync("chown", ["-R", "1000:1000", root]);
  return root;
}

async function measure(title: string, tree: string, cases: { name: string; tool: "grep" | "glob"; env: Record<string, string> }[]): Promise<void> {
  const spec = benchSpec(tree);
  const sandbox: Sandbox = await new DockerSandboxProvider().create({ ...spec, limits: { ...spec.limits, cpus: cpuLimit, memoryBytes: 1024 ** 3 } });
  try {
    const rows: Row[] = [];
    for (const entry of cases) {
      const variants = {
        rg: () => run(sandbox, entry.tool === "grep" ? RIPGREP_GREP : RIPGREP_GLOB, entry.env),
        helper: () => run(sandbox, `"$RUNNER_SANDBOX_HELPER" ${entry.tool}`, entry.env),
      };
      const [ripgrepOutput, helperOutput] = [await variants.rg(), await variants.helper()];
      // rg's first 301 rows are whichever its threads find first: a capped search can only agree on the count.
      const capped = entry.tool === "grep" && ripgrepOutput.split("\n").filter(Boolean).length >= 301;
      const same =
        entry.tool === "glob"
          ? ripgrepOutput === helperOutput
          : capped
            ? sorted(helperOutput).split("\n").length === 301
            : sorted(ripgrepOutput) === sorted(helperOutput);
      const samples = await interleave(variants, rounds, 1);
      const note = `${ripgrepOutput.split("\n").filter(Boolean).length} rows, same output: ${same ? (capped ? "yes (301 rows each)" : "yes") : "NO"}`;
      rows.push({ name: `${entry.name}: rg`, samples: samples.rg!, note });
      rows.push({ name: `${entry.name}: helper`, samples: samples.helper!, baseline: `${entry.name}: rg` });
    }
    printTable(`${title} (cpus ${cpuLimit}, ${rounds} rounds)`, rows);
  } finally {
    await sandbox.close();
  }
}

async function run(sandbox: Sandbox, command: string, env: Record<string, string>): Promise<string> {
  const result = await sandbox.exec({ command, env, timeoutMs: 300_000, maxOutputBytes: 16 * 1024 * 1024 });
  if (result.exitCode !== 0) throw new Error(`${command} exited ${result.exitCode}: ${result.stderr}`);
  return result.stdout;
}

const sorted = (text: string) => text.split("\n").filter(Boolean).sort().join("\n");
const grep = (pattern: string, glob = "") => ({ RUNNER_GREP_PATTERN: pattern, RUNNER_GREP_PATH: ".", RUNNER_GREP_GLOB: glob, RUNNER_GREP_MAX_ROWS: "301" });
const globIn = (pattern: string) => ({ RUNNER_GLOB_PATTERN: pattern, RUNNER_GLOB_DIR: "/workspace" });

const docker = await requireDocker();
sweepOnSignals(docker);
console.log(
  `search bench: ${cpus().length} cores, load ${loadavg()
    .map((load) => load.toFixed(2))
    .join(" ")}`,
);
try {
  if (parts.has("repo")) {
    const tree = repositoryCopy();
    try {
      await measure("this repository's tree", tree, [
        { name: "grep rare (whole tree)", tool: "grep", env: grep("parseAligningHereDocuments") },
        { name: "grep common (stops at 301 rows)", tool: "grep", env: grep("import") },
        { name: "grep with glob *.ts", tool: "grep", env: grep("ShellParser", "*.ts") },
        { name: "glob **/*.ts", tool: "glob", env: globIn("**/*.ts") },
      ]);
    } finally {
      rmSync(tree, { recursive: true, force: true });
    }
  }
  if (parts.has("50k")) {
    const tree = generatedTree(50_000);
    try {
      await measure("50 000 files", tree, [
        { name: "grep rare (whole tree)", tool: "grep", env: grep("RARE_MARKER") },
        { name: "grep regex (whole tree)", tool: "grep", env: grep("function_4999\\d{2}\\(") },
        { name: "glob **/*.py", tool: "glob", env: globIn("**/*.py") },
      ]);
    } finally {
      rmSync(tree, { recursive: true, force: true });
    }
  }
} finally {
  await sweepBenchContainers(docker);
}
