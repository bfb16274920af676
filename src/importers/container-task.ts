import { existsSync, mkdirSync, realpathSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, posix, relative } from "node:path";
import { errorMessage } from "../errors.js";
import { workdirProblem } from "../sandbox/workdir.js";
import { rawSafeGit } from "../workspace/safe-git.js";
import { hereDocument, MAX_VERIFY_COMMAND_BYTES, taskName, writeTaskFile, type ImportLine } from "./task-writer.js";
import { shellWord } from "../process/shell-word.js";
import { isPathInside } from "../process/path-inside.js";
import { copyWithoutFollowing, makeDirectoriesNoFollow, OutsideTaskDirectoryError, type UntrustedTaskDirectory } from "./untrusted-task-directory.js";

/**
 * Where the verify command puts the benchmark's test files and where their
 * verifier writes: a fixed directory of the verification sandbox's /tmp, which
 * every container gets empty (the image's own file system is read-only, so
 * the benchmarks' /tests and /logs/verifier cannot be made). Nothing the agent
 * wrote can be there: the agent's container is gone and the checkout is
 * mounted elsewhere.
 */
const VERIFIER_ROOT = "/tmp/runner-verifier";
const TESTS = `${VERIFIER_ROOT}/tests`;
const LOGS = `${VERIFIER_ROOT}/logs/verifier`;

/**
 * Commands in a test script that fetch from the network (installers,
 * downloads); verification has no network, so such a task cannot be
 * converted as it is.
 */
const NETWORK_COMMANDS =
  /(^|[\s;&|(`$])(curl|wget|pip3? install|python3? -m pip install|uv (pip install|sync|add|venv|tool install|run --with)|uvx|apt(-get)? (install|update)|apk add|npm (install|ci)|yarn( install)?|git clone|go (get|mod download)|cargo (install|fetch))\b/;

/** A benchmark task as the importers read it, before it becomes a task dir. */
export interface ContainerTask {
  id: string;
  /** The task's directory, through which every file of it is read (no link out of it is followed). */
  files: UntrustedTaskDirectory;
  instruction: string;
  /** environment/ (Harbor) or the task dir (TB1): the Docker build context. */
  buildContext: string;
  dockerfile: string;
  /** The test script (tests/test.sh, run-tests.sh) and the tests directory uploaded next to it; paths on the host. */
  testScript: string;
  testsDirectory: string | null;
  verifyTimeoutSec: number;
  /** Shell lines run after the test script, with `$out` its output file and `$status` its exit code; exit 0 = passed. */
  verdict: string;
  /** Entries of the build context left out of the copy (the tests and the solution, when they share the task's directory). */
  excludeFromContext: string[];
  /** The workdir when the Dockerfile sets none. */
  defaultWorkdir: string;
  /** Written next to task.yaml. */
  source: Record<string, unknown>;
}

/** The benchmark's absolute paths, as the tests name them, moved under {@link VERIFIER_ROOT}. */
export function relocateVerifierPaths(text: string): string {
  return text.replace(/(?<![\w.-])\/logs\/verifier(?![\w.-])/g, LOGS).replace(/(?<![\w.-])\/tests(?![\w.-])/g, TESTS);
}

/** The Dockerfile's last WORKDIR and the sources it COPY/ADDs into it (instructions after the first FROM of the last stage). */
function readDockerfile(text: string): {
  workdir: string | null;
  copies: { sources: string[]; destination: string }[];
  runAfterWorkdir: boolean;
  from: string[];
} {
  const instructions = text
    .replace(/\\\r?\n/g, " ")
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith("#"));
  let workdir: string | null = null;
  let runAfterWorkdir = false;
  const copies: { sources: string[]; destination: string }[] = [];
  const from: string[] = [];
  for (const line of instructions) {
    const [keyword = "", ...rest] = line.split(/\s+/);
    const upper = keyword.toUpperCase();
    if (upper === "FROM") from.push(rest.find((word) => !word.startsWith("--")) ?? "");
    if (upper === "WORKDIR") {
      const path = rest.join(" ");
      workdir = path.startsWith("/") ? posix.normalize(path) : posix.join(workdir ?? "/", path);
      runAfterWorkdir = false;
    }
    if (upper === "RUN" && workdir) runAfterWorkdir = true;
    if ((upper === "COPY" || upper === "ADD") && !rest.some((word) => word.startsWith("--from"))) {
      const words = rest.filter((word) => !word.startsWith("--"));
      if (words.length >= 2) copies.push({ sources: words.slice(0, -1), destination: words.at(-1)! });
    }
  }
  return { workdir, copies, runAfterWorkdir, from };
}

/**
 * Writes `<out>/<id>/`: task.yaml with `sandbox.build` from the task's
 * Dockerfile (its context copied to `environment/`), `workdir` the
 * Dockerfile's WORKDIR, a workspace repository (`repo/`) holding what the
 * Dockerfile copies into that WORKDIR (the mount of the workspace hides the
 * image's own WORKDIR), and a verify command that writes the test script and
 * tests under {@link VERIFIER_ROOT} (their /tests and /logs/verifier paths
 * moved there), runs the script, and decides by `task.verdict`. The tests
 * exist only inside that command: the agent never sees them. Returns the line
 * for this task; a task that cannot be converted leaves nothing behind.
 * Every file is read through `task.files`: a link out of the task's
 * directory throws OutsideTaskDirectoryError (the caller refuses the task).
 */
export async function writeContainerTask(task: ContainerTask, out: string): Promise<ImportLine> {
  const refuse = (reason: string): ImportLine => ({ id: task.id, converted: false, reason });
  const files = task.files;
  if (!files.exists(task.dockerfile)) return refuse(`no Dockerfile at ${task.dockerfile} (an image the runner can build is needed)`);
  if (!files.exists(task.testScript)) return refuse(`no test script at ${task.testScript}`);
  const scriptText = files.readText(task.testScript);
  const network = NETWORK_COMMANDS.exec(
    scriptText
      .split("\n")
      .filter((line) => !line.trim().startsWith("#"))
      .join("\n"),
  );
  if (network) {
    const line = scriptText.split("\n").findIndex((text) => text.includes(network[2]!)) + 1;
    return refuse(
      `${relative(dirname(task.buildContext), task.testScript) || task.testScript} line ${line} runs \`${network[2]}\`: verify needs network, and verification has none`,
    );
  }
  const dockerfile = readDockerfile(files.readText(task.dockerfile));
  const workdir = dockerfile.workdir ?? task.defaultWorkdir;
  const problem = workdirProblem(workdir);
  if (problem) return refuse(`the Dockerfile's WORKDIR ${workdir} cannot hold the workspace: ${problem}`);

  const lines = [`rm -rf ${VERIFIER_ROOT} && mkdir -p ${TESTS} ${LOGS} || exit 1`, `export TEST_DIR=${TESTS}`];
  if (task.testsDirectory && files.isDirectory(task.testsDirectory)) {
    for (const file of files.filesBelow(task.testsDirectory)) {
      const target = posix.join(TESTS, file.split("\\").join("/"));
      const content = files.read(join(task.testsDirectory, file));
      const text = content.toString("utf8");
      const relocated = Buffer.from(text, "utf8").equals(content) ? Buffer.from(relocateVerifierPaths(text)) : content;
      lines.push(`mkdir -p ${shellWord(posix.dirname(target))}`, hereDocument(shellWord(target), relocated));
    }
  }
  lines.push(
    hereDocument(`'${VERIFIER_ROOT}/run-tests.sh'`, Buffer.from(relocateVerifierPaths(scriptText))),
    `out=${VERIFIER_ROOT}/output.txt`,
    `bash ${VERIFIER_ROOT}/run-tests.sh > "$out" 2>&1; status=$?`,
    'cat "$out"',
    task.verdict,
  );
  const command = lines.join("\n");
  const bytes = Buffer.byteLength(command);
  if (bytes > MAX_VERIFY_COMMAND_BYTES)
    return refuse(`its tests make a verify command of ${bytes} bytes, over the ${MAX_VERIFY_COMMAND_BYTES} one command may have (Linux MAX_ARG_STRLEN)`);

  const directory = join(out, task.id);
  if (existsSync(directory)) return refuse(`${directory} exists (remove it to import again)`);
  const excluded = new Set([".git", ...task.excludeFromContext].map((name) => join(task.buildContext, name)));
  const name = (path: string) => files.name(path);
  try {
    // No link is followed: the context's links are copied as links, and only those that stay inside it.
    const environment = join(directory, "environment");
    mkdirSync(directory, { recursive: true });
    copyWithoutFollowing(task.buildContext, environment, name, excluded);
    const context = realpathSync.native(environment);
    const dockerfileInContext = relative(task.buildContext, task.dockerfile);
    const repository = join(directory, "repo");
    mkdirSync(repository);
    for (const copy of dockerfile.copies) {
      const destination = copy.destination.startsWith("/") ? posix.normalize(copy.destination) : posix.join(workdir, copy.destination);
      const inside = posix.relative(workdir, destination);
      if (inside.startsWith("..") || posix.isAbsolute(inside)) continue;
      for (const source of copy.sources) {
        const from = join(context, source);
        if (!isPathInside(from, context) || !existsSync(from)) continue;
        // Read at its real path, which must be inside the copied context (links there are resolved as they are now, in the output).
        const real = realpathSync.native(from);
        if (!isPathInside(real, context)) {
          throw new OutsideTaskDirectoryError(
            `COPY ${source} leads out of the build context (to ${real}): refused, a benchmark task is untrusted input and only its own files are read`,
          );
        }
        // Docker's rules: a directory's contents land in the destination; a file lands in it when it is a directory.
        const isDirectory = statSync(real).isDirectory();
        const intoDirectory = isDirectory || copy.destination.endsWith("/") || copy.sources.length > 1 || inside === "";
        const target = isDirectory ? join(repository, inside) : intoDirectory ? join(repository, inside, posix.basename(source)) : join(repository, inside);
        if (target !== repository) makeDirectoriesNoFollow(repository, dirname(target));
        copyWithoutFollowing(real, target, (path) => name(join(task.buildContext, relative(context, path))));
      }
    }
    await rawSafeGit({ baseDirectory: repository }, ["init", "-q"]);
    await rawSafeGit({ baseDirectory: repository }, ["add", "--all"]);
    await rawSafeGit({ baseDirectory: repository }, [
      "commit",
      "-q",
      "--allow-empty",
      "-m",
      `${task.id}: the task's files as its Dockerfile puts them in ${workdir}`,
    ]);
    const invalid = writeTaskFile(directory, {
      name: taskName(task.id),
      instruction: task.instruction,
      workspace: "./repo",
      sandbox: {
        build: { context: "./environment", ...(dockerfileInContext === "Dockerfile" ? {} : { dockerfile: `./environment/${dockerfileInContext}` }) },
        workdir,
      },
      // The benchmark's own harness runs its tests with Python's usual path; grading here must match it (docs/importers.md).
      verify: { command, timeout_sec: task.verifyTimeoutSec, python_safe_path: false },
    });
    if (invalid) throw new Error(invalid);
    writeFileSync(join(directory, "instance.json"), `${JSON.stringify({ ...task.source, id: task.id }, null, 2)}\n`);
  } catch (error) {
    rmSync(directory, { recursive: true, force: true });
    return refuse(errorMessage(error));
  }
  const notes: string[] = [];
  const bases = dockerfile.from.filter((base) => base && base.toLowerCase() !== "scratch");
  if (bases.length) notes.push(`sandbox.build FROM ${bases.join(", ")}: present locally, or a registry at build time`);
  if (dockerfile.runAfterWorkdir) notes.push(`RUN steps after WORKDIR ${workdir}: what they write there is hidden by the workspace mount`);
  return { id: task.id, converted: true, directory, notes };
}
