import { execFileSync } from "node:child_process";
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync, type Stats } from "node:fs";
import { basename, join, relative, resolve } from "node:path";
import { ConfigError } from "../errors.js";
import { packageIndexHosts, type PackageIndex } from "../process/package-index-hosts.js";

/** A test command found in the repository, and where it was found (said in the task's comment). */
export interface DetectedTestCommand {
  command: string;
  /** Why, e.g. `package.json scripts.test`. */
  source: string;
  /** The package index the command's toolchain fetches dependencies from (its hosts, from this machine's configuration, make a commented allow-list hint); null for none. */
  index: PackageIndex["tool"] | null;
}

/** What `npm init` writes as scripts.test: not a test command. */
const NPM_PLACEHOLDER_TEST = /no test specified/;

/**
 * The repository's test command, where it is obvious from its files (none is
 * run or executed: only file names and contents are read). In order:
 * a Makefile `test:` target (the project's own entry point, which usually
 * wraps the others), package.json `scripts.test` (with pnpm or yarn when their
 * lock file is there; npm's "no test specified" placeholder does not count),
 * pytest (pytest.ini, `[tool.pytest` in pyproject.toml, `[tool:pytest]` in
 * setup.cfg, tox.ini `[pytest]`, a conftest.py, or test_*.py / *_test.py at
 * the top, under tests/ or under test/),
 * go.mod (`go test ./...`), Cargo.toml (`cargo test`). Null when none fits.
 */
export function detectTestCommand(directory: string): DetectedTestCommand | null {
  const file = (name: string) => {
    const path = join(directory, name);
    return existsSync(path) && statSync(path).isFile() ? readFileSync(path, "utf8") : null;
  };
  const makefile = file("Makefile") ?? file("makefile") ?? file("GNUmakefile");
  if (makefile && /^test\s*:/m.test(makefile)) return { command: "make test", source: "the Makefile's test target", index: null };
  const packageJson = file("package.json");
  if (packageJson) {
    let test: unknown;
    try {
      test = (JSON.parse(packageJson) as { scripts?: Record<string, unknown> }).scripts?.test;
    } catch {
      test = undefined;
    }
    if (typeof test === "string" && test.trim() && !NPM_PLACEHOLDER_TEST.test(test)) {
      const manager = existsSync(join(directory, "pnpm-lock.yaml")) ? "pnpm" : existsSync(join(directory, "yarn.lock")) ? "yarn" : "npm";
      return { command: `${manager} test`, source: "package.json scripts.test", index: "npm" };
    }
  }
  const pytest =
    file("pytest.ini") !== null ||
    /^\[tool\.pytest/m.test(file("pyproject.toml") ?? "") ||
    /^\[tool:pytest\]/m.test(file("setup.cfg") ?? "") ||
    /^\[pytest\]/m.test(file("tox.ini") ?? "") ||
    file("conftest.py") !== null ||
    // pytest's own discovery: test_*.py or *_test.py files, at the top (the simplest layout) or in tests/ or test/.
    ["", "tests", "test"].some((folder) => hasPytestFiles(join(directory, folder)));
  if (pytest) return { command: "python3 -m pytest -q", source: "pytest configuration or tests", index: "pip" };
  if (file("go.mod") !== null) return { command: "go test ./...", source: "go.mod", index: "go" };
  if (file("Cargo.toml") !== null) return { command: "cargo test", source: "Cargo.toml", index: null };
  return null;
}

/** Whether `directory` holds files pytest collects by default (`test_*.py`, `*_test.py`: pytest's `python_files`). */
function hasPytestFiles(directory: string): boolean {
  return existsSync(directory) && statSync(directory).isDirectory() && readdirSync(directory).some((name) => /^test_.*\.py$|_test\.py$/.test(name));
}

/** A task name ([a-z0-9-], starting with a letter or digit) made from a directory name. */
function taskName(directory: string): string {
  const name = basename(directory)
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "");
  return name || "task";
}

/**
 * The commented allow-list line of the task: the hosts of the package index
 * the test command's toolchain uses, as this machine's configuration names
 * it (else any index it names), or a placeholder to replace. No public
 * index's host is built in (a team behind a mirror needs its own).
 */
function allowHint(test: DetectedTestCommand | null, indexes: readonly PackageIndex[]): string {
  const index = indexes.find((candidate) => candidate.tool === test?.index) ?? (test?.index ? undefined : indexes[0]);
  if (index) return `# allow: [${index.hosts.join(", ")}]   # ${index.tool}'s index, from ${index.source}, to install dependencies`;
  return `# allow: [registry.example.com]   # your package index's host: this machine's ${test?.index ?? "npm, pip, apt or Go"} configuration names none`;
}

/** The commented task.yaml `runner init` writes. */
function taskYaml(options: { name: string; workspace: string; test: DetectedTestCommand | null; indexes: readonly PackageIndex[] }): string {
  const { test } = options;
  const instruction = test
    ? [`  Run the test suite (\`${test.command}\`) and fix what fails.`, "  Do not change the tests."]
    : ["  Describe what the agent must do: the change, and how to check it."];
  const verify = test
    ? [
        "verify:                           # runs in a fresh sandbox on the agent's committed work; the run succeeds only if it passes",
        `  command: ${test.command}${" ".repeat(Math.max(1, 23 - test.command.length))}# found: ${test.source}`,
        "  timeout_sec: 600",
        '  # protect: ["tests/**"]         # restore these paths from the base commit before verifying (the agent cannot edit the tests)',
      ]
    : ["# verify:                         # no test command found: say how to check the work", "#   command: make test", "#   timeout_sec: 600"];
  const allow = allowHint(test, options.indexes);
  return [
    `# A task for runner (\`runner exec ${"task.yaml"}\`); docs/task-yaml.md "task.yaml" lists every field.`,
    "# Generated by `runner init`. Keep this file (and script.yaml) out of your commits, or keep tasks outside",
    "# the repository (`runner init ../tasks/NAME` from inside it): a merged run could otherwise change the next run's task.",
    `name: ${options.name}`,
    "instruction: |                    # what the agent must do",
    ...instruction,
    `workspace: ${options.workspace}${" ".repeat(Math.max(1, 23 - options.workspace.length))}# the git repository (its HEAD commit); relative to this file`,
    "model:",
    "  provider: openai                # OPENAI_API_KEY; OPENAI_BASE_URL for another OpenAI-compatible endpoint",
    "  # name: gpt-4.1                 # or set OPENAI_MODEL",
    "  # Try it without a model first: the scripted trajectory in script.yaml.",
    "  # provider: scripted",
    "  # script: ./script.yaml",
    "sandbox:",
    "  image: agent-runner/sandbox:bookworm   # Debian with python3, pytest, node, npm, make, git; another image for other toolchains",
    "  network:",
    "    allow: []                     # no network at all",
    `    ${allow}`,
    "  limits: { cpus: 1, memory: 1g, pids: 256, disk: 10g }",
    ...verify,
    "max_steps: 50                     # model calls",
    'policy: worker                    # what the agent may run: explore, worker, reviewer, ci, or your own file (docs/policies.md "Policies")',
    "# instructions_files: false       # the repository's AGENTS.md files go into the prompt unless this is false",
    "# on_success: merge               # fast-forward your branch to the run's after a verified success",
    "",
  ].join("\n");
}

/** The scripted trajectory example `runner init` writes: look around, run the tests, answer. */
function scriptYaml(test: DetectedTestCommand | null): string {
  const check = test?.command ?? "git status --short";
  return [
    '# A scripted trajectory (docs/scripted-model.md "Scripted model"): the model\'s turns, played in order, so a task',
    "# can be tried (and tested) without a model. Each turn may call tools; `expect` checks the results",
    "# of the previous turn's calls (a regular expression) and fails the run when they do not match.",
    "turns:",
    '  - content: "I\'ll look at the repository first."',
    "    tool_calls:",
    "      - { name: list_dir, arguments: { path: . } }",
    `  - content: "Now the check: ${check.replace(/"/g, '\\"')}."`,
    "    tool_calls:",
    `      - { name: run_shell, arguments: { command: ${JSON.stringify(check)} } }`,
    '  - expect: { tool_result_matches: "^exit_code: " }',
    '    content: "Done: I ran the check and changed nothing."',
    "",
  ].join("\n");
}

/**
 * `runner init [dir]`: writes a commented task.yaml and a scripted trajectory
 * example (script.yaml) into `dir` for the git repository it is in — or,
 * when `dir` is outside every repository (the place the README recommends
 * for tasks: a merged run cannot change them), for the repository the
 * current directory `cwd` is in, with `workspace` pointing there. A missing
 * `dir` is created once every check passed. Refuses (ConfigError, exit 2)
 * when neither is in a git repository, when `dir` is a file, or when either
 * file exists (nothing is overwritten, nothing half-written). `indexes`
 * gives the package indexes of this machine's configuration for the
 * allow-list hint (default {@link packageIndexHosts}). Returns the exit code.
 */
export function initCommand(
  dir: string | undefined,
  output: NodeJS.WritableStream = process.stdout,
  indexes: () => PackageIndex[] = () => packageIndexHosts(),
  cwd: string = process.cwd(),
): number {
  const directory = resolve(cwd, dir ?? ".");
  const exists = existsSync(directory);
  if (exists && !statSync(directory).isDirectory()) throw new ConfigError(`runner init: ${directory} is not a directory`);
  const topLevel = (exists ? gitTopLevel(directory) : null) ?? gitTopLevel(cwd);
  if (topLevel === null) {
    throw new ConfigError(
      `runner init: neither ${directory} nor the current directory is in a git repository; the agent works on a repository's commit (git init && git add -A && git commit -m initial)`,
    );
  }
  const files = { task: join(directory, "task.yaml"), script: join(directory, "script.yaml") };
  // lstat, not exists: a dangling symlink is there too (and writing through it is refused by `wx`).
  const existing = Object.values(files).filter((path) => lstatIfAny(path) !== null);
  if (existing.length)
    throw new ConfigError(
      `runner init: ${existing.join(" and ")} already exist${existing.length === 1 ? "s" : ""}; nothing was written (move ${existing.length === 1 ? "it" : "them"} away, or run runner init in another directory)`,
    );
  const test = detectTestCommand(topLevel);
  const workspace = relative(directory, topLevel) || ".";
  mkdirSync(directory, { recursive: true });
  writeFileSync(files.task, taskYaml({ name: taskName(topLevel), workspace, test, indexes: indexes() }), { flag: "wx" });
  writeFileSync(files.script, scriptYaml(test), { flag: "wx" });
  output.write(
    [
      `wrote ${files.task}${test ? ` (verify: ${test.command}, from ${test.source})` : " (no test command found: fill in verify)"}`,
      `wrote ${files.script} (a scripted trajectory: set model.provider: scripted to try it without a model)`,
      `next: edit the instruction, then  runner exec ${relative(cwd, files.task) || "task.yaml"}`,
      "",
    ].join("\n"),
  );
  return 0;
}

/** The top level of the git repository `directory` is in, or null when it is in none. */
function gitTopLevel(directory: string): string | null {
  try {
    return execFileSync("git", ["-C", directory, "rev-parse", "--show-toplevel"], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();
  } catch {
    return null;
  }
}

function lstatIfAny(path: string): Stats | null {
  try {
    return lstatSync(path);
  } catch {
    return null;
  }
}
