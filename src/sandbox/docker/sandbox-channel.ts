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
  /** ms the daemon has to answer, or null for a command with no timeout (the heartbeat watches those). */
  deadlineMs: number | null;
  timer: NodeJS.Timeout | null;
}

/** Default deadline of every request but a command's, ms: file operations, kills and pings answer in milliseconds. */
export const OPERATION_DEADLINE_MS = 30_000;

/**
 * JSON-lines request/response channel to the sandbox helper (`helper/`, docs/sandbox-helper.md) over a
 * container's attached stdin/stdout (Docker's multiplexed attach stream).
 * Requests may overlap; responses are matched by id.
 *
 * Every request has a deadline: the operation deadline (default
 * {@link OPERATION_DEADLINE_MS}), or for a command the deadline its caller
 * gives (its timeout plus a grace); while a command with no timeout is
 * pending, the daemon is pinged every third of the operation deadline. A missed deadline means the
 * daemon is stopped or hung, whatever the cause: the channel is then lost and
 * every pending and later request rejects with SandboxGoneError (so a
 * RecoveringSandbox replaces the sandbox). Deadlines do not run while the
 * container is frozen ({@link suspendDeadlines}).
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
    /** Deadline of a request that gives none, ms; the heartbeat pings at a third of it. */
    private readonly operationDeadlineMs: number = OPERATION_DEADLINE_MS,
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
    this.rejectReady = rejectReady;
    const onEnd = () => {
      const detail = this.stderrTail.join("").trim().slice(-2000);
      this.lose(new SandboxGoneError(`sandbox ${this.label}: the in-container daemon went away${detail ? `: ${detail}` : ""}`));
    };
    stream.on("end", onEnd);
    stream.on("close", onEnd);
    stream.on("error", onEnd);
  }

  private readonly rejectReady: (error: Error) => void;
  private suspended = false;
  private heartbeat: NodeJS.Timeout | null = null;

  /**
   * Sends one request; resolves with the daemon's result. `deadlineMs`: how
   * long the daemon has to answer (default: the channel's operation deadline;
   * null: no deadline, the heartbeat watches the daemon instead). Rejects
   * with SandboxGoneError when the channel is or gets lost.
   */
  request<T>(body: { op: string; [key: string]: unknown }, options: { deadlineMs?: number | null } = {}): Promise<T> {
    if (this.closedError) return Promise.reject(this.closedError);
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      const entry: Pending = {
        resolve: (value) => {
          this.settle(entry);
          resolve(value as T);
        },
        reject: (error) => {
          this.settle(entry);
          reject(error);
        },
        request: body as Pending["request"],
        deadlineMs: options.deadlineMs === undefined ? this.operationDeadlineMs : options.deadlineMs,
        timer: null,
      };
      this.pending.set(id, entry);
      this.arm(entry);
      if (entry.deadlineMs === null) this.startHeartbeat();
      this.stream.write(`${JSON.stringify({ ...body, id })}\n`);
    });
  }

  /** Stops the deadline clocks (the container is about to be frozen: a frozen daemon cannot answer). */
  suspendDeadlines(): void {
    this.suspended = true;
    for (const entry of this.pending.values()) {
      if (entry.timer) clearTimeout(entry.timer);
      entry.timer = null;
    }
  }

  /** Restarts the deadline clocks after a freeze, each with its whole deadline again. */
  resumeDeadlines(): void {
    this.suspended = false;
    for (const entry of this.pending.values()) this.arm(entry);
  }

  private arm(entry: Pending): void {
    if (this.suspended || entry.deadlineMs === null || entry.timer) return;
    const deadline = entry.deadlineMs;
    entry.timer = setTimeout(() => {
      this.lose(
        new SandboxGoneError(
          `sandbox ${this.label}: the in-container daemon did not answer ${entry.request.op} within ${deadline} ms (stopped or hung); the sandbox is treated as lost`,
        ),
      );
    }, deadline);
    entry.timer.unref();
  }

  private settle(entry: Pending): void {
    if (entry.timer) clearTimeout(entry.timer);
    entry.timer = null;
    if (this.heartbeat && ![...this.pending.values()].some((pending) => pending.deadlineMs === null)) {
      clearInterval(this.heartbeat);
      this.heartbeat = null;
    }
  }

  private startHeartbeat(): void {
    if (this.heartbeat) return;
    this.heartbeat = setInterval(() => {
      if (!this.suspended) this.request({ op: "ping" }).catch(() => undefined);
    }, this.operationDeadlineMs / 3);
    this.heartbeat.unref();
  }

  /** The channel is gone: every pending request, and every later one, rejects with `error`. */
  private lose(error: SandboxGoneError): void {
    if (this.closedError) return;
    this.closedError = error;
    this.rejectReady(error);
    for (const [id, pending] of this.pending) {
      this.pending.delete(id);
      pending.reject(error);
    }
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.heartbeat = null;
    this.stream.destroy();
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
