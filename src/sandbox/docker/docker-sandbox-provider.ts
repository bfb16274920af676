import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import Docker from "dockerode";
import { pack } from "tar-fs";
import { SandboxError, errorMessage } from "../../errors.js";
import { WORKSPACE_ROOT, type Sandbox, type SandboxProvider, type SandboxSpec } from "../sandbox.js";
import { DockerSandbox } from "./docker-sandbox.js";
import { LABEL_AGENT_ID, LABEL_OWNER, LABEL_RUN_ID } from "./labels.js";
import { currentOwner } from "../../process/process-owner.js";
import { SandboxChannel } from "./sandbox-channel.js";

const DAEMON_DIRECTORY = fileURLToPath(new URL("./daemon/", import.meta.url));
const DAEMON_FILE = "sandbox-daemon.cjs";
const DAEMON_CONTAINER_DIRECTORY = "/opt/agent-runner";

/** Milliseconds to wait for the in-container daemon's hello after start. */
const READY_TIMEOUT_MS = 30_000;

/**
 * Creates one container per sandbox: network none, every capability dropped,
 * no-new-privileges, cgroup limits, an unprivileged user, only the workspace
 * (and read-only git metadata) mounted, `--init` so orphans are reaped, and
 * stdin-once so the container ends itself when the runner disappears.
 */
export class DockerSandboxProvider implements SandboxProvider {
  readonly docker: Docker;
  private daemonArchive: Buffer | null = null;

  constructor(docker: Docker = new Docker()) {
    this.docker = docker;
  }

  async create(spec: SandboxSpec): Promise<Sandbox> {
    if (spec.user.uid === 0) {
      throw new SandboxError("refusing to run a sandbox as uid 0; pass an unprivileged uid");
    }
    await this.requireImage(spec.image);
    const archive = await this.loadDaemonArchive();
    let container: Docker.Container;
    try {
      container = await this.docker.createContainer({
        name: `agent-runner-${spec.runId}-${spec.agentId}`,
        Image: spec.image,
        Cmd: ["node", `${DAEMON_CONTAINER_DIRECTORY}/${DAEMON_FILE}`],
        Entrypoint: [],
        User: `${spec.user.uid}:${spec.user.gid}`,
        WorkingDir: WORKSPACE_ROOT,
        Env: Object.entries(spec.env).map(([key, value]) => `${key}=${value}`),
        Labels: {
          [LABEL_RUN_ID]: spec.runId,
          [LABEL_AGENT_ID]: spec.agentId,
          [LABEL_OWNER]: currentOwner(),
        },
        AttachStdin: true,
        AttachStdout: true,
        AttachStderr: true,
        OpenStdin: true,
        StdinOnce: true,
        Tty: false,
        NetworkDisabled: false,
        HostConfig: {
          NetworkMode: "none",
          CapDrop: ["ALL"],
          SecurityOpt: ["no-new-privileges"],
          Privileged: false,
          Init: true,
          AutoRemove: true,
          PidsLimit: spec.limits.pids,
          Memory: spec.limits.memoryBytes,
          MemorySwap: spec.limits.memoryBytes,
          NanoCpus: Math.round(spec.limits.cpus * 1e9),
          IpcMode: "private",
          Mounts: [
            { Type: "bind", Source: spec.workspace.hostPath, Target: WORKSPACE_ROOT, ReadOnly: spec.workspace.readOnly ?? false },
            ...spec.readOnlyMounts.map((mount) => ({
              Type: "bind" as const,
              Source: mount.hostPath,
              Target: mount.containerPath,
              ReadOnly: true,
            })),
          ],
        },
      });
    } catch (error) {
      throw new SandboxError(`could not create the sandbox container: ${errorMessage(error)}`, { cause: error });
    }
    try {
      await container.putArchive(archive, { path: "/" });
      const stream = (await container.attach({
        stream: true,
        stdin: true,
        stdout: true,
        stderr: true,
        hijack: true,
      })) as unknown as import("node:stream").Duplex;
      const channel = new SandboxChannel(
        stream,
        (source, stdout, stderr) => this.docker.modem.demuxStream(source, stdout, stderr),
        container.id.slice(0, 12),
      );
      await container.start();
      await withTimeout(channel.ready, READY_TIMEOUT_MS, `sandbox daemon did not start within ${READY_TIMEOUT_MS} ms`);
      return new DockerSandbox(container.id.slice(0, 12), container, channel);
    } catch (error) {
      await container.remove({ force: true }).catch(() => undefined);
      if (error instanceof SandboxError) {
        throw new SandboxError(
          `${error.message}\n(the image must provide node >= 18 on PATH and bash; ${spec.image} is built by \`runner image build\`)`,
        );
      }
      throw new SandboxError(`could not start the sandbox container: ${errorMessage(error)}`, { cause: error });
    }
  }

  private async requireImage(image: string): Promise<void> {
    try {
      await this.docker.getImage(image).inspect();
    } catch (error) {
      const status = (error as { statusCode?: number }).statusCode;
      if (status === 404) {
        throw new SandboxError(`sandbox image ${image} is not present; build it with \`runner image build\` (or \`make setup\`)`);
      }
      throw new SandboxError(
        `cannot reach the Docker daemon (${errorMessage(error)}); start it (\`make setup\` does) or set DOCKER_HOST`,
        { cause: error },
      );
    }
  }

  private async loadDaemonArchive(): Promise<Buffer> {
    if (this.daemonArchive) return this.daemonArchive;
    const chunks: Buffer[] = [];
    const stream = pack(DAEMON_DIRECTORY, {
      entries: [DAEMON_FILE],
      map: (header) => ({
        ...header,
        name: `${DAEMON_CONTAINER_DIRECTORY.slice(1)}/${header.name}`,
        uid: 0,
        gid: 0,
        mode: 0o644,
      }),
    });
    for await (const chunk of stream) chunks.push(chunk as Buffer);
    this.daemonArchive = Buffer.concat(chunks);
    // Fail early and clearly if the asset is missing from the build.
    readFileSync(`${DAEMON_DIRECTORY}${DAEMON_FILE}`);
    return this.daemonArchive;
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
