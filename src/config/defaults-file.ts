import { existsSync, readFileSync, realpathSync, statSync } from "node:fs";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { isMap, isScalar, LineCounter, parseDocument, type Document } from "yaml";
import { z } from "zod";
import { describeIssue, describeYamlError, yamlDocumentValue } from "../describe-issue.js";
import { ConfigError } from "../errors.js";
import { imageReference, limitsSchema, modelFields } from "./task-schema.js";
import { isPathInside } from "../process/path-inside.js";
import { repositoryTopLevel } from "../process/repository-top-level.js";

/** The defaults file in RUNNER_HOME. */
const HOME_DEFAULTS_FILE = "config.yaml";
/** The defaults file of the current directory, read only from outside the task's repository. */
const DIRECTORY_DEFAULTS_FILE = ".runner.yaml";

/**
 * A defaults file (docs/command-line.md "Defaults file"): the task fields a user sets for
 * every run, under the task file's names. Validated with the task schema's
 * own field schemas; what is merged is the file's values as written, so the
 * task schema applies its rules once, to the merged task.
 */
const defaultsSchema = z.strictObject({
  /** `model` of task.yaml, but `script` (a scripted model's script belongs to its task). */
  model: modelFields
    .omit({ script: true })
    .refine((model) => model.provider !== "scripted", { message: "the scripted model needs a script: set it in the task file", path: ["provider"] })
    .optional(),
  /** `policy`: a shipped policy's name, or a file (relative to the defaults file). */
  policy: z.string().min(1).optional(),
  max_steps: z.number().int().positive().max(10_000).optional(),
  /** The run's wall-clock limit, as `runner exec --timeout` takes it ("20m", "1.5h"; a number is seconds). */
  timeout: z.union([z.string(), z.number().positive()]).optional(),
  /** `sandbox.image`. */
  image: imageReference.optional(),
  /** `sandbox.limits`. */
  limits: limitsSchema.optional(),
});

type DefaultsValues = Partial<Record<keyof z.input<typeof defaultsSchema>, unknown>> & {
  model?: Record<string, unknown>;
  limits?: Record<string, unknown>;
  policy?: string;
  timeout?: string | number;
};

/** The defaults that apply to a task: the merged values and, per dotted key, where each came from (`file:line`). */
export interface TaskDefaults {
  values: DefaultsValues;
  sources: Map<string, string>;
  /** The files read, lowest layer first. */
  files: string[];
  /** For the user: a defaults file that exists and was not read, and why. */
  notes: string[];
}

/** Problems of one defaults file, each with its line. Exit 2. */
export class DefaultsFileError extends ConfigError {
  constructor(
    readonly file: string,
    readonly problems: { line: number | null; path: string; message: string }[],
  ) {
    super(
      `${file}: ${problems.length} problem${problems.length === 1 ? "" : "s"}:\n${problems
        .map((problem) => `  - ${problem.line ? `line ${problem.line}: ` : ""}${problem.path || "(file)"}: ${problem.message}`)
        .join("\n")}`,
    );
  }
}

/**
 * The defaults for a task on `workspace`: `$RUNNER_HOME/config.yaml`, then
 * `<cwd>/.runner.yaml` over it. A file is read only when neither the
 * current directory (for .runner.yaml) nor the file itself (through
 * symlinks) lies inside the workspace's repository or RUNNER_HOME, the
 * trees the agent's work can reach (its worktree is in RUNNER_HOME; a merge
 * brings its files into the repository): nothing an agent could have
 * written becomes configuration (README "Trust"). A file left out for that
 * reason gets a note. Throws {@link DefaultsFileError} for a bad file.
 */
export function loadDefaults(options: { home: string; cwd: string; workspace: string }): TaskDefaults {
  const repository = repositoryTopLevel(options.workspace);
  const home = realpathIfExists(options.home);
  const defaults: TaskDefaults = { values: {}, sources: new Map(), files: [], notes: [] };
  const candidates = [
    { file: join(options.home, HOME_DEFAULTS_FILE), from: null },
    { file: join(options.cwd, DIRECTORY_DEFAULTS_FILE), from: realpathIfExists(options.cwd) },
  ];
  for (const { file, from } of candidates) {
    if (!existsSync(file)) continue;
    const places = [from, realpathIfExists(file)].filter((path) => path !== null);
    const inside = repository !== null && places.some((path) => isPathInside(path, repository));
    // config.yaml is RUNNER_HOME's own; a .runner.yaml there is in the runs' worktrees' tree.
    const inHome = from !== null && places.some((path) => isPathInside(path, home));
    if (inside || inHome) {
      defaults.notes.push(
        `${file} not read: it is inside ${inside ? `the task's repository ${repository}` : `RUNNER_HOME ${home}`}, which the agent's work can reach; run from outside it (docs/command-line.md "Defaults file")`,
      );
      continue;
    }
    mergeLayer(defaults, readDefaultsFile(file));
    defaults.files.push(file);
  }
  return defaults;
}

/**
 * `raw` (a task as parsed, before validation) with `defaults` under it:
 * a field the task sets wins, whole (`limits` and `model` key by key).
 * The defaults' `model` keys apply only to a task of the same provider (a
 * task that names another provider takes none of them). `image` does not
 * apply to a task with `sandbox.build`.
 */
export function applyDefaults(raw: Record<string, unknown>, defaults: TaskDefaults): Record<string, unknown> {
  const values = defaults.values;
  const task = { ...raw };
  if (values.model && (raw.model === undefined || isPlainObject(raw.model))) {
    const taskModel = (raw.model ?? {}) as Record<string, unknown>;
    if (taskModel.provider === undefined || (taskModel.provider ?? "openai") === (values.model.provider ?? "openai"))
      task.model = { ...values.model, ...taskModel };
  }
  if (task.policy === undefined && values.policy !== undefined) task.policy = values.policy;
  if (task.max_steps === undefined && values.max_steps !== undefined) task.max_steps = values.max_steps;
  if ((values.image !== undefined || values.limits) && (raw.sandbox === undefined || isPlainObject(raw.sandbox))) {
    const sandbox = { ...((raw.sandbox ?? {}) as Record<string, unknown>) };
    if (values.image !== undefined && sandbox.image === undefined && sandbox.build === undefined) sandbox.image = values.image;
    if (values.limits && (sandbox.limits === undefined || isPlainObject(sandbox.limits)))
      sandbox.limits = { ...values.limits, ...((sandbox.limits ?? {}) as object) };
    task.sandbox = sandbox;
  }
  return task;
}

/** The defaults' run time limit as `--timeout` takes it ("20m"; a number of seconds becomes "<n>s"), and where it was set; null when unset. */
export function defaultTimeout(defaults: TaskDefaults): { value: string; source: string } | null {
  const timeout = defaults.values.timeout;
  if (timeout === undefined) return null;
  return { value: typeof timeout === "number" ? `${timeout}s` : timeout, source: defaults.sources.get("timeout") ?? "defaults" };
}

/** `over` on top of `under`: key by key for `model` (unless the providers differ: then `over`'s model alone) and `limits`. */
function mergeLayer(under: TaskDefaults, over: { values: DefaultsValues; lines: Map<string, number>; file: string }): void {
  const values = { ...under.values };
  for (const [key, value] of Object.entries(over.values) as [keyof DefaultsValues, unknown][]) {
    if (key === "model" || key === "limits") {
      const lower = (values[key] ?? {}) as Record<string, unknown>;
      const upper = value as Record<string, unknown>;
      const sameProvider = key === "limits" || (lower.provider ?? "openai") === (upper.provider ?? "openai");
      if (!sameProvider) for (const source of [...under.sources.keys()]) if (source.startsWith("model.")) under.sources.delete(source);
      values[key] = sameProvider ? { ...lower, ...upper } : upper;
    } else {
      values[key] = value as never;
    }
  }
  under.values = values;
  for (const [path, line] of over.lines) under.sources.set(path, `${over.file}:${line}`);
}

/** Reads and validates one defaults file; policy paths made absolute against its directory. */
function readDefaultsFile(file: string): { values: DefaultsValues; lines: Map<string, number>; file: string } {
  if (!statSync(file).isFile()) throw new DefaultsFileError(file, [{ line: null, path: "", message: "not a file" }]);
  const source = readFileSync(file, "utf8");
  const lineCounter = new LineCounter();
  const document = parseDocument(source, { prettyErrors: true, lineCounter });
  if (document.errors.length) {
    throw new DefaultsFileError(
      file,
      document.errors.map((error) => ({ line: null, path: "", message: describeYamlError(error, source) })),
    );
  }
  const built = yamlDocumentValue(document);
  if ("problem" in built) throw new DefaultsFileError(file, [{ line: null, path: "", message: built.problem }]);
  const raw = built.value;
  if (!isPlainObject(raw))
    throw new DefaultsFileError(file, [{ line: 1, path: "", message: "expected a mapping of defaults (model, policy, max_steps, timeout, image, limits)" }]);
  const parsed = defaultsSchema.safeParse(raw, { reportInput: true });
  const problems = parsed.success
    ? []
    : parsed.error.issues.map((issue) => ({
        ...describeIssue(issue, 'docs/command-line.md "Defaults file"', defaultsSchema),
        line: lineOf(document, lineCounter, issue),
      }));
  const values = raw as DefaultsValues;
  if (values.timeout !== undefined && problems.every((problem) => !problem.path.startsWith("timeout"))) {
    const duration = typeof values.timeout === "number" ? `${values.timeout}s` : values.timeout;
    if (!/^\s*\d+(?:\.\d+)?\s*[smh]?\s*$/i.test(duration))
      problems.push({
        path: "timeout",
        line: lineAt(document, lineCounter, ["timeout"]),
        message: `expected a duration such as "90s", "10m" or "1.5h", got ${JSON.stringify(values.timeout)}`,
      });
  }
  if (typeof values.policy === "string" && !/^[a-z0-9][a-z0-9-]*$/.test(values.policy)) {
    values.policy = isAbsolute(values.policy) ? values.policy : resolve(dirname(file), values.policy);
    if (!existsSync(values.policy))
      problems.push({
        path: "policy",
        line: lineAt(document, lineCounter, ["policy"]),
        message: `file ${values.policy} does not exist (a path is relative to this file)`,
      });
  }
  if (problems.length)
    throw new DefaultsFileError(
      file,
      problems.sort((a, b) => (a.line ?? 0) - (b.line ?? 0)),
    );
  const lines = new Map<string, number>();
  for (const [key, value] of Object.entries(raw)) {
    if (isPlainObject(value)) for (const inner of Object.keys(value)) lines.set(`${key}.${inner}`, lineAt(document, lineCounter, [key, inner]) ?? 0);
    else lines.set(key, lineAt(document, lineCounter, [key]) ?? 0);
  }
  return { values, lines, file };
}

/** The line of the field a zod issue is about (for an unknown key, the key's own line). */
function lineOf(document: Document, lineCounter: LineCounter, issue: z.core.$ZodIssue): number | null {
  const path = issue.path.map(String);
  if (issue.code === "unrecognized_keys") return lineAt(document, lineCounter, [...path, issue.keys[0]!]);
  return lineAt(document, lineCounter, path);
}

/** The 1-based line of the key at `path` (or of the nearest enclosing key that exists). */
function lineAt(document: Document, lineCounter: LineCounter, path: string[]): number | null {
  for (let length = path.length; length > 0; length -= 1) {
    const parent = length === 1 ? document.contents : document.getIn(path.slice(0, length - 1), true);
    if (!isMap(parent)) continue;
    const pair = parent.items.find((item) => isScalar(item.key) && String(item.key.value) === path[length - 1]);
    const offset = isScalar(pair?.key) ? pair.key.range?.[0] : undefined;
    if (offset !== undefined) return lineCounter.linePos(offset).line;
  }
  return null;
}

/**
 * The top level of the git repository holding `path`: the nearest directory
 * at or above it with a `.git` entry (a directory, or the file of a linked
 * worktree), through symlinks; null when there is none (no run can be made
 * on it: nothing of it is the agent's). Found by looking, not by running
 * git: nothing in the repository (its config, hooks, fsmonitor) runs on the
 * host for this.
 */
function realpathIfExists(path: string): string {
  return existsSync(path) ? realpathSync(path) : resolve(path);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
