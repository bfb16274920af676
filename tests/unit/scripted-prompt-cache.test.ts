import { describe, expect, it } from "vitest";
import { MIN_CACHED_PREFIX_TOKENS, PromptCache, scriptedTokens, type PromptBlock } from "../../src/model/scripted-prompt-cache.js";

/** A block of exactly `tokens` scripted tokens. */
const block = (letter: string, tokens: number, breakpoint = false): PromptBlock => ({ text: letter.repeat(tokens * 4), breakpoint });

describe("PromptCache (the scripted model's provider cache)", () => {
  it("automatic: reads the longest prefix an earlier request had, in 128-token steps past 1024, and never below the minimum", () => {
    const cache = new PromptCache();
    const first = [block("a", 1000), block("b", 300)];
    expect(cache.measure(first, "automatic")).toEqual({ prompt: 1300, cached: 0, cacheWrite: 0 });
    // Same prefix plus a new block: 1300 tokens were seen, rounded down to 1024 + 2 * 128.
    expect(cache.measure([...first, block("c", 50)], "automatic")).toEqual({ prompt: 1350, cached: 1280, cacheWrite: 0 });
    // A prefix that was seen but is under the minimum is never a hit.
    const small = new PromptCache();
    small.measure([block("a", MIN_CACHED_PREFIX_TOKENS - 1)], "automatic");
    expect(small.measure([block("a", MIN_CACHED_PREFIX_TOKENS - 1), block("z", 10)], "automatic").cached).toBe(0);
  });

  it("breakpoints: only marked prefixes are written and read; the write is the part past the last hit", () => {
    const cache = new PromptCache();
    const system = block("s", 1200, true);
    expect(cache.measure([system, block("u", 100, true)], "breakpoints")).toEqual({ prompt: 1300, cached: 0, cacheWrite: 1300 });
    // The next turn moves the last breakpoint forward: reads 1300, writes the 200 new tokens.
    expect(cache.measure([system, block("u", 100), block("v", 200, true)], "breakpoints")).toEqual({ prompt: 1500, cached: 1300, cacheWrite: 200 });
    // Nothing marked: nothing read, nothing written, even though the prefix was cached.
    expect(
      cache.measure(
        [system, block("u", 100)].map((entry) => ({ text: entry.text })),
        "breakpoints",
      ),
    ).toEqual({ prompt: 1300, cached: 0, cacheWrite: 0 });
  });

  it("counts 4 characters a token, rounded up", () => {
    expect(scriptedTokens("abcde")).toBe(2);
    expect(scriptedTokens(8)).toBe(2);
  });
});
