import {
  createSandbox,
  SandboxGoneError,
  SandboxLostToAgentError,
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
} from "./sandbox.js";

/** Restarts allowed per sandbox before a loss ends the run. */
const MAX_RESTARTS = 3;

const RESTART_NOTICE =
  "the sandbox was restarted because its control process died or stopped answering (e.g. killed by the out-of-memory killer). " +
  "Files in the workspace are intact; processes started earlier are gone.";

/**
 * A {@link Sandbox} that survives the loss of the sandbox's control process
 * (the agent's commands cannot signal it, but the out-of-memory killer can
 * end it, and a hung or stopped one misses its deadlines). On SandboxGoneError
 * the sandbox is replaced by a new one on the same spec (the workspace lives
 * on the host, so files survive); the failed exec answers with a notice, and
 * file operations are retried once. After {@link MAX_RESTARTS}, the next loss
 * is the agent's: SandboxLostToAgentError (the run `failed`, `sandbox_lost`).
 */
export class RecoveringSandbox implements Sandbox {
  private restarts = 0;

  private constructor(
    private readonly provider: SandboxProvider,
    private readonly spec: SandboxSpec,
    private current: Sandbox,
    private readonly onRestart: (newId: string) => void,
  ) {}

  /** Creates the first sandbox; `signal` (the run's) makes a cancel win over a create() that hangs ({@link createSandbox}). */
  static async create(
    provider: SandboxProvider,
    spec: SandboxSpec,
    onRestart: (newId: string) => void = () => undefined,
    signal?: AbortSignal,
  ): Promise<RecoveringSandbox> {
    return new RecoveringSandbox(provider, spec, await createSandbox(provider, spec, signal), onRestart);
  }

  get id(): string {
    return this.current.id;
  }

  get workdir(): string {
    return this.current.workdir;
  }

  async exec(request: ExecRequest): Promise<ExecResult> {
    const used = this.current;
    try {
      return await used.exec(request);
    } catch (error) {
      if (!(error instanceof SandboxGoneError)) throw error;
      await this.restart(used, error);
      return {
        exitCode: null,
        signal: "SIGKILL",
        stdout: "",
        stderr: RESTART_NOTICE,
        timedOut: false,
        truncated: false,
        stdoutBytes: 0,
        stderrBytes: RESTART_NOTICE.length,
        durationMs: 0,
      };
    }
  }

  readFile(path: string, options?: { maxBytes?: number }): Promise<FileContent | null> {
    return this.retrying(() => this.current.readFile(path, options));
  }

  writeFile(path: string, content: Buffer): Promise<{ path: string; bytesWritten: number }> {
    return this.retrying(() => this.current.writeFile(path, content));
  }

  stat(path: string): Promise<PathInfo | null> {
    return this.retrying(() => this.current.stat(path));
  }

  listDir(path: string): Promise<DirectoryEntry[] | null> {
    return this.retrying(() => this.current.listDir(path));
  }

  stopAllProcesses(): Promise<void> {
    return this.retrying(() => this.current.stopAllProcesses());
  }

  /** Starts the process in the current sandbox; a process started before a restart ended with the sandbox it ran in. */
  spawn(request: SpawnRequest): Promise<SandboxProcess> {
    return this.retrying(() => this.current.spawn(request));
  }

  freeze<T>(operation: () => Promise<T>): Promise<T> {
    return this.current.freeze(operation);
  }

  close(): Promise<void> {
    return this.current.close();
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  private async retrying<T>(operation: () => Promise<T>): Promise<T> {
    const used = this.current;
    try {
      return await operation();
    } catch (error) {
      if (!(error instanceof SandboxGoneError)) throw error;
      await this.restart(used, error);
      return operation();
    }
  }

  private restarting: Promise<void> | null = null;

  /**
   * Replaces `failed` unless a concurrent call already did. Past
   * {@link MAX_RESTARTS}: SandboxLostToAgentError when Docker still removes
   * the lost sandbox (it was lost to what ran in it), else `cause`.
   */
  private async restart(failed: Sandbox, cause: SandboxGoneError): Promise<void> {
    if (this.current !== failed) return;
    if (this.restarting) return this.restarting;
    if (this.restarts >= MAX_RESTARTS) {
      await failed.close().catch(() => {
        throw cause;
      });
      throw new SandboxLostToAgentError(
        `the sandbox was lost ${MAX_RESTARTS + 1} times to what ran in it (its control process died or stopped answering, e.g. killed by the out-of-memory killer when the agent's processes filled the memory limit): ${cause.message}`,
        { cause },
      );
    }
    this.restarts += 1;
    this.restarting = (async () => {
      await failed.close().catch(() => undefined);
      this.current = await this.provider.create(this.spec);
      this.onRestart(this.current.id);
    })().finally(() => {
      this.restarting = null;
    });
    return this.restarting;
  }
}
