import { createHash } from "node:crypto";
import { constants, copyFileSync, existsSync, lchownSync, lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Duplex } from "node:stream";
import { fileURLToPath } from "node:url";
import Docker from "dockerode";
import { SandboxError, errorMessage } from "../../errors.js";
import { privateDirectory } from "../../process/private-directory.js";
import { WORKSPACE_ROOT, type Sandbox, type SandboxProvider, type SandboxSpec } from "../sandbox.js";
import { missingImageFix } from "../task-image.js";
import { DockerSandbox } from "./docker-sandbox.js";
import { createScratchDirectory, SCRATCH_MOUNTS } from "./disk-watch.js";
import { ATTACHED_STDIO, LABEL_RUN_ID, resourceLabels } from "./labels.js";
import { OPERATION_DEADLINE_MS, SandboxChannel } from "./sandbox-channel.js";
import { TaskNetwork } from "./task-network.js";
import { HELPER_CONTAINER_PATH } from "./helper-path.js";

/**
 * The in-container helper: a static binary built from src/sandbox/docker/helper
 * by `make setup` (scripts/build-helper.sh) into build/, the same path from
 * src/ (tests) and dist/ (the CLI). Bind-mounted read-only at
 * {@link HELPER_CONTAINER_PATH} and run as the container's command, so the
 * image needs nothing (docs/sandbox-helper.md).
 */
/** The container's own git directory in its scratch space (SandboxSpec `privateGit`). */
const PRIVATE_GIT = "git";

/**
 * Copies the tree at `from` (directories and regular files; anything else is
 * refused) to `to`, every entry owned by `owner`. The seed is the runner's
 * own (containerGitView), written on the run's disk, which the agent cannot
 * reach before its container exists.
 */
function copyOwnedTree(from: string, to: string, owner: { uid: number; gid: number }): void {
  const entry = lstatSync(from);
  if (entry.isDirectory()) {
    mkdirSync(to, { mode: 0o755 });
    for (const name of readdirSync(from)) copyOwnedTree(join(from, name), join(to, name), owner);
  } else if (entry.isFile()) {
    copyFileSync(from, to, constants.COPYFILE_EXCL);
  } else {
    throw new SandboxError(`the git seed ${from} holds something that is neither a file nor a directory`);
  }
  lchownSync(to, owner.uid, owner.gid);
}

const HELPER_FILE = fileURLToPath(new URL("../../../build/agent-runner-sandboxd", import.meta.url));

let helperCopy: string | null = null;

/**
 * The host file containers mount the helper from: a copy of
 * {@link HELPER_FILE} in this user's private temporary directory, named by
 * its content hash (so concurrent runners of different builds never clash).
 * A bind mount shows its source's path in /proc/self/mountinfo; the copy's
 * path names neither the checkout nor the home directory the runner lives in.
 * Made once per process. Throws SandboxError (exit 3) with the fix when the
 * helper has not been built.
 */
function helperMountSource(): string {
  if (helperCopy !== null && existsSync(helperCopy)) return helperCopy;
  let binary: Buffer;
  try {
    binary = readFileSync(HELPER_FILE);
  } catch (error) {
    throw new SandboxError(
      `the sandbox helper ${HELPER_FILE} is missing (${errorMessage(error)}); build it with \`make setup\` (or \`bash scripts/build-helper.sh\`, which needs Debian's golang-go)`,
      { cause: error, reason: "sandbox_helper_missing" },
    );
  }
  const copy = join(privateDirectory("agent-runner-helper", 0o755), `agent-runner-sandboxd-${createHash("sha256").update(binary).digest("hex").slice(0, 16)}`);
  if (!existsSync(copy)) {
    const temporary = `${copy}.${process.pid}`;
    writeFileSync(temporary, binary, { mode: 0o755 });
    renameSync(temporary, copy);
  }
  helperCopy = copy;
  return copy;
}

/**
 * Docker create options of a sandbox container: network none, every
 * capability dropped but the helper's SETUID/SETGID/SETPCAP (none left in its commands' bounding set), no-new-privileges, cgroup limits, commands as an unprivileged user,
 * only the workspace (and read-only git metadata) mounted, `--init` so orphans
 * are reaped, and stdin-once so the container ends itself when the runner's
 * attach connection drops. The image's file system is read-only: what the
 * task can write outside /workspace is the `scratch` directory's
 * {@link SCRATCH_MOUNTS} (from {@link createScratchDirectory}), on the run's
 * disk like the workspace, so `sandbox.limits.disk` bounds both (a writable
 * layer would sit on Docker's own disk, where overlay2 on ext4 has no quota).
 * Exported so benchmarks start exactly this container.
 */
export function sandboxContainerOptions(spec: SandboxSpec, scratch: string, network: TaskNetwork | null = null): Docker.ContainerCreateOptions {
  const proxyEnvironment = network
    ? Object.fromEntries(
        ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"]
          .map((name) => [name, network.proxyUrl])
          .concat([
            ["NO_PROXY", "localhost,127.0.0.1,::1"],
            ["no_proxy", "localhost,127.0.0.1,::1"],
          ]),
      )
    : {};
  const workdir = spec.workdir ?? WORKSPACE_ROOT;
  return {
    name: `agent-runner-${spec.runId}-${spec.agentId}`,
    Image: spec.image,
    // The image's ENTRYPOINT, CMD and USER are replaced (its WORKDIR too):
    // the helper is the container's command, under Docker's init.
    Cmd: [HELPER_CONTAINER_PATH, "-uid", String(spec.user.uid), "-gid", String(spec.user.gid)],
    Entrypoint: [],
    // The helper starts as root and keeps root only as its real and saved uid
    // (helper/main.go): the agent's processes, which run as spec.user in
    // all three ids, can neither signal nor ptrace it. Every command it starts,
    // and every Docker exec (docker-sandbox-process.ts), runs as spec.user.
    User: "0:0",
    WorkingDir: workdir,
    // RUNNER_WORKSPACE: the root the helper confines tool paths to; RUNNER_SANDBOX_HELPER: where the grep and glob tools find it without rg.
    Env: Object.entries({ ...spec.env, ...proxyEnvironment, RUNNER_WORKSPACE: workdir, RUNNER_SANDBOX_HELPER: HELPER_CONTAINER_PATH }).map(
      ([key, value]) => `${key}=${value}`,
    ),
    Labels: resourceLabels(spec),
    ...ATTACHED_STDIO,
    ...(network ? { NetworkingConfig: { EndpointsConfig: { [network.name]: { IPAMConfig: { IPv4Address: network.sandboxAddress } } } } } : {}),
    HostConfig: {
      NetworkMode: network ? network.name : "none",
      // Docker before 25 gives internal networks a default route via a gateway
      // nobody holds (inhibit_ipv4): one short ARP probe makes a direct
      // connection fail in ~50 ms instead of ~3 s.
      ...(network ? { Sysctls: { "net.ipv4.neigh.eth0.mcast_solicit": "1", "net.ipv4.neigh.eth0.retrans_time_ms": "50" } } : {}),

      ReadonlyRootfs: true,
      CapDrop: ["ALL"],
      // Only for the helper: SETUID and SETGID to hand its commands to
      // spec.user, SETPCAP to take all three out of the bounding set its
      // commands inherit (src/sandbox/docker/helper/bounding.go). A process that
      // runs as spec.user has none, not even bounded (setuid to a non-zero uid
      // clears the others, and no-new-privileges stops setuid binaries and file
      // capabilities).
      CapAdd: ["SETUID", "SETGID", "SETPCAP"],
      SecurityOpt: ["no-new-privileges"],
      Privileged: false,
      Init: true,
      AutoRemove: true,
      PidsLimit: spec.limits.pids,
      // Bind mounts have no quota: this caps a runaway `yes > file` per file.
      Ulimits: [{ Name: "fsize", Soft: spec.limits.fileSizeBytes, Hard: spec.limits.fileSizeBytes }],
      Memory: spec.limits.memoryBytes,
      MemorySwap: spec.limits.memoryBytes,
      NanoCpus: Math.round(spec.limits.cpus * 1e9),
      IpcMode: "private",
      Mounts: [
        { Type: "bind", Source: helperMountSource(), Target: HELPER_CONTAINER_PATH, ReadOnly: true },
        { Type: "bind", Source: spec.workspace.hostPath, Target: workdir, ReadOnly: spec.workspace.readOnly ?? false },
        ...SCRATCH_MOUNTS.map(({ name, target }) => ({ Type: "bind" as const, Source: join(scratch, name), Target: target, ReadOnly: false })),
        ...(spec.privateGit ? [{ Type: "bind" as const, Source: join(scratch, PRIVATE_GIT), Target: spec.privateGit.containerPath, ReadOnly: false }] : []),
        // No name resolution in the sandbox at all (the proxy resolves allowed
        // names): a resolv.conf naming a resolver that is not there fails at
        // once, instead of Docker's embedded DNS, which may forward queries out.
        ...(network ? [{ Type: "bind" as const, Source: network.resolvConf, Target: "/etc/resolv.conf", ReadOnly: true }] : []),
        ...spec.readOnlyMounts.map((mount) => ({
          Type: "bind" as const,
          Source: mount.hostPath,
          Target: mount.containerPath,
          ReadOnly: true,
        })),
      ],
    },
  };
}

/**
 * The image the egress proxy runs in: the runner's own (setup builds it), so a
 * task image needs no Node for its allow-list to work. Its node runs only our
 * proxy script, in a container of its own.
 */
export const PROXY_IMAGE = "agent-runner/sandbox:bookworm";

/** Milliseconds to wait for the in-container helper's hello after start. */
const READY_TIMEOUT_MS = 30_000;

/** Creates one container per sandbox ({@link sandboxContainerOptions}) and connects to its helper. */
export class DockerSandboxProvider implements SandboxProvider {
  readonly docker: Docker;
  /** Network the egress proxies reach the outside through. */
  private readonly egressNetwork: string;

  /** How long the in-container helper may take to answer a request that is not a command, ms (a miss loses the sandbox). */
  private readonly operationDeadlineMs: number;

  /** Image of the egress proxy containers ({@link PROXY_IMAGE} unless given). */
  private readonly proxyImage: string;

  constructor(options: { docker?: Docker; egressNetwork?: string; operationDeadlineMs?: number; proxyImage?: string } = {}) {
    this.docker = options.docker ?? new Docker();
    this.proxyImage = options.proxyImage ?? PROXY_IMAGE;
    this.egressNetwork = options.egressNetwork ?? "bridge";
    this.operationDeadlineMs = options.operationDeadlineMs ?? OPERATION_DEADLINE_MS;
  }

  async create(spec: SandboxSpec): Promise<Sandbox> {
    if (spec.user.uid === 0) {
      throw new SandboxError("refusing to run a sandbox as uid 0; pass an unprivileged uid");
    }
    helperMountSource();
    await this.requireImage(spec.image);
    const egress = spec.network !== null && spec.network.rules.length > 0;
    if (egress) await this.requireProxyImage();
    const network = egress ? await TaskNetwork.create(this.docker, spec) : null;
    // The proxy starts while the sandbox does (both addresses are fixed); it
    // must be ready before the sandbox is handed out.
    const proxyStarting = network ? network.startProxy(spec, this.egressNetwork, this.proxyImage) : Promise.resolve();
    proxyStarting.catch(() => undefined);
    let container: Docker.Container | null = null;
    let scratch: string | null = null;
    try {
      scratch = createScratchDirectory(spec.disk.scratchDirectory);
      if (spec.privateGit) copyOwnedTree(spec.privateGit.seed, join(scratch, PRIVATE_GIT), spec.user);
      container = await this.docker.createContainer(sandboxContainerOptions(spec, scratch, network)).catch((error: unknown) => {
        throw new SandboxError(`could not create the sandbox container: ${errorMessage(error)}`, { cause: error, reason: "sandbox_start_failed" });
      });
      const stream = (await container.attach({ stream: true, stdin: true, stdout: true, stderr: true, hijack: true })) as unknown as Duplex;
      const channel = new SandboxChannel(
        stream,
        (source, stdout, stderr) => this.docker.modem.demuxStream(source, stdout, stderr),
        container.id.slice(0, 12),
        this.operationDeadlineMs,
      );
      await container.start();
      await withTimeout(channel.ready, READY_TIMEOUT_MS, `the sandbox helper did not start within ${READY_TIMEOUT_MS} ms`).catch((error: unknown) => {
        throw new SandboxError(`${errorMessage(error)}\n(the sandbox helper did not start in ${spec.image}; see docs/sandbox-helper.md)`, {
          reason: "sandbox_start_failed",
        });
      });
      await proxyStarting;
      return new DockerSandbox(container.id.slice(0, 12), container, channel, spec.user, network, { spec, scratch });
    } catch (error) {
      // Let an in-flight proxy creation land first, or its container would outlive the cleanup.
      await proxyStarting.catch(() => undefined);
      if (container) await container.remove({ force: true }).catch(() => undefined);
      else await this.removeByName(`agent-runner-${spec.runId}-${spec.agentId}`);
      await container?.wait({ condition: "removed" }).catch(() => undefined);
      await network?.close().catch(() => undefined);
      if (scratch) rmSync(scratch, { recursive: true, force: true });
      throw error instanceof SandboxError
        ? error
        : new SandboxError(`could not start the sandbox container: ${errorMessage(error)}`, { cause: error, reason: "sandbox_start_failed" });
    }
  }

  /**
   * Pre-flight: the daemon answers, the image is present and, for a task with
   * an allow-list, the egress network exists. Throws
   * SandboxError (exit 3) with what to do, before a run creates anything.
   */
  async checkReady(image: string, options: { egress: boolean }): Promise<void> {
    try {
      await this.docker.ping();
    } catch (error) {
      throw new SandboxError(`cannot reach the Docker daemon (${errorMessage(error)}); start it (\`make setup\` does) or set DOCKER_HOST`, {
        cause: error,
        reason: "docker_unreachable",
      });
    }
    await this.requireImage(image);
    if (options.egress) {
      await this.requireProxyImage();
      await this.docker
        .getNetwork(this.egressNetwork)
        .inspect()
        .catch((error: unknown) => {
          throw new SandboxError(`the egress network "${this.egressNetwork}" is not usable (${errorMessage(error)}); create it or fix RUNNER_EGRESS_NETWORK`, {
            cause: error,
            reason: "network_failed",
          });
        });
    }
  }

  async ensureWorkspaceIdle(hostPath: string): Promise<void> {
    let containers: Docker.ContainerInfo[];
    try {
      containers = await this.docker.listContainers({ all: true, filters: { label: [LABEL_RUN_ID] } });
    } catch (error) {
      throw new SandboxError(`cannot tell whether a sandbox still uses ${hostPath} (${errorMessage(error)}); host git does not read it`, {
        cause: error,
        reason: "sandbox_not_idle",
      });
    }
    for (const info of containers) {
      // "paused" is frozen (no process runs); "created", "exited" and "dead" run nothing.
      if (!["running", "restarting", "removing"].includes(info.State)) continue;
      if (info.Mounts.some((mount) => mount.Source === hostPath && mount.RW)) {
        throw new SandboxError(
          `container ${info.Id.slice(0, 12)} (${info.State}) still mounts ${hostPath} writable; host git does not read a worktree while the agent's processes can run`,
          { reason: "sandbox_not_idle" },
        );
      }
    }
  }

  /** The egress proxy's image must be present whatever the task's image is; SandboxError (exit 3) with the fix if not. */
  private async requireProxyImage(): Promise<void> {
    const present = await this.docker
      .getImage(this.proxyImage)
      .inspect()
      .then(
        () => true,
        (error: unknown) => {
          if ((error as { statusCode?: number }).statusCode === 404) return false;
          throw new SandboxError(`cannot reach the Docker daemon (${errorMessage(error)}); start it (\`make setup\` does) or set DOCKER_HOST`, {
            cause: error,
            reason: "docker_unreachable",
          });
        },
      );
    if (!present) {
      throw new SandboxError(
        `the egress proxy of a task with sandbox.network.allow runs in the runner's image ${this.proxyImage}, which is not present; ${missingImageFix(this.proxyImage)}`,
        { reason: "image_missing" },
      );
    }
  }

  private async removeByName(name: string): Promise<void> {
    await this.docker
      .getContainer(name)
      .remove({ force: true })
      .catch(() => undefined);
  }

  private async requireImage(image: string): Promise<void> {
    try {
      await this.docker.getImage(image).inspect();
    } catch (error) {
      const status = (error as { statusCode?: number }).statusCode;
      if (status === 404) {
        throw new SandboxError(`sandbox image ${image} is not present; ${missingImageFix(image)}`, { reason: "image_missing" });
      }
      throw new SandboxError(`cannot reach the Docker daemon (${errorMessage(error)}); start it (\`make setup\` does) or set DOCKER_HOST`, {
        cause: error,
        reason: "docker_unreachable",
      });
    }
  }
}

async function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new SandboxError(message)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
