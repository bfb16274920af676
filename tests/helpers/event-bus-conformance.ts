/**
 * The EventBus conformance suite (src/bus/event-bus.ts): every backend runs
 * it, as testcontainers runs one suite over its container runtimes. A
 * backend's test file calls
 *
 *   describeEventBusConformance("FileEventBus", async () => ({ open: …, dispose: … }));
 *
 * with a fixture whose `open` can be called again after the bus is closed and
 * opens the same bus (its log and its consumers): that is how the suite
 * checks what survives a restart. No sleeps: every wait is on the bus.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createAgencyEvent } from "../../src/bus/agency-event.ts";
import { EventRejectedError, MAX_EVENT_DATA_BYTES, type AgencyEvent, type EventBus, type StoredEvent } from "../../src/bus/event-bus.ts";

/** One backend's bus for one test. */
export interface EventBusFixture {
  /** Opens the bus; after `close`, opens the same one again. */
  open(): Promise<EventBus>;
  /** Removes whatever the fixture made (directories, streams). */
  dispose(): Promise<void>;
}

const SOURCE = "agent-runner://agencies/conformance/orchestrator";

/** An event of type `type` with a fresh id (or `id`). */
export function testEvent(type: string, init: { id?: string; data?: unknown } = {}): AgencyEvent {
  return createAgencyEvent({ type, source: SOURCE, correlationid: "conformance", ...init });
}

/** Every stored event, without following. */
async function stored(bus: EventBus, from = 0): Promise<StoredEvent[]> {
  const events: StoredEvent[] = [];
  for await (const event of bus.read({ from, follow: false })) events.push(event);
  return events;
}

/** The next `count` items of `iterator`. */
async function next<T>(iterator: AsyncIterator<T>, count: number): Promise<T[]> {
  const items: T[] = [];
  while (items.length < count) {
    const result = await iterator.next();
    if (result.done) throw new Error(`the iteration ended after ${items.length} of ${count} items`);
    items.push(result.value);
  }
  return items;
}

/** Registers the conformance tests for one EventBus backend. */
export function describeEventBusConformance(name: string, createFixture: () => Promise<EventBusFixture>): void {
  describe(`EventBus conformance: ${name}`, () => {
    let fixture: EventBusFixture;
    let bus: EventBus;

    beforeEach(async () => {
      fixture = await createFixture();
      bus = await fixture.open();
    });

    afterEach(async () => {
      await bus.close();
      await fixture.dispose();
    });

    /** Closes the bus and opens the same one again. */
    async function reopen(): Promise<void> {
      await bus.close();
      bus = await fixture.open();
    }

    it("gives each publish the next sequence, from 0, and reads them back in order", async () => {
      expect(await bus.nextSequence()).toBe(0);
      const events = ["a.one", "a.two", "a.three"].map((type) => testEvent(type, { data: { type } }));
      const sequences: number[] = [];
      for (const event of events) sequences.push(await bus.publish(event));
      expect(sequences).toEqual([0, 1, 2]);
      expect(await bus.nextSequence()).toBe(3);
      expect(await stored(bus)).toEqual(events.map((event, sequence) => ({ sequence, event })));
    });

    it("reads from any sequence, then follows live events", async () => {
      for (let index = 0; index < 5; index += 1) await bus.publish(testEvent("stored", { data: { index } }));
      const controller = new AbortController();
      const iterator = bus.read({ from: 3, signal: controller.signal })[Symbol.asyncIterator]();
      expect((await next(iterator, 2)).map((event) => event.sequence)).toEqual([3, 4]);
      const waiting = iterator.next();
      const live = testEvent("live");
      await bus.publish(live);
      expect(await waiting).toEqual({ done: false, value: { sequence: 5, event: live } });
      controller.abort();
      expect(await iterator.next()).toEqual({ done: true, value: undefined });
    });

    it("ends a read without follow at the last stored event, and reads nothing past the end", async () => {
      await bus.publish(testEvent("one"));
      await bus.publish(testEvent("two"));
      expect((await stored(bus, 1)).map((event) => event.event.type)).toEqual(["two"]);
      expect(await stored(bus, 2)).toEqual([]);
      expect(await stored(bus, 7)).toEqual([]);
    });

    it("lets a subscriber that starts late replay from 0 and lose nothing", async () => {
      const early = Array.from({ length: 10 }, (_, index) => testEvent("early", { data: { index } }));
      for (const event of early) await bus.publish(event);
      const controller = new AbortController();
      const iterator = bus.consume("late", { signal: controller.signal })[Symbol.asyncIterator]();
      const replayed = await next(iterator, 10);
      expect(replayed.map((delivery) => delivery.event)).toEqual(early);
      expect(replayed.map((delivery) => delivery.deliveryCount)).toEqual(Array(10).fill(1));
      const waiting = iterator.next();
      const live = testEvent("later");
      await bus.publish(live);
      expect((await waiting).value).toEqual({ sequence: 10, event: live, deliveryCount: 1 });
      controller.abort();
      expect((await iterator.next()).done).toBe(true);
    });

    it("delivers unacked events again after a reopen, counting the deliveries, and never an acked one", async () => {
      for (let index = 0; index < 4; index += 1) await bus.publish(testEvent("work", { data: { index } }));
      const first = bus.consume("worker")[Symbol.asyncIterator]();
      expect((await next(first, 4)).map((delivery) => [delivery.sequence, delivery.deliveryCount])).toEqual([
        [0, 1],
        [1, 1],
        [2, 1],
        [3, 1],
      ]);
      await bus.ack("worker", 1);
      await bus.ack("worker", 3);
      await reopen();
      expect(await bus.ackFloor("worker")).toBe(0);
      const controller = new AbortController();
      const second = bus.consume("worker", { signal: controller.signal })[Symbol.asyncIterator]();
      expect((await next(second, 2)).map((delivery) => [delivery.sequence, delivery.deliveryCount])).toEqual([
        [0, 2],
        [2, 2],
      ]);
      // Nothing else is pending: the next delivery is a new event.
      const waiting = second.next();
      await bus.publish(testEvent("new"));
      expect((await waiting).value).toMatchObject({ sequence: 4, deliveryCount: 1 });
      controller.abort();
    });

    it("redelivers pending events to a new consume of the same name in the same process", async () => {
      await bus.publish(testEvent("work"));
      await bus.publish(testEvent("work"));
      const first = bus.consume("worker")[Symbol.asyncIterator]();
      await next(first, 2);
      await bus.ack("worker", 0);
      await first.return?.();
      const controller = new AbortController();
      const second = bus.consume("worker", { signal: controller.signal })[Symbol.asyncIterator]();
      expect((await second.next()).value).toMatchObject({ sequence: 1, deliveryCount: 2 });
      controller.abort();
    });

    it("takes an ack of a delivery after its consume ended (an invocation finishing after the agency stopped taking events)", async () => {
      await bus.publish(testEvent("work"));
      await bus.publish(testEvent("work"));
      const first = bus.consume("worker")[Symbol.asyncIterator]();
      await next(first, 2);
      await first.return?.();
      await bus.ack("worker", 1);
      expect(await bus.ackFloor("worker")).toBe(0);
      const controller = new AbortController();
      const second = bus.consume("worker", { signal: controller.signal })[Symbol.asyncIterator]();
      expect((await second.next()).value).toMatchObject({ sequence: 0, deliveryCount: 2 });
      const waiting = second.next();
      await bus.publish(testEvent("new"));
      expect((await waiting).value).toMatchObject({ sequence: 2, deliveryCount: 1 });
      controller.abort();
    });

    it("allows one consume per name at a time, and independent consumers side by side", async () => {
      await bus.publish(testEvent("shared"));
      const controller = new AbortController();
      const first = bus.consume("one", { signal: controller.signal })[Symbol.asyncIterator]();
      expect((await first.next()).value).toMatchObject({ sequence: 0 });
      await expect(bus.consume("one")[Symbol.asyncIterator]().next()).rejects.toThrow(/already being consumed/);
      const other = bus.consume("two", { signal: controller.signal })[Symbol.asyncIterator]();
      expect((await other.next()).value).toMatchObject({ sequence: 0, deliveryCount: 1 });
      controller.abort();
    });

    it("moves the ack floor over out-of-order acks only when the gap below closes", async () => {
      for (let index = 0; index < 6; index += 1) await bus.publish(testEvent("work"));
      expect(await bus.ackFloor("acker")).toBe(0);
      const deliveries = bus.consume("acker")[Symbol.asyncIterator]();
      await next(deliveries, 6);
      await bus.ack("acker", 2);
      await bus.ack("acker", 4);
      expect(await bus.ackFloor("acker")).toBe(0);
      await bus.ack("acker", 0);
      expect(await bus.ackFloor("acker")).toBe(1);
      await bus.ack("acker", 1);
      expect(await bus.ackFloor("acker")).toBe(3);
      await bus.ack("acker", 1);
      await bus.ack("acker", 4);
      expect(await bus.ackFloor("acker")).toBe(3);
      await bus.ack("acker", 3);
      expect(await bus.ackFloor("acker")).toBe(5);
      await deliveries.return?.();
      await reopen();
      expect(await bus.ackFloor("acker")).toBe(5);
      const controller = new AbortController();
      const iterator = bus.consume("acker", { signal: controller.signal })[Symbol.asyncIterator]();
      expect((await iterator.next()).value).toMatchObject({ sequence: 5 });
      controller.abort();
    });

    it("never redelivers an event acked above the floor, before or after a reopen", async () => {
      for (let index = 0; index < 4; index += 1) await bus.publish(testEvent("work"));
      const before = bus.consume("skipper")[Symbol.asyncIterator]();
      expect((await next(before, 4)).map((delivery) => delivery.sequence)).toEqual([0, 1, 2, 3]);
      await bus.ack("skipper", 2);
      await bus.ack("skipper", 1);
      await before.return?.();
      const again = bus.consume("skipper")[Symbol.asyncIterator]();
      expect((await next(again, 2)).map((delivery) => [delivery.sequence, delivery.deliveryCount])).toEqual([
        [0, 2],
        [3, 2],
      ]);
      await again.return?.();
      await reopen();
      const after = bus.consume("skipper")[Symbol.asyncIterator]();
      expect((await next(after, 2)).map((delivery) => [delivery.sequence, delivery.deliveryCount])).toEqual([
        [0, 3],
        [3, 3],
      ]);
      await after.return?.();
    });

    it("refuses an ack of a sequence that is not stored, and a consumer name the other backend could not hold", async () => {
      await bus.publish(testEvent("only"));
      await expect(bus.ack("acker", 1)).rejects.toThrow(/sequence/);
      await expect(bus.ack("acker", -1)).rejects.toThrow(/sequence/);
      await expect(bus.ackFloor("a.b")).rejects.toThrow(/consumer name/);
      await expect(bus.consume("with space")[Symbol.asyncIterator]().next()).rejects.toThrow(/consumer name/);
    });

    it("stores a duplicate id once and returns the first sequence, also for publishes in flight together", async () => {
      const event = testEvent("once", { id: "outside-42", data: { first: true } });
      expect(await bus.publish(testEvent("before"))).toBe(0);
      expect(await bus.publish(event)).toBe(1);
      expect(await bus.publish({ ...event, data: { first: false } })).toBe(1);
      const twin = testEvent("twin", { id: "twin" });
      expect(await Promise.all([bus.publish(twin), bus.publish(twin), bus.publish({ ...twin })])).toEqual([2, 2, 2]);
      await reopen();
      expect(await bus.publish(event)).toBe(1);
      expect(await bus.nextSequence()).toBe(3);
      expect((await stored(bus)).map((stored) => stored.event)).toEqual([expect.objectContaining({ type: "before" }), event, twin]);
    });

    it("accepts data of exactly 16 KiB and refuses 16 KiB + 1 byte, naming dataref, storing nothing", async () => {
      // A JSON string is its characters plus two quotes.
      const exact = testEvent("exact", { data: "x".repeat(MAX_EVENT_DATA_BYTES - 2) });
      expect(await bus.publish(exact)).toBe(0);
      const over = testEvent("over", { data: "x".repeat(MAX_EVENT_DATA_BYTES - 1) });
      const refusal = await bus.publish(over).then(
        () => null,
        (error: unknown) => error,
      );
      expect(refusal).toBeInstanceOf(EventRejectedError);
      expect(refusal).toMatchObject({ reason: "too_large" });
      expect((refusal as Error).message).toMatch(/16385 bytes.*16384.*dataref/);
      const multibyte = testEvent("multibyte", { data: "é".repeat(MAX_EVENT_DATA_BYTES / 2) });
      await expect(bus.publish(multibyte)).rejects.toMatchObject({ reason: "too_large" });
      expect(await bus.nextSequence()).toBe(1);
      expect((await stored(bus)).map((stored) => stored.event.id)).toEqual([exact.id]);
    });

    it("refuses a malformed event, naming the field", async () => {
      const event = testEvent("bad");
      await expect(bus.publish({ ...event, hops: -1 })).rejects.toMatchObject({ reason: "invalid", message: expect.stringMatching(/hops/) });
      await expect(bus.publish({ ...event, traceparent: "nope" })).rejects.toMatchObject({ message: expect.stringMatching(/traceparent/) });
      await expect(bus.publish({ ...event, causationId: "x" } as AgencyEvent)).rejects.toMatchObject({ message: expect.stringMatching(/causationId/) });
      expect(await bus.nextSequence()).toBe(0);
    });

    it("ends every read and consume when it closes, and refuses publishes after", async () => {
      await bus.publish(testEvent("one"));
      const reader = bus.read({ from: 1 })[Symbol.asyncIterator]();
      const consumer = bus.consume("closing")[Symbol.asyncIterator]();
      expect((await consumer.next()).value).toMatchObject({ sequence: 0 });
      const readerWaiting = reader.next();
      const consumerWaiting = consumer.next();
      await bus.close();
      expect(await readerWaiting).toEqual({ done: true, value: undefined });
      expect(await consumerWaiting).toEqual({ done: true, value: undefined });
      await expect(bus.publish(testEvent("late"))).rejects.toThrow(/closed/);
      await bus.close();
    });

    it("gives concurrent publishes dense, unique sequences in the order the log holds them", async () => {
      const events = Array.from({ length: 500 }, (_, index) => testEvent("burst", { data: { index } }));
      const sequences = await Promise.all(events.map((event) => bus.publish(event)));
      expect([...sequences].sort((a, b) => a - b)).toEqual(events.map((_, index) => index));
      const log = await stored(bus);
      expect(log).toHaveLength(500);
      for (const [index, event] of events.entries()) expect(log[sequences[index]!]!.event.id).toBe(event.id);
      await reopen();
      expect(await bus.nextSequence()).toBe(500);
    });
  });
}
