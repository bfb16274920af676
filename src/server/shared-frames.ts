/** Frames in one page: with CloudEvents lines of ~0.5–2 KiB a page is 32–128 KiB, the size of one socket write. */
const PAGE_FRAMES = 64;

/** What {@link SharedFrames.read} hands a client: bytes to send and how many events they hold. */
export interface FrameChunk {
  bytes: Buffer;
  count: number;
}

/**
 * The SSE frames of one run this server runs, each made once and shared by
 * every client of the run (issue 23's bench: 50 clients of a 10 000-event
 * run). One reader of the run's events (the server's own subscription)
 * pushes them here; a client is only a position. Every {@link PAGE_FRAMES}
 * frames are joined into one page buffer, and a client that is behind gets a
 * zero-copy slice of a page (from its position to the page's end), so
 * catching up costs no copy per client; a client at the live end gets the
 * newest frames (one frame: that buffer itself).
 *
 * Why not a Node stream or an EventEmitter per client: both queue every
 * event once per client (what made the server's memory grow with its
 * clients); here the queue is the one frame log and each client a number.
 * The log holds the run's frames for as long as the run goes on or a client
 * reads it (about the size of events.jsonl; the run's own replay holds the
 * events as objects already).
 */
export class SharedFrames {
  private readonly pages: { bytes: Buffer; offsets: Uint32Array }[] = [];
  private tail: Buffer[] = [];
  private ended = false;
  private waiting: (() => void)[] = [];

  /** Events pushed so far: the next event's sequence number. */
  get length(): number {
    return this.pages.length * PAGE_FRAMES + this.tail.length;
  }

  /** Appends the next event (`id:` its sequence, `event:` its type, `data:` its JSON) and wakes the clients waiting for it. */
  push(event: { readonly type: string }): void {
    this.tail.push(Buffer.from(`id: ${this.length}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`));
    if (this.tail.length === PAGE_FRAMES) {
      const offsets = new Uint32Array(PAGE_FRAMES + 1);
      this.tail.forEach((frame, index) => (offsets[index + 1] = offsets[index]! + frame.length));
      this.pages.push({ bytes: Buffer.concat(this.tail, offsets[PAGE_FRAMES]), offsets });
      this.tail = [];
    }
    this.wake();
  }

  /** The run ended: clients finish once they have read everything. */
  end(): void {
    this.ended = true;
    this.wake();
  }

  /**
   * The frames from sequence `from`: up to the end of its page (or of what
   * exists), `null` when there is nothing yet ({@link wait}), `"end"` when the
   * run ended and `from` is past its last event.
   */
  read(from: number): FrameChunk | null | "end" {
    const page = Math.floor(from / PAGE_FRAMES);
    if (page < this.pages.length) {
      const { bytes, offsets } = this.pages[page]!;
      const index = from - page * PAGE_FRAMES;
      return { bytes: bytes.subarray(offsets[index]!, offsets[PAGE_FRAMES]!), count: PAGE_FRAMES - index };
    }
    const frames = this.tail.slice(from - this.pages.length * PAGE_FRAMES);
    if (frames.length === 0) return this.ended ? "end" : null;
    return { bytes: frames.length === 1 ? frames[0]! : Buffer.concat(frames), count: frames.length };
  }

  /** Resolves at the next push or at the end. */
  wait(): Promise<void> {
    return this.ended ? Promise.resolve() : new Promise((resolve) => this.waiting.push(resolve));
  }

  private wake(): void {
    const waiting = this.waiting;
    this.waiting = [];
    for (const resolve of waiting) resolve();
  }
}
