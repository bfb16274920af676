import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { basename, dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import picomatch from "picomatch";
import { globSync } from "tinyglobby";
import { loadTaskFile, TaskValidationError, validateTask, type Task } from "../config/load-task.js";
import { ConfigError, errorMessage } from "../errors.js";
import { checkTaskModel } from "../runner/check-script.js";
import { resolveRepository } from "../workspace/run-worktree.js";

/** The file names a task directory's task file may have, in the order they are looked for. */
const TASK_FILE_NAMES = ["task.yaml", "task.yml"];

/** Directories never searched for task files: a repository's git directory and npm's packages. */
const NEVER_SEARCHED = new Set([".git", "node_modules"]);

/**
 * One task of a batch: validated (`task`), or one whose task file the loader
 * refused (`task` null, `invalid` the loader's message). An invalid task is
 * that task's outcome (`error`, reason `task_invalid`), never the batch's
 * end: the others run, as pytest reports a collection error and runs the rest.
 */
export type BatchTask = {
  /**
   * Stable id: the task's directory relative to the input root (`/`
   * separated, without `/task.yaml`; the task file's path when it has
   * another name), or a JSONL line's `id` (else `name`). Shards, `--filter`,
   * resume and the reports key on it.
   */
  id: string;
  /** Where the task came from: the task file's absolute path, or `<tasks.jsonl>:<line>`. */
  task_file: string;
} & ({ task: Task; invalid?: undefined } | { task: null; invalid: string });

/** What `runner batch run <input>` was given, and the tasks found there (sorted by id). */
export interface DiscoveredTasks {
  kind: "directory" | "glob" | "list" | "jsonl";
  /** The directory task ids are relative to. */
  root: string;
  /** Valid and invalid tasks, in id order. */
  tasks: BatchTask[];
}

/**
 * Finds and validates every task of a batch input (docs/batch.md "Task discovery"):
 * - a directory: every `task.yaml` (or `task.yml`) below it, at any depth,
 *   except below `.git`, `node_modules` and a directory that holds a task
 *   file itself (a task's own repository is not searched for more tasks);
 * - a glob (quoted, so the shell leaves it alone): the matching task files,
 *   or the task files of matching directories; root is the glob's static base;
 * - a list file (`*.txt`, `*.list`): one task file or task directory per
 *   line, relative to the list file; blank lines and `#` comments skipped;
 * - a JSONL file (`*.jsonl`): one task object per line (the task.yaml
 *   schema, relative paths against the JSONL file's directory) with an
 *   optional `id` (default: its `name`).
 *
 * Every task is validated before anything starts: its schema, its workspace
 * (a repository with a commit) and its model settings. A task that fails is
 * returned with `invalid` (the loader's message) and the batch runs the rest.
 * Throws ConfigError (exit 2) only for the input as a whole: unreadable or of
 * no known kind, no task in it, ids that repeat, or no entry that is a task
 * at all (then listing every entry's problem). Task files that are all
 * refused still make a batch: each is its task's error.
 */
export async function discoverTasks(input: string, cwd = process.cwd(), options: DiscoverOptions = {}): Promise<DiscoveredTasks> {
  const path = resolve(cwd, input);
  const found = existsSync(path) ? discoverAt(path, input, options) : discoverGlob(input, cwd, options);
  const tasks: BatchTask[] = [];
  for (const candidate of found.candidates) {
    try {
      const task = candidate.load();
      await resolveRepository(task.workspacePath);
      checkTaskModel(task, process.env);
      tasks.push({ id: candidate.id, task_file: candidate.taskFile, task });
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      const invalid = error instanceof TaskValidationError ? error.message : `${candidate.taskFile}: ${errorMessage(error)}`;
      tasks.push({ id: candidate.id, task_file: candidate.taskFile, task: null, invalid });
    }
  }
  const problems: string[] = [];
  const seen = new Map<string, string>();
  for (const task of found.candidates.filter((candidate) => !candidate.broken)) {
    const earlier = seen.get(task.id);
    if (earlier !== undefined) problems.push(`task id "${task.id}" is used by both ${earlier} and ${task.taskFile}; give each task a unique id`);
    seen.set(task.id, task.taskFile);
  }
  // Nothing in the input is a task at all (lines that are not JSON, paths that do not exist): the input's problem. Task
  // files that are there but refused are each a task's error, even all of them: CI still gets every report (as pytest
  // writes its JUnit file for collection errors).
  if (problems.length === 0 && found.candidates.length > 0 && found.candidates.every((candidate) => candidate.broken))
    problems.push(...tasks.map((task) => task.invalid!));
  if (problems.length)
    throw new ConfigError(
      `batch input ${input}: ${problems.length} problem${problems.length === 1 ? "" : "s"}:\n${problems.map((problem) => `- ${problem}`).join("\n")}`,
    );
  if (tasks.length === 0) throw new ConfigError(`batch input ${input}: no tasks found (${describeKind(found.kind)})`);
  tasks.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return { kind: found.kind, root: found.root, tasks };
}

/** Options of {@link discoverTasks}. */
export interface DiscoverOptions {
  /**
   * Called with each candidate task file's absolute path before anything
   * reads it: null accepts it, a string refuses it (the task is invalid with
   * that reason, and nothing of the file's content is read or shown).
   */
  acceptFile?: (absolutePath: string) => string | null;
}

interface Candidate {
  id: string;
  taskFile: string;
  /** Set for an entry that is no task at all (a missing path, a line that is not JSON): it has no id to compare. */
  broken?: true;
  load(): Task;
}

interface Found {
  kind: DiscoveredTasks["kind"];
  root: string;
  candidates: Candidate[];
}

function describeKind(kind: DiscoveredTasks["kind"]): string {
  switch (kind) {
    case "directory":
      return "no task.yaml below the directory";
    case "glob":
      return "the glob matched no task file or task directory";
    case "list":
      return "the list file names no task";
    case "jsonl":
      return "the JSONL file has no task line";
  }
}

function discoverAt(path: string, input: string, options: DiscoverOptions): Found {
  if (statSync(path).isDirectory()) {
    return { kind: "directory", root: path, candidates: findTaskFiles(path).map((file) => fileCandidate(path, file, options)) };
  }
  if (path.endsWith(".jsonl")) return { kind: "jsonl", root: dirname(path), candidates: jsonlCandidates(path) };
  if (path.endsWith(".txt") || path.endsWith(".list")) return { kind: "list", root: dirname(path), candidates: listCandidates(path, options) };
  throw new ConfigError(`batch input ${input}: expected a directory of tasks, a quoted glob, a list file (.txt or .list) or a JSONL file of tasks (.jsonl)`);
}

/** Task files below `directory` (see {@link discoverTasks}). */
function findTaskFiles(directory: string): string[] {
  const own = taskFileIn(directory);
  if (own) return [own];
  const files: string[] = [];
  for (const entry of readdirSync(directory, { withFileTypes: true })) {
    if (entry.isDirectory() && !NEVER_SEARCHED.has(entry.name)) files.push(...findTaskFiles(join(directory, entry.name)));
  }
  return files;
}

function taskFileIn(directory: string): string | null {
  for (const name of TASK_FILE_NAMES) {
    const file = join(directory, name);
    if (existsSync(file) && statSync(file).isFile()) return file;
  }
  return null;
}

function fileCandidate(root: string, file: string, options: DiscoverOptions): Candidate {
  return {
    id: taskFileId(root, file),
    taskFile: file,
    load: () => {
      const refusal = options.acceptFile?.(file);
      if (refusal) throw new ConfigError(refusal);
      return loadTaskFile(file);
    },
  };
}

/**
 * A task file's id: its directory relative to `root` (the directory's own
 * name when that is `root` itself), or, for a task file with another name
 * than task.yaml / task.yml, its path relative to `root`.
 */
function taskFileId(root: string, file: string): string {
  const path = TASK_FILE_NAMES.includes(basename(file)) ? dirname(file) : file;
  return (relative(root, path) || basename(path)).split(sep).join("/");
}

function discoverGlob(pattern: string, cwd: string, options: DiscoverOptions): Found {
  const scan = picomatch.scan(pattern);
  if (!scan.isGlob) throw new ConfigError(`batch input ${pattern}: no such file or directory`);
  const root = resolve(cwd, scan.base || ".");
  const matches = globSync(pattern, { cwd, absolute: true, onlyFiles: false, ignore: ["**/.git/**", "**/node_modules/**"] });
  const candidates: Candidate[] = [];
  for (const match of matches.map((file) => resolve(file.replace(/\/$/, "")))) {
    const file = statSync(match).isDirectory() ? taskFileIn(match) : match;
    if (file) candidates.push(fileCandidate(root, file, options));
  }
  return { kind: "glob", root, candidates };
}

function listCandidates(listFile: string, options: DiscoverOptions): Candidate[] {
  const root = dirname(listFile);
  const candidates: Candidate[] = [];
  for (const [index, raw] of readFileSync(listFile, "utf8").split("\n").entries()) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const path = isAbsolute(line) ? line : resolve(root, line);
    const where = `${listFile}:${index + 1}`;
    if (!existsSync(path)) {
      candidates.push(failing(line, where, `${line} does not exist`));
      continue;
    }
    const file = statSync(path).isDirectory() ? taskFileIn(path) : path;
    if (!file) candidates.push(failing(line, where, `${line} is a directory without ${TASK_FILE_NAMES.join(" or ")}`));
    else candidates.push(fileCandidate(root, file, options));
  }
  return candidates;
}

function jsonlCandidates(jsonlFile: string): Candidate[] {
  const base = dirname(jsonlFile);
  const candidates: Candidate[] = [];
  for (const [index, raw] of readFileSync(jsonlFile, "utf8").split("\n").entries()) {
    if (!raw.trim()) continue;
    const where = `${jsonlFile}:${index + 1}`;
    let value: unknown;
    try {
      value = JSON.parse(raw);
    } catch (error) {
      candidates.push(failing(`line ${index + 1}`, where, `not JSON (${errorMessage(error)})`));
      continue;
    }
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      candidates.push(failing(`line ${index + 1}`, where, "expected a JSON object of task fields (name, instruction, workspace, ...) and an optional id"));
      continue;
    }
    const { id, ...fields } = value as Record<string, unknown>;
    const name = (fields as { name?: unknown }).name;
    const taskId = id ?? name;
    if (typeof taskId !== "string" || taskId.length === 0 || /[\u0000-\u001f]/.test(taskId)) {
      candidates.push(failing(`line ${index + 1}`, where, "id: give each line a non-empty string `id` (or a `name`) without control characters"));
      continue;
    }
    candidates.push({ id: taskId, taskFile: where, load: () => validateTask(fields, where, base) });
  }
  return candidates;
}

function failing(id: string, where: string, message: string): Candidate {
  return {
    id,
    taskFile: where,
    broken: true,
    load: () => {
      throw new ConfigError(message);
    },
  };
}

/** `--shard i/n`: the i-th (1-based) of n shards. */
export interface Shard {
  index: number;
  count: number;
}

/** Parses `i/n` (1 ≤ i ≤ n); ConfigError naming `--shard` otherwise. */
export function parseShard(value: string): Shard {
  const match = /^(\d+)\/(\d+)$/.exec(value.trim());
  const index = match ? Number(match[1]) : NaN;
  const count = match ? Number(match[2]) : NaN;
  if (!match || count < 1 || index < 1 || index > count) throw new ConfigError(`--shard: expected i/n with 1 <= i <= n, such as 2/5; got "${value}"`);
  return { index, count };
}

/**
 * The shard (1-based, of `count`) a task id belongs to: the first 8 bytes of
 * SHA-256 of the id, as an unsigned integer, modulo `count`, plus one. It
 * depends on the id alone, so every task lands in exactly one shard and adding
 * or removing other tasks never moves it.
 */
export function shardOf(id: string, count: number): number {
  const hash = createHash("sha256").update(id, "utf8").digest().readBigUInt64BE(0);
  return Number(hash % BigInt(count)) + 1;
}

export interface Selection {
  /** Keeps task ids this regular expression matches (`RegExp.test`). */
  filter?: RegExp;
  shard?: Shard;
  /** At most this many tasks (the first by id), after the filter and the shard. */
  limit?: number;
}

/** The tasks a batch runs: `--filter`, then `--shard`, then `--limit`, in id order. */
export function selectTasks<T extends { id: string }>(tasks: T[], selection: Selection): T[] {
  let selected = tasks.filter((task) => !selection.filter || selection.filter.test(task.id));
  const shard = selection.shard;
  if (shard) selected = selected.filter((task) => shardOf(task.id, shard.count) === shard.index);
  return selection.limit === undefined ? selected : selected.slice(0, selection.limit);
}

/** Parses `--filter`; ConfigError naming the flag for a bad expression. */
export function parseFilter(value: string): RegExp {
  try {
    return new RegExp(value);
  } catch (error) {
    throw new ConfigError(`--filter: not a valid regular expression (${errorMessage(error)})`);
  }
}
