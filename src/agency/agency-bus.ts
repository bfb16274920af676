import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { LockHeldError, lockFile } from "../bus/directory-lock.js";
import type { AgencyEvent, EventBus, StoredEvent } from "../bus/event-bus.js";
import { BUS_FILES, FileEventBus } from "../bus/file-event-bus.js";
import { parseNatsServers } from "../bus/nats-connection.js";
import { NatsEventBus } from "../bus/nats-event-bus.js";
import { readBusLog } from "../bus/read-bus-log.js";
import { ConfigError, errorMessage, RunnerError, SandboxError } from "../errors.js";
import type { AgencyDirectory, AgencyRecord } from "./agency-directory.js";

/** Options of a read of the agency's events (see EventBus.read). */
export interface AgencyReadOptions {
  /** The first sequence, 0-based. Default 0. */
  from?: number;
  /** Default false here: end at the last stored event; true: then wait for new ones until `signal` aborts. */
  follow?: boolean;
  signal?: AbortSignal;
}

/**
 * The one way to an agency's bus (docs/agency.md "The bus") for every
 * process: the one that runs the agency (its owner) and the others —
 * `runner agency events/publish/show`, `runner serve`'s agency routes, the
 * trace of `agency show` and the OTLP export. The agency's record
 * (`definition.bus`) says which backend holds the events:
 *
 * - `file`: bus.jsonl in the agency's directory (src/bus/file-event-bus.ts);
 *   readers read the file, an outside event goes through the owner's inbox;
 * - `nats://host:port[,host:port…]`: the JetStream stream `AGENCY_<id>`
 *   (src/bus/nats-event-bus.ts), reached with the `RUNNER_NATS_*`
 *   credentials (src/bus/nats-connection.ts) by every process alike.
 *
 * Either way the owner holds bus.lock in the agency's directory (so
 * `agencyRunning` answers for both), and the records (agency.json,
 * invocations.jsonl, outbox/, the report) stay on the owner's disk.
 * A NATS cluster that does not answer is a SandboxError (exit 3, reason
 * `nats_unreachable`) naming the URLs, after nats.js's connect timeout at
 * most (20 s), never a hang.
 */
export class AgencyBus {
  private constructor(
    readonly directory: AgencyDirectory,
    readonly record: AgencyRecord,
  ) {}

  /** The bus of the agency in `directory`, as its record (agency.json, read when not given) names it. */
  static of(directory: AgencyDirectory, record: AgencyRecord = directory.readRecord()): AgencyBus {
    return new AgencyBus(directory, record);
  }

  /** The seed URLs of a `nats://` bus; null for the file bus. ConfigError for a malformed one (agency.json edited by hand). */
  get natsServers(): string[] | null {
    const bus = this.record.definition.bus;
    return bus === "file" ? null : parseNatsServers(bus, `agency ${this.record.agency_id}: bus`);
  }

  /**
   * Opens the bus as the agency's owner (the orchestrator's process): takes
   * the lock, and on NATS makes deliveries a killed owner left pending come
   * again at once (NatsEventBus.redeliverAbandoned). `close()` releases
   * both. Throws ConfigError when another live process owns the agency,
   * SandboxError when NATS cannot be reached or used.
   */
  async openAsOwner(options: { onWait?: (reason: string) => void } = {}): Promise<EventBus> {
    const servers = this.natsServers;
    if (!servers) {
      try {
        return await FileEventBus.open(this.directory.busDirectory);
      } catch (error) {
        throw new ConfigError(`agency ${this.record.agency_id}: ${errorMessage(error)}`, { cause: error });
      }
    }
    let unlock: () => Promise<void>;
    try {
      unlock = await lockFile(join(this.directory.busDirectory, BUS_FILES.lock), `agency ${this.record.agency_id}'s bus`);
    } catch (error) {
      if (error instanceof LockHeldError) throw new ConfigError(`agency ${this.record.agency_id}: ${error.message}`, { cause: error });
      throw error;
    }
    try {
      const bus = await this.openNats(servers, { create: true, ...options });
      await bus.redeliverAbandoned().catch(async (error: unknown) => {
        await bus.close();
        throw this.unusable(servers, error);
      });
      return ownedBus(bus, unlock);
    } catch (error) {
      await unlock();
      throw error;
    }
  }

  /**
   * The agency's events from `from` in order, without owning the bus (any
   * process, while the agency runs or after). With `follow` it waits for new
   * ones until `signal` aborts. Throws SandboxError when NATS cannot be
   * reached or holds no stream for the agency.
   */
  async *read(options: AgencyReadOptions = {}): AsyncIterable<StoredEvent> {
    const servers = this.natsServers;
    const follow = options.follow ?? false;
    if (!servers) {
      yield* readBusLog(this.directory.busDirectory, { ...options, follow });
      return;
    }
    const bus = await this.openNats(servers, { create: false });
    try {
      yield* bus.read({ ...options, follow });
    } finally {
      await bus.close();
    }
  }

  /**
   * Stores an outside event in the agency's bus from any process, resolving
   * with its sequence; an id already stored resolves with the earlier
   * sequence (within JetStream's dedupe window on NATS). A running agency
   * takes it at once (file: through its inbox, see FileEventBus.publishTo,
   * waiting until `signal` aborts); a stopped one on its next resume.
   * Throws EventRejectedError before storing anything for a refused event.
   */
  async publish(event: AgencyEvent, options: { signal?: AbortSignal } = {}): Promise<number> {
    const servers = this.natsServers;
    if (!servers) return FileEventBus.publishTo(this.directory.busDirectory, event, options);
    const bus = await this.openNats(servers, { create: true });
    try {
      return await bus.publish(event);
    } finally {
      await bus.close();
    }
  }

  /** How many events the bus holds (the next publish's sequence). */
  async count(): Promise<number> {
    const servers = this.natsServers;
    if (!servers) {
      const file = join(this.directory.busDirectory, BUS_FILES.log);
      if (!existsSync(file)) return 0;
      let lines = 0;
      for (const byte of readFileSync(file)) if (byte === 0x0a) lines++;
      return lines;
    }
    const bus = await this.openNats(servers, { create: false });
    try {
      return await bus.nextSequence();
    } finally {
      await bus.close();
    }
  }

  private async openNats(servers: string[], options: { create: boolean; onWait?: (reason: string) => void }): Promise<NatsEventBus> {
    try {
      return await NatsEventBus.open({ servers, agencyId: this.record.agency_id, ...options });
    } catch (error) {
      if (error instanceof RunnerError) throw error;
      throw this.unusable(servers, error);
    }
  }

  private unusable(servers: string[], error: unknown): SandboxError {
    const unreachable = /cannot reach NATS/.test(errorMessage(error));
    return new SandboxError(
      `agency ${this.record.agency_id}: bus ${servers.join(",")}: ${errorMessage(error)}; ` +
        (unreachable ? "start the NATS servers or fix `bus:` (docs/scale-out.md)" : "is JetStream enabled on that cluster? (docs/scale-out.md)"),
      { reason: unreachable ? "nats_unreachable" : "nats_unavailable", cause: error },
    );
  }
}

/** `bus` whose close also releases the owner's lock. */
function ownedBus(bus: EventBus, unlock: () => Promise<void>): EventBus {
  return {
    publish: (event) => bus.publish(event),
    read: (options) => bus.read(options),
    consume: (name, options) => bus.consume(name, options),
    ack: (name, sequence) => bus.ack(name, sequence),
    ackFloor: (name) => bus.ackFloor(name),
    nextSequence: () => bus.nextSequence(),
    async close() {
      try {
        await bus.close();
      } finally {
        await unlock();
      }
    },
  };
}
