import { createHash } from "node:crypto";
import { watch, type FSWatcher } from "node:fs";
import { mkdir, readdir, readFile, rename, unlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { AgencyEvent } from "./event-bus.js";

/** The inbox folder of a bus directory: events other processes hand to the process that has the bus open. */
export const INBOX = "inbox";

/**
 * Hands `event` to the process that has the file bus in `directory` open:
 * one file `inbox/<sha256 of the id>.json`, written whole and then renamed
 * into place, so the owner never reads half of it (and a retry with the same
 * id replaces it rather than adding a second).
 */
export async function dropInInbox(directory: string, event: AgencyEvent): Promise<void> {
  const inbox = join(directory, INBOX);
  await mkdir(inbox, { recursive: true, mode: 0o700 });
  const name = `${createHash("sha256").update(event.id).digest("hex")}.json`;
  const temporary = join(inbox, `.${name}.${process.pid}.tmp`);
  await writeFile(temporary, JSON.stringify(event), { mode: 0o600 });
  await rename(temporary, join(inbox, name));
}

/**
 * The owner's side of the inbox: publishes every event file in it, then
 * removes the file; again whenever the folder changes (inotify through
 * fs.watch). Publishing dedupes by id, so a file published but not yet
 * removed when the process died is harmless on the next open. A file that is
 * not an acceptable event is renamed `<name>.rejected` with the reason in
 * `<name>.rejected.txt` and left for a person.
 */
export class InboxDrain {
  private draining: Promise<void> | null = null;
  private again = false;
  private stopped = false;

  private constructor(
    private readonly inbox: string,
    private readonly publish: (event: AgencyEvent) => Promise<unknown>,
    private watcher: FSWatcher | null,
  ) {}

  /** Starts watching `directory`'s inbox and drains what is already in it; resolves after that first drain. */
  static async start(directory: string, publish: (event: AgencyEvent) => Promise<unknown>): Promise<InboxDrain> {
    const inbox = join(directory, INBOX);
    await mkdir(inbox, { recursive: true, mode: 0o700 });
    const drain = new InboxDrain(inbox, publish, null);
    // A failed drain (the folder gone, a full disk) leaves the files where they are: the next change or open drains again.
    const drainQuietly = (): void => void drain.drain().catch(() => undefined);
    // Persistent: like an open connection to a broker, an open bus keeps its process alive for events from outside.
    drain.watcher = watch(inbox, drainQuietly);
    drain.watcher.on("error", drainQuietly);
    await drain.drain();
    return drain;
  }

  /** Drains once more (joining a drain under way: it runs again after). */
  drain(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (this.draining) {
      this.again = true;
      return this.draining;
    }
    this.draining = (async () => {
      do {
        this.again = false;
        await this.drainOnce();
      } while (this.again && !this.stopped);
    })().finally(() => {
      this.draining = null;
    });
    return this.draining;
  }

  private async drainOnce(): Promise<void> {
    const names = (await readdir(this.inbox)).filter((name) => name.endsWith(".json") && !name.startsWith(".")).sort();
    for (const name of names) {
      if (this.stopped) return;
      const path = join(this.inbox, name);
      let text: string;
      try {
        text = await readFile(path, "utf8");
      } catch {
        continue; // removed by an earlier drain
      }
      try {
        await this.publish(JSON.parse(text) as AgencyEvent);
      } catch (error) {
        if (this.stopped) return;
        await writeFile(`${path}.rejected.txt`, `${(error as Error).message}\n`);
        await rename(path, `${path}.rejected`);
        continue;
      }
      await unlink(path).catch(() => undefined);
    }
  }

  /** Stops watching and waits for a drain under way. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.watcher?.close();
    await this.draining;
  }
}
