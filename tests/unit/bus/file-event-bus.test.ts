import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FileEventBus } from "../../../src/bus/file-event-bus.ts";
import { describeEventBusConformance } from "../../helpers/event-bus-conformance.ts";

describeEventBusConformance("FileEventBus", async () => {
  const directory = await mkdtemp(join(tmpdir(), "file-event-bus-"));
  return {
    open: () => FileEventBus.open(directory),
    dispose: () => rm(directory, { recursive: true, force: true }),
  };
});
