// The price table and its lookup (issue 12 item 6): model ids as providers
// and routers spell them find their entry, near misses find none (a cost is
// right or null), task prices win, and the cost of a usage splits its tokens.
import { describe, expect, it } from "vitest";
import { PRICE_TABLE, PRICE_TABLE_DATE } from "../../src/model/price-table.js";
import { costOf, lookupPrices, pricingOf } from "../../src/model/pricing.js";

describe("the price table", () => {
  it("finds models by id, dated snapshot, router path and dotted Claude version", () => {
    const input = (id: string) => lookupPrices(id)?.prices.input ?? null;
    expect(input("claude-sonnet-4-5")).toBe(3);
    expect(input("claude-sonnet-4-5-20250929")).toBe(3);
    expect(input("claude-sonnet-4-20250514")).toBe(3);
    expect(input("anthropic/claude-sonnet-4.5")).toBe(3);
    expect(input("claude-sonnet-4-5@20250929")).toBe(3);
    expect(input("Claude-Opus-4-1-20250805")).toBe(15);
    expect(input("claude-opus-4-5-20251101")).toBe(5);
    expect(input("claude-haiku-4-5-20251001")).toBe(1);
    expect(input("gpt-4.1-2025-04-14")).toBe(2);
    expect(input("gpt-4.1-mini")).toBe(0.4);
    expect(input("gpt-4o-mini-2024-07-18")).toBe(0.15);
    expect(input("openai/gpt-5")).toBe(1.25);
    expect(input("o4-mini-2025-04-16")).toBe(1.1);
    expect(input("deepseek-chat")).toBe(0.27);
  });

  it("prices no near miss as its neighbour", () => {
    for (const id of ["gpt-4o-audio-preview", "claude-sonnet-4-5-thinking", "gpt-5-chat", "gpt-4o-2024-05-13", "my-model", "claude-sonnet", "gpt-4"])
      expect(lookupPrices(id), id).toBeNull();
  });

  it("has every entry with four prices, a source and a date", () => {
    expect(PRICE_TABLE_DATE).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    for (const entry of PRICE_TABLE) {
      expect(entry.source).toMatch(/^https:\/\//);
      for (const price of Object.values(entry.prices)) expect(price).toBeGreaterThanOrEqual(0);
      if (!entry.checked) expect(entry.note, entry.ids[0]).toBeTruthy();
    }
    const ids = PRICE_TABLE.flatMap((entry) => entry.ids);
    expect(new Set(ids).size).toBe(ids.length);
  });
});

describe("pricing a task's model", () => {
  it("task prices win, then the table; unknown and unnamed models are unpriced, saying why", () => {
    const prices = { input: 1, cached_input: 0.1, cache_write: 1.25, output: 5 };
    expect(pricingOf({ provider: "openai", prices }, "gpt-4.1")).toMatchObject({ source: "task", prices });
    expect(pricingOf({ provider: "scripted", prices }, null)).toMatchObject({ source: "task", prices, model: null });
    expect(pricingOf({ provider: "anthropic" }, "claude-haiku-4-5")).toMatchObject({
      source: "table",
      model: "claude-haiku-4-5",
      prices: { input: 1, cached_input: 0.1, cache_write: 1.25, output: 5 },
      table_date: PRICE_TABLE_DATE,
      unpriced: null,
    });
    expect(pricingOf({ provider: "openai" }, "my-local-model")).toMatchObject({
      prices: null,
      unpriced: "the price table has no model my-local-model: set model.prices (USD per million tokens) to price it",
    });
    expect(pricingOf({ provider: "scripted" }, null).unpriced).toMatch(/^the scripted model has no model to price as: set model.name/);
  });

  it("a usage costs its uncached, cached, written and output tokens at their prices", () => {
    const sonnet = lookupPrices("claude-sonnet-4-5")!.prices;
    // 10 000 prompt tokens: 6 000 read from the cache, 1 000 written to it, 3 000 uncached; 500 out.
    const usage = { prompt_tokens: 10_000, cached_tokens: 6_000, cache_write_tokens: 1_000, completion_tokens: 500 };
    expect(costOf(usage, sonnet)).toBeCloseTo((3_000 * 3 + 6_000 * 0.3 + 1_000 * 3.75 + 500 * 15) / 1e6, 12);
    // An older log without cache writes: all non-cached prompt tokens are input.
    expect(costOf({ prompt_tokens: 1_000_000, cached_tokens: 0, completion_tokens: 0 }, sonnet)).toBe(3);
  });
});
