import { ReadBuffer, serializeMessage } from "@modelcontextprotocol/sdk/shared/stdio.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { SandboxProcess, SandboxProcessExit } from "../sandbox/sandbox.js";

/** How long close() lets the server exit by itself after its stdin closes, before killing it, ms. */
const CLOSE_GRACE_MS = 1_000;

/**
 * An MCP client {@link Transport} over a process started in the sandbox
 * (`Sandbox.spawn`): newline-delimited JSON-RPC on its stdin/stdout, the way
 * MCP's stdio transport frames messages (the SDK's own ReadBuffer and
 * serializeMessage). `onclose` fires once, when the process has ended;
 * {@link exit} then says how.
 */
export class SandboxProcessTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  /** How the process ended; null while it runs. Set before `onclose` fires. */
  exit: SandboxProcessExit | null = null;
  private readonly buffer = new ReadBuffer();
  private started = false;

  constructor(private readonly process: SandboxProcess) {}

  async start(): Promise<void> {
    if (this.started) throw new Error("SandboxProcessTransport already started");
    this.started = true;
    this.process.stdout.on("data", (chunk: Buffer) => {
      try {
        this.buffer.append(chunk);
      } catch (error) {
        this.onerror?.(error as Error);
        return;
      }
      this.readMessages();
    });
    this.process.stdout.on("error", (error: Error) => this.onerror?.(error));
    this.process.stdin.on("error", (error: Error) => this.onerror?.(error));
    void this.process.exited.then((exit) => {
      this.exit = exit;
      this.buffer.clear();
      this.onclose?.();
    });
  }

  private readMessages(): void {
    for (;;) {
      let message: JSONRPCMessage | null;
      try {
        message = this.buffer.readMessage();
      } catch (error) {
        // A line that is not JSON-RPC (a server logging to stdout) is reported and skipped.
        this.onerror?.(error as Error);
        continue;
      }
      if (message === null) return;
      this.onmessage?.(message);
    }
  }

  send(message: JSONRPCMessage): Promise<void> {
    if (this.exit) return Promise.reject(new Error("the server process has exited"));
    return new Promise((resolve) => {
      if (this.process.stdin.write(serializeMessage(message))) resolve();
      else this.process.stdin.once("drain", resolve);
    });
  }

  /** Closes the server's stdin (MCP's stdio shutdown), then kills it if it has not exited within a second. */
  async close(): Promise<void> {
    if (!this.exit) {
      this.process.stdin.end();
      let timer: NodeJS.Timeout | undefined;
      const exited = await Promise.race([
        this.process.exited.then(() => true),
        new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(false), CLOSE_GRACE_MS);
        }),
      ]);
      clearTimeout(timer);
      if (!exited) await this.process.kill();
    }
    await this.process.exited;
    // Let `onclose` (queued on the same promise) run before close() resolves.
    await Promise.resolve();
  }
}
