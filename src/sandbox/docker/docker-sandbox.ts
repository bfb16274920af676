import { rmSync } from "node:fs";
import type Docker from "dockerode";
import { SandboxError, errorMessage } from "../../errors.js";
import {
  BYTES_PER_INODE,
  SandboxGoneError,
  type DirectoryEntry,
  type ExecRequest,
  type ExecResult,
  type FileContent,
  type PathInfo,
  type Sandbox,
  type SandboxProcess,
  type SandboxSpec,
  type SpawnRequest,
  WORKSPACE_ROOT,
} from "../sandbox.js";
import { DiskWatch, SCRATCH_MOUNTS, type DiskUsage } from "./disk-watch.js";
import { filesystemUsage } from "../../process/filesystem-usage.js";
import { startDockerSandboxProcess, type DockerSandboxProcess } from "./docker-sandbox-process.js";
import type { SandboxChannel } from "./sandbox-channel.js";
import type { TaskNetwork } from "./task-network.js";

/** Tries to reach a paused/unpaused state, and the wait between tries (times the try number), ms. */
const FREEZE_ATTEMPTS = 5;
const FREEZE_RETRY_MS = 20;
/** How long close() waits for Docker to finish removing the container, ms. */
const REMOVAL_TIMEOUT_MS = 30_000;
/** Grace on top of a command's own timeout for the daemon to kill it and answer, ms; past it the sandbox is lost. */
const HOST_TIMEOUT_GRACE_MS = 15_000;

/**
 * A running task container, driven through the persistent daemon channel.
 * Created by {@link DockerSandboxProvider}; `close()` removes the container.
 */
export class DockerSandbox implements Sandbox {
  private closed = false;
  /** Processes started by spawn() that have not ended yet. */
  private readonly processes = new Set<DockerSandboxProcess>();
  private readonly diskWatch: DiskWatch;

  constructor(
    readonly id: string,
    private readonly container: Docker.Container,
    private readonly channel: SandboxChannel,
    /** Who the sandbox's processes run as (Docker execs too). */
    private readonly user: { uid: number; gid: number },
    /** The task network and its egress proxy, when the task has an allow-list. */
    private readonly network: TaskNetwork | null,
    /** What the sandbox was made of, and its directory of writable places outside the workspace (removed on close). */
    private readonly made: { spec: SandboxSpec; scratch: string },
  ) {
    this.diskWatch = new DiskWatch(made.spec.disk, {
      measure: () => this.measureDisk(),
      stopProcesses: () => this.stopAllProcesses(),
      onReached: (reached) => made.spec.onDiskLimit?.({ sandboxId: id, ...reached }),
    });
    this.diskWatch.start();
  }

  get workdir(): string {
    return this.made.spec.workdir ?? WORKSPACE_ROOT;
  }

  /**
   * What counts against `SandboxSpec.disk.limitBytes` now. `filesystem`: the
   * run's whole filesystem (statfs on the host, no file read). `monitor`: the
   * allocated blocks and the inodes of the files under the writable workspace
   * and this container's scratch directories and own git directory (full past the limit's bytes or
   * past `limitBytes / BYTES_PER_INODE` inodes), each inode once, measured by the daemon
   * inside the container; a file the sandbox user cannot read into, or a
   * deleted one still held open, is not counted.
   */
  async measureDisk(): Promise<DiskUsage> {
    const { disk, workspace } = this.made.spec;
    if (disk.enforcement === "filesystem") return filesystemUsage(this.made.scratch);
    const { privateGit } = this.made.spec;
    const roots = [
      ...(workspace.readOnly ? [] : [this.workdir]),
      ...SCRATCH_MOUNTS.map((mount) => mount.target),
      // The container's own git directory is on the run's disk too: what the agent commits or stashes counts.
      ...(privateGit ? [privateGit.containerPath] : []),
    ];
    const { bytes, inodes } = await this.channel.request<{ bytes: number; inodes: number }>({ op: "disk_usage", roots });
    const inodeLimit = Math.floor(disk.limitBytes / BYTES_PER_INODE);
    return { usedBytes: bytes, inodes: { used: inodes, limit: inodeLimit }, full: bytes > disk.limitBytes || inodes > inodeLimit };
  }

  async exec(request: ExecRequest): Promise<ExecResult> {
    if (request.signal?.aborted) {
      return abortedResult();
    }
    const execId = this.channel.peekNextId();
    const onAbort = () => {
      this.channel.request({ op: "kill", execId }).catch(() => undefined);
    };
    request.signal?.addEventListener("abort", onAbort, { once: true });
    try {
      // A command's deadline is its own timeout plus a grace for the daemon to kill it and answer;
      // without a timeout the channel's heartbeat watches the daemon.
      const answer = await this.channel.request<ExecResult>(
        {
          op: "exec",
          execId,
          command: request.command,
          cwd: request.cwd,
          env: request.env,
          timeoutMs: request.timeoutMs,
          maxOutputBytes: request.maxOutputBytes,
        },
        { deadlineMs: request.timeoutMs ? request.timeoutMs + HOST_TIMEOUT_GRACE_MS : null },
      );
      return this.withProxyNotice(answer);
    } finally {
      await this.diskWatch.afterCommand();
      request.signal?.removeEventListener("abort", onAbort);
    }
  }

  /** Tells the model, in every command's stderr, that network requests cannot work any more. */
  private withProxyNotice(result: ExecResult): ExecResult {
    if (!this.network?.exitedDetail) return result;
    return {
      ...result,
      stderr: `${result.stderr}\n[agent-runner] the egress proxy exited (${this.network.exitedDetail.trim().slice(0, 200)}); network requests will fail for the rest of this run.`,
    };
  }

  async readFile(path: string, options: { maxBytes?: number } = {}): Promise<FileContent | null> {
    const result = await this.channel.request<{ path: string; size: number; content: string } | null>({
      op: "read",
      path,
      maxBytes: options.maxBytes,
    });
    if (result === null) return null;
    return { path: result.path, size: result.size, content: Buffer.from(result.content, "base64") };
  }

  writeFile(path: string, content: Buffer): Promise<{ path: string; bytesWritten: number }> {
    return this.channel.request({ op: "write", path, content: content.toString("base64") });
  }

  stat(path: string): Promise<PathInfo | null> {
    return this.channel.request({ op: "stat", path });
  }

  listDir(path: string): Promise<DirectoryEntry[] | null> {
    return this.channel.request({ op: "list", path });
  }

  async stopAllProcesses(): Promise<void> {
    const { stopped } = await this.channel.request<{ stopped: boolean }>({ op: "stop_all" });
    if (!stopped) throw new SandboxError(`sandbox ${this.id}: processes kept re-spawning; could not stop them all`);
  }

  async freeze<T>(operation: () => Promise<T>): Promise<T> {
    this.channel.suspendDeadlines();
    try {
      await this.setPaused(true);
      try {
        return await operation();
      } finally {
        await this.setPaused(false);
      }
    } finally {
      this.channel.resumeDeadlines();
    }
  }

  /**
   * Pauses or unpauses the container and waits until Docker reports that
   * state. Docker 20.10 can answer a pause right after an unpause with 409/500
   * ("already paused", "cannot pause a paused container") while the previous
   * unpause settles: the state is then read back and the call retried, never
   * left half-done. Throws SandboxError when the state cannot be reached.
   */
  private async setPaused(paused: boolean): Promise<void> {
    let lastError: unknown = null;
    for (let attempt = 0; attempt < FREEZE_ATTEMPTS; attempt += 1) {
      try {
        if (paused) await this.container.pause();
        else await this.container.unpause();
      } catch (error) {
        lastError = error;
      }
      const state = await this.container.inspect().then(
        (info) => info.State,
        () => null,
      );
      if (state && state.Paused === paused) return;
      if (state && !state.Running) break;
      await new Promise((resolve) => setTimeout(resolve, FREEZE_RETRY_MS * (attempt + 1)));
    }
    throw new SandboxError(`sandbox ${this.id}: could not ${paused ? "pause" : "unpause"} the container${lastError ? `: ${errorMessage(lastError)}` : ""}`, {
      cause: lastError,
    });
  }

  /** A Docker exec in the container (see {@link startDockerSandboxProcess}); it ends with the container. */
  async spawn(request: SpawnRequest): Promise<SandboxProcess> {
    if (this.closed) throw new SandboxGoneError(`sandbox ${this.id} is closed; cannot start ${request.command}`);
    await this.requireCommand(request);
    const started = await startDockerSandboxProcess(this.container, request, {
      label: this.id,
      user: this.user,
      workdir: this.made.spec.workdir ?? WORKSPACE_ROOT,
      killInside: async (marker) => {
        await this.channel.request({ op: "kill_spawned", marker });
      },
    });
    this.processes.add(started);
    void started.exited.then(() => this.processes.delete(started));
    return started;
  }

  /**
   * Throws a plain Error (the caller's configuration, not the sandbox, is at
   * fault) when the image has no `request.command` on PATH: `npx` and `node`
   * come from the image, which the runner's helper does not provide.
   */
  private async requireCommand(request: SpawnRequest): Promise<void> {
    const { path } = await this.channel.request<{ path: string | null }>({ op: "find_command", command: request.command, env: request.env ?? {} });
    if (path !== null) return;
    const image = this.made.spec.image;
    const node = /^(npx|node|npm|nodejs)$/.test(request.command)
      ? `; a server started with ${request.command} needs Node.js (node and npx on PATH) in the task image, which ${image} does not have: use an image with Node (e.g. one built FROM agent-runner/sandbox:bookworm), install Node in yours, or run the server on the host with \`trusted: true\``
      : `; install it in the task image, or use an image that has it`;
    throw new Error(`"${request.command}" is not in the sandbox image ${image} (looked on its PATH)${node}`);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.diskWatch.close();
    for (const started of this.processes) started.markSandboxClosing();
    this.channel.close();
    // The proxy goes at the same time as the sandbox; the network once both are gone.
    await Promise.all([this.removeContainer(), this.network?.removeProxy()]);
    // Their processes went with the container; do not wait for Docker to drop the connections.
    for (const started of this.processes) started.abandon();
    // Only now that no process of the container can run: it wrote there, and rm does not follow links.
    rmSync(this.made.scratch, { recursive: true, force: true });
    await this.network?.removeNetwork().catch((error: unknown) => {
      throw new SandboxError(`could not remove the task network: ${(error as Error).message}`, { cause: error });
    });
  }

  private async removeContainer(): Promise<void> {
    try {
      await this.container.remove({ force: true, v: true });
    } catch (error) {
      const status = (error as { statusCode?: number }).statusCode;
      // 404: already gone; 409: AutoRemove is removing it; 500 "is not running":
      // it died while we killed it (the agent killed its daemon) and AutoRemove takes it.
      if (status !== 404 && status !== 409 && !/is not running/.test(errorMessage(error))) {
        throw new SandboxError(`could not remove container ${this.id}: ${errorMessage(error)}`, { cause: error });
      }
    }
    // The name and the network endpoint are free only once it is gone.
    const gone = this.container.wait({ condition: "removed" }).catch(() => undefined);
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<"timeout">((resolve) => {
      timer = setTimeout(() => resolve("timeout"), REMOVAL_TIMEOUT_MS);
    });
    const outcome = await Promise.race([gone, timedOut]);
    clearTimeout(timer);
    if (outcome === "timeout") throw new SandboxError(`container ${this.id} was not removed within ${REMOVAL_TIMEOUT_MS} ms`);
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

function abortedResult(): ExecResult {
  return {
    exitCode: null,
    signal: "SIGKILL",
    stdout: "",
    stderr: "",
    timedOut: false,
    truncated: false,
    stdoutBytes: 0,
    stderrBytes: 0,
    durationMs: 0,
  };
}
