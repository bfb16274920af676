import { posix } from "node:path";
import {
  PathOutsideWorkspaceError,
  NotAFileError,
  WORKSPACE_ROOT,
  type DirectoryEntry,
  type ExecRequest,
  type ExecResult,
  type FileContent,
  type PathInfo,
  type Sandbox,
  type SandboxProcess,
  type SpawnRequest,
} from "../sandbox.js";
import { FakeSandboxProcess, missingProgram, type FakeProgram } from "./fake-sandbox-process.js";

/** Answers `exec` in a {@link FakeSandbox}: return what the command "printed". */
export type FakeExecHandler = (request: ExecRequest) => Partial<ExecResult> | Promise<Partial<ExecResult>>;

/**
 * An in-memory {@link Sandbox} for unit tests and benchmarks of the loop: files
 * live in a Map keyed by absolute path, `exec` is answered by a handler. It
 * confines paths lexically (it has no symlinks), with the same errors as the
 * real sandbox.
 */
export class FakeSandbox implements Sandbox {
  readonly id = "fake";
  readonly workdir = WORKSPACE_ROOT;
  readonly files = new Map<string, Buffer>();
  readonly commands: ExecRequest[] = [];
  /** What `spawn` runs, by command; an unknown command exits 127 as in the real sandbox. */
  readonly programs = new Map<string, FakeProgram>();
  readonly spawned: { request: SpawnRequest; process: FakeSandboxProcess }[] = [];
  closed = false;

  constructor(
    files: Record<string, string | Buffer> = {},
    private readonly onExec: FakeExecHandler = () => ({}),
  ) {
    for (const [path, content] of Object.entries(files)) this.files.set(this.resolve(path), Buffer.from(content));
  }

  resolve(path: string): string {
    const resolved = posix.resolve(WORKSPACE_ROOT, path);
    if (resolved !== WORKSPACE_ROOT && !resolved.startsWith(`${WORKSPACE_ROOT}/`)) throw new PathOutsideWorkspaceError(path, resolved);
    return resolved;
  }

  async exec(request: ExecRequest): Promise<ExecResult> {
    this.commands.push(request);
    const answer = await this.onExec(request);
    return {
      exitCode: 0,
      signal: null,
      stdout: "",
      stderr: "",
      timedOut: false,
      truncated: false,
      stdoutBytes: answer.stdout?.length ?? 0,
      stderrBytes: answer.stderr?.length ?? 0,
      durationMs: 0,
      ...answer,
    };
  }

  async readFile(path: string, options: { maxBytes?: number } = {}): Promise<FileContent | null> {
    const resolved = this.resolve(path);
    const content = this.files.get(resolved);
    if (!content) {
      if (this.isDirectory(resolved)) throw new NotAFileError(path, "directory");
      return null;
    }
    return { path: resolved, content: content.subarray(0, options.maxBytes ?? content.length), size: content.length };
  }

  async writeFile(path: string, content: Buffer): Promise<{ path: string; bytesWritten: number }> {
    const resolved = this.resolve(path);
    if (this.isDirectory(resolved)) throw new NotAFileError(path, "directory");
    this.files.set(resolved, Buffer.from(content));
    return { path: resolved, bytesWritten: content.length };
  }

  async stat(path: string): Promise<PathInfo | null> {
    const resolved = this.resolve(path);
    const content = this.files.get(resolved);
    if (content) return { path: resolved, type: "file", size: content.length, mtimeMs: 0 };
    if (this.isDirectory(resolved)) return { path: resolved, type: "directory", size: 0, mtimeMs: 0 };
    return null;
  }

  async listDir(path: string): Promise<DirectoryEntry[] | null> {
    const resolved = this.resolve(path);
    if (!this.isDirectory(resolved)) return null;
    const entries = new Map<string, DirectoryEntry["type"]>();
    for (const file of this.files.keys()) {
      if (!file.startsWith(`${resolved}/`) && resolved !== "/") continue;
      const [first, ...rest] = file.slice(resolved.length + 1).split("/");
      entries.set(first!, rest.length ? "directory" : "file");
    }
    return [...entries].sort(([a], [b]) => (a < b ? -1 : 1)).map(([name, type]) => ({ name, type }));
  }

  async spawn(request: SpawnRequest): Promise<SandboxProcess> {
    const started = new FakeSandboxProcess(this.programs.get(request.command) ?? missingProgram, request);
    this.spawned.push({ request, process: started });
    return started;
  }

  /** Kills spawned processes (the fake has no others). */
  async stopAllProcesses(): Promise<void> {
    await Promise.all(this.spawned.map(({ process }) => process.kill()));
  }

  /** Counts freezes; the fake has no processes to freeze. */
  freezes = 0;

  async freeze<T>(operation: () => Promise<T>): Promise<T> {
    this.freezes += 1;
    return operation();
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.spawned.map(({ process }) => process.kill()));
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  private isDirectory(resolved: string): boolean {
    if (resolved === WORKSPACE_ROOT) return true;
    for (const file of this.files.keys()) if (file.startsWith(`${resolved}/`)) return true;
    return false;
  }
}
