import { existsSync, readdirSync, realpathSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { parse as parseToml } from "smol-toml";
import { parse as parseYaml } from "yaml";
import { ConfigError, errorMessage } from "../errors.js";
import { writeContainerTask, type ContainerTask } from "./container-task.js";
import type { ImportLine } from "./task-writer.js";
import { OutsideTaskDirectoryError, UntrustedTaskDirectory } from "./untrusted-task-directory.js";

/** Task directories at `input`: itself when it holds `marker`, else its subdirectories that do. */
function taskDirectories(input: string, marker: string, what: string): string[] {
  if (!existsSync(input)) throw new ConfigError(`${input}: no such directory (give a ${what} task directory or a directory of them)`);
  const root = realpathSync(resolve(input));
  if (existsSync(join(root, marker))) return [root];
  const found = readdirSync(root, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(join(root, entry.name, marker)))
    .map((entry) => join(root, entry.name))
    .sort();
  if (found.length === 0) throw new ConfigError(`${input}: no ${what} task (a directory holding ${marker}) in it or its subdirectories`);
  return found;
}

/** More than one service in a compose file: an environment of several containers, which a sandbox is not. */
function composeProblem(files: UntrustedTaskDirectory, file: string): string | null {
  if (!files.exists(file)) return null;
  try {
    const services = (parseYaml(files.readText(file)) as { services?: Record<string, unknown> } | null)?.services ?? {};
    const names = Object.keys(services);
    return names.length > 1
      ? `${basename(file)} defines ${names.length} services (${names.join(", ")}): an environment of several containers is not supported (one sandbox per task)`
      : null;
  } catch (error) {
    if (error instanceof OutsideTaskDirectoryError) throw error;
    return `${basename(file)} is not YAML (${errorMessage(error)})`;
  }
}

/**
 * The verdict of a Harbor verifier: its reward file, written by tests/test.sh
 * under the fresh verifier directory (reward.txt, a number; else reward.json,
 * `{"reward": n}`), as Harbor's verifier reads them. Passed iff the reward is
 * 1 (full marks); no reward file is not passed, whatever the exit code.
 */
const HARBOR_VERDICT = [
  "logs=/tmp/runner-verifier/logs/verifier",
  'if [ -f "$logs/reward.txt" ]; then reward=$(tr -d " \\t\\r\\n" < "$logs/reward.txt")',
  'elif [ -f "$logs/reward.json" ]; then reward=$(tr -d " \\t\\r\\n" < "$logs/reward.json" | grep -Eo \'"reward":[-+0-9.eE]+\' | head -n 1 | cut -d: -f2)',
  "else echo '[harbor] no reward file in the verifier directory: not passed'; exit 1; fi",
  'echo "[harbor] reward: $reward (test script exited $status)"',
  "echo \"$reward\" | grep -Eqx '\\+?1(\\.0*)?' && exit 0",
  "echo '[harbor] reward below 1: not passed'; exit 1",
].join("\n");

/**
 * Harbor tasks (github.com/laude-institute/harbor: `task.toml`,
 * `instruction.md`, `environment/Dockerfile`, `tests/test.sh`) at `input`
 * (one task dir, or a directory of them) → task dirs under `out`.
 */
export async function importHarbor(input: string, out: string): Promise<ImportLine[]> {
  const lines: ImportLine[] = [];
  for (const directory of taskDirectories(input, "task.toml", "Harbor")) {
    const id = basename(directory);
    const refuse = (reason: string) => lines.push({ id, converted: false, reason });
    const line = await refusingLinksOut(id, () => harborTask(new UntrustedTaskDirectory(directory), id, out));
    if (typeof line === "string") refuse(line);
    else lines.push(line);
  }
  return lines;
}

/** Runs one task's import; a file leading out of its directory refuses the task with the message naming it. */
async function refusingLinksOut(id: string, convert: () => Promise<ImportLine | string>): Promise<ImportLine | string> {
  try {
    return await convert();
  } catch (error) {
    if (error instanceof OutsideTaskDirectoryError) return error.message;
    throw error;
  }
}

/** One Harbor task directory → its task dir, or why not. */
async function harborTask(files: UntrustedTaskDirectory, id: string, out: string): Promise<ImportLine | string> {
  const directory = files.root;
  let config: { verifier?: { timeout_sec?: number }; environment?: { docker_image?: string } };
  try {
    config = parseToml(files.readText(join(directory, "task.toml"))) as typeof config;
  } catch (error) {
    if (error instanceof OutsideTaskDirectoryError) throw error;
    return `task.toml is not TOML (${errorMessage(error)})`;
  }
  const instruction = join(directory, "instruction.md");
  const instructionText = files.exists(instruction) ? files.readText(instruction) : "";
  if (!instructionText.trim()) return "no instruction.md (the agent's instruction)";
  const compose =
    composeProblem(files, join(directory, "environment", "docker-compose.yaml")) ?? composeProblem(files, join(directory, "environment", "docker-compose.yml"));
  if (compose) return compose;
  const task: ContainerTask = {
    id,
    files,
    instruction: instructionText,
    buildContext: join(directory, "environment"),
    dockerfile: join(directory, "environment", "Dockerfile"),
    testScript: join(directory, "tests", "test.sh"),
    testsDirectory: join(directory, "tests"),
    verifyTimeoutSec: Math.max(1, Math.ceil(config.verifier?.timeout_sec ?? 600)),
    verdict: HARBOR_VERDICT,
    excludeFromContext: [],
    defaultWorkdir: "/app",
    source: { source: "harbor", task_dir: directory },
  };
  return writeContainerTask(task, resolve(out));
}

/**
 * The verdict of a Terminal-Bench 1 task, whose harness parses the test
 * output (`parser_name: pytest`, the `-rA` summary): passed iff at least one
 * line starts with PASSED and none with FAILED or ERROR.
 */
const TB1_VERDICT = [
  "if grep -Eq '^(FAILED|ERROR) ' \"$out\"; then echo '[tb1] a test failed: not passed'; exit 1; fi",
  'if grep -Eq \'^PASSED \' "$out"; then echo "[tb1] every test passed (run-tests.sh exited $status)"; exit 0; fi',
  "echo '[tb1] no PASSED line in the output (pytest -rA summary): not passed'; exit 1",
].join("\n");

/**
 * Terminal-Bench 1 tasks (github.com/laude-institute/terminal-bench:
 * `task.yaml` with `instruction`, `Dockerfile`, `run-tests.sh`, `tests/`) at
 * `input` → task dirs under `out`.
 */
export async function importTerminalBench1(input: string, out: string): Promise<ImportLine[]> {
  const lines: ImportLine[] = [];
  for (const directory of taskDirectories(input, "task.yaml", "Terminal-Bench 1")) {
    const id = basename(directory);
    const line = await refusingLinksOut(id, () => terminalBench1Task(new UntrustedTaskDirectory(directory), id, out));
    lines.push(typeof line === "string" ? { id, converted: false, reason: line } : line);
  }
  return lines;
}

/** One Terminal-Bench 1 task directory → its task dir, or why not. */
async function terminalBench1Task(files: UntrustedTaskDirectory, id: string, out: string): Promise<ImportLine | string> {
  const directory = files.root;
  let config: { instruction?: unknown; descriptions?: { key?: string; description?: string }[]; max_test_timeout_sec?: number; parser_name?: string };
  try {
    config = (parseYaml(files.readText(join(directory, "task.yaml"))) ?? {}) as typeof config;
  } catch (error) {
    if (error instanceof OutsideTaskDirectoryError) throw error;
    return `task.yaml is not YAML (${errorMessage(error)})`;
  }
  const instruction =
    typeof config.instruction === "string"
      ? config.instruction
      : (config.descriptions?.find((entry) => entry.key === "base") ?? config.descriptions?.[0])?.description;
  if (!instruction?.trim()) return "task.yaml has no instruction";
  if (config.parser_name && config.parser_name !== "pytest") return `parser_name ${config.parser_name}: only the pytest parser is supported`;
  const compose = composeProblem(files, join(directory, "docker-compose.yaml")) ?? composeProblem(files, join(directory, "docker-compose.yml"));
  if (compose) return compose;
  const task: ContainerTask = {
    id,
    files,
    instruction,
    buildContext: directory,
    dockerfile: join(directory, "Dockerfile"),
    testScript: join(directory, "run-tests.sh"),
    testsDirectory: join(directory, "tests"),
    verifyTimeoutSec: Math.max(1, Math.ceil(config.max_test_timeout_sec ?? 180)),
    verdict: TB1_VERDICT,
    excludeFromContext: ["tests", "run-tests.sh", "solution.sh", "solution.yaml", "task.yaml"],
    defaultWorkdir: "/app",
    source: { source: "terminal-bench-1", task_dir: directory },
  };
  return writeContainerTask(task, resolve(out));
}
