import { randomUUID } from "node:crypto";
import { jetstreamManager } from "@nats-io/jetstream";
import { connect } from "@nats-io/transport-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NatsEventBus } from "../../src/bus/nats-event-bus.ts";
import { describeEventBusConformance, testEvent } from "../helpers/event-bus-conformance.ts";
import { startNatsCluster, type NatsCluster } from "../helpers/nats-cluster.ts";

// One real nats-server (Debian's 2.9) for the suite; each test gets a stream of its own.
let cluster: NatsCluster;
beforeAll(async () => {
  cluster = await startNatsCluster(1);
});
afterAll(async () => {
  await cluster?.close();
});

describeEventBusConformance("NatsEventBus", async () => {
  const agencyId = randomUUID();
  const options = { servers: cluster.url, agencyId, ackWaitMs: 5_000 };
  return {
    open: () => NatsEventBus.open(options),
    dispose: async () => {
      const bus = await NatsEventBus.open(options);
      await bus.deleteStream();
      await bus.close();
    },
  };
});

describe("NatsEventBus on a 3-node JetStream cluster", () => {
  it("keeps publishing through the loss of the stream's leader: every publish resolves once, nothing lost, nothing doubled", async () => {
    await using three = await startNatsCluster(3);
    const agencyId = randomUUID();
    const waits: string[] = [];
    const bus = await NatsEventBus.open({ servers: three.url, agencyId, replicas: 3, onWait: (reason) => waits.push(reason) });
    try {
      const first = Array.from({ length: 50 }, (_, index) => testEvent("before", { data: { index } }));
      for (const event of first) await bus.publish(event);
      const connection = await connect({ servers: three.urls });
      const leader = (await (await jetstreamManager(connection)).streams.info(`AGENCY_${agencyId}`)).cluster?.leader;
      await connection.close();
      const index = Number(/^n(\d+)$/.exec(leader ?? "")?.[1]);
      expect(Number.isInteger(index)).toBe(true);
      // Killed while publishes are in flight: they wait for the new leader, then land once each.
      const second = Array.from({ length: 50 }, (_, index) => testEvent("after", { data: { index } }));
      const publishing = Promise.all(second.map((event) => bus.publish(event)));
      await three.stop(index);
      const sequences = await publishing;
      expect(new Set(sequences).size).toBe(50);
      const log: string[] = [];
      for await (const stored of bus.read({ follow: false })) log.push(stored.event.id);
      expect(log).toEqual([...first, ...second].map((event) => event.id).filter((id) => log.includes(id)));
      expect(new Set(log)).toEqual(new Set([...first, ...second].map((event) => event.id)));
      expect(log).toHaveLength(100);
    } finally {
      await bus.close();
    }
  });
});
