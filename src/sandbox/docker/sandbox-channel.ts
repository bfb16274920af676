import { PassThrough, type Duplex } from "node:stream";
import { createInterface } from "node:readline";
import { NotAFileError, PathOutsideWorkspaceError, SandboxGoneError } from "../sandbox.js";

interface DaemonErrorBody {
  code: string;
  message: string;
  resolved?: string;
  actual?: string;
}

interface DaemonResponse {
  id: number | null;
  ok: boolean;
  result?: unknown;
  error?: DaemonErrorBody;
}

interface Pending {
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
  request: { op: string; path?: string; cwd?: string };
}

/**
 * JSON-lines request/response channel to `sandbox-daemon.cjs` over a
 * container's attached stdin/stdout (Docker's multiplexed attach stream).
 * Requests may overlap; responses are matched by id.
 */
export class SandboxChannel {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly stderrTail: string[] = [];
  private closedError: SandboxGoneError | null = null;
  /** Resolves with the daemon's hello (id 0), rejects if the stream ends first. */
  readonly ready: Promise<{ pid: number; uid: number }>;

  constructor(
    private readonly stream: Duplex,
    demux: (source: Duplex, stdout: PassThrough, stderr: PassThrough) => void,
    private readonly label: string,
  ) {
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    demux(stream, stdout, stderr);
    stderr.on("data", (chunk: Buffer) => {
      this.stderrTail.push(chunk.toString("utf8"));
      if (this.stderrTail.length > 20) this.stderrTail.shift();
    });
    let resolveReady!: (value: { pid: number; uid: number }) => void;
    let rejectReady!: (error: Error) => void;
    this.ready = new Promise((resolve, reject) => {
      resolveReady = resolve;
      rejectReady = reject;
    });
    this.ready.catch(() => undefined);
    const lines = createInterface({ input: stdout, crlfDelay: Infinity });
    lines.on("line", (line) => {
      let message: DaemonResponse;
      try {
        message = JSON.parse(line) as DaemonResponse;
      } catch {
        this.stderrTail.push(`unparsable daemon output: ${line.slice(0, 200)}`);
        return;
      }
      if (message.id === 0) {
        resolveReady(message.result as { pid: number; uid: number });
        return;
      }
      const pending = message.id === null ? undefined : this.pending.get(message.id);
      if (!pending || message.id === null) return;
      this.pending.delete(message.id);
      if (message.ok) pending.resolve(message.result);
      else pending.reject(translateError(message.error, pending.request));
    });
    const onEnd = () => {
      const detail = this.stderrTail.join("").trim().slice(-2000);
      this.closedError = new SandboxGoneError(
        `sandbox ${this.label}: the in-container daemon went away${detail ? `: ${detail}` : ""}`,
      );
      rejectReady(this.closedError);
      for (const [id, pending] of this.pending) {
        this.pending.delete(id);
        pending.reject(this.closedError);
      }
    };
    stream.on("end", onEnd);
    stream.on("close", onEnd);
    stream.on("error", onEnd);
  }

  /** Sends one request; resolves with the daemon's result. Throws SandboxError if the channel is gone. */
  request<T>(body: { op: string; [key: string]: unknown }): Promise<T> {
    if (this.closedError) return Promise.reject(this.closedError);
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, {
        resolve: resolve as (value: unknown) => void,
        reject,
        request: body as Pending["request"],
      });
      this.stream.write(`${JSON.stringify({ ...body, id })}\n`);
    });
  }

  /** Id the next request will get; lets exec register a kill target before sending. */
  peekNextId(): number {
    return this.nextId;
  }

  close(): void {
    this.stream.end();
    this.stream.destroy();
  }
}

function translateError(error: DaemonErrorBody | undefined, request: Pending["request"]): Error {
  const requested = request.path ?? request.cwd ?? "";
  switch (error?.code) {
    case "OUTSIDE_WORKSPACE":
      return new PathOutsideWorkspaceError(requested, error.resolved ?? "?");
    case "NOT_A_FILE":
      return new NotAFileError(requested, error.actual ?? "non-file");
    case "NOT_A_DIRECTORY":
      return new Error(`"${requested}" is not a directory`);
    default:
      // Errors from the file system (EACCES, ENOSPC, ...) are the model's to see.
      return new Error(error?.message ?? "unknown sandbox error");
  }
}
