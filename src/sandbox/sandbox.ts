import type { Readable, Writable } from "node:stream";
import type { AllowRule } from "./network-allow-list.js";
import { CancelledError, RunnerError, SandboxError } from "../errors.js";

/**
 * The sandbox contract: where every tool of a task runs. Paths are workspace
 * relative (or absolute under the workspace root, {@link Sandbox.workdir}); an implementation
 * resolves `..` and symlinks *inside* the sandbox and refuses anything that
 * ends up outside the workspace by throwing {@link PathOutsideWorkspaceError}.
 *
 * A non-zero exit code or a missing file is data, not an exception; only an
 * infrastructure failure (container gone, channel broken) throws `SandboxError`.
 */
/** Where the repository is mounted in a sandbox unless the task sets `sandbox.workdir`. */
export const WORKSPACE_ROOT = "/workspace";

export interface ExecRequest {
  /** Run by `bash -c` in the sandbox. */
  command: string;
  /** Working directory, workspace relative; default the workspace root. */
  cwd?: string;
  /** Extra environment variables for this command only. */
  env?: Record<string, string>;
  /** Wall-clock limit in ms; on expiry the command's whole process tree is killed. */
  timeoutMs?: number;
  /** Cap on the bytes kept per stream (head + tail halves); default 64 KiB. */
  maxOutputBytes?: number;
  /** Aborting kills the command's process tree; the promise then resolves with what was captured. */
  signal?: AbortSignal;
}

export interface ExecResult {
  exitCode: number | null;
  /** Signal that ended the command, e.g. `SIGKILL`, or null. */
  signal: string | null;
  /** UTF-8 text; invalid bytes replaced with U+FFFD; if truncated, head + marker + tail. */
  stdout: string;
  stderr: string;
  /** True when the timeout fired and the process tree was killed. */
  timedOut: boolean;
  /** True when either stream was cut to `maxOutputBytes`. */
  truncated: boolean;
  /** Bytes the command wrote to each stream, including what was cut. */
  stdoutBytes: number;
  stderrBytes: number;
  durationMs: number;
}

export interface FileContent {
  /** Absolute path inside the sandbox after resolving symlinks. */
  path: string;
  /** The file's bytes, at most `maxBytes` of them. */
  content: Buffer;
  /** Size of the whole file in bytes. */
  size: number;
}

export interface PathInfo {
  /** Absolute path inside the sandbox after resolving symlinks. */
  path: string;
  type: "file" | "directory" | "symlink" | "other";
  /** Bytes. */
  size: number;
  mtimeMs: number;
}

export interface DirectoryEntry {
  name: string;
  type: "file" | "directory" | "symlink" | "other";
}

/** A long-lived process started by {@link Sandbox.spawn}. */
export interface SpawnRequest {
  /** Executable, looked up on the sandbox's PATH; not run through a shell. */
  command: string;
  args?: string[];
  /** Added to the environment `exec` commands get; nothing else is added. */
  env?: Record<string, string>;
}

/** How a spawned process ended. */
export interface SandboxProcessExit {
  /** Null when unknown (the sandbox went away first). */
  exitCode: number | null;
  /** Signal that ended it, e.g. `SIGKILL`, when known. */
  signal: string | null;
  /** Why the exit status is unknown or unusual, e.g. "the sandbox was closed". */
  detail?: string;
}

/**
 * A process running in the sandbox with piped standard streams (e.g. an MCP
 * server). It runs as the sandbox user in the workspace root, under the
 * sandbox's limits and network, and dies when the sandbox closes. The owner
 * reads stdout and stderr (unread output is buffered in the runner) and
 * calls kill() when done.
 */
export interface SandboxProcess {
  /** Its standard input; `end()` closes it (EOF). Writes after the exit are dropped. */
  readonly stdin: Writable;
  readonly stdout: Readable;
  readonly stderr: Readable;
  /** Resolves once the process has ended and both output streams have ended; never rejects. */
  readonly exited: Promise<SandboxProcessExit>;
  /** Kills the process and everything it started; resolves once it is gone. Safe after the exit and twice. */
  kill(): Promise<void>;
}

export interface Sandbox {
  /** Identifier for logs and events (the container id for Docker). */
  readonly id: string;
  /** Absolute path of the workspace root in the sandbox (`SandboxSpec.workdir`). */
  readonly workdir: string;
  exec(request: ExecRequest): Promise<ExecResult>;
  /** Reads a regular file; `null` when it does not exist. Throws PathOutsideWorkspaceError, NotAFileError. */
  readFile(path: string, options?: { maxBytes?: number }): Promise<FileContent | null>;
  /**
   * Writes a file atomically (temporary file + rename, so a hard link or a
   * symlink at the target never carries the write elsewhere), creating parent
   * directories and keeping an existing file's mode. Returns the resolved path.
   */
  writeFile(path: string, content: Buffer): Promise<{ path: string; bytesWritten: number }>;
  /** Resolves a path (following symlinks) and describes it; `null` when it does not exist. Throws PathOutsideWorkspaceError. */
  stat(path: string): Promise<PathInfo | null>;
  /** Lists a directory; `null` when it does not exist. Entries sorted by name. */
  listDir(path: string): Promise<DirectoryEntry[] | null>;
  /**
   * Kills every process running in the sandbox (commands, their background
   * children, anything that escaped its process group), leaving the sandbox
   * usable for new commands. Throws SandboxError if not every process could be killed.
   */
  stopAllProcesses(): Promise<void>;
  /**
   * Runs `operation` with every process of the sandbox frozen (cgroup
   * freezer), so host-side git can read or change the workspace without a
   * process racing it, yet without killing background work. No sandbox
   * operation may be started by `operation` itself.
   */
  freeze<T>(operation: () => Promise<T>): Promise<T>;
  /**
   * Starts a long-lived process with piped stdin/stdout/stderr (an MCP
   * server). Unlike `exec` commands, it is not killed by another command's
   * timeout; `stopAllProcesses` and `close` do kill it. Throws SandboxError
   * when the process cannot be started at all (a missing executable is an
   * early exit with code 127 and a message on stderr, not an exception).
   */
  spawn(request: SpawnRequest): Promise<SandboxProcess>;
  /** Stops every process and removes the sandbox; safe to call twice. */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/**
 * The sandbox's control process or container is gone (e.g. a command killed
 * every process it could, or the container was removed). The workspace on
 * the host is intact; a new sandbox on the same spec can take over.
 */
export class SandboxGoneError extends SandboxError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, { ...options, reason: "sandbox_lost" });
  }
}

/**
 * The sandbox was lost once more after its restarts were spent, while
 * Docker went on creating and removing sandboxes: its control process was
 * killed or stopped by what ran in it (memory the agent's processes filled,
 * which the out-of-memory killer settles by killing the helper). The
 * agent's failure, as in verification (`verify.sandbox_lost`): exit 1, the
 * run `failed` with reason `sandbox_lost`, not an infrastructure error.
 */
export class SandboxLostToAgentError extends RunnerError {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, 1, { ...options, reason: "sandbox_lost" });
  }
}

/** A path resolved (after `..` and symlinks) to somewhere outside the workspace. */
export class PathOutsideWorkspaceError extends Error {
  constructor(
    readonly requested: string,
    readonly resolved: string,
  ) {
    super(`path "${requested}" resolves to "${resolved}", outside the workspace; only files in the workspace can be used`);
    this.name = "PathOutsideWorkspaceError";
  }
}

/** The path exists but is not the kind of thing the operation needs (e.g. a directory given to readFile). */
export class NotAFileError extends Error {
  constructor(
    readonly requested: string,
    readonly actual: string,
  ) {
    super(`"${requested}" is a ${actual}, not a regular file`);
    this.name = "NotAFileError";
  }
}

/** What a sandbox is made of. Everything the container sees from the host is listed here. */
export interface SandboxSpec {
  /** Run id; labels the container so a later start can sweep leftovers. */
  runId: string;
  /** Agent id within the run (e.g. `main`); part of the container name. */
  agentId: string;
  /** Image reference, e.g. `agent-runner/sandbox:bookworm`. */
  image: string;
  /** Host directory mounted read-write (or read-only) at `workdir`. */
  workspace: { hostPath: string; readOnly?: boolean };
  /**
   * Absolute container path the workspace is mounted at, the working
   * directory of every process and the root tool paths are relative to
   * (env `RUNNER_WORKSPACE`); default {@link WORKSPACE_ROOT}. Checked by
   * `workdirProblem` (src/sandbox/workdir.ts) when the task is loaded.
   */
  workdir?: string;
  /** Further read-only host paths (git metadata), mounted at `containerPath`. */
  readOnlyMounts: { hostPath: string; containerPath: string }[];
  /**
   * The container's own git directory (src/workspace/run-worktree.ts
   * `containerGitView`): the provider copies `seed` (regular files and
   * directories only) into the container's scratch space, owned by `user`,
   * and mounts the copy writable at `containerPath`. It goes with the
   * container; the host never reads it back.
   */
  privateGit?: { seed: string; containerPath: string };
  /** The container's whole environment beyond the image's own: no host variable passes implicitly. */
  env: Record<string, string>;
  /** Unprivileged numeric user the processes run as; never 0. */
  user: { uid: number; gid: number };
  /**
   * Egress: `null` = no network at all. Otherwise the container sits alone on
   * an internal network whose only way out is an egress proxy admitting these
   * rules (HTTP and HTTPS CONNECT), refusing IP literals, other ports and names
   * resolving to non-public addresses outside `allowCidrs`.
   */
  network: { rules: AllowRule[]; allowCidrs: string[] } | null;
  /** Receives each proxy decision as it happens. */
  onNetworkEvent?: (event: NetworkEvent) => void;
  /** Called if the egress proxy dies during the run (its last output); requests then fail. */
  onProxyExit?: (detail: string) => void;
  limits: {
    /** CPUs, fractional allowed. */
    cpus: number;
    /** Memory limit in bytes; swap is not allowed beyond it. */
    memoryBytes: number;
    /** Maximum number of processes (pids cgroup). */
    pids: number;
    /** Largest file a process may write, bytes (RLIMIT_FSIZE). */
    fileSizeBytes: number;
  };
  /**
   * What the task may write besides /workspace, and how much in all. The
   * image's own file system is read-only; each container gets fresh writable
   * directories for /tmp, /var/tmp and /run/lock under `scratchDirectory`,
   * removed with it. `limitBytes` bounds the workspace and those directories
   * together (allocated blocks): `filesystem` when `scratchDirectory` and the
   * workspace sit on a filesystem of exactly that size (a write past it fails
   * with ENOSPC), `monitor` when the sandbox must measure them itself and stop
   * its processes once they hold more.
   */
  disk: { limitBytes: number; enforcement: "filesystem" | "monitor"; scratchDirectory: string };
  /** Called once when a sandbox finds its disk limit reached (after stopping its processes, for `monitor`). */
  onDiskLimit?: (reached: DiskLimitReached) => void;
}

/**
 * Bytes of a disk limit per inode it allows: the run's ext4 filesystem is
 * made with one inode per 8 KiB (`mkfs.ext4 -i 8192`), and a monitored limit
 * allows as many files (`limitBytes / BYTES_PER_INODE`), so that empty files,
 * which hold no block, cannot exhaust the host's inodes.
 */
export const BYTES_PER_INODE = 8192;

/** A sandbox reached `SandboxSpec.disk.limitBytes`. */
export interface DiskLimitReached {
  sandboxId: string;
  /** Bytes in use when it was seen: the whole filesystem's (`filesystem`) or the sandbox's directories' (`monitor`). */
  usedBytes: number;
  limitBytes: number;
  /** `monitor`: the files (inodes) under the sandbox's directories, and how many the limit allows ({@link BYTES_PER_INODE}). */
  inodes?: { used: number; limit: number };
  enforcement: "filesystem" | "monitor";
  /** `refused`: writes past the limit fail with ENOSPC and the processes go on; `stopped`: every process of the sandbox was killed. */
  action: "refused" | "stopped";
}

/** One decision of the egress proxy. */
export interface NetworkEvent {
  decision: "allowed" | "denied";
  /** `CONNECT` for HTTPS tunnels, else the HTTP method. */
  method: string;
  host: string;
  port: number;
  /** Why a request was refused. */
  reason?: string;
}

/**
 * Creates sandboxes. `create` throws SandboxError when the backend cannot (no daemon, missing image).
 * Implemented by `DockerSandboxProvider` and, for tests, `HostDirectorySandboxProvider`; a Kubernetes
 * provider (a task's sandbox as a pod claimed from a warm pool) would implement this interface too:
 * its design, on paper only, is in docs/scale-out.md "A Kubernetes sandbox provider (designed, not built)".
 */
export interface SandboxProvider {
  create(spec: SandboxSpec): Promise<Sandbox>;
  /**
   * Resolves when no sandbox of this backend that mounts `hostPath`
   * writable can run a process: none exists, or each one is frozen
   * ({@link Sandbox.freeze}). Throws SandboxError naming the sandbox
   * otherwise, or when the backend cannot tell. Host code calls it right
   * before host git reads or changes a worktree, or the worktree is
   * removed, so nothing of the agent's can race it (a directory swapped for
   * a symlink mid-read would carry host git to host files).
   */
  ensureWorkspaceIdle(hostPath: string): Promise<void>;
}

/**
 * `provider.create(spec)` that a cancelled run does not wait for: when
 * `signal` aborts first it rejects with CancelledError at once, and a sandbox
 * the provider hands over later is closed (a provider's create() takes no
 * signal, so a hanging one would otherwise hold the run's cancel forever).
 */
export async function createSandbox(provider: SandboxProvider, spec: SandboxSpec, signal: AbortSignal | undefined): Promise<Sandbox> {
  if (!signal) return provider.create(spec);
  if (signal.aborted) throw new CancelledError();
  const creating = provider.create(spec);
  let onAbort!: () => void;
  const aborted = new Promise<never>((_resolve, reject) => {
    onAbort = () => reject(new CancelledError());
    signal.addEventListener("abort", onAbort, { once: true });
  });
  try {
    return await Promise.race([creating, aborted]);
  } catch (error) {
    if (signal.aborted) creating.then((late) => late.close()).catch(() => undefined);
    throw error;
  } finally {
    signal.removeEventListener("abort", onAbort);
    aborted.catch(() => undefined);
  }
}
