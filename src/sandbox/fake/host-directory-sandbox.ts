import {
  chmodSync,
  lstatSync,
  mkdirSync,
  openSync,
  closeSync,
  readlinkSync,
  readSync,
  readdirSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
  type Stats,
} from "node:fs";
import { join, posix } from "node:path";
import { SandboxError } from "../../errors.js";
import {
  NotAFileError,
  PathOutsideWorkspaceError,
  WORKSPACE_ROOT,
  type DirectoryEntry,
  type ExecRequest,
  type ExecResult,
  type FileContent,
  type PathInfo,
  type Sandbox,
  type SandboxProcess,
  type SandboxProvider,
  type SandboxSpec,
  type SpawnRequest,
} from "../sandbox.js";
import { FakeSandboxProcess, missingProgram, type FakeProgram } from "./fake-sandbox-process.js";

/** What an {@link HostDirectoryExecHandler} is told about the command it answers. */
export interface HostDirectoryExec {
  request: ExecRequest;
  /** The sandbox the command "runs" in: its file operations are confined (and read-only) as the agent's are. */
  sandbox: HostDirectorySandbox;
  /** The spec it was created with (`agentId` tells the main agent, a worker `w1`, a verification `verify`/`w1-verify`). */
  spec: SandboxSpec;
  /** Host path of the workspace (the spec's `workspace.hostPath`), for a handler that reads what git made there. */
  workspace: string;
  /** Aborts when the command is killed: its request's signal, its timeout, stopAllProcesses or close. */
  signal: AbortSignal;
}

/**
 * Answers `exec` in a {@link HostDirectorySandbox}: what the command "printed"
 * and how it exited (defaults: exit 0, no output). It runs in the test's
 * process and must not hand the command to a shell: the host never runs a
 * command the agent wrote. A handler that throws after `signal` aborted
 * makes the command end killed (`SIGKILL`).
 */
export type HostDirectoryExecHandler = (exec: HostDirectoryExec) => Partial<ExecResult> | Promise<Partial<ExecResult>>;

export interface HostDirectorySandboxOptions {
  /** Answers every sandbox's commands. Default: exit 127, "command not found" (nothing is run). */
  exec?: HostDirectoryExecHandler;
  /** What `spawn` runs, by command name; an unknown one exits 127 as in the real sandbox. */
  programs?: Record<string, FakeProgram>;
  /**
   * Sandboxes of matching specs stay "running" after `close()` resolves, the
   * way a container Docker failed to remove does: `ensureWorkspaceIdle` on
   * their workspace then throws until {@link HostDirectorySandboxProvider.release}.
   */
  lingerAfterClose?: (spec: SandboxSpec) => boolean;
}

/** One command a sandbox of the provider was asked to run, in order. */
export interface RecordedCommand {
  sandboxId: string;
  agentId: string;
  request: ExecRequest;
}

/**
 * A {@link SandboxProvider} for the Docker-free run tier (docs/development.md "Testing"):
 * each sandbox works on its spec's real host directory, so host git (commit,
 * verification checkout, merges) sees exactly the files the agent's tools
 * wrote, yet it never runs a command on the host: `exec` is answered by the
 * test's handler and `spawn` by in-process {@link FakeProgram}s. File
 * operations follow the in-container helper (src/sandbox/docker/helper/files.go): `..` is
 * resolved lexically, symlinks are followed by hand (an absolute target means
 * the container's path), anything ending outside the workspace throws
 * {@link PathOutsideWorkspaceError}, writes are atomic (a fresh inode renamed
 * over the target, keeping its mode), and a read-only workspace refuses
 * writes with EROFS as the bind mount does. Everything is recorded: the specs
 * of the sandboxes created, and each command. Nothing of the spec but the
 * workspace and the agent id is used: no limits, network, disk measuring or
 * read-only git mounts (the Docker provider's tests cover those).
 *
 * Hand-written rather than memfs/mock-fs: those replace `fs` for the whole
 * process, and the point here is that host git reads the real directory.
 */
export class HostDirectorySandboxProvider implements SandboxProvider {
  /** Every sandbox created, in order, with its spec. */
  readonly created: HostDirectorySandbox[] = [];
  /** Every command any sandbox was asked to run, in order. */
  readonly commands: RecordedCommand[] = [];
  private readonly lingering = new Set<HostDirectorySandbox>();
  private counter = 0;

  constructor(private readonly options: HostDirectorySandboxOptions = {}) {}

  /** Throws SandboxError for uid 0 (as Docker's provider does) or a workspace that is not a directory. */
  async create(spec: SandboxSpec): Promise<Sandbox> {
    if (spec.user.uid === 0) throw new SandboxError("refusing to run a sandbox as uid 0; pass an unprivileged uid");
    let root: string;
    try {
      root = realpathSync(spec.workspace.hostPath);
      if (!statSync(root).isDirectory()) throw new Error("not a directory");
    } catch (error) {
      throw new SandboxError(`could not create the sandbox: workspace ${spec.workspace.hostPath} is unusable (${(error as Error).message})`, { cause: error });
    }
    this.counter += 1;
    const sandbox = new HostDirectorySandbox(`fake-${this.counter}-${spec.agentId}`, spec, root, {
      exec: this.options.exec ?? commandNotFound,
      programs: this.options.programs ?? {},
      record: (request) => this.commands.push({ sandboxId: sandbox.id, agentId: spec.agentId, request }),
      onClose: () => {
        if (this.options.lingerAfterClose?.(spec)) this.lingering.add(sandbox);
      },
    });
    this.created.push(sandbox);
    return sandbox;
  }

  /**
   * Resolves when no sandbox that mounts `hostPath` writable can run a
   * process: each is closed (and not lingering) or frozen. Throws
   * SandboxError naming the sandbox otherwise.
   */
  async ensureWorkspaceIdle(hostPath: string): Promise<void> {
    for (const sandbox of this.created) {
      if (sandbox.spec.workspace.hostPath !== hostPath || sandbox.spec.workspace.readOnly || sandbox.frozen) continue;
      if (!sandbox.closed || this.lingering.has(sandbox)) {
        throw new SandboxError(
          `sandbox ${sandbox.id} (${sandbox.closed ? "not removed" : "running"}) still mounts ${hostPath} writable; host git does not read a worktree while the agent's processes can run`,
          { reason: "sandbox_not_idle" },
        );
      }
    }
  }

  /** Lets lingering sandboxes (see `lingerAfterClose`) be gone, so their workspaces become idle. */
  release(): void {
    this.lingering.clear();
  }

  /** The sandboxes of an agent (`main`, `w1`, `verify`, ...), in the order they were created. */
  sandboxesOf(agentId: string): HostDirectorySandbox[] {
    return this.created.filter((sandbox) => sandbox.spec.agentId === agentId);
  }
}

/** The default handler: nothing is run, as if no such program existed. */
const commandNotFound: HostDirectoryExecHandler = ({ request }) => ({
  exitCode: 127,
  stderr: `bash: ${request.command.split(/\s/)[0]}: command not found (the host-directory sandbox runs no command; give the provider an exec handler)\n`,
});

/** Most symlinks followed while resolving one path, as in the in-container helper (and Linux's MAXSYMLINKS). */
const MAX_SYMLINK_HOPS = 40;

/** A sandbox of {@link HostDirectorySandboxProvider}: its spec's host directory seen at its workdir (default {@link WORKSPACE_ROOT}). */
export class HostDirectorySandbox implements Sandbox {
  /** Commands this sandbox was asked to run, in order. */
  readonly commands: ExecRequest[] = [];
  readonly spawned: { request: SpawnRequest; process: FakeSandboxProcess }[] = [];
  closed = false;
  /** True while `freeze` runs its operation. */
  frozen = false;
  /** How many times `freeze` was called. */
  freezes = 0;
  /** Aborts the commands in flight (stopAllProcesses, close). */
  private killing = new AbortController();
  /** Where the workspace is in the "container" (`spec.workdir`, default /workspace): paths resolve and confine against it. */
  readonly workdir: string;

  constructor(
    readonly id: string,
    readonly spec: SandboxSpec,
    /** Real host path of the workspace. */
    private readonly root: string,
    private readonly behaviour: {
      exec: HostDirectoryExecHandler;
      programs: Record<string, FakeProgram>;
      record: (request: ExecRequest) => void;
      onClose: () => void;
    },
  ) {
    this.workdir = spec.workdir ?? WORKSPACE_ROOT;
  }

  /**
   * Resolves `requested` (workspace relative, or absolute in the container)
   * the way the in-container helper does and returns the container path and the
   * host path it stands for. Throws PathOutsideWorkspaceError.
   */
  resolve(requested: string): { path: string; hostPath: string } {
    if (requested.length === 0) throw new Error("path must be a non-empty string");
    if (requested.includes("\0")) throw new Error("path contains a NUL byte");
    const root = this.workdir;
    let pending = posix.resolve(root, requested);
    for (let hop = 0; hop <= MAX_SYMLINK_HOPS; hop += 1) {
      if (!isInside(pending, root)) throw new PathOutsideWorkspaceError(requested, pending);
      const parts = pending === root ? [] : pending.slice(root.length + 1).split("/");
      let current = root;
      let followed = false;
      for (const [index, part] of parts.entries()) {
        const candidate = `${current}/${part}`;
        let stats: Stats;
        try {
          stats = lstatSync(this.hostPathOf(candidate));
        } catch (error) {
          const code = (error as NodeJS.ErrnoException).code;
          if (code !== "ENOENT" && code !== "ENOTDIR") throw error;
          // Not there (yet): the rest is appended as it is, like a write would create it.
          return { path: pending, hostPath: this.hostPathOf(pending) };
        }
        if (stats.isSymbolicLink()) {
          pending = posix.resolve(posix.dirname(candidate), readlinkSync(this.hostPathOf(candidate)), ...parts.slice(index + 1));
          followed = true;
          break;
        }
        current = candidate;
      }
      if (!followed) return { path: pending, hostPath: this.hostPathOf(pending) };
    }
    throw new Error(`more than ${MAX_SYMLINK_HOPS} symbolic links in "${requested}"`);
  }

  async exec(request: ExecRequest): Promise<ExecResult> {
    this.assertOpen();
    const started = Date.now();
    // As in the Docker sandbox: a command whose signal already aborted is not started (nor recorded).
    if (request.signal?.aborted) return killedResult(false, started);
    this.commands.push(request);
    this.behaviour.record(request);
    const timeout = request.timeoutMs ? AbortSignal.timeout(request.timeoutMs) : null;
    const signal = AbortSignal.any([this.killing.signal, ...(request.signal ? [request.signal] : []), ...(timeout ? [timeout] : [])]);
    let answer: Partial<ExecResult>;
    try {
      // The handler races the kill: a command that never returns still ends when it is killed.
      answer = await new Promise<Partial<ExecResult>>((resolve, reject) => {
        const killed = () => reject(signal.reason);
        signal.addEventListener("abort", killed, { once: true });
        Promise.resolve()
          .then(() => this.behaviour.exec({ request, sandbox: this, spec: this.spec, workspace: this.spec.workspace.hostPath, signal }))
          .then(resolve, reject)
          .finally(() => signal.removeEventListener("abort", killed));
      });
    } catch (error) {
      if (!signal.aborted) throw error;
      return killedResult(timeout?.aborted ?? false, started);
    }
    const stdout = answer.stdout ?? "";
    const stderr = answer.stderr ?? "";
    return {
      exitCode: 0,
      signal: null,
      timedOut: false,
      truncated: false,
      stdoutBytes: Buffer.byteLength(stdout),
      stderrBytes: Buffer.byteLength(stderr),
      durationMs: Date.now() - started,
      ...answer,
      stdout,
      stderr,
    };
  }

  async readFile(path: string, options: { maxBytes?: number } = {}): Promise<FileContent | null> {
    this.assertOpen();
    const resolved = this.resolve(path);
    const stats = statOrNull(resolved.hostPath);
    if (!stats) return null;
    if (!stats.isFile()) throw new NotAFileError(path, kindOf(stats));
    const length = Math.min(options.maxBytes ?? stats.size, stats.size);
    const content = Buffer.alloc(length);
    const descriptor = openSync(resolved.hostPath, "r");
    try {
      let offset = 0;
      while (offset < length) {
        const read = readSync(descriptor, content, offset, length - offset, offset);
        if (read === 0) break;
        offset += read;
      }
      return { path: resolved.path, content: content.subarray(0, offset), size: stats.size };
    } finally {
      closeSync(descriptor);
    }
  }

  /** Throws `EROFS` for a read-only workspace, as the read-only bind mount makes the daemon's write fail. */
  async writeFile(path: string, content: Buffer): Promise<{ path: string; bytesWritten: number }> {
    this.assertOpen();
    const resolved = this.resolve(path);
    let mode = 0o644;
    try {
      const stats = lstatSync(resolved.hostPath);
      if (stats.isDirectory()) throw new NotAFileError(path, "directory");
      if (stats.isFile()) mode = stats.mode & 0o7777;
    } catch (error) {
      if (error instanceof NotAFileError) throw error;
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    }
    const directory = posix.dirname(resolved.path);
    if (this.spec.workspace.readOnly) throw new Error(`EROFS: read-only file system, open '${directory}/.runner-write'`);
    mkdirSync(this.hostPathOf(directory), { recursive: true });
    // A fresh inode renamed over the target: a hard link or symlink at the target never carries the bytes elsewhere.
    const temporary = join(this.hostPathOf(directory), `.runner-write-${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2)}`);
    try {
      writeFileSync(temporary, content, { mode, flag: "wx" });
      chmodSync(temporary, mode);
      renameSync(temporary, resolved.hostPath);
    } catch (error) {
      rmSync(temporary, { force: true });
      throw error;
    }
    return { path: resolved.path, bytesWritten: content.length };
  }

  async stat(path: string): Promise<PathInfo | null> {
    this.assertOpen();
    const resolved = this.resolve(path);
    const stats = statOrNull(resolved.hostPath);
    return stats ? { path: resolved.path, type: kindOf(stats), size: stats.size, mtimeMs: stats.mtimeMs } : null;
  }

  async listDir(path: string): Promise<DirectoryEntry[] | null> {
    this.assertOpen();
    const resolved = this.resolve(path);
    let entries;
    try {
      entries = readdirSync(resolved.hostPath, { withFileTypes: true });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "ENOENT") return null;
      if (code === "ENOTDIR") throw new Error(`"${path}" is not a directory`);
      throw error;
    }
    return entries.map((entry) => ({ name: entry.name, type: kindOf(entry) })).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  async spawn(request: SpawnRequest): Promise<SandboxProcess> {
    this.assertOpen();
    const started = new FakeSandboxProcess(this.behaviour.programs[request.command] ?? missingProgram, request);
    this.spawned.push({ request, process: started });
    return started;
  }

  /** Kills the commands in flight (their handlers' signal aborts) and the spawned processes; the sandbox stays usable. */
  async stopAllProcesses(): Promise<void> {
    this.assertOpen();
    await this.killAll();
  }

  /** Runs `operation` with the sandbox counted as frozen: `ensureWorkspaceIdle` then lets host git at its workspace. */
  async freeze<T>(operation: () => Promise<T>): Promise<T> {
    this.assertOpen();
    this.freezes += 1;
    this.frozen = true;
    try {
      return await operation();
    } finally {
      this.frozen = false;
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.killAll();
    this.behaviour.onClose();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  private async killAll(): Promise<void> {
    this.killing.abort(new Error(`sandbox ${this.id}: every process was stopped`));
    this.killing = new AbortController();
    await Promise.all(this.spawned.map(({ process }) => process.kill()));
  }

  private assertOpen(): void {
    if (this.closed) throw new SandboxError(`sandbox ${this.id} is closed`);
  }

  private hostPathOf(containerPath: string): string {
    return containerPath === this.workdir ? this.root : join(this.root, containerPath.slice(this.workdir.length + 1));
  }
}

/** What a killed command returns: no exit code, SIGKILL, nothing captured. */
function killedResult(timedOut: boolean, started: number): ExecResult {
  return {
    exitCode: null,
    signal: "SIGKILL",
    stdout: "",
    stderr: "",
    timedOut,
    truncated: false,
    stdoutBytes: 0,
    stderrBytes: 0,
    durationMs: Date.now() - started,
  };
}

function isInside(path: string, root: string): boolean {
  return path === root || path.startsWith(`${root}/`);
}

function statOrNull(hostPath: string): Stats | null {
  try {
    return statSync(hostPath);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return null;
    throw error;
  }
}

function kindOf(entry: { isFile(): boolean; isDirectory(): boolean; isSymbolicLink(): boolean }): DirectoryEntry["type"] {
  if (entry.isFile()) return "file";
  if (entry.isDirectory()) return "directory";
  if (entry.isSymbolicLink()) return "symlink";
  return "other";
}
