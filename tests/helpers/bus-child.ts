/**
 * A child process for the FileEventBus crash tests (tests/unit/bus): opens
 * the bus in a directory and works until it is killed, writing one line to
 * stdout per finished step (stdout to a pipe is synchronous on Linux, so a
 * line the parent read was written before the step's promise resolved).
 *
 *   publish <dir>: publishes 4 KiB events, 32 in flight; `published <sequence> <id>` per resolved publish.
 *   consume <dir>: consumes `worker`, acking odd sequences; `delivered <sequence> <count>`, `acked <sequence>`.
 *   publish-to <dir> <id>: FileEventBus.publishTo of one event with that id; `published <sequence>`, then exits.
 */
import { FileEventBus } from "../../src/bus/file-event-bus.ts";
import { createAgencyEvent } from "../../src/bus/agency-event.ts";

const [mode, directory, id] = process.argv.slice(2);
if (!["publish", "consume", "publish-to"].includes(mode ?? "") || !directory)
  throw new Error("usage: bus-child.ts publish|consume|publish-to <directory> [id]");
const source = "agent-runner://agencies/crash/orchestrator";

if (mode === "publish-to") {
  const sequence = await FileEventBus.publishTo(directory, createAgencyEvent({ type: "outside.event", source, correlationid: "crash", id }));
  process.stdout.write(`published ${sequence}\n`);
  process.exit(0);
}
const bus = await FileEventBus.open(directory);

if (mode === "publish") {
  const padding = "p".repeat(4096);
  const publisher = async (): Promise<never> => {
    for (;;) {
      const event = createAgencyEvent({ type: "crash.test", source, correlationid: "crash", data: { padding } });
      const sequence = await bus.publish(event);
      process.stdout.write(`published ${sequence} ${event.id}\n`);
    }
  };
  await Promise.all(Array.from({ length: 32 }, publisher));
} else {
  for await (const delivery of bus.consume("worker")) {
    process.stdout.write(`delivered ${delivery.sequence} ${delivery.deliveryCount}\n`);
    if (delivery.sequence % 2 === 1) {
      await bus.ack("worker", delivery.sequence);
      process.stdout.write(`acked ${delivery.sequence}\n`);
    }
  }
}
