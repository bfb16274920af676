import { afterEach, describe, expect, it, vi } from "vitest";
import { CancelledError } from "../../src/errors.js";
import { MinuteWindow } from "../../src/process/minute-window.js";

afterEach(() => {
  vi.useRealTimers();
});

describe("MinuteWindow (per-minute policy limits)", () => {
  it("lets amounts through below the limit and holds the next one until the oldest leaves the minute", async () => {
    vi.useFakeTimers({ now: 0 });
    const window = new MinuteWindow();
    await window.waitBelow(2);
    window.add(1);
    vi.setSystemTime(10_000);
    await window.waitBelow(2);
    window.add(1);
    let released = false;
    const third = window.waitBelow(2).then(() => (released = true));
    await vi.advanceTimersByTimeAsync(49_000);
    expect(released).toBe(false);
    await vi.advanceTimersByTimeAsync(1_000);
    await third;
    expect(Date.now()).toBe(60_000);
  });

  it("a wait ends with CancelledError when its signal aborts", async () => {
    const window = new MinuteWindow();
    window.add(5);
    const controller = new AbortController();
    const waiting = window.waitBelow(5, controller.signal);
    controller.abort();
    await expect(waiting).rejects.toBeInstanceOf(CancelledError);
  });
});
