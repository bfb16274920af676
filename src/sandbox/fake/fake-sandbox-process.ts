import { PassThrough, Writable, type Readable } from "node:stream";
import type { SandboxProcess, SandboxProcessExit, SpawnRequest } from "../sandbox.js";

/** What a {@link FakeProgram} gets: the process's side of its streams. */
export interface FakeProgramIo {
  /** What the spawner writes to the process's stdin. */
  stdin: Readable;
  stdout: Writable;
  stderr: Writable;
  /** Ends the process with `exitCode` (its streams end). */
  exit(exitCode: number): void;
  /** Aborted when the process is killed. */
  signal: AbortSignal;
}

/** A fake executable for {@link FakeSandbox.spawn}: it runs in-process on the given streams. */
export type FakeProgram = (io: FakeProgramIo, request: SpawnRequest) => void;

/** A {@link SandboxProcess} whose other end is a {@link FakeProgram} in this process. */
export class FakeSandboxProcess implements SandboxProcess {
  readonly stdin: Writable;
  readonly stdout = new PassThrough();
  readonly stderr = new PassThrough();
  readonly exited: Promise<SandboxProcessExit>;
  private resolveExit!: (exit: SandboxProcessExit) => void;
  private ended = false;
  private readonly programStdin = new PassThrough();
  private readonly killing = new AbortController();

  constructor(program: FakeProgram, request: SpawnRequest) {
    this.exited = new Promise((resolve) => {
      this.resolveExit = resolve;
    });
    this.stdin = new Writable({
      write: (chunk: Buffer, _encoding, callback) => {
        if (!this.ended) this.programStdin.write(chunk);
        callback();
      },
      final: (callback) => {
        this.programStdin.end();
        callback();
      },
    });
    const io: FakeProgramIo = {
      stdin: this.programStdin,
      stdout: this.stdout,
      stderr: this.stderr,
      exit: (exitCode) => this.finish({ exitCode, signal: null }),
      signal: this.killing.signal,
    };
    queueMicrotask(() => {
      try {
        program(io, request);
      } catch (error) {
        this.stderr.write(`${(error as Error).message}\n`);
        this.finish({ exitCode: 1, signal: null });
      }
    });
  }

  /** True once the process has ended. */
  get hasExited(): boolean {
    return this.ended;
  }

  async kill(): Promise<void> {
    this.killing.abort();
    this.finish({ exitCode: 137, signal: "SIGKILL" });
    await this.exited;
  }

  private finish(exit: SandboxProcessExit): void {
    if (this.ended) return;
    this.ended = true;
    this.programStdin.end();
    this.stdout.end();
    this.stderr.end();
    this.resolveExit(exit);
  }
}

/** What `env` prints for a command that is not there, as in the real sandbox. */
export const missingProgram: FakeProgram = (io, request) => {
  io.stderr.write(`env: '${request.command}': No such file or directory\n`);
  io.exit(127);
};
