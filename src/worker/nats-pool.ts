import { hostname } from "node:os";
import type { NatsConnection } from "@nats-io/transport-node";
import { ConfigError, errorMessage, SandboxError } from "../errors.js";
import { connectNats, parseNatsServers } from "../bus/nats-connection.js";
import { checkPoolName, WorkQueue } from "./work-queue.js";

/** The NATS flags `runner worker` and `runner batch run --nats` share, as commander parses them. */
export interface NatsFlags {
  nats: string;
  pool?: string;
  /** Seconds; only the process that creates the pool's consumer sets it. */
  ackWait?: string;
  maxDeliver?: string;
}

/** `--nats`, `--pool`, `--ack-wait`, `--max-deliver` checked (ConfigError naming the flag), for a batch's plan. */
export function parseNatsFlags(flags: NatsFlags): { servers: string[]; pool: string; ack_wait_ms: number | null; max_deliver: number | null } {
  const whole = (value: string | undefined, flag: string, least: number, most: number): number | null => {
    if (value === undefined) return null;
    const number = Number(value);
    if (!/^\d+$/.test(value.trim()) || number < least || number > most)
      throw new ConfigError(`${flag}: expected a whole number from ${least} to ${most}, got "${value}"`);
    return number;
  };
  const ackWait = whole(flags.ackWait, "--ack-wait", 1, 3600);
  return {
    servers: parseNatsServers(flags.nats),
    pool: checkPoolName(flags.pool ?? "default"),
    ack_wait_ms: ackWait === null ? null : ackWait * 1000,
    max_deliver: whole(flags.maxDeliver, "--max-deliver", 1, 100),
  };
}

/**
 * Connects with the environment's credentials (src/bus/nats-connection.ts)
 * and opens the pool's queue. A cluster that does not answer is an
 * infrastructure stop (SandboxError, reason `nats_unreachable`, exit 3).
 */
export async function openPool(
  settings: ReturnType<typeof parseNatsFlags>,
  role: "worker" | "submitter",
  onWait: (reason: string) => void,
): Promise<{ connection: NatsConnection; queue: WorkQueue }> {
  let connection: NatsConnection;
  try {
    connection = await connectNats({ servers: settings.servers, name: `agent-runner ${role} ${hostname()}:${process.pid}`, environment: process.env });
  } catch (error) {
    if (error instanceof ConfigError) throw error;
    throw new SandboxError(`${errorMessage(error)}; check --nats and that the servers run (docs/scale-out.md)`, { reason: "nats_unreachable", cause: error });
  }
  try {
    const queue = await WorkQueue.open(connection, {
      pool: settings.pool,
      ...(settings.ack_wait_ms !== null ? { ackWaitMs: settings.ack_wait_ms } : {}),
      ...(settings.max_deliver !== null ? { maxDeliver: settings.max_deliver } : {}),
      onWait,
    });
    return { connection, queue };
  } catch (error) {
    await connection.close();
    throw new SandboxError(`pool ${settings.pool}: JetStream is not usable: ${errorMessage(error)}`, { reason: "nats_unavailable", cause: error });
  }
}
