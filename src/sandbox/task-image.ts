import { createHash } from "node:crypto";
import { closeSync, constants, existsSync, fstatSync, lstatSync, openSync, readdirSync, readFileSync, readlinkSync } from "node:fs";
import { join, relative } from "node:path";
import dockerignoreModule from "@balena/dockerignore";
import type Docker from "dockerode";
import tarFs from "tar-fs";
import { Readable } from "node:stream";
import { SandboxError, errorMessage } from "../errors.js";

// The package is CommonJS (`module.exports = factory`) but its types declare an ES default export.
const dockerignore = dockerignoreModule as unknown as typeof dockerignoreModule.default;

/** The image a task runs in unless it sets `sandbox.image` or `sandbox.build` (sandbox-images/Dockerfile). */
export const DEFAULT_SANDBOX_IMAGE = "agent-runner/sandbox:bookworm";

/** Repository of the images the runner builds from `sandbox.build`; the tag is the inputs' hash. */
const BUILT_IMAGE_REPOSITORY = "agent-runner/task-build";

/** Label holding the full hash of a built image's inputs (see {@link buildInputsHash}). */
export const BUILD_INPUTS_LABEL = "dev.agent-runner.build-inputs";

/** A task's `sandbox.build` with absolute paths (load-task.ts resolves them against the task file). */
export interface ImageBuild {
  /** Absolute build context directory. */
  context: string;
  /** Absolute path of the Dockerfile (anywhere; it travels in the context under its own name). */
  dockerfile: string;
  /** Build arguments (`ARG`), by name. */
  args: Record<string, string>;
}

/**
 * What to do about an absent image, for its error message: `runner image
 * build` builds only {@link DEFAULT_SANDBOX_IMAGE}, so any other image is
 * the user's to pull or build (or to describe with `sandbox.build`).
 */
export function missingImageFix(image: string): string {
  return image === DEFAULT_SANDBOX_IMAGE
    ? "build it with `runner image build` (or `make setup`)"
    : `pull or build it yourself (docker pull ${image} / docker build -t ${image} ...), or give sandbox.build instead`;
}

/** What {@link ensureTaskImage} did. */
export interface TaskImage {
  /** The reference the sandbox runs: the task's image, or the built image's hash tag. */
  image: string;
  /** `present`: there already; `pulled`; `built`: built now; `reused`: a build with the same inputs existed. */
  source: "present" | "pulled" | "built" | "reused";
}

/** The Dockerfile's name in the build context sent to Docker (next to the context's own files, which keep theirs). */
const DOCKERFILE_ENTRY = ".agent-runner.Dockerfile";
/** Bumped when the hash's inputs change shape, so older tags are not reused by mistake. */
const HASH_FORMAT = "agent-runner build inputs v1";
/** How much of a failed build's output its error keeps, characters. */
const BUILD_OUTPUT_TAIL = 3000;

/**
 * Makes the task's image available before anything of a run exists (the
 * pre-flight): with `build`, the image built from it (or the one an earlier
 * build with identical inputs tagged); otherwise `image`, pulled only when it
 * is not present locally. Throws SandboxError (exit 3) naming the field and
 * what to do: Docker unreachable, an image that is absent and cannot be
 * pulled (`runner image build` is suggested only for the default image), or
 * a build that fails (with the tail of its output).
 */
export async function ensureTaskImage(docker: Docker, sandbox: { image: string; build?: ImageBuild | undefined }): Promise<TaskImage> {
  if (sandbox.build) return buildTaskImage(docker, sandbox.build);
  if (await imageExists(docker, sandbox.image)) return { image: sandbox.image, source: "present" };
  if (sandbox.image === DEFAULT_SANDBOX_IMAGE) {
    throw new SandboxError(`sandbox image ${sandbox.image} is not present; ${missingImageFix(sandbox.image)}`, { reason: "image_missing" });
  }
  try {
    const failure = progressError(await followProgress<ProgressLine>(docker, await docker.pull(sandbox.image)));
    if (failure) throw new Error(failure);
  } catch (error) {
    throw new SandboxError(
      `sandbox.image: ${sandbox.image} is not present locally and could not be pulled (${errorMessage(error).split("\n")[0]}); ${missingImageFix(sandbox.image)}`,
      { cause: error, reason: "image_missing" },
    );
  }
  return { image: sandbox.image, source: "pulled" };
}

/**
 * The image of `build`: `agent-runner/task-build:<hash>` for the hash of its
 * inputs ({@link buildInputsHash}); built (dockerode buildImage with a tar of
 * the context, `.dockerignore` applied) only when no image has that tag.
 */
async function buildTaskImage(docker: Docker, build: ImageBuild): Promise<TaskImage> {
  const inputs = buildInputs(build);
  const tag = `${BUILT_IMAGE_REPOSITORY}:${inputs.hash.slice(0, 32)}`;
  // Tasks of one process (a batch) with the same inputs wait for one build instead of each starting their own.
  const pending = buildsInFlight.get(tag);
  if (pending) return pending.then((built) => ({ image: built.image, source: "reused" as const }));
  const building = buildOnce(docker, build, inputs, tag).finally(() => buildsInFlight.delete(tag));
  buildsInFlight.set(tag, building);
  return building;
}

/** Builds of this process not yet finished, by tag. */
const buildsInFlight = new Map<string, Promise<TaskImage>>();

async function buildOnce(docker: Docker, build: ImageBuild, inputs: ReturnType<typeof buildInputs>, tag: string): Promise<TaskImage> {
  if (await imageExists(docker, tag)) return { image: tag, source: "reused" };
  const context = tarFs.pack(build.context, {
    entries: inputs.entries,
    // Every entry is listed (the hashed ones): a listed directory adds no children of its own.
    ignore: () => true,
    finalize: false,
    finish: (pack) => {
      pack.entry({ name: DOCKERFILE_ENTRY, mode: 0o644 }, inputs.dockerfile);
      pack.finalize();
    },
  });
  let output: ProgressLine[];
  try {
    // tar-fs packs into a streamx stream; Docker's client takes a Node stream.
    const stream = await docker.buildImage(Readable.from(context as unknown as AsyncIterable<Buffer>), {
      t: tag,
      dockerfile: DOCKERFILE_ENTRY,
      buildargs: build.args,
      labels: { [BUILD_INPUTS_LABEL]: inputs.hash },
      rm: true,
      forcerm: true,
    });
    output = await followProgress<ProgressLine>(docker, stream);
  } catch (error) {
    throw new SandboxError(`sandbox.build: cannot build ${build.dockerfile} (${errorMessage(error)})`, { cause: error, reason: "image_build_failed" });
  }
  const failure = progressError(output);
  if (failure) {
    const log = output
      .map((line) => line.stream ?? "")
      .join("")
      .slice(-BUILD_OUTPUT_TAIL);
    throw new SandboxError(`sandbox.build: building ${build.dockerfile} (context ${build.context}) failed: ${failure}\n${log}`, {
      reason: "image_build_failed",
    });
  }
  return { image: tag, source: "built" };
}

/**
 * The inputs of a build and their hash (sha256, hex): the Dockerfile's
 * bytes, the build arguments, and every file of the context that
 * `.dockerignore` leaves in (path, type, executable bit, content or link
 * target), in sorted order. The same inputs give the same hash on any host;
 * a changed byte anywhere gives another. `.dockerignore` is applied by
 * @balena/dockerignore (Docker's syntax), pruning ignored directories
 * whole: an exception (`!pattern`) under an ignored directory does not bring
 * files back, unlike Docker's own CLI.
 */
export function buildInputs(build: ImageBuild): { hash: string; entries: string[]; dockerfile: Buffer } {
  if (!existsSync(build.context) || !lstatSync(build.context).isDirectory()) {
    throw new SandboxError(`sandbox.build.context: ${build.context} is not a directory`, { reason: "image_build_failed" });
  }
  if (!existsSync(build.dockerfile)) throw new SandboxError(`sandbox.build.dockerfile: ${build.dockerfile} does not exist`, { reason: "image_build_failed" });
  const ignorePath = join(build.context, ".dockerignore");
  const ignored = dockerignore().add(readDockerignore(ignorePath));
  const hash = createHash("sha256").update(`${HASH_FORMAT}\n`);
  const dockerfile = readFileSync(build.dockerfile);
  hash.update(`dockerfile ${dockerfile.length}\n`).update(dockerfile);
  for (const name of Object.keys(build.args).sort()) hash.update(`arg ${JSON.stringify(name)}=${JSON.stringify(build.args[name])}\n`);
  const entries: string[] = [];
  const walk = (directory: string) => {
    for (const name of readdirSync(directory).sort()) {
      const path = join(directory, name);
      const relativePath = relative(build.context, path);
      if (ignored.ignores(relativePath)) continue;
      const stat = lstatSync(path);
      entries.push(relativePath);
      if (stat.isDirectory()) {
        hash.update(`dir ${JSON.stringify(relativePath)}\n`);
        walk(path);
      } else if (stat.isSymbolicLink()) {
        hash.update(`link ${JSON.stringify(relativePath)} ${JSON.stringify(readlinkSync(path))}\n`);
      } else if (stat.isFile()) {
        const content = readFileSync(path);
        hash.update(`file ${JSON.stringify(relativePath)} ${stat.mode & 0o111 ? "x" : "-"} ${content.length}\n`).update(content);
      } else {
        // Sockets, FIFOs and devices cannot travel in a build context.
        entries.pop();
      }
    }
  };
  walk(build.context);
  return { hash: hash.digest("hex"), entries, dockerfile };
}

/** The most a `.dockerignore` may hold. */
const DOCKERIGNORE_MAX_BYTES = 1024 * 1024;

/**
 * The lines of `<context>/.dockerignore`, none when there is none. Read only
 * when it is a regular file (not a link, FIFO or device) of at most 1 MiB,
 * opened without following a link; anything else is a build error naming it.
 */
function readDockerignore(path: string): string[] {
  const refuse = (why: string) =>
    new SandboxError(`sandbox.build.context: ${path} ${why}; a .dockerignore must be a regular file of at most 1 MiB`, { reason: "image_build_failed" });
  let stat;
  try {
    stat = lstatSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
    throw refuse(`cannot be read (${errorMessage(error)})`);
  }
  if (!stat.isFile()) throw refuse(stat.isSymbolicLink() ? "is a symbolic link" : "is not a regular file");
  if (stat.size > DOCKERIGNORE_MAX_BYTES) throw refuse(`is ${stat.size} bytes`);
  let descriptor: number;
  try {
    descriptor = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (error) {
    throw refuse(`cannot be read (${errorMessage(error)})`);
  }
  try {
    // Checked again on what was opened: it may have been swapped since the lstat.
    const opened = fstatSync(descriptor);
    if (!opened.isFile()) throw refuse("is not a regular file");
    if (opened.size > DOCKERIGNORE_MAX_BYTES) throw refuse(`is ${opened.size} bytes`);
    return readFileSync(descriptor, "utf8").split(/\r?\n/);
  } finally {
    closeSync(descriptor);
  }
}

async function imageExists(docker: Docker, image: string): Promise<boolean> {
  try {
    await docker.getImage(image).inspect();
    return true;
  } catch (error) {
    if ((error as { statusCode?: number }).statusCode === 404) return false;
    throw new SandboxError(`cannot reach the Docker daemon (${errorMessage(error)}); start it (\`make setup\` does) or set DOCKER_HOST`, {
      cause: error,
      reason: "docker_unreachable",
    });
  }
}

/** One JSON line of a pull or build stream (Docker Engine API). */
interface ProgressLine {
  stream?: string;
  error?: string;
  errorDetail?: { message?: string };
}

/** The first error a pull or build reported in its stream, or null. */
function progressError(output: ProgressLine[]): string | null {
  const failure = output.find((line) => line.error || line.errorDetail);
  return failure ? (failure.errorDetail?.message ?? failure.error ?? "failed") : null;
}

/** Reads a pull or build stream to its end; resolves with its JSON lines, rejects when the stream itself fails. */
function followProgress<T>(docker: Docker, stream: NodeJS.ReadableStream): Promise<T[]> {
  return new Promise((resolve, reject) => {
    docker.modem.followProgress(stream, (error: Error | null, output: T[]) => (error ? reject(error) : resolve(output)));
  });
}
