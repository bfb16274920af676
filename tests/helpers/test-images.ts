/**
 * Images the tests build offline, from images and files this machine already
 * has (no registry, no network: every build runs with network "none"). Each is
 * tagged `agent-runner/test-<name>:<hash of its inputs>` and built only when
 * that tag is missing, so repeated runs reuse it.
 */
import { createHash } from "node:crypto";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Docker from "dockerode";

/** The sandbox image setup builds; the images below derive from it or from the debootstrap base. */
const DEFAULT_IMAGE = "agent-runner/sandbox:bookworm";
/** glibc, bash and coreutils; no Node, python, git or rg (setup's debootstrap base). */
export const BASE_IMAGE = "agent-runner/base:bookworm";
/** Debian's statically linked busybox (package busybox-static), copied into `FROM scratch` images. */
const BUSYBOX = "/bin/busybox";

export interface TestImage {
  name: string;
  dockerfile: string;
  /** Files of the build context: context path -> host path. */
  files?: Record<string, string>;
}

/**
 * The default image with Node and ripgrep removed: everything else the tool
 * suite and the security probes use, but no node/npm/npx and no rg, so the
 * suite's grep and glob are answered by the sandbox helper.
 */
export const NO_NODE_IMAGE: TestImage = {
  name: "sandbox-no-node-no-rg",
  dockerfile: [
    `FROM ${DEFAULT_IMAGE}`,
    "RUN rm -f /usr/bin/node /usr/bin/nodejs /usr/bin/npm /usr/bin/npx /usr/bin/rg && rm -rf /usr/share/nodejs /usr/lib/nodejs && ! command -v node && ! command -v rg",
  ].join("\n"),
};

/** No libc, no bash: a static busybox as /bin/sh and its applets. */
export const BUSYBOX_IMAGE: TestImage = {
  name: "busybox-static",
  dockerfile: ["FROM scratch", "COPY busybox /bin/busybox", 'RUN ["/bin/busybox", "--install", "-s", "/bin"]', 'CMD ["/bin/sh"]'].join("\n"),
  files: { busybox: BUSYBOX },
};

/** Debian 11's git .deb, fetched by scripts/fetch-old-git.sh (run by `make test`'s scripts/ensure-test-deps.sh). */
const OLD_GIT_DEB = join(process.env.AGENT_RUNNER_TEST_CACHE ?? "/var/cache/agent-runner-tests", "git-bullseye.deb");

/**
 * The default image with Debian 11's git 2.30 as its git: older than 2.31, so
 * it ignores the GIT_CONFIG_COUNT trust of the container's environment, but
 * with the repository-ownership check ("dubious ownership") back-ported.
 */
export const OLD_GIT_IMAGE: TestImage = {
  name: "sandbox-git-2.30",
  dockerfile: [
    `FROM ${DEFAULT_IMAGE}`,
    "COPY git.deb /tmp/git.deb",
    // Only the git binary (its builtins: status, stash, restore, commit, ...); the image's own libraries serve it.
    "RUN dpkg-deb -x /tmp/git.deb /tmp/git && cp /tmp/git/usr/bin/git /usr/bin/git && rm -rf /tmp/git /tmp/git.deb && git --version | grep -q '^git version 2\\.30\\.'",
  ].join("\n"),
  files: { "git.deb": OLD_GIT_DEB },
};

/** Nothing at all but one data file: no shell, no libc. */
export const EMPTY_IMAGE: TestImage = {
  name: "scratch-empty",
  dockerfile: ["FROM scratch", "COPY marker.txt /etc/marker.txt"].join("\n"),
};

/** A user's image with its own USER, ENTRYPOINT, CMD and WORKDIR (all of which the runner overrides). */
export const USER_ENTRYPOINT_IMAGE: TestImage = {
  name: "user-entrypoint-workdir",
  dockerfile: [
    `FROM ${BASE_IMAGE}`,
    "RUN mkdir -p /app && chown 1234:1234 /app",
    "USER 1234",
    "WORKDIR /app",
    'ENTRYPOINT ["/bin/false"]',
    'CMD ["never-run"]',
  ].join("\n"),
};

/**
 * The image's tag, built first when it does not exist. Throws (the test
 * fails, never skips) when the base image or a file is missing or the build fails.
 */
export async function ensureTestImage(image: TestImage, docker = new Docker()): Promise<string> {
  const hash = createHash("sha256").update(image.dockerfile);
  // A rebuilt base makes a new tag.
  const from = /^FROM (\S+)/m.exec(image.dockerfile)?.[1];
  if (from && from !== "scratch") {
    const id = await docker
      .getImage(from)
      .inspect()
      .then(
        (info) => info.Id,
        () => null,
      );
    if (id === null) throw new Error(`the test image ${image.name} is built FROM ${from}, which is not present (run \`make setup\`)`);
    hash.update(id);
  }
  for (const [name, source] of Object.entries(image.files ?? {})) hash.update(`\0${name}\0`).update(readOrThrow(source));
  const tag = `agent-runner/test-${image.name}:${hash.digest("hex").slice(0, 16)}`;
  if (
    await docker
      .getImage(tag)
      .inspect()
      .then(
        () => true,
        () => false,
      )
  )
    return tag;
  const context = mkdtempSync(join(tmpdir(), "agent-runner-test-image-"));
  try {
    writeFileSync(join(context, "Dockerfile"), `${image.dockerfile}\n`);
    writeFileSync(join(context, "marker.txt"), "marker\n");
    for (const [name, source] of Object.entries(image.files ?? {})) copyFileSync(source, join(context, name));
    const stream: NodeJS.ReadableStream = await docker.buildImage(
      { context, src: ["Dockerfile", "marker.txt", ...Object.keys(image.files ?? {})] },
      { t: tag, networkmode: "none", rm: true, forcerm: true },
    );
    const output = await new Promise<Array<{ error?: string; stream?: string }>>((resolve, reject) => {
      docker.modem.followProgress(stream, (error: Error | null, result: Array<{ error?: string; stream?: string }>) =>
        error ? reject(error) : resolve(result),
      );
    });
    const failure = output.find((line) => line.error);
    if (failure)
      throw new Error(
        `building test image ${tag} failed: ${failure.error}\n${output
          .map((line) => line.stream ?? "")
          .join("")
          .slice(-2000)}`,
      );
    return tag;
  } finally {
    rmSync(context, { recursive: true, force: true });
  }
}

function readOrThrow(path: string): Buffer {
  try {
    return readFileSync(path);
  } catch (error) {
    throw new Error(
      `the test image needs ${path} on this host (${(error as Error).message}); for ${BUSYBOX}: apt-get install busybox-static; for ${OLD_GIT_DEB}: bash scripts/fetch-old-git.sh`,
    );
  }
}
