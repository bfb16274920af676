import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { z } from "zod";
import { ConfigError, errorMessage } from "../errors.js";
import { DEFAULT_SANDBOX_IMAGE } from "../sandbox/task-image.js";
import { rawSafeGit } from "../workspace/safe-git.js";
import { isPathInside } from "../process/path-inside.js";
import { hereDocument, literalPattern, MAX_VERIFY_COMMAND_BYTES, taskName, writeTaskFile, type ImportLine } from "./task-writer.js";

/** A list of test ids as the official dataset stores it: a JSON-encoded string, or the list itself. */
const testList = z.preprocess(
  (value) => {
    if (typeof value !== "string") return value;
    try {
      return JSON.parse(value) as unknown;
    } catch {
      return value;
    }
  },
  z.array(z.string(), { error: 'expected a list of test ids, or its JSON string like "[\\"tests/test_a.py::test_x\\"]"' }),
);

const instanceSchema = z.object({
  instance_id: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, "expected an id like astropy__astropy-12907 (letters, digits, . _ -)"),
  repo: z
    .string()
    .regex(/^[A-Za-z0-9_.-]+\/[A-Za-z0-9_.-]+$/, "expected owner/name like astropy/astropy")
    // `.`/`..` would pick a clone outside --repos (`../x` is <repos>/../x).
    .refine((repo) => repo.split("/").every((part) => !/^\.+$/.test(part)), "expected owner/name like astropy/astropy, neither part only dots"),
  base_commit: z.string().regex(/^[0-9a-f]{40}$/, "expected the 40-hex commit the instance starts from"),
  problem_statement: z.string().trim().min(1, "expected the issue text"),
  test_patch: z.string().min(1, "expected the diff that adds the tests"),
  FAIL_TO_PASS: testList,
  PASS_TO_PASS: testList,
  version: z.union([z.string(), z.number()]).transform(String),
});

export type SweBenchInstance = z.infer<typeof instanceSchema>;

/**
 * How the official harness runs and reads each repository's tests: its test
 * command (`test_cmd` of MAP_REPO_VERSION_TO_SPECS, swebench/harness/constants)
 * and log parser (MAP_REPO_TO_PARSER_PY, swebench/harness/log_parsers/python.py),
 * per repository; where the harness varies them by version, the common one.
 * A repository not listed is run with pytest -rA and read by the pytest parser.
 */
/** Django's runner, and for version 1.9 without `--parallel` (SPECS_DJANGO of the harness). */
const DJANGO = "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1";
const DJANGO_1_9 = "./tests/runtests.py --verbosity 2";

const PYTEST = "pytest --no-header -rA --tb=no -p no:cacheprovider";
const REPOSITORIES: Record<string, { test_command: string; parser: string }> = {
  "astropy/astropy": { test_command: "pytest -rA -vv -o console_output_style=classic --tb=no", parser: "pytest_v2" },
  "marshmallow-code/marshmallow": { test_command: PYTEST, parser: "pytest" },
  "matplotlib/matplotlib": { test_command: PYTEST, parser: "matplotlib" },
  "mwaskom/seaborn": { test_command: "pytest --no-header -rA", parser: "seaborn" },
  "pallets/flask": { test_command: PYTEST, parser: "pytest" },
  "psf/requests": { test_command: PYTEST, parser: "pytest_options" },
  "pvlib/pvlib-python": { test_command: PYTEST, parser: "pytest" },
  "pydata/xarray": { test_command: PYTEST, parser: "pytest" },
  "pydicom/pydicom": { test_command: PYTEST, parser: "pytest_options" },
  "pylint-dev/astroid": { test_command: PYTEST, parser: "pytest" },
  "pylint-dev/pylint": { test_command: PYTEST, parser: "pytest_options" },
  "pytest-dev/pytest": { test_command: "pytest -rA", parser: "pytest" },
  "pyvista/pyvista": { test_command: PYTEST, parser: "pytest" },
  "scikit-learn/scikit-learn": { test_command: PYTEST, parser: "pytest_v2" },
  "sqlfluff/sqlfluff": { test_command: PYTEST, parser: "pytest" },
  "sphinx-doc/sphinx": { test_command: "tox --current-env -epy39 -v --", parser: "pytest_v2" },
  "django/django": { test_command: DJANGO, parser: "django" },
  "sympy/sympy": { test_command: "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose", parser: "sympy" },
};

/** File endings the harness drops from the test files it runs (NON_TEST_EXTS, swebench/harness/constants). */
const NON_TEST_EXTENSIONS = [".json", ".png", "csv", ".txt", ".md", ".jpg", ".jpeg", ".pkl", ".yml", ".yaml", ".toml"];

/** The grader that runs in the verification sandbox (shipped next to this module). */
const GRADER = new URL("./swe_bench_grade.py", import.meta.url);

/** Where the official images keep the repository (and where the workspace is mounted). */
const WORKDIR = "/testbed";

export interface SweBenchImportOptions {
  /** Directory of local clones: `<repos>/<owner>__<name>` or `<repos>/<owner>/<name>`. */
  repos: string;
  out: string;
  /** Image for every task; `{instance_id}` is replaced by the id as the harness's Docker Hub images spell it (see dockerHubId). Default: the runner's default image. */
  image?: string;
  /** Copy only the base commit, not its history. */
  shallow?: boolean;
}

/**
 * Reads a SWE-bench instances file (JSONL: one instance per line; blank lines
 * skipped). Throws ConfigError naming the line and field of every bad line.
 */
export function readSweBenchInstances(file: string): SweBenchInstance[] {
  if (!existsSync(file)) throw new ConfigError(`${file}: no such file (give the instances as JSONL, one per line)`);
  const problems: string[] = [];
  const instances: SweBenchInstance[] = [];
  readFileSync(file, "utf8")
    .split("\n")
    .forEach((text, index) => {
      if (!text.trim()) return;
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch (error) {
        problems.push(`line ${index + 1}: not JSON (${errorMessage(error)})`);
        return;
      }
      const parsed = instanceSchema.safeParse(value);
      if (parsed.success) instances.push(parsed.data);
      else problems.push(...parsed.error.issues.map((issue) => `line ${index + 1}: ${issue.path.join(".") || "(line)"}: ${issue.message}`));
    });
  if (problems.length)
    throw new ConfigError(`${file}: ${problems.length} problem${problems.length === 1 ? "" : "s"}:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
  if (instances.length === 0) throw new ConfigError(`${file}: no instances (expected one JSON object per line)`);
  return instances;
}

/** Paths a unified diff changes (`diff --git a/X b/X` headers, the b side), as the harness reads them. */
function patchedFiles(patch: string): string[] {
  return [...patch.matchAll(/^diff --git a\/.* b\/(.*)$/gm)].map((match) => match[1]!);
}

/**
 * What the test command is given (get_test_directives of the harness): the
 * test patch's files without data files; for Django, as module names
 * (`tests/` and `.py` dropped, slashes as dots).
 */
function testDirectives(files: string[], django: boolean): string[] {
  const tests = files.filter((path) => !NON_TEST_EXTENSIONS.some((ending) => path.endsWith(ending)));
  if (!django) return tests;
  return tests.map((path) => (path.endsWith(".py") ? path.slice(0, -3) : path).replace(/^tests\//, "").replaceAll("/", "."));
}

/**
 * The clone of `repo` under `repos`, or null. A candidate whose path
 * (resolved, `..` included) leaves `repos` is never taken: the instances
 * file is a download, `--repos` is the user's choice. A link the user put in
 * `--repos` is followed as they meant it.
 */
function findClone(repos: string, repo: string): string | null {
  const [owner, name] = repo.split("/") as [string, string];
  for (const candidate of [resolve(repos, `${owner}__${name}`), resolve(repos, owner, name)]) {
    if (!isPathInside(candidate, repos) || candidate === repos) continue;
    if (existsSync(join(candidate, ".git")) || existsSync(join(candidate, "HEAD"))) return candidate;
  }
  return null;
}

/**
 * Converts every instance into `<out>/<instance_id>/` (task.yaml, instance.json,
 * repo/): a repository holding the base commit (and its ancestors, or only it
 * with `shallow`) fetched from the local clone, so no later commit (the fix) is
 * in the agent's object store; the problem statement as the instruction; a
 * verify command that writes the test patch and the grader into the
 * verification sandbox's /tmp, applies the patch, runs the test files with the
 * harness's test command and passes iff every FAIL_TO_PASS and PASS_TO_PASS
 * test passed (src/importers/swe_bench_grade.py). The test patch exists only in
 * task.yaml, outside the workspace; verify.protect restores the files it
 * touches from the base commit first. Returns one line per instance.
 */
export async function importSweBench(file: string, options: SweBenchImportOptions): Promise<ImportLine[]> {
  const instances = readSweBenchInstances(file);
  if (!existsSync(options.repos)) throw new ConfigError(`--repos ${options.repos}: no such directory (local clones as <owner>__<name> or <owner>/<name>)`);
  const grader = readFileSync(GRADER);
  const lines: ImportLine[] = [];
  for (const instance of instances) {
    try {
      lines.push(await importInstance(instance, options, grader));
    } catch (error) {
      lines.push({ id: instance.instance_id, converted: false, reason: errorMessage(error) });
    }
  }
  return lines;
}

async function importInstance(instance: SweBenchInstance, options: SweBenchImportOptions, grader: Buffer): Promise<ImportLine> {
  const id = instance.instance_id;
  const refuse = (reason: string): ImportLine => ({ id, converted: false, reason });
  const clone = findClone(resolve(options.repos), instance.repo);
  if (!clone) {
    const [owner, name] = instance.repo.split("/");
    return refuse(`no clone of ${instance.repo} in ${options.repos} (expected ${owner}__${name}/ or ${owner}/${name}/)`);
  }
  const directory = join(resolve(options.out), id);
  if (existsSync(directory)) return refuse(`${directory} exists (remove it to import again)`);
  const known = REPOSITORIES[instance.repo];
  const runner = { ...(known ?? { test_command: PYTEST, parser: "pytest" }) };
  const django = instance.repo === "django/django";
  if (django && instance.version === "1.9") runner.test_command = DJANGO_1_9;
  const testFiles = patchedFiles(instance.test_patch);
  if (testFiles.length === 0) return refuse("test_patch changes no file (no `diff --git a/... b/...` header)");
  const spec = {
    instance_id: id,
    parser: runner.parser,
    test_command: runner.test_command,
    directives: testDirectives(testFiles, django),
    fail_to_pass: instance.FAIL_TO_PASS,
    pass_to_pass: instance.PASS_TO_PASS,
  };
  const command = verifyCommand(instance.test_patch, JSON.stringify(spec), grader);
  const bytes = Buffer.byteLength(command);
  if (bytes > MAX_VERIFY_COMMAND_BYTES)
    return refuse(`the test patch makes a verify command of ${bytes} bytes, over the ${MAX_VERIFY_COMMAND_BYTES} one command may have (Linux MAX_ARG_STRLEN)`);

  const repository = join(directory, "repo");
  mkdirSync(repository, { recursive: true });
  try {
    await copyBaseCommit(clone, repository, instance.base_commit, options.shallow ?? false);
  } catch (error) {
    rmSync(directory, { recursive: true, force: true });
    return refuse(`base_commit ${instance.base_commit} could not be had from ${clone}: ${errorMessage(error).split("\n")[0]}`);
  }
  const image = options.image?.replaceAll("{instance_id}", dockerHubId(id));
  const invalid = writeTaskFile(directory, {
    name: taskName(id),
    instruction: instance.problem_statement,
    workspace: "./repo",
    sandbox: { image: image ?? DEFAULT_SANDBOX_IMAGE, workdir: WORKDIR },
    // As the SWE-bench harness runs them: Django's tests/runtests.py imports its siblings from the script's directory (docs/importers.md).
    verify: { command, timeout_sec: 1800, protect: testFiles.map(literalPattern), python_safe_path: false },
  });
  if (invalid) {
    rmSync(directory, { recursive: true, force: true });
    return refuse(invalid);
  }
  writeFileSync(
    join(directory, "instance.json"),
    `${JSON.stringify({ source: "swe-bench", instance_id: id, repo: instance.repo, base_commit: instance.base_commit, version: instance.version }, null, 2)}\n`,
  );
  const notes: string[] = [];
  if (!image)
    notes.push(`image ${DEFAULT_SANDBOX_IMAGE}: the harness's environment for ${instance.repo} ${instance.version} needs a Python package index; give --image`);
  if (!known) notes.push(`${instance.repo} is not a harness repository: tests run with \`${PYTEST}\`, read as pytest -rA`);
  return { id, converted: true, directory, notes };
}

/**
 * The verify command: the files land in a fresh directory under the
 * verification sandbox's /tmp (never in the checkout), the harness images'
 * conda environment is activated when there is one, and the grader runs
 * isolated from the checkout (`python3 -I`: no current directory or PYTHON*
 * variables on its path).
 */
function verifyCommand(testPatch: string, spec: string, grader: Buffer): string {
  return [
    "d=$(mktemp -d /tmp/swe-bench.XXXXXX) || exit 1",
    hereDocument('"$d/test.patch"', Buffer.from(testPatch)),
    hereDocument('"$d/spec.json"', Buffer.from(spec)),
    hereDocument('"$d/grade.py"', grader),
    "if [ -f /opt/miniconda3/bin/activate ]; then . /opt/miniconda3/bin/activate && conda activate testbed; fi",
    'python3 -I "$d/grade.py" "$d"',
  ].join("\n");
}

/**
 * The instance id as the harness names its images on Docker Hub
 * (`swebench/sweb.eval.x86_64.<id>`): lower case, `__` written `_1776_`
 * (an image name cannot hold `__` here).
 */
function dockerHubId(id: string): string {
  return id.toLowerCase().replaceAll("__", "_1776_");
}

/** A new repository at `target` whose HEAD (branch `swe-bench-base`) is `commit`, fetched from `clone`. */
async function copyBaseCommit(clone: string, target: string, commit: string, shallow: boolean): Promise<void> {
  await rawSafeGit({ baseDirectory: target }, ["init", "-q"]);
  // Fetching a commit by id (no ref names it in a clone that is checked out elsewhere) needs the serving side's consent.
  await rawSafeGit({ baseDirectory: target, config: ["uploadpack.allowAnySHA1InWant=true"] }, [
    "fetch",
    "-q",
    "--no-tags",
    ...(shallow ? ["--depth", "1"] : []),
    clone,
    commit,
  ]);
  await rawSafeGit({ baseDirectory: target }, ["checkout", "-q", "-b", "swe-bench-base", commit]);
}
