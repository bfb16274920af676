import { randomUUID } from "node:crypto";
import { constants } from "node:os";
import { PassThrough, Writable, type Duplex } from "node:stream";
import type Docker from "dockerode";
import { SandboxError, errorMessage } from "../../errors.js";
import { SandboxGoneError, type SandboxProcess, type SandboxProcessExit, type SpawnRequest } from "../sandbox.js";
import { HELPER_CONTAINER_PATH } from "./helper-path.js";

/** How long kill() waits for the process to go after the in-container kill before it drops the connection, ms. */
const KILL_WAIT_MS = 5_000;
/** How long the exit status may lag behind the end of the streams, ms. */
const EXIT_STATUS_WAIT_MS = 2_000;

/** Environment variable the sandbox daemon finds a process tree by (its kill and stop_all). */
const MARKER_VARIABLE = "RUNNER_EXEC_ID";

interface StartOptions {
  /** Kills every process carrying `marker`, inside the container (the sandbox daemon's `kill_spawned`). */
  killInside: (marker: string) => Promise<void>;
  label: string;
  /** Who the process runs as (never the container's root). */
  user: { uid: number; gid: number };
  /** Where it starts: the workspace's mount point. */
  workdir: string;
}

/**
 * Starts `request` in `container` with a Docker exec whose stdin/stdout/stderr
 * are attached (one hijacked connection, demultiplexed). The exec runs as the
 * sandbox user in the workspace's mount point, with the
 * container's environment plus `request.env`; Docker exec processes share the
 * container's cgroup (memory, pids, cpu), capabilities, no-new-privileges,
 * rlimits and network namespace, and die when the container is removed.
 */
export async function startDockerSandboxProcess(container: Docker.Container, request: SpawnRequest, options: StartOptions): Promise<DockerSandboxProcess> {
  const marker = `spawn-${randomUUID()}`;
  const environment = Object.entries(request.env ?? {})
    .filter(([name]) => name !== MARKER_VARIABLE)
    .map(([name, value]) => `${name}=${value}`);
  let exec: Docker.Exec;
  let stream: Duplex;
  try {
    exec = await container.exec({
      // Through the helper (the image may have no `env` or shell): as root it drops SETUID, SETGID and
      // SETPCAP from the bounding set, becomes the sandbox user in all three ids, enters the workdir as
      // that user and executes the command in its place (docs/sandbox-helper.md). A Docker exec run as
      // the sandbox user directly would keep the container's capabilities in its bounding set.
      Cmd: [
        HELPER_CONTAINER_PATH,
        "-uid",
        String(options.user.uid),
        "-gid",
        String(options.user.gid),
        "-spawn",
        "-dir",
        options.workdir,
        "--",
        request.command,
        ...(request.args ?? []),
      ],
      User: "0:0",
      // Its own marker: the daemon's kill of another command's tree spares it (that kill
      // also takes every process with no marker at all, as one that wiped its environment).
      Env: [...environment, `${MARKER_VARIABLE}=${marker}`],
      AttachStdin: true,
      AttachStdout: true,
      AttachStderr: true,
      Tty: false,
    });
    stream = (await exec.start({ hijack: true, stdin: true })) as unknown as Duplex;
  } catch (error) {
    const status = (error as { statusCode?: number }).statusCode;
    const gone = status === 404 || status === 409 || /is not running|is paused/.test(errorMessage(error));
    const message = `sandbox ${options.label}: could not start ${request.command}: ${errorMessage(error)}`;
    throw gone ? new SandboxGoneError(message, { cause: error }) : new SandboxError(message, { cause: error });
  }
  return new DockerSandboxProcess(stream, exec, marker, options.killInside, (source, stdout, stderr) => container.modem.demuxStream(source, stdout, stderr));
}

/** A process started by {@link startDockerSandboxProcess}. */
export class DockerSandboxProcess implements SandboxProcess {
  readonly stdin: Writable;
  readonly stdout = new PassThrough();
  readonly stderr = new PassThrough();
  readonly exited: Promise<SandboxProcessExit>;
  private ended = false;
  private abandoned = false;
  private sandboxClosing = false;

  constructor(
    private readonly stream: Duplex,
    private readonly exec: Docker.Exec,
    /** The value of RUNNER_EXEC_ID in the process's environment. */
    readonly marker: string,
    private readonly killInside: (marker: string) => Promise<void>,
    demux: (source: Duplex, stdout: PassThrough, stderr: PassThrough) => void,
  ) {
    demux(stream, this.stdout, this.stderr);
    this.stdin = new Writable({
      write: (chunk: Buffer, _encoding, callback) => {
        if (this.ended) return callback();
        // Completing only once written keeps the writer's backpressure.
        stream.write(chunk, () => callback());
      },
      // Half-close: Docker closes the process's stdin; its output keeps coming.
      final: (callback) => {
        if (!this.ended) stream.end();
        callback();
      },
    });
    this.exited = new Promise((resolve) => {
      const finish = () => {
        if (this.ended) return;
        this.ended = true;
        this.stdout.end();
        this.stderr.end();
        void this.exitStatus().then(resolve);
      };
      stream.on("end", finish);
      stream.on("close", finish);
      stream.on("error", finish);
    });
  }

  async kill(): Promise<void> {
    if (!this.ended) {
      await this.killInside(this.marker).catch(() => undefined);
      let timer: NodeJS.Timeout | undefined;
      const gone = await Promise.race([
        this.exited.then(() => true),
        new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(false), KILL_WAIT_MS);
        }),
      ]);
      clearTimeout(timer);
      if (!gone) this.abandon();
    }
    await this.exited;
  }

  /** The sandbox is being closed: the process ends with it, whatever its exit code then says. */
  markSandboxClosing(): void {
    this.sandboxClosing = true;
  }

  /** Drops the connection (the sandbox is being removed, which ends the process). */
  abandon(): void {
    this.abandoned = true;
    this.stream.destroy();
  }

  private async exitStatus(): Promise<SandboxProcessExit> {
    // Docker reports 126 or 137 for a process whose container went away.
    if (this.sandboxClosing) return { exitCode: null, signal: null, detail: "the sandbox was closed" };
    const deadline = Date.now() + EXIT_STATUS_WAIT_MS;
    for (;;) {
      let info: Docker.ExecInspectInfo;
      try {
        info = await this.exec.inspect();
      } catch {
        return { exitCode: null, signal: null, detail: "the sandbox is gone" };
      }
      if (!info.Running && info.ExitCode !== null) return { exitCode: info.ExitCode, signal: signalOf(info.ExitCode) };
      if (this.abandoned || Date.now() > deadline) {
        return { exitCode: null, signal: null, detail: this.abandoned ? "the connection to it was dropped" : "its output ended but it did not exit" };
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

/** The signal behind a shell-style exit code 128+n, e.g. 137 → SIGKILL. */
function signalOf(exitCode: number): string | null {
  if (exitCode <= 128 || exitCode > 128 + 64) return null;
  const entry = Object.entries(constants.signals).find(([, number]) => number === exitCode - 128);
  return entry ? entry[0] : null;
}
